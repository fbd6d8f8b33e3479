// The interpreter's execution: a frame of slots running a plan's steps (interpreter_plan.cpp decides
// their order) on the eager dispatcher.
#include "backends/interp/interpreter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "backends/interp/demand_schedule.h"
#include "backends/interp/interop_scheduler.h"
#include "backends/interp/interpreter_plan.h"
#include "backends/interp/kernel_flops.h"
#include "backends/interp/number_ops.h"
#include "backends/interp/takeover.h"
#include "core/ir/printer.h"
#include "core/shapes_broadcast.h"
#include "core/trace_hooks.h"
#include "eager/autocast/autocast.h"
#include "eager/autograd/graph.h"
#include "eager/dispatch.h"
#include "eager/ops.h"
#include "eager/profiler/flops.h"
#include "eager/profiler/profile_hooks.h"
#include "eager/slice_scatter.h"
#include "eager/tensor_ops.h"

namespace kiln::interp {

namespace {

using ir::Block;
using ir::Node;
using ir::Prim;

// The step this thread runs: with inter-op threads, several steps of one frame run at once.
thread_local const Plan::Step* t_step = nullptr;

bool on_cpu(const IValue& v) {
  if (v.is_tensor()) return !v.to_tensor().defined() || v.to_tensor().device().is_cpu();
  if (v.is_tuple() || v.is_list())
    for (const IValue& e : v.elements())
      if (!on_cpu(e)) return false;
  return true;
}

// A graph runs where its tensors are: the device of the first input not on the CPU (a module moved to
// the GPU passes its parameters), as `device=x.device` in the source says.
Device device_of(const IValue& v) {
  if (v.is_tensor() && v.to_tensor().defined()) return v.to_tensor().device();
  if (v.is_tuple() || v.is_list())
    for (const IValue& e : v.elements())
      if (Device d = device_of(e); !d.is_cpu()) return d;
  return Device::cpu();
}

bool requires_grad(const IValue& v) {
  if (v.is_tensor()) return v.to_tensor().defined() && v.to_tensor().requires_grad();
  if (v.is_tuple() || v.is_list())
    for (const IValue& e : v.elements())
      if (requires_grad(e)) return true;
  return false;
}

int64_t max_numel(const std::vector<Tensor>& ts) {
  int64_t m = 0;
  for (const Tensor& t : ts) m = std::max(m, t.numel());
  return m;
}

// Where a step stops being small. Elementwise kernels, reductions and the x86 group kernels split
// work across threads only from 2 * 32768 elements (eager/cpu/strided_loop.h, backends/x86/kernel.cpp):
// below that they run on one thread anyway, so one thread changes neither their speed nor a bit of their
// result. GEMMs and convolutions go by flops (2 per multiply-add, the profiler's formulas): 8 MFLOP is
// about 0.2 ms on one core here.
constexpr int64_t kSmallElements = int64_t(1) << 16;
constexpr int64_t kSmallFlops = int64_t(1) << 23;

bool small_op(OpId op, const std::vector<Tensor>& in, const Attrs& attrs) {
  int64_t f = gemm_flops_before_run(op, in, attrs);
  return f >= 0 ? f < kSmallFlops : max_numel(in) < kSmallElements;
}

class Frame {
 public:
  Frame(const Plan& plan, NodeRunner* runner, bool interop, Device device, DemandSchedule* demands = nullptr)
      : plan_(plan), g_(plan.graph()), runner_(runner), interop_(interop), device_(device), demands_(demands),
        env_(size_t(plan.num_slots())) {}

  // Runs b with its arguments bound to args and returns its results.
  std::vector<IValue> block(const Block& b, std::vector<IValue> args) {
    const Plan::BlockPlan& bp = plan_.block_plan(b);
    for (size_t i = 0; i < args.size(); ++i) env_[size_t(bp.args[i])] = std::move(args[i]);
    const Plan::Step* saved = t_step;  // a nested block runs inside its owner's step
    bool demands = demands_ && &b == g_.block();
    if (!demands && interop_ && bp.concurrent && !in_interop_worker()) {
      concurrent(bp);
    } else {
      for (size_t k = 0; k < bp.steps.size(); ++k) {
        const Plan::Step& s = bp.steps[k];
        if (demands) demands_->before(k);
        step(s);
        if (demands) demands_->after(k, tensors_of(s.out));
        for (int d : s.dead) env_[size_t(d)] = IValue();
      }
    }
    t_step = saved;
    std::vector<IValue> results;
    results.reserve(bp.results.size());
    for (int r : bp.results) results.push_back(env_[size_t(r)]);
    // The block's own values are not read after it ends: release them, so a loop's next iteration
    // holds its carried tensors alone (a scatter may then write into them).
    for (int a : bp.args) env_[size_t(a)] = IValue();
    for (const Plan::Step& s : bp.steps)
      for (int o : s.out) env_[size_t(o)] = IValue();
    return results;
  }

 private:
  void step(const Plan::Step& s) {
    t_step = &s;
    const Node& n = *s.node;
    try {
      if (!(runner_ && delegate(s))) node(n);
    } catch (const Error& e) {
      if (std::string_view(e.what()).rfind("interp: ", 0) == 0) throw;
      fail("interp: line {} ({}): {}", line_of(n), n.kind_name(), e.what());
    }
  }

  // The block's steps on the inter-op scheduler. A value is released when the last step reading it
  // finished, whichever that is: program order no longer says.
  void concurrent(const Plan::BlockPlan& bp) {
    std::unique_ptr<std::atomic<int>[]> left;
    if (!bp.releases.empty()) {
      left = std::make_unique<std::atomic<int>[]>(bp.releases.size());
      for (size_t i = 0; i < bp.releases.size(); ++i) left[i].store(bp.releases[i], std::memory_order_relaxed);
    }
    run_steps(
        bp.order, [&](int i) { return small(bp.steps[size_t(i)]); },
        [&](int i) {
          const Plan::Step& s = bp.steps[size_t(i)];
          step(s);
          if (left)
            for (int r : s.reads)
              if (bp.releases[size_t(r)] > 0 && left[size_t(r)].fetch_sub(1, std::memory_order_acq_rel) == 1)
                env_[size_t(r)] = IValue();
        });
  }

  bool small(const Plan::Step& s) const {
    const Node& n = *s.node;
    std::vector<Tensor> ins;
    for (int i : s.in)
      if (const IValue& v = env_[size_t(i)]; v.is_tensor() && v.to_tensor().defined()) ins.push_back(v.to_tensor());
    if (n.is_op()) return small_op(n.op(), ins, n.attrs());
    if (n.prim() != Prim::FusionGroup) return max_numel(ins) < kSmallElements;
    // A gemm group (its epilogue runs inside the GEMM call) by its matmul's flops; an elementwise group
    // by its largest input (a broadcast output is no larger).
    const Block& body = *n.blocks()[0];
    for (const Node* m : body.nodes()) {
      if (!m->is_op() || m->op() != OpId::Matmul) continue;
      std::vector<Tensor> args;
      for (const ir::Value* v : m->inputs()) {
        auto it = std::find(body.inputs().begin(), body.inputs().end(), v);
        size_t k = size_t(it - body.inputs().begin());
        if (it == body.inputs().end() || k >= s.in.size() || !env_[size_t(s.in[k])].is_tensor()) return false;
        args.push_back(env_[size_t(s.in[k])].to_tensor());
      }
      return small_op(m->op(), args, m->attrs());
    }
    return max_numel(ins) < kSmallElements;
  }

  int line_of(const Node& n) {
    if (n.line) return n.line;
    std::lock_guard<std::mutex> lock(printed_mu_);
    if (!printed_) printed_ = std::make_unique<ir::PrintedGraph>(ir::print_graph(g_));
    auto it = printed_->lines.find(&n);
    return it == printed_->lines.end() ? 0 : it->second;
  }

  std::vector<Tensor> tensors_of(const std::vector<int>& slots) const {
    std::vector<Tensor> ts;
    std::function<void(const IValue&)> add = [&](const IValue& v) {
      if (v.is_tensor()) {
        if (v.to_tensor().defined()) ts.push_back(v.to_tensor());
      } else if (v.is_tuple() || v.is_list()) {
        for (const IValue& e : v.elements()) add(e);
      }
    };
    for (int o : slots) add(env_[size_t(o)]);
    return ts;
  }

  void out(size_t i, IValue x) { env_[size_t(t_step->out[i])] = std::move(x); }

  bool delegate(const Plan::Step& s) {
    std::vector<IValue> ins, outs;
    ins.reserve(s.in.size());
    for (int i : s.in) ins.push_back(env_[size_t(i)]);
    if (ProfileHooks* prof = profile_hooks()) {
      if (!profiled_run(*prof, *s.node, ins, outs)) return false;
    } else if (!runner_->run(*s.node, ins, outs)) {
      return false;
    }
    if (outs.size() != s.out.size())
      fail("{} produced {} outputs, the node has {}", s.node->kind_name(), outs.size(), s.out.size());
    for (size_t i = 0; i < outs.size(); ++i) env_[size_t(s.out[i])] = std::move(outs[i]);
    return true;
  }

  // A compiled kernel is one row of the profile: what it calls inside (a GEMM's fallback to the
  // dispatcher) is its own time, not ops of the graph.
  bool profiled_run(ProfileHooks& prof, const Node& n, const std::vector<IValue>& ins, std::vector<IValue>& outs) {
    struct Unhooked {  // the profiler is back on this thread however the kernel returns
      ProfileHooks& p;
      explicit Unhooked(ProfileHooks& h) : p(h) { detail::t_profile_hooks = nullptr; }
      ~Unhooked() { detail::t_profile_hooks = &p; }
    };
    int64_t start = profile_clock_ns();
    bool ran;
    {
      Unhooked off(prof);
      ran = runner_->run(n, ins, outs);
    }
    if (!ran) return false;
    int64_t end = profile_clock_ns();
    std::vector<Tensor> ts;
    for (const IValue& v : ins)
      if (v.is_tensor()) ts.push_back(v.to_tensor());
    std::string name = n.is_op() || !n.attrs().has("name") ? std::string(n.kind_name()) : n.attrs().s("name");
    prof.on_kernel(name, ts, kernel_flops(n, ins, outs), start, end);
    return true;
  }

  const IValue& in(const Node& n, size_t i) const {
    (void)n;
    return env_[size_t(t_step->in.at(i))];
  }

  void node(const Node& n) {
    if (n.is_op()) return op(n);
    switch (n.prim()) {
      case Prim::Param:
      case Prim::Return:
      case Prim::Op: fail("interp: {} cannot appear in a block's node list", n.kind_name());
      case Prim::Constant: return out(0, constant(n));
      case Prim::If: return run_if(n);
      case Prim::Loop: return run_loop(n);
      case Prim::FusionGroup: {
        const Block& body = *n.blocks()[0];
        std::vector<IValue> args;
        for (size_t i = 0; i < n.inputs().size(); ++i) args.push_back(in(n, i));
        std::vector<IValue> r = block(body, std::move(args));
        for (size_t i = 0; i < r.size(); ++i) out(i, std::move(r[i]));
        return;
      }
      case Prim::TupleConstruct:
      case Prim::ListConstruct: {
        std::vector<IValue> es;
        for (size_t i = 0; i < n.inputs().size(); ++i) es.push_back(in(n, i));
        return out(0, n.prim() == Prim::TupleConstruct ? IValue::tuple(std::move(es)) : IValue::list(std::move(es)));
      }
      case Prim::TupleUnpack:
      case Prim::ListUnpack: {
        const auto& es = in(n, 0).elements();
        if (es.size() != n.outputs().size())
          fail("cannot unpack {} values into {}", es.size(), n.outputs().size());
        for (size_t i = 0; i < es.size(); ++i) out(i, es[i]);
        return;
      }
      case Prim::TupleIndex: return out(0, index(in(n, 0), n.attrs().i("index")));
      case Prim::ListIndex: return out(0, index(in(n, 0), in(n, 1).to_int()));
      case Prim::Len: {
        IValue x = in(n, 0);
        if (x.is_tensor()) {
          if (x.to_tensor().dim() == 0) fail("len() of a 0-d tensor");
          return out(0, x.to_tensor().size(0));
        }
        return out(0, int64_t(x.elements().size()));
      }
      case Prim::Size: return out(0, in(n, 0).to_tensor().size(in(n, 1).to_int()));
      case Prim::Shape: {
        std::vector<IValue> dims;
        for (int64_t d : in(n, 0).to_tensor().sizes()) dims.emplace_back(d);
        return out(0, IValue::list(std::move(dims)));
      }
      case Prim::ToBool: return out(0, to_bool(in(n, 0)));
      case Prim::ToInt: {
        IValue x = in(n, 0);
        if (x.is_tensor()) return out(0, int64_t(scalar_of(x.to_tensor(), "int")));
        if (x.is_double()) return out(0, int64_t(std::trunc(checked_finite(x.to_double()))));
        return out(0, x.to_int());
      }
      case Prim::ToFloat: {
        IValue x = in(n, 0);
        return out(0, x.is_tensor() ? scalar_of(x.to_tensor(), "float") : x.to_double());
      }
      case Prim::NumToTensor: {
        IValue x = in(n, 0);
        Scalar s = x.is_bool() ? Scalar(x.to_bool()) : x.is_int() ? Scalar(x.to_int()) : Scalar(x.to_double());
        return out(0, Tensor::wrap_scalar(s));
      }
      case Prim::IsNone: return out(0, in(n, 0).is_none());
      case Prim::IsBool: return out(0, in(n, 0).to_tensor().dtype() == DType::Bool);
      case Prim::DTypeOf: return out(0, int64_t(in(n, 0).to_tensor().dtype()));
      case Prim::CastTo: {
        int64_t code = in(n, 1).to_int();
        if (code < 0 || code >= kNumDTypes) fail("prim::cast: {} is not a dtype code", code);
        return out(0, in(n, 0).to_tensor().to(DType(code)));
      }
      case Prim::IsCuda: return out(0, !in(n, 0).to_tensor().device().is_cpu());
      case Prim::Unwrap: {
        IValue x = in(n, 0);
        if (x.is_none()) fail("unwrapped an Optional that is None");
        return out(0, x);
      }
      case Prim::Reshape: return out(0, reshape(in(n, 0).to_tensor(), ints_of(in(n, 1))));
      case Prim::Full: {
        IValue v = in(n, 1);
        Scalar s = v.is_bool() ? Scalar(v.to_bool()) : v.is_int() ? Scalar(v.to_int()) : Scalar(v.to_double());
        DType dt = n.attrs().has("dtype") ? n.attrs().dtype("dtype") : DType::Float32;
        return out(0, full(ints_of(in(n, 0)), s, TensorOptions(dt, device_)));
      }
      case Prim::RandLike: {
        const Tensor& x = in(n, 0).to_tensor();
        // attr float: a draw in float32 unless x is float64 (dropout's mask, as eager draws it)
        bool widen = n.attrs().has("float") && n.attrs().i("float") != 0 && x.dtype() != DType::Float32 && x.dtype() != DType::Float64;
        return out(0, rand_like(widen ? x.to(DType::Float32) : x));
      }
      case Prim::Arange: {
        auto num = [&](size_t i) {
          IValue v = in(n, i);
          return v.is_int() ? Scalar(v.to_int()) : Scalar(v.to_double());
        };
        bool ints = in(n, 0).is_int() && in(n, 1).is_int() && in(n, 2).is_int();
        DType dt = n.attrs().has("dtype") ? n.attrs().dtype("dtype") : ints ? DType::Int64 : default_dtype();
        return out(0, arange(num(0), num(1), num(2), TensorOptions(dt, device_)));
      }
      case Prim::Slice: {
        auto bound = [&](size_t i) { return in(n, i).is_none() ? std::nullopt : std::optional<int64_t>(in(n, i).to_int()); };
        return out(0, in(n, 0).to_tensor().slice(in(n, 1).to_int(), bound(2), bound(3), in(n, 4).to_int()));
      }
      case Prim::ListCat: {
        Tensors xs;
        for (const IValue& e : in(n, 0).elements()) xs.push_back(e.to_tensor());
        bool stack_ = n.attrs().has("stack") && n.attrs().i("stack") != 0;
        return out(0, stack_ ? stack(xs, in(n, 1).to_int()) : cat(xs, in(n, 1).to_int()));
      }
      case Prim::Transpose: return out(0, in(n, 0).to_tensor().transpose(in(n, 1).to_int(), in(n, 2).to_int()));
      case Prim::SliceScatter: {
        auto bound = [&](size_t i) { return in(n, i).is_none() ? std::nullopt : std::optional<int64_t>(in(n, i).to_int()); };
        Tensor base = in(n, 0).to_tensor(), src = in(n, 1).to_tensor();
        int64_t dim = in(n, 2).to_int(), step = in(n, 5).to_int();
        std::optional<int64_t> start = bound(3), end = bound(4);
        drop_dead();
        return out(0, slice_scatter(std::move(base), src, dim, start, end, step));
      }
      case Prim::SelectScatter: {
        Tensor base = in(n, 0).to_tensor(), src = in(n, 1).to_tensor();
        int64_t dim = in(n, 2).to_int(), index = in(n, 3).to_int();
        drop_dead();
        return out(0, select_scatter(std::move(base), src, dim, index));
      }
      case Prim::InplaceResult: {
        const Tensor& r = in(n, 0).to_tensor();
        const Tensor& self = in(n, 1).to_tensor();
        bool copy = n.attrs().has("copy") && n.attrs().i("copy") != 0;  // copy_ / fill_ cast freely
        if (!copy && !can_cast(r.dtype(), self.dtype()))
          fail("result type {} can't be cast to the desired output type {}", dtype_name(r.dtype()), dtype_name(self.dtype()));
        if (r.sizes() == self.sizes()) return out(0, r.to(self.dtype()));
        bool fits = r.dim() <= self.dim();
        for (int64_t k = 1; fits && k <= r.dim(); ++k)
          fits = r.sizes()[size_t(r.dim() - k)] == 1 || r.sizes()[size_t(r.dim() - k)] == self.sizes()[size_t(self.dim() - k)];
        if (!fits)
          fail("output with shape {} doesn't match the broadcast shape {}", shape_str(self.sizes()), shape_str(r.sizes()));
        return out(0, r.to(self.dtype()).expand(self.sizes()).contiguous());
      }
      case Prim::Detach: return out(0, in(n, 0).to_tensor().detach());
      case Prim::Autocast: {
        Tensors xs;
        for (size_t i = 0; i < n.inputs().size(); ++i) xs.push_back(in(n, i).to_tensor());
        Tensors ys = autocast_apply(autocast_policy_named(n.attrs().s("policy")), n.attrs().dtype("dtype"), xs);
        for (size_t i = 0; i < ys.size(); ++i) out(i, ys[i]);
        return;
      }
      case Prim::FloorDivide: return out(0, floor_divide(in(n, 0).to_tensor(), in(n, 1).to_tensor()));
      case Prim::Remainder: return out(0, remainder(in(n, 0).to_tensor(), in(n, 1).to_tensor()));
      case Prim::Einsum: {
        Tensors xs;
        for (size_t i = 0; i < n.inputs().size(); ++i) xs.push_back(in(n, i).to_tensor());
        return out(0, einsum(n.attrs().s("equation"), xs));
      }
      case Prim::IndexPut: {
        Tensors idx;
        for (size_t i = 2; i < n.inputs().size(); ++i) idx.push_back(in(n, i).to_tensor());
        return out(0, index_put(in(n, 0).to_tensor(), idx, in(n, 1).to_tensor(), n.attrs().i("accumulate") != 0));
      }
      case Prim::Print: {
        std::string sep = n.attrs().has("sep") ? n.attrs().s("sep") : " ";
        std::string line;
        for (size_t i = 0; i < n.inputs().size(); ++i) {
          if (i) line += sep;
          line += python_str(in(n, i));
        }
        fmt::print("{}{}", line, n.attrs().has("end") ? n.attrs().s("end") : "\n");
        std::fflush(stdout);
        return;
      }
      case Prim::ListAdd: {
        std::vector<IValue> es = in(n, 0).elements();
        const auto& more = in(n, 1).elements();
        es.insert(es.end(), more.begin(), more.end());
        return out(0, IValue::list(std::move(es)));
      }
      case Prim::ListSlice: {
        const auto& es = in(n, 0).elements();
        int64_t len = int64_t(es.size());
        auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + len : i, int64_t(0), len); };
        int64_t b = clamp(in(n, 1).to_int()), e = clamp(in(n, 2).to_int());
        return out(0, IValue::list(std::vector<IValue>(es.begin() + b, es.begin() + std::max(b, e))));
      }
      case Prim::ListSet: {
        std::vector<IValue> es = in(n, 0).elements();
        int64_t len = int64_t(es.size()), i = in(n, 1).to_int();
        int64_t j = i < 0 ? i + len : i;
        if (j < 0 || j >= len) fail("list assignment index {} is out of range for a list of {} elements", i, len);
        es[size_t(j)] = in(n, 2);
        return out(0, IValue::list(std::move(es)));
      }
      case Prim::Raise: fail("{}", n.attrs().has("message") ? n.attrs().s("message") : std::string("assertion failed"));
      case Prim::CheckBroadcast: {
        std::vector<Shape> shapes;
        for (size_t i = 0; i < n.inputs().size(); ++i) shapes.push_back(in(n, i).to_tensor().sizes());
        if (!shapes_broadcast(shapes)) fail("{}{}", n.attrs().s("message"), shapes_list(shapes));
        return;
      }
      case Prim::NumAdd:
      case Prim::NumSub:
      case Prim::NumMul:
      case Prim::NumDiv:
      case Prim::NumFloorDiv:
      case Prim::NumMod:
      case Prim::NumPow:
      case Prim::NumLt:
      case Prim::NumLe:
      case Prim::NumGt:
      case Prim::NumGe:
      case Prim::NumEq:
      case Prim::NumNe:
      case Prim::Min:
      case Prim::Max: return out(0, number_binary(n.prim(), in(n, 0), in(n, 1)));
      case Prim::NumNeg: {
        IValue x = in(n, 0);
        return out(0, x.is_double() ? IValue(-x.to_double()) : IValue(-x.to_int()));
      }
      case Prim::Not: return out(0, !to_bool(in(n, 0)));
    }
  }

  // Called by a step that takes a tensor over, once it has read its inputs: the block's values dead by
  // now are dropped (every step reading them has run: program order, or the inter-op order's edges), so
  // the step holds the tensor alone unless something live (a caller's handle, a constant, a view,
  // autograd) does too.
  void drop_dead() {
    for (int d : t_step->drop) env_[size_t(d)] = IValue();
  }

  // torch's can_cast for in-place results: no float into an integer tensor, nothing but bool into bool.
  static bool can_cast(DType from, DType to) {
    if (is_floating(from) && !is_floating(to)) return false;
    if (from != DType::Bool && to == DType::Bool) return false;
    return true;
  }

  // What Python's print writes for a value (str(), with repr() inside tuples and lists).
  static std::string python_str(const IValue& v, bool inner = false) {
    if (v.is_none()) return "None";
    if (v.is_bool()) return v.to_bool() ? "True" : "False";
    if (v.is_int()) return std::to_string(v.to_int());
    if (v.is_double()) {
      double d = v.to_double();
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      std::string s = fmt::format("{}", d);
      if (s.find_first_of(".e") == std::string::npos) s += ".0";
      return s;
    }
    if (v.is_string()) return inner ? fmt::format("'{}'", v.to_string()) : v.to_string();
    if (v.is_tensor()) return v.to_tensor().str();
    std::string s = v.is_tuple() ? "(" : "[";
    const auto& es = v.elements();
    for (size_t i = 0; i < es.size(); ++i) {
      if (i) s += ", ";
      s += python_str(es[i], true);
    }
    if (v.is_tuple() && es.size() == 1) s += ",";
    return s + (v.is_tuple() ? ")" : "]");
  }

  static Shape ints_of(const IValue& list) {
    Shape s;
    for (const IValue& e : list.elements()) s.push_back(e.to_int());
    return s;
  }

  static double checked_finite(double d) {
    if (!std::isfinite(d)) fail("cannot convert float {} to integer", d);
    return d;
  }

  static double scalar_of(const Tensor& t, const char* what) {
    if (t.numel() != 1) fail("{}() of a tensor with {} elements (needs exactly one)", what, t.numel());
    return t.item_double();
  }

  static bool to_bool(const IValue& x) {
    if (x.is_tensor()) {
      const Tensor& t = x.to_tensor();
      if (t.numel() != 1)
        fail("boolean value of a tensor with {} elements is ambiguous (shape {})", t.numel(), shape_str(t.sizes()));
      return t.item_double() != 0;
    }
    if (x.is_double()) return x.to_double() != 0;
    return x.to_int() != 0;
  }

  static IValue index(const IValue& seq, int64_t i) {
    const auto& es = seq.elements();
    int64_t n = int64_t(es.size());
    int64_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) fail("index {} is out of range for a {} of {} elements", i, seq.is_tuple() ? "tuple" : "list", n);
    return es[size_t(j)];
  }

  static IValue constant(const Node& n) {
    if (n.tensor().defined()) return n.tensor();
    if (!n.attrs().has("value")) return IValue();
    for (const auto& [k, v] : n.attrs().items())
      if (k == "value")
        return std::visit(
            [](const auto& x) -> IValue {
              using T = std::decay_t<decltype(x)>;
              if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                            std::is_same_v<T, std::string>)
                return IValue(x);
              else fail("prim::Constant: unsupported value kind");
            },
            v);
    return IValue();
  }

  void op(const Node& n) {
    Tensors ins;
    ins.reserve(n.inputs().size());
    for (size_t i = 0; i < n.inputs().size(); ++i) ins.push_back(in(n, i).to_tensor());
    Tensors outs = dispatch(n.op(), ins, n.attrs());
    if (outs.size() != n.outputs().size())
      fail("{} produced {} outputs, the node has {}", n.kind_name(), outs.size(), n.outputs().size());
    for (size_t i = 0; i < outs.size(); ++i) out(i, std::move(outs[i]));
  }

  void run_if(const Node& n) {
    std::vector<IValue> r = block(*n.blocks()[to_bool(in(n, 0)) ? 0 : 1], {});
    for (size_t i = 0; i < r.size(); ++i) out(i, std::move(r[i]));
  }

  void run_loop(const Node& n) {
    int64_t trip = in(n, 0).to_int();
    bool cond = to_bool(in(n, 1));
    std::vector<IValue> carried;
    for (size_t i = 2; i < n.inputs().size(); ++i) carried.push_back(in(n, i));
    drop_dead();
    const Block& body = *n.blocks()[0];
    for (int64_t it = 0; it < trip && cond; ++it) {
      std::vector<IValue> args{IValue(it)};  // carried values move in: the body holds them alone
      args.insert(args.end(), std::make_move_iterator(carried.begin()), std::make_move_iterator(carried.end()));
      std::vector<IValue> r = block(body, std::move(args));
      cond = to_bool(r[0]);
      for (size_t i = 0; i < carried.size(); ++i) carried[i] = std::move(r[i + 1]);
    }
    for (size_t i = 0; i < carried.size(); ++i) out(i, std::move(carried[i]));
  }

  const Plan& plan_;
  const ir::Graph& g_;
  NodeRunner* runner_;
  bool interop_;
  Device device_;  // where the graph's factories (torch.zeros, torch.arange) make their tensors
  DemandSchedule* demands_;  // null: no input's memory is filled on demand
  std::vector<IValue> env_;
  std::mutex printed_mu_;
  std::unique_ptr<ir::PrintedGraph> printed_;
};

}  // namespace

std::vector<IValue> run(const Plan& plan, const std::vector<IValue>& inputs, NodeRunner* runner, size_t caller_results) {
  return run(plan, std::vector<IValue>(inputs), runner, caller_results);
}

std::vector<IValue> run(const Plan& plan, std::vector<IValue>&& inputs, NodeRunner* runner, size_t caller_results) {
  const ir::Graph& g = plan.graph();
  if (inputs.size() != g.inputs().size())
    fail("interp: the graph takes {} inputs, got {}", g.inputs().size(), inputs.size());
  // Autograd's tape, the tracer's graph and the profiler's events are kept in program order by
  // running sequentially while any of them records.
  bool interop = plan.constants_allow_interop() && get_num_interop_threads() > 1 && !in_interop_worker() &&
                 !trace_hooks() && !profile_hooks();
  for (const IValue& v : inputs) {
    if (!interop) break;
    if (!on_cpu(v) || (GradMode::enabled() && requires_grad(v))) interop = false;
  }
  Device device = Device::cpu();
  for (const IValue& v : inputs)
    if (device = device_of(v); !device.is_cpu()) break;
  // the owners of memory filled on demand are called in program order, so the top level runs sequentially
  DemandSchedule demands(plan, inputs, caller_results);
  Frame f(plan, runner, interop, device, demands.empty() ? nullptr : &demands);
  return f.block(*g.block(), std::move(inputs));
}

std::vector<IValue> run(const ir::Graph& g, const std::vector<IValue>& inputs, NodeRunner* runner,
                        bool free_dead_values) {
  return run(Plan(g, free_dead_values), inputs, runner);
}

}  // namespace kiln::interp
