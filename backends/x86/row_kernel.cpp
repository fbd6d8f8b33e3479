// Row kernels (row_kernel.h): the group is cut into passes, each a small standalone graph lowered and
// emitted exactly like an ordinary fusion group, so every row of ops.def and both ISAs come for free;
// this file only plans the passes and drives them row by row.
#include "backends/x86/row_kernel.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "backends/fusion_backend.h"
#include "backends/x86/isa.h"
#include "backends/x86/kernel_emitter.h"
#include "backends/x86/program.h"
#include "backends/x86/row_chunks.h"
#include "core/error.h"
#include "core/ir/graph.h"

namespace kiln::x86 {
using detail::Program;

namespace {

constexpr int64_t kGrain = 32768;  // as kernel.cpp: below 2^16 elements one thread

bool is_reduce(const ir::Node* n) { return n->is_op() && op_info(n->op()).kind == OpKind::Reduce; }

// A value of one element per row (or per tensor): its last dim is statically 1, or it has no dims.
// Everything else is row-shaped: it changes along the row.
bool row_shaped_input(const ir::Type& t) {
  if (!t.dims) return true;
  if (t.dims->empty()) return false;
  return t.dims->back().size != 1;
}

struct Pass {
  Program prog;         // inputs: the group's, then one per reduction result (a broadcast scalar)
  bool single = false;  // one element per row (outputs of one number per row), not the row
  int red = -1;         // the reduction whose result this pass folds, or -1
  std::vector<int> outs;  // the group output each of prog.outputs is (then the stashes it stores)
  std::vector<int> stash_out;  // the scratch rows it stores, after its outputs
};

struct Plan {
  size_t ni = 0, nr = 0, ns = 0;  // inputs, reductions, stashed rows (a pass's inputs, in this order)
  std::vector<OpId> red_ops;
  std::vector<bool> in_row;   // per group input: row-shaped
  std::vector<Pass> passes;
  std::vector<int> out_red;   // per group output: the reduction it is, or -1
  std::vector<bool> out_row;  // per group output: row-shaped
  std::vector<DType> out_dtype;  // per group output: the compute type, bool or bf16
  std::vector<size_t> out_rank;
  DType cd = DType::Float32;
};

// The type a reduction result or stashed row has in the block's f32/f64 scratch: a bf16 value stays
// unrounded there, as it would in registers.
ir::Type scratch_type(const ir::Value* v) {
  ir::Type t = v->type();
  if (t.dtype) t.dtype = detail::register_dtype(*t.dtype);
  return t;
}

// The standalone graph of one pass: the group's inputs, the reduction results and the stashed rows as
// inputs (the stashes in `avail` mapped to theirs, so the pass reads them instead of recomputing), the
// nodes `targets`, `stash_out` and the reduction `red`'s input need, then `red` itself last.
Program lower_pass(const ir::Graph& g, const std::vector<const ir::Node*>& reds,
                   const std::vector<const ir::Value*>& stashes, size_t avail,
                   const std::vector<const ir::Value*>& targets, const std::vector<const ir::Value*>& stash_out,
                   const ir::Node* red) {
  ir::Graph sub;
  std::unordered_map<const ir::Value*, ir::Value*> env;
  for (const ir::Value* v : g.inputs()) env[v] = sub.add_input(v->type());
  for (const ir::Node* r : reds) env[r->output()] = sub.add_input(scratch_type(r->output()));
  for (size_t i = 0; i < stashes.size(); ++i) {
    ir::Value* in = sub.add_input(scratch_type(stashes[i]));
    if (i < avail) env[stashes[i]] = in;
  }
  std::unordered_set<const ir::Node*> needed;
  std::vector<const ir::Value*> stack(targets.begin(), targets.end());
  stack.insert(stack.end(), stash_out.begin(), stash_out.end());
  if (red) stack.push_back(red->input(0));
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (env.count(v) || needed.count(v->node())) continue;
    needed.insert(v->node());
    for (const ir::Value* a : v->node()->inputs()) stack.push_back(a);
  }
  for (const ir::Node* n : g.block()->nodes()) {
    if (!needed.count(n)) continue;
    if (is_reduce(n)) fail("x86 row kernel: internal: a pass needs the reduction {}", n->kind_name());
    ir::Node* c;
    if (n->prim() == ir::Prim::Constant) {
      c = sub.create(ir::Prim::Constant);
      c->set_tensor(n->tensor());
      c->attrs() = n->attrs();
      c->output()->set_type(n->output()->type());
    } else {
      if (!n->is_op()) fail("x86 row kernel: {} is not supported", n->kind_name());
      c = sub.create_op(n->op(), {}, n->attrs(), 0);
      for (const ir::Value* a : n->inputs()) c->add_input(env.at(a));
      for (const ir::Value* o : n->outputs()) c->add_output(o->type());
    }
    sub.block()->append(c);
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->output(i)] = c->output(i);
  }
  for (const ir::Value* t : targets) sub.register_output(env.at(t));
  for (const ir::Value* t : stash_out) sub.register_output(env.at(t));
  if (red) {
    ir::Node* c = sub.create_op(red->op(), {env.at(red->input(0))}, red->attrs(), 0);
    c->add_output(red->output()->type());
    sub.block()->append(c);
    sub.register_output(c->output());
  }
  Program p = detail::lower(sub);
  for (size_t i = 0; i < stash_out.size(); ++i)
    p.output_dtypes[targets.size() + i] = detail::register_dtype(p.output_dtypes[targets.size() + i]);
  return p;
}

// Whether computing `targets` from the group's inputs and reduction results passes through `v`.
bool reaches(const std::vector<const ir::Value*>& targets, const ir::Value* v, const ir::Graph& g) {
  std::unordered_set<const ir::Value*> seen;
  std::vector<const ir::Value*> stack(targets.begin(), targets.end());
  while (!stack.empty()) {
    const ir::Value* x = stack.back();
    stack.pop_back();
    if (x == v) return true;
    if (!seen.insert(x).second || x->node()->prim() == ir::Prim::Param || is_reduce(x->node())) continue;
    for (const ir::Value* a : x->node()->inputs()) stack.push_back(a);
  }
  (void)g;
  return false;
}

Plan plan(const ir::Graph& g) {
  Plan P;
  P.ni = g.inputs().size();
  std::vector<const ir::Node*> reds;
  std::unordered_map<const ir::Value*, int> red_of;
  std::unordered_map<const ir::Value*, int> level;
  std::unordered_map<const ir::Value*, bool> row;
  for (const ir::Value* v : g.inputs()) {
    level[v] = 0;
    row[v] = row_shaped_input(v->type());
    P.in_row.push_back(row[v]);
  }
  std::unordered_set<const ir::Value*> outputs(g.outputs().begin(), g.outputs().end());
  for (const ir::Node* n : g.block()->nodes()) {
    if (n->outputs().size() != 1) fail("x86 row kernel: {} with {} outputs", n->kind_name(), n->outputs().size());
    const ir::Value* o = n->output();
    if (n->prim() == ir::Prim::Constant) {
      level[o] = 0;
      row[o] = false;
      continue;
    }
    if (!n->is_op()) fail("x86 row kernel: {} is not supported", n->kind_name());
    int lv = 0;
    bool rw = false;
    for (const ir::Value* a : n->inputs()) {
      if (!level.count(a)) fail("x86 row kernel: {} reads a value defined outside the group", n->kind_name());
      lv = std::max(lv, level[a]);
      rw = rw || row[a];
    }
    if (is_reduce(n)) {
      const ir::Type& t = n->input(0)->type();
      if (n->inputs().size() != 1 || !t.dims || t.dims->empty())
        fail("x86 row kernel: {} needs one input of known rank", n->kind_name());
      const int64_t r = int64_t(t.dims->size());
      const Shape d = n->attrs().has("dims") ? n->attrs().ints("dims") : Shape{};
      if (!(d.size() == 1 && (d[0] == r - 1 || d[0] == -1)))
        fail("x86 row kernel: {} over dims {}, not the last of {}", n->kind_name(), shape_str(d), r);
      // Without keepdim the result would broadcast against the rows' other dims: only as an output.
      if (!n->attrs().b_or("keepdim", false))
        for (const ir::Use& u : o->uses())
          if (u.user->prim() != ir::Prim::Return)
            fail("x86 row kernel: {} without keepdim is read inside the group", n->kind_name());
      red_of[o] = int(reds.size());
      reds.push_back(n);
      P.red_ops.push_back(n->op());
      level[o] = lv + 1;
      row[o] = false;
      continue;
    }
    level[o] = lv;
    row[o] = rw;
  }
  P.nr = reds.size();
  if (P.nr == 0) fail("x86 row kernel: the group has no reduction");
  // outputs by kind
  std::map<int, std::vector<const ir::Value*>> row_outs;  // level → outputs
  std::map<int, std::vector<int>> row_out_ids;
  std::vector<const ir::Value*> one_outs;
  std::vector<int> one_out_ids;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ir::Value* v = g.outputs()[i];
    if (!v->type().dims) fail("x86 row kernel: output {} has unknown rank", i);
    P.out_rank.push_back(v->type().dims->size());
    P.out_dtype.push_back(v->type().dtype.value_or(DType::Float32));
    auto it = red_of.find(v);
    P.out_red.push_back(it == red_of.end() ? -1 : it->second);
    P.out_row.push_back(it == red_of.end() && row.at(v));
    if (it != red_of.end()) continue;
    if (v->node()->prim() != ir::Prim::Op) fail("x86 row kernel: output {} is not computed in the group", i);
    if (row.at(v)) {
      row_outs[level.at(v)].push_back(v);
      row_out_ids[level.at(v)].push_back(int(i));
    } else {
      one_outs.push_back(v);
      one_out_ids.push_back(int(i));
    }
  }
  int max_level = 0;
  for (const ir::Node* r : reds) max_level = std::max(max_level, level.at(r->input(0)));
  for (auto& [lv, _] : row_outs) max_level = std::max(max_level, lv);
  // What each pass computes, before lowering: its reduction (or -1), its row outputs, one-element or not.
  struct Spec {
    int red = -1;
    bool single = false;
    std::vector<const ir::Value*> outs;
    std::vector<int> ids;
    std::vector<const ir::Value*> stash_out;
  };
  std::vector<Spec> specs;
  for (int lv = 0; lv <= max_level; ++lv) {
    std::vector<const ir::Value*> outs = row_outs.count(lv) ? row_outs[lv] : std::vector<const ir::Value*>{};
    std::vector<int> ids = row_out_ids.count(lv) ? row_out_ids[lv] : std::vector<int>{};
    bool first = true;
    for (size_t j = 0; j < reds.size(); ++j) {
      if (level.at(reds[j]->input(0)) != lv) continue;
      Spec sp;
      sp.red = int(j);
      if (first) sp.outs = outs, sp.ids = ids;
      specs.push_back(std::move(sp));
      first = false;
    }
    if (first && !outs.empty()) specs.push_back(Spec{-1, false, outs, ids, {}});
  }
  if (!one_outs.empty()) specs.push_back(Spec{-1, true, one_outs, one_out_ids, {}});
  // A reduction's input that a later pass needs again (softmax's exp(x - max), read by its division)
  // is stored to a scratch row as it is folded, and read back there: the row is in L1, and the
  // recomputation it saves is the expensive part of the pass.
  std::vector<const ir::Value*> stashes;
  std::vector<size_t> avail(specs.size(), 0);  // stashes a pass may read: those of earlier passes
  for (size_t i = 0; i < specs.size(); ++i) {
    avail[i] = stashes.size();
    if (specs[i].red < 0) continue;
    const ir::Value* v = reds[size_t(specs[i].red)]->input(0);
    if (!v->node()->is_op()) continue;  // a group input: already in memory
    bool later = false;
    for (size_t q = i + 1; q < specs.size() && !later; ++q) {
      if (specs[q].single) continue;
      std::vector<const ir::Value*> t = specs[q].outs;
      if (specs[q].red >= 0) t.push_back(reds[size_t(specs[q].red)]->input(0));
      later = reaches(t, v, g);
    }
    if (!later) continue;
    specs[i].stash_out.push_back(v);
    stashes.push_back(v);
  }
  P.ns = stashes.size();
  for (size_t i = 0; i < specs.size(); ++i) {
    Spec& sp = specs[i];
    Pass ps;
    ps.red = sp.red;
    ps.single = sp.single;
    ps.outs = sp.ids;
    for (const ir::Value* v : sp.stash_out)
      ps.stash_out.push_back(int(std::find(stashes.begin(), stashes.end(), v) - stashes.begin()));
    ps.prog = lower_pass(g, reds, stashes, sp.single ? 0 : avail[i], sp.outs, sp.stash_out,
                         sp.red >= 0 ? reds[size_t(sp.red)] : nullptr);
    P.passes.push_back(std::move(ps));
  }
  P.cd = P.passes.front().prog.compute();
  for (const Pass& ps : P.passes)
    if (ps.prog.compute() != P.cd) fail("x86 row kernel: passes mix f32 and f64");
  if (P.ni + P.nr + P.ns > 62 || P.ni + P.nr + P.ns + g.outputs().size() + P.ns > 64)
    fail("x86 row kernel: more than 62 inputs or 64 inputs and outputs");
  return P;
}

Shape broadcast_shape(const std::vector<const Shape*>& shapes) {
  Shape out;
  for (const Shape* s : shapes) out = broadcast_shapes("x86 row kernel", out, *s);
  return out;
}

class RowKernel final : public backends::FusedKernel {
 public:
  RowKernel(Plan p, std::string name) : p_(std::move(p)), name_(std::move(name)), isa_(best_isa()) {
    for (size_t i = 0; i < p_.passes.size(); ++i) fn(i, default_bcast(i));  // fail now, not at run
  }
  const std::string& name() const override { return name_; }

  Tensors run(const Tensors& in_given) const override {
    const Plan& P = p_;
    if (in_given.size() != P.ni) fail("x86 row kernel {}: expected {} inputs, got {}", name_, P.ni, in_given.size());
    Tensors in = in_given;
    std::vector<const Shape*> shapes;
    for (size_t k = 0; k < P.ni; ++k) {
      if (!in[k].defined()) fail("x86 row kernel {}: input {} is undefined", name_, k);
      if (in[k].device() != Device::cpu()) fail("x86 row kernel {}: input {} is not on the cpu", name_, k);
      const DType want = P.passes.front().prog.input_dtypes[k];
      if (in[k].dtype() != want)
        fail("x86 row kernel {}: input {} has dtype {}, expected {}", name_, k, dtype_name(in[k].dtype()), dtype_name(want));
      shapes.push_back(&in[k].sizes());
    }
    const Shape shape = broadcast_shape(shapes);
    const size_t r = shape.size();
    if (r == 0) fail("x86 row kernel {}: the inputs are all 0-d", name_);
    const int64_t C = shape[r - 1];
    const int64_t numel = numel_of(shape);
    const int64_t rows = numel_of(Shape(shape.begin(), shape.end() - 1));
    // inputs: inner stride 0 or 1, else made contiguous in the iteration shape
    std::vector<std::vector<int64_t>> st(P.ni);
    uint64_t bcast_in = 0;
    for (size_t k = 0; k < P.ni; ++k) {
      auto strides = [&] {
        std::vector<int64_t> s(r, 0);
        size_t off = r - size_t(in[k].dim());
        for (size_t d = 0; d < size_t(in[k].dim()); ++d)
          s[off + d] = in[k].sizes()[d] == 1 ? 0 : in[k].strides()[d] * int64_t(in[k].element_size());
        return s;
      };
      st[k] = strides();
      int64_t inner = st[k][r - 1];
      if (inner != 0 && inner != int64_t(in[k].element_size())) {
        in[k] = in[k].expand(shape).contiguous();
        st[k] = strides();
        inner = st[k][r - 1];
      }
      if (inner == 0 || C == 1) bcast_in |= uint64_t(1) << k;
    }
    // outputs
    const int64_t cs = int64_t(itemsize(P.cd));
    Tensors outs(P.out_red.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      Shape s = shape;
      if (!P.out_row[i]) {
        if (P.out_rank[i] == r) s[r - 1] = 1;
        else if (P.out_rank[i] + 1 == r) s.pop_back();
        else fail("x86 row kernel {}: output {} has rank {} for rows of rank {}", name_, i, P.out_rank[i], r);
      }
      // a bf16 reduction result is folded in the compute type and rounded once it is complete
      outs[i] = Tensor::empty(s, P.out_red[i] >= 0 ? P.cd : P.out_dtype[i]);
    }
    auto result = [&] {
      for (size_t i = 0; i < outs.size(); ++i)
        if (outs[i].dtype() != P.out_dtype[i]) outs[i] = outs[i].to(P.out_dtype[i]);
      return outs;
    };
    if (rows == 0) return result();
    std::vector<detail::KernelFn> fns(P.passes.size());
    std::vector<uint64_t> bc(P.passes.size());
    for (size_t i = 0; i < P.passes.size(); ++i) {
      uint64_t stash_bits = C == 1 ? ((uint64_t(1) << P.ns) - 1) << (P.ni + P.nr) : 0;
      bc[i] = P.passes[i].single ? ~uint64_t(0) : bcast_in | (((uint64_t(1) << P.nr) - 1) << P.ni) | stash_bits;
      fns[i] = fn(i, bc[i]);
    }
    std::vector<char*> in_base(P.ni), out_base(outs.size());
    for (size_t k = 0; k < P.ni; ++k) in_base[k] = static_cast<char*>(in[k].raw_data());
    for (size_t i = 0; i < outs.size(); ++i) out_base[i] = static_cast<char*>(outs[i].raw_data());
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    visit_dtype(P.cd, [&](auto tv) {
      using T = decltype(tv);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        // Rows go in blocks along the innermost outer dim (one stride per operand): each pass runs over
        // the whole block in one call, the reduction results of the block's rows land in `red`, and the
        // next pass reads them one per row. A block is sized to stay in L2.
        const int64_t inner_rows = r >= 2 ? shape[r - 2] : 1;
        const int64_t block = std::clamp<int64_t>(int64_t(16384) / std::max<int64_t>(C, 1), 1, 256);
        auto do_rows = [&](int64_t b, int64_t e) {
          alignas(64) static const double zeros[8] = {};  // row-shaped inputs a one-element pass never reads
          std::vector<T> red(P.nr * size_t(block));
          std::vector<T> scratch(P.ns * size_t(block * C) + 1);
          std::vector<char*> inp(P.ni);
          char* ptrs[64];
          detail::RowBlock rb;
          // The block's first row over the outer dims, stepped like an odometer: a division per dim and
          // input on every row costs more than a short row's passes.
          std::vector<int64_t> idx(r - 1, 0);
          {
            int64_t rem = b;
            for (size_t d = r - 1; d-- > 0;) {
              idx[d] = rem % shape[d];
              rem /= shape[d];
            }
            for (size_t k = 0; k < P.ni; ++k) {
              inp[k] = in_base[k];
              for (size_t d = 0; d + 1 < r; ++d) inp[k] += idx[d] * st[k][d];
            }
          }
          for (int64_t row = b; row < e;) {
            const int64_t n_rows = std::min({block, e - row, r >= 2 ? inner_rows - idx[r - 2] : int64_t(1)});
            for (size_t pi = 0; pi < P.passes.size(); ++pi) {
              const Pass& ps = P.passes[pi];
              size_t q = 0;
              for (size_t k = 0; k < P.ni; ++k) {
                const bool unread = ps.single && P.in_row[k];
                rb.stride[q] = unread || r < 2 ? 0 : st[k][r - 2];
                ptrs[q++] = unread ? reinterpret_cast<char*>(const_cast<double*>(zeros)) : inp[k];
              }
              for (size_t j = 0; j < P.nr; ++j) {
                rb.stride[q] = cs;
                ptrs[q++] = reinterpret_cast<char*>(red.data() + j * size_t(block));
              }
              for (size_t j = 0; j < P.ns; ++j) {
                rb.stride[q] = C * cs;
                ptrs[q++] = reinterpret_cast<char*>(scratch.data() + j * size_t(block * C));
              }
              for (int o : ps.outs) {
                const int64_t esz = int64_t(itemsize(P.out_dtype[size_t(o)]));
                const int64_t per_row = (P.out_row[size_t(o)] ? C : 1) * esz;
                rb.stride[q] = per_row;
                ptrs[q++] = out_base[size_t(o)] + row * per_row;
              }
              for (int j : ps.stash_out) {
                rb.stride[q] = C * cs;
                ptrs[q++] = reinterpret_cast<char*>(scratch.data() + size_t(j) * size_t(block * C));
              }
              rb.count = n_rows;
              rb.red_out = ps.red >= 0 ? reinterpret_cast<char*>(red.data() + size_t(ps.red) * size_t(block)) : nullptr;
              fns[pi](ptrs, ps.single ? 1 : C, &rb);
            }
            for (size_t i = 0; i < P.out_red.size(); ++i)
              if (P.out_red[i] >= 0)
                std::copy_n(red.data() + size_t(P.out_red[i]) * size_t(block), n_rows,
                            reinterpret_cast<T*>(out_base[i]) + row);
            row += n_rows;
            if (row >= e || r < 2) continue;
            for (size_t k = 0; k < P.ni; ++k) inp[k] += n_rows * st[k][r - 2];
            idx[r - 2] += n_rows;
            for (size_t d = r - 2; idx[d] == shape[d] && d > 0; --d) {  // carry into the outer dims
              idx[d] = 0;
              for (size_t k = 0; k < P.ni; ++k) inp[k] += st[k][d - 1] - shape[d] * st[k][d];
              ++idx[d - 1];
            }
          }
        };
        for_row_chunks(threads, numel >= 2 * kGrain, rows, do_rows);
      }
    });
    return result();
  }

 private:
  uint64_t default_bcast(size_t i) const {
    return p_.passes[i].single ? ~uint64_t(0) : (((uint64_t(1) << p_.nr) - 1) << p_.ni);
  }
  detail::KernelFn fn(size_t pass, uint64_t bcast) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_pair(pass, bcast);
    auto it = code_.find(key);
    if (it == code_.end()) {
      it = code_.emplace(key, detail::emit(p_.passes[pass].prog, isa_, {bcast, false, true})).first;
      detail::perf_map(it->second->bytes(), it->second->size(), name_ + "_pass" + std::to_string(pass));
    }
    return it->second->fn();
  }

  Plan p_;
  std::string name_;
  Isa isa_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<size_t, uint64_t>, std::unique_ptr<detail::Code>> code_;
};

}  // namespace

bool is_row_group(const ir::Graph& group) {
  int reds = 0;
  bool inner_use = false;
  const ir::Node* last = nullptr;
  for (const ir::Node* n : group.block()->nodes()) {
    last = n;
    if (!is_reduce(n)) continue;
    ++reds;
    for (const ir::Use& u : n->output()->uses()) inner_use |= u.user->prim() != ir::Prim::Return;
  }
  return reds > 1 || inner_use || (reds == 1 && !is_reduce(last));
}

std::shared_ptr<backends::FusedKernel> compile_row(const ir::Graph& group, const std::string& name) {
  if (best_isa() == Isa::None) fail("x86: this CPU has neither AVX2 nor AVX-512");
  return std::make_shared<RowKernel>(plan(group), name.empty() ? std::string("kiln_row") : name);
}

}  // namespace kiln::x86
