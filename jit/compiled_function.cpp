#include "jit/compiled_function.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "backends/interp/interpreter.h"
#include "eager/autograd/graph.h"
#include "jit/default_backend.h"

namespace kiln::jit {

namespace {

constexpr int64_t kSymbolic = -1;

struct InputSig {
  char kind;  // 't' tensor, 'i' int, 'f' float, 'b' bool, 's' str, 'n' None, 'o' other
  DType dtype = DType::Float32;
  Shape dims;  // kSymbolic for a symbolic dim
  bool contiguous = true;
  Device device;
  bool requires_grad = false;
  bool operator==(const InputSig&) const = default;
};

struct Signature {
  std::vector<InputSig> inputs;
  bool grad_mode = false;
  bool operator==(const Signature&) const = default;
};

std::string sig_str(const InputSig& s) {
  if (s.kind != 't') return std::string(1, s.kind);
  std::string d;
  for (size_t i = 0; i < s.dims.size(); ++i) d += (i ? "," : "") + (s.dims[i] == kSymbolic ? std::string("?") : std::to_string(s.dims[i]));
  return fmt::format("{}[{}]{}{}", ir::dtype_short_name(s.dtype), d, s.contiguous ? "" : " strided",
                     s.requires_grad ? " requires_grad" : "");
}

std::string sig_str(const Signature& s) {
  std::string out;
  for (size_t i = 0; i < s.inputs.size(); ++i) out += (i ? ", " : "") + sig_str(s.inputs[i]);
  return "(" + out + ")";
}

// Why `now` missed the entry compiled for `before`, and which (input, dim) changed if a dim did.
std::string miss_reason(const Signature& before, const Signature& now, std::pair<int, int>* dim) {
  *dim = {-1, -1};
  if (before.grad_mode != now.grad_mode) return fmt::format("grad mode changed {} -> {}", before.grad_mode, now.grad_mode);
  for (size_t i = 0; i < now.inputs.size(); ++i) {
    const InputSig &a = before.inputs[i], &b = now.inputs[i];
    if (a == b) continue;
    if (a.kind != b.kind) return fmt::format("input {} changed kind {} -> {}", i, sig_str(a), sig_str(b));
    if (a.dtype != b.dtype)
      return fmt::format("input {} dtype changed {} -> {}", i, ir::dtype_short_name(a.dtype), ir::dtype_short_name(b.dtype));
    if (a.dims.size() != b.dims.size()) return fmt::format("input {} rank changed {} -> {}", i, a.dims.size(), b.dims.size());
    for (size_t d = 0; d < a.dims.size(); ++d)
      if (a.dims[d] != b.dims[d]) {
        *dim = {int(i), int(d)};
        return fmt::format("input {} dim {} changed {} -> {}", i, d, a.dims[d], b.dims[d]);
      }
    if (a.contiguous != b.contiguous) return fmt::format("input {} contiguity changed", i);
    if (!(a.device == b.device)) return fmt::format("input {} device changed {} -> {}", i, a.device.str(), b.device.str());
    return fmt::format("input {} requires_grad changed", i);
  }
  return "signature changed";
}

// Runs fusion groups with their compiled kernels; the interpreter does the rest.
class GroupRunner final : public interp::NodeRunner {
 public:
  explicit GroupRunner(const std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>>& k) : kernels_(k) {}
  bool run(const ir::Node& n, const std::vector<IValue>& in, std::vector<IValue>& out) override {
    if (n.prim() != ir::Prim::FusionGroup) return false;
    auto it = kernels_.find(&n);
    if (it == kernels_.end()) return false;
    Tensors ts;
    ts.reserve(in.size());
    for (const IValue& v : in) ts.push_back(v.to_tensor());
    for (Tensor& t : it->second->run(ts)) out.emplace_back(std::move(t));
    return true;
  }

 private:
  const std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>>& kernels_;
};

}  // namespace

std::unique_ptr<ir::Graph> group_graph(const ir::Node& group) {
  auto g = std::make_unique<ir::Graph>();
  const ir::Block& body = *group.blocks().at(0);
  std::unordered_map<const ir::Value*, ir::Value*> env;
  for (ir::Value* a : body.inputs()) env[a] = g->add_input(a->type(), a->name());
  g->block()->clone_from(body, env);
  for (ir::Value* r : body.outputs()) g->register_output(env.at(r));
  return g;
}

class CompiledFunction final : public Function::Executor {
 public:
  CompiledFunction(std::shared_ptr<const ir::Graph> graph, std::string name, CompileOptions o)
      : source_(std::move(graph)), name_(std::move(name)), opts_(std::move(o)) {
    if (!opts_.backend && opts_.use_default_backend) opts_.backend = default_backend();
  }

  std::vector<IValue> run(const std::vector<IValue>& inputs) override {
    bool grad_mode = GradMode::enabled();
    if (!(grad_mode && any_requires_grad(inputs)))
      if (std::shared_ptr<Entry> e = lookup(inputs, grad_mode)) {
        GroupRunner runner(e->kernels);
        return interp::run(*e->plan, inputs, &runner);
      }
    Signature sig = signature_of(inputs);
    if (sig.grad_mode && needs_grad(sig)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.eager_calls;
        if (!said_eager_) spdlog::info("{}: inputs require grad; running on the interpreter so autograd records "
                                       "(compiled backward is not there yet)", name_);
        said_eager_ = true;
      }
      return interp::run(*source_, inputs);
    }
    std::shared_ptr<Entry> e = entry_for(sig);
    GroupRunner runner(e->kernels);
    return interp::run(*e->plan, inputs, &runner);
  }

  std::shared_ptr<const ir::Graph> graph_for(const std::vector<IValue>& inputs) { return entry_for(signature_of(inputs))->graph; }

  CacheStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  struct Entry {
    Signature sig;
    std::shared_ptr<ir::Graph> graph;
    std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>> kernels;
    std::unique_ptr<interp::Plan> plan;  // values dropped after their last use (the memory plan)
  };

  static bool any_requires_grad(const std::vector<IValue>& inputs) {
    for (const IValue& v : inputs)
      if (v.is_tensor() && v.to_tensor().requires_grad()) return true;
    return false;
  }

  // Whether a call's inputs have this signature; no allocation, so a cache hit stays cheap.
  static bool matches(const Signature& s, const std::vector<IValue>& inputs, bool grad_mode) {
    if (s.grad_mode != grad_mode || s.inputs.size() != inputs.size()) return false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const InputSig& want = s.inputs[i];
      const IValue& v = inputs[i];
      if (!v.is_tensor()) {
        if (want.kind == 't') return false;
        continue;  // numbers and such: their kinds were checked by the Function's signature
      }
      if (want.kind != 't') return false;
      const Tensor& t = v.to_tensor();
      const TensorImpl* impl = t.impl();
      if (impl->dtype != want.dtype || impl->sizes.size() != want.dims.size() || t.requires_grad() != want.requires_grad)
        return false;
      for (size_t d = 0; d < want.dims.size(); ++d)
        if (want.dims[d] != kSymbolic && want.dims[d] != impl->sizes[d]) return false;
      if (t.is_contiguous() != want.contiguous || !(t.device() == want.device)) return false;
    }
    return true;
  }

  // The entry serving these inputs, most recently compiled first; null on a miss.
  std::shared_ptr<Entry> lookup(const std::vector<IValue>& inputs, bool grad_mode) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (matches((*it)->sig, inputs, grad_mode)) {
        ++stats_.hits;
        return *it;
      }
    return nullptr;
  }

  static bool needs_grad(const Signature& s) {
    for (const InputSig& i : s.inputs)
      if (i.requires_grad) return true;
    return false;
  }

  Signature signature_of(const std::vector<IValue>& inputs) {
    Signature s;
    s.grad_mode = GradMode::enabled();
    s.inputs.reserve(inputs.size());
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const IValue& v = inputs[i];
      InputSig in;
      if (v.is_tensor()) {
        const Tensor& t = v.to_tensor();
        in.kind = 't';
        in.dtype = t.dtype();
        in.dims = t.impl()->sizes;
        in.contiguous = t.is_contiguous();
        in.device = t.device();
        in.requires_grad = t.requires_grad();
        for (size_t d = 0; d < in.dims.size(); ++d)
          if (symbolic_.count({int(i), int(d)})) in.dims[d] = kSymbolic;
      } else {
        in.kind = v.is_int() ? 'i' : v.is_double() ? 'f' : v.is_bool() ? 'b' : v.is_string() ? 's' : v.is_none() ? 'n' : 'o';
      }
      s.inputs.push_back(std::move(in));
    }
    return s;
  }

  std::shared_ptr<Entry> entry_for(Signature sig) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_)
      if (e->sig == sig) {
        ++stats_.hits;
        return e;
      }
    if (!entries_.empty()) {
      std::pair<int, int> dim;
      std::string why = miss_reason(entries_.back()->sig, sig, &dim);
      spdlog::info("recompiling {}: {}", name_, why);
      stats_.last_miss_reason = why;
      if (dim.first >= 0 && ++dim_misses_[dim] >= opts_.recompile_limit) {
        symbolic_.insert(dim);
        ++stats_.symbolic_dims;
        sig.inputs[size_t(dim.first)].dims[size_t(dim.second)] = kSymbolic;
        spdlog::info("{}: input {} dim {} changed {} times; compiling it as a symbolic dim", name_, dim.first,
                     dim.second, dim_misses_[dim]);
        for (const auto& e : entries_)
          if (e->sig == sig) return e;
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    auto e = std::make_shared<Entry>();
    e->sig = sig;
    e->graph = specialise(sig);
    run_pipeline(*e->graph, opts_.pipeline);
    compile_groups(*e);
    e->plan = std::make_unique<interp::Plan>(*e->graph, /*free_dead_values=*/true);
    ++stats_.misses;
    stats_.compile_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    entries_.push_back(e);
    return e;
  }

  // A copy of the source graph with the signature's input types; op result types are derived anew
  // by shape propagation when an input type changed (a symbolic dim, another dtype than traced).
  std::shared_ptr<ir::Graph> specialise(const Signature& sig) {
    std::shared_ptr<ir::Graph> g = source_->copy();
    bool changed = false;
    for (size_t i = 0; i < sig.inputs.size() && i < g->inputs().size(); ++i) {
      const InputSig& in = sig.inputs[i];
      if (in.kind != 't') continue;
      std::vector<ir::Dim> dims;
      for (size_t d = 0; d < in.dims.size(); ++d)
        dims.push_back(in.dims[d] == kSymbolic ? ir::Dim::symbolic(fmt::format("s{}_{}", i, d)) : ir::Dim::known(in.dims[d]));
      ir::Type t = ir::Type::tensor(in.dtype, std::move(dims));
      if (!(g->inputs()[i]->type() == t)) changed = true;
      g->inputs()[i]->set_type(std::move(t));
    }
    if (changed)
      for_each(*g->block(), [](ir::Node* n) {
        if (n->is_op())
          for (ir::Value* o : n->outputs()) o->set_type(ir::Type::tensor());
      });
    return g;
  }

  static void for_each(const ir::Block& b, const std::function<void(ir::Node*)>& f) {
    for (ir::Node* n : b.nodes()) {
      f(n);
      for (ir::Block* s : n->blocks()) for_each(*s, f);
    }
  }

  void compile_groups(Entry& e) {
    if (!opts_.backend) return;
    for_each(*e.graph->block(), [&](ir::Node* n) {
      if (n->prim() != ir::Prim::FusionGroup) return;
      auto t0 = std::chrono::steady_clock::now();
      std::string why;
      std::string kname = fmt::format("{}_{}", name_, n->attrs().s("name"));
      std::shared_ptr<GroupKernel> k = opts_.backend(*group_graph(*n), kname, &why);
      if (!k) {
        ++stats_.interpreted_groups;
        spdlog::debug("{}: fusion group {} runs on the interpreter: {}", name_, kname, why);
        return;
      }
      stats_.kernel_compile_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      ++stats_.kernels;
      e.kernels[n] = std::move(k);
    });
  }

  std::shared_ptr<const ir::Graph> source_;
  std::string name_;
  CompileOptions opts_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Entry>> entries_;
  std::map<std::pair<int, int>, int> dim_misses_;
  std::set<std::pair<int, int>> symbolic_;
  CacheStats stats_;
  bool said_eager_ = false;
};

}  // namespace kiln::jit

namespace kiln {

namespace {
jit::CompiledFunction& compiled(const Function& fn) {
  auto* c = dynamic_cast<jit::CompiledFunction*>(fn.executor().get());
  if (!c) fail("{}: not a compiled function (use kiln::compile)", fn.name());
  return *c;
}
}  // namespace

Function compile(const Function& fn, jit::CompileOptions options) {
  if (!fn.defined()) fail("compile: undefined function");
  auto graph = std::shared_ptr<const ir::Graph>(fn.graph().copy());
  auto exec = std::make_shared<jit::CompiledFunction>(graph, fn.name(), std::move(options));
  return fn.with_executor(exec);
}

jit::CacheStats compile_stats(const Function& fn) { return compiled(fn).stats(); }

std::shared_ptr<const ir::Graph> compiled_graph(const Function& fn, const std::vector<IValue>& inputs) {
  std::vector<IValue> all = inputs;
  for (const Tensor& t : fn.binding().bound) all.emplace_back(t);
  return compiled(fn).graph_for(all);
}

}  // namespace kiln
