#include "jit/tensor_parallel_plan.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "eager/ops.h"

namespace kiln::jit {

namespace {

// How a value lies on the ranks: dim -1 whole on each; else split along dim, block by block (see
// ParameterShard), by `module` of the plan (named in errors).
struct Sharding {
  int64_t dim = -1;
  int64_t blocks = 1;
  std::string module;
  bool sharded() const { return dim >= 0; }
};

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out(1);
  for (char c : path) {
    if (c == '.') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

bool path_matches(const std::string& pattern, const std::string& path) {
  std::vector<std::string> p = components(pattern), m = components(path);
  if (p.size() != m.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != "*" && p[i] != m[i]) return false;
  return true;
}

const char* style_name(ParallelStyle s) { return s == ParallelStyle::Colwise ? "colwise" : "rowwise"; }

int64_t wrap_dim(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }

class ShardingPass {
 public:
  ShardingPass(const Function& f, const TensorParallelPlan& plan, int64_t world)
      : graph_(f.graph().copy()), g_(*graph_), world_(world) {
    if (world < 1) fail("tensor parallel: world size {}; it must be at least 1", world);
    if (!f.binding().guards.empty()) fail("tensor parallel: the traced forward has value guards; trace it without guard_value_reads");
    if (!f.binding().writebacks.empty())
      fail("tensor parallel: the traced forward writes {} bound tensors in place (running statistics); not supported",
           f.binding().writebacks.size());
    size_t index = 0;
    for (ir::Node* n : g_.block()->nodes()) {
      nodes_.push_back(n);
      index_[n] = index++;
    }
    for (ir::Node* n : nodes_) {
      for (ir::Value* v : n->outputs()) remember_shape(v);
      // values computed from constants alone (attention's scale) have no gradient to sum
      bool fixed = n->blocks().empty();
      for (const ir::Value* v : n->inputs()) fixed &= constant_.count(v) > 0;
      if (fixed || n->prim() == ir::Prim::Constant)
        for (ir::Value* v : n->outputs()) constant_.insert(v);
    }
    for (ir::Value* v : g_.inputs()) remember_shape(v);
    const size_t num_bound = f.binding().bound.size(), first = g_.inputs().size() - num_bound;
    for (size_t k = 0; k < num_bound; ++k) result_.shards.push_back({g_.inputs()[first + k]->name(), "", -1, 1});
    for (const auto& [pattern, style] : plan) {
      bool found = false;
      for (size_t k = 0; k < num_bound; ++k) {
        const std::string& name = result_.shards[k].name;
        if (name.size() > 7 && name.ends_with(".weight") && path_matches(pattern, name.substr(0, name.size() - 7))) {
          found = true;
          plan_linear(name.substr(0, name.size() - 7), style, first, num_bound);
        }
      }
      if (!found)
        fail("tensor parallel: the plan's '{}' ({}) names no module with a weight in the traced model; its parameters "
             "are named like '{}'", pattern, style_name(style), num_bound ? result_.shards[0].name : std::string("(none)"));
    }
  }

  TensorParallelGraph run() {
    for (ir::Node* n : nodes_) visit(n);
    for (size_t i = 0; i < g_.outputs().size(); ++i)
      if (Sharding s = of(g_.outputs()[i]); s.sharded())
        fail("tensor parallel: the graph's output {} of shape {} is sharded on dim {} by module {}; end each sharded "
             "region with a rowwise module", i, shape_str(global(g_.outputs()[i])), s.dim, s.module);
    result_.graph = graph_;
    return std::move(result_);
  }

 private:
  void remember_shape(const ir::Value* v) {
    const ir::Type& t = v->type();
    if (t.is_tensor() && t.has_static_shape()) shapes_[v] = t.static_shape();
  }
  const Shape& global(const ir::Value* v) const {
    auto it = shapes_.find(v);
    if (it == shapes_.end()) fail("tensor parallel: a value of type {} has no static shape; trace the model", v->type().str());
    return it->second;
  }
  Sharding of(const ir::Value* v) const {
    auto it = state_.find(v);
    return it == state_.end() ? Sharding{} : it->second;
  }
  // v is sharded by s: its type becomes one rank's
  void set(ir::Value* v, Sharding s) {
    if (!v->type().is_tensor() || !v->type().dtype) fail("tensor parallel: a sharded value of type {} has no dtype", v->type().str());
    Shape local = global(v);
    local[size_t(s.dim)] /= world_;
    v->set_type(ir::Type::tensor(*v->type().dtype, local));
    state_[v] = std::move(s);
  }
  std::string what(const ir::Node* n) const {
    auto it = index_.find(n);
    return fmt::format("node {} ({})", it == index_.end() ? -1 : int64_t(it->second), n->kind_name());
  }
  std::string described(const ir::Value* v) const {
    Sharding s = of(v);
    if (!s.sharded()) return fmt::format("{} (replicated)", shape_str(global(v)));
    return fmt::format("{} sharded on dim {} by module {}", shape_str(global(v)), s.dim, s.module);
  }
  [[noreturn]] void no_rule(const ir::Node* n, const std::string& why) const {
    std::vector<std::string> ins;
    for (const ir::Value* v : n->inputs())
      if (shapes_.count(v)) ins.push_back(described(v));
    fail("tensor parallel: {} {}; its inputs: {}", what(n), why, fmt::join(ins, ", "));
  }

  // A planned module as the trace records a Linear: weight -> permute -> matmul(x, .) [-> add(., bias)]
  void plan_linear(const std::string& module, ParallelStyle style, size_t first, size_t num_bound) {
    auto input = [&](const std::string& name) -> std::pair<ir::Value*, size_t> {
      for (size_t k = 0; k < num_bound; ++k)
        if (result_.shards[k].name == name) return {g_.inputs()[first + k], k};
      return {nullptr, 0};
    };
    auto [w, wk] = input(module + ".weight");
    auto [b, bk] = input(module + ".bias");
    const Shape& ws = global(w);
    const char* how = style_name(style);
    ir::Node* mm = nullptr;
    if (ws.size() == 2 && w->uses().size() == 1) {
      ir::Node* t = w->uses()[0].user;
      if (t->is_op(OpId::Permute) && t->attrs().ints("dims") == Shape{1, 0} && t->output()->uses().size() == 1 &&
          t->output()->uses()[0].user->is_op(OpId::Matmul) && t->output()->uses()[0].index == 1)
        mm = t->output()->uses()[0].user;
    }
    if (!mm)
      fail("tensor parallel: {} module {}: its weight of shape {} is not read as a Linear's (x @ weight.T, once) in the "
           "traced graph", how, module, shape_str(ws));
    if (style == ParallelStyle::Rowwise) {
      if (ws[1] % world_ != 0)
        fail("tensor parallel: rowwise module {}: in_features {} does not divide by the world size {}", module, ws[1], world_);
      result_.shards[wk] = {result_.shards[wk].name, module, 1, 1};
      set(w, {1, 1, module});
      return;
    }
    // The output the module returns (after its bias), and whether it is only read as equal slices along
    // the features (q, k, v): then the rows are split per slice, so each rank keeps whole heads of each.
    ir::Value* out = mm->output();
    if (b && out->uses().size() == 1 && out->uses()[0].user->is_op(OpId::Add) &&
        out->uses()[0].user->inputs().size() == 2 && out->uses()[0].user->input(1) == b)
      out = out->uses()[0].user->output();
    int64_t n = ws[0], blocks = 1, len = 0;
    bool slices = out->uses().size() >= 2;
    for (const ir::Use& u : out->uses()) {
      const ir::Node* s = u.user;
      if (!s->is_op(OpId::Slice) || wrap_dim(s->attrs().i("dim"), global(out).size()) != int64_t(global(out).size()) - 1 ||
          s->attrs().i_or("step", 1) != 1) {
        slices = false;
        break;
      }
      int64_t l = global(s->output()).back();
      if (len == 0) len = l;
      if (l != len || l == 0 || s->attrs().i_or("start", 0) % l != 0) slices = false;
    }
    if (slices && n % len == 0) blocks = n / len;
    if (n % (blocks * world_) != 0) {
      if (blocks == 1)
        fail("tensor parallel: colwise module {}: out_features {} does not divide by the world size {}", module, n, world_);
      fail("tensor parallel: colwise module {}: out_features {} are read as {} slices of {}, which do not divide by the "
           "world size {}", module, n, blocks, len, world_);
    }
    result_.shards[wk] = {result_.shards[wk].name, module, 0, blocks};
    set(w, {0, blocks, module});
    if (b) {
      result_.shards[bk] = {result_.shards[bk].name, module, 0, blocks};
      set(b, {0, blocks, module});
    }
  }

  // A collective marker after v's definition: clone[tensor_parallel=kind](v), of v's type
  ir::Value* marker(ir::Value* v, const char* kind) {
    Attrs a;
    a.set("tensor_parallel", std::string(kind));
    ir::Node* c = g_.create_op(OpId::Clone, {v}, a);
    c->output()->set_type(v->type());
    if (v->node()->prim() == ir::Prim::Param) g_.block()->prepend(c);
    else c->insert_after(v->node());
    return c->output();
  }
  // v's gradient from this rank's shard is only a part of it: summed over the ranks in backward
  ir::Value* copied(ir::Value* v) {
    auto it = copies_.find(v);
    if (it != copies_.end()) return it->second;
    return copies_[v] = marker(v, "copy");
  }
  // Every rank holds a partial sum: all-reduced before anything reads it
  void reduce(ir::Value* v) {
    ir::Value* r = marker(v, "reduce");
    v->replace_all_uses_with(r);
    r->node()->replace_input(0, v);
  }

  void visit(ir::Node* n) {
    bool any = false;
    for (const ir::Value* v : n->inputs()) any |= of(v).sharded();
    if (!any) return;
    if (!n->blocks().empty()) no_rule(n, "holds blocks (control flow) and reads a sharded value");
    if (n->prim() == ir::Prim::Detach) {
      set(n->output(), of(n->input()));
      return;
    }
    if (!n->is_op()) no_rule(n, "reads a sharded value and the pass has no rule for it");
    bool partial = false;
    std::vector<Sharding> outs = rule(n, partial);
    if (partial) {
      reduce(n->output());
      return;
    }
    for (size_t i = 0; i < outs.size(); ++i) set(n->output(i), outs[i]);
    // A replicated input (not a constant) combined into a sharded result
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      ir::Value* v = n->input(i);
      const ir::Type& t = v->type();
      if (of(v).sharded() || !t.is_tensor() || !t.dtype || !is_floating(*t.dtype) || constant_.count(v)) continue;
      n->replace_input(i, copied(v));
    }
  }

  // The output shardings of an op reading a sharded value; `partial` when its result is a partial sum.
  std::vector<Sharding> rule(ir::Node* n, bool& partial) {
    const Sharding s0 = of(n->input(0));
    const Shape& in0 = global(n->input(0));
    Attrs& a = n->attrs();
    switch (n->op()) {
#define KILN_UNARY(Id, ...) case OpId::Id:
#include "core/ops.def"
      case OpId::Contiguous: case OpId::Clone: case OpId::Cast:
        return {s0};
#define KILN_BINARY(Id, ...) case OpId::Id:
#include "core/ops.def"
      case OpId::Where:
        return {broadcast_rule(n)};
#define KILN_REDUCE(Id, ...) case OpId::Id:
#include "core/ops.def"
      case OpId::Argmax: case OpId::Argmin: {
        const bool single = n->op() == OpId::Argmax || n->op() == OpId::Argmin;
        const char* key = single ? "dim" : "dims";
        std::vector<bool> reduced(in0.size(), !a.has(key) || (!single && a.ints(key).empty()));
        if (a.has(key))
          for (int64_t d : single ? Shape{a.i(key)} : a.ints(key)) reduced[size_t(wrap_dim(d, in0.size()))] = true;
        if (reduced[size_t(s0.dim)]) {
          if (n->op() != OpId::Sum) no_rule(n, fmt::format("reduces over the sharded dim {}; only a sum can (into partial sums)", s0.dim));
          partial = true;
          return {};
        }
        if (a.b_or("keepdim", false)) return {s0};
        Sharding s = s0;
        for (int64_t d = 0; d < s0.dim; ++d) s.dim -= reduced[size_t(d)];
        return {s};
      }
      case OpId::Argsort: case OpId::Cumsum: case OpId::Cumprod:
        if (wrap_dim(a.i("dim"), in0.size()) == s0.dim) no_rule(n, "runs along the sharded dim");
        return {s0};
      case OpId::Reshape:
        return {reshape_rule(n, s0)};
      case OpId::Permute: {
        const Shape& dims = a.ints("dims");
        Sharding s = s0;
        for (size_t j = 0; j < dims.size(); ++j)
          if (wrap_dim(dims[j], in0.size()) == s0.dim) s.dim = int64_t(j);
        return {s};
      }
      case OpId::Expand: {
        Shape shape = a.ints("shape");
        Sharding s = s0;
        s.dim += int64_t(shape.size() - in0.size());
        if (shape[size_t(s.dim)] != -1) shape[size_t(s.dim)] /= world_;
        a.set("shape", shape);
        return {s};
      }
      case OpId::Slice:
        return {slice_rule(n, s0)};
      case OpId::Select: {
        int64_t d = wrap_dim(a.i("dim"), in0.size());
        if (d == s0.dim) no_rule(n, "selects along the sharded dim");
        Sharding s = s0;
        s.dim -= d < s0.dim;
        return {s};
      }
      case OpId::Squeeze: {
        // the removed dims named (a local size-1 dim the whole one is not must stay)
        Shape removed;
        const Shape listed = a.has("dims") ? a.ints("dims") : Shape{};
        for (size_t i = 0; i < in0.size(); ++i) {
          bool named = listed.empty();
          for (int64_t d : listed) named |= wrap_dim(d, in0.size()) == int64_t(i);
          if (named && in0[i] == 1) removed.push_back(int64_t(i));
        }
        if (removed.empty()) {
          // removes nothing of the whole value; on a rank whose part of the sharded dim is 1 it must not either
          if (listed.empty() || std::count(listed.begin(), listed.end(), s0.dim) || std::count(listed.begin(), listed.end(), s0.dim - int64_t(in0.size())))
            no_rule(n, "squeezes no dim of the whole value but may squeeze a rank's part");
          return {s0};
        }
        a.set("dims", removed);
        Sharding s = s0;
        for (int64_t d : removed) s.dim -= d < s0.dim;
        return {s};
      }
      case OpId::Unsqueeze: {
        Sharding s = s0;
        s.dim += wrap_dim(a.i("dim"), in0.size() + 1) <= s0.dim;
        return {s};
      }
      case OpId::Matmul:
        return {matmul_rule(n, partial)};
      case OpId::Cat: {
        for (const ir::Value* v : n->inputs())
          if (Sharding s = of(v); s.dim != s0.dim || s.blocks != s0.blocks) no_rule(n, "joins values sharded differently");
        if (wrap_dim(a.i("dim"), in0.size()) == s0.dim) no_rule(n, "joins along the sharded dim");
        return {s0};
      }
      case OpId::FlashAttention: {
        // q, k, v split alike along a batch dim (the heads): each rank attends with its own heads
        for (size_t i = 0; i < 3; ++i) {
          Sharding s = of(n->input(i));
          if (!s.sharded() || s.dim != s0.dim || s.blocks != s0.blocks || s.dim >= int64_t(in0.size()) - 2)
            no_rule(n, "reads q, k and v not all sharded alike on a batch dim (the heads)");
        }
        for (size_t i = 4; i < n->inputs().size(); ++i) broadcast_operand(n, n->input(i), int64_t(in0.size()), s0.dim);
        return {s0, s0};
      }
      case OpId::Conv2d: case OpId::MaxPool2d: case OpId::AvgPool2d: case OpId::RnnLayer: case OpId::IndexSelect:
      case OpId::Gather: case OpId::IndexAdd: case OpId::ScatterAdd: case OpId::SliceBackward:
      case OpId::AvgPool2dBackward: case OpId::Conv2dBackwardInput: case OpId::Conv2dBackwardWeight:
      case OpId::RnnLayerBackward: case OpId::FlashAttentionBackward:
        break;
    }
    no_rule(n, "reads a sharded value and the pass has no rule for it");
  }

  // A replicated operand broadcast against a value sharded on out dim d (of out_rank dims): it must not vary along d
  void broadcast_operand(const ir::Node* n, const ir::Value* v, int64_t out_rank, int64_t d) {
    if (of(v).sharded() || !shapes_.count(v)) return;
    const Shape& s = global(v);
    int64_t at = d - (out_rank - int64_t(s.size()));
    if (at >= 0 && s[size_t(at)] != 1)
      no_rule(n, fmt::format("combines a value sharded on dim {} with a replicated one of size {} on that dim", d, s[size_t(at)]));
  }

  Sharding broadcast_rule(const ir::Node* n) {
    const int64_t r = int64_t(global(n->output()).size());
    Sharding out;
    for (const ir::Value* v : n->inputs()) {
      Sharding s = of(v);
      if (!s.sharded()) continue;
      s.dim += r - int64_t(global(v).size());
      if (out.sharded() && (s.dim != out.dim || s.blocks != out.blocks)) no_rule(n, "combines values sharded differently");
      out = s;
    }
    for (const ir::Value* v : n->inputs()) broadcast_operand(n, v, r, out.dim);
    return out;
  }

  // A view: the smallest runs of input and output dims of equal product hold the sharded dim; it must lead
  // its run (each rank's part is then a contiguous range of the run), and the output run's leading dim takes
  // the split (a view into (heads, head_dim): the heads).
  Sharding reshape_rule(ir::Node* n, const Sharding& s0) {
    const Shape& in = global(n->input(0));
    const Shape& out = global(n->output());
    size_t i = 0, o = 0, i0 = 0, o0 = 0;
    int64_t pi = 1, po = 1;
    Sharding s = s0;
    while (i < in.size() || o < out.size()) {
      if (o >= out.size() || (i < in.size() && pi <= po)) pi *= in[i++];
      else po *= out[o++];
      if (pi != po || !(i0 <= size_t(s0.dim) && size_t(s0.dim) < i)) {
        if (pi == po) i0 = i, o0 = o, pi = po = 1;
        continue;
      }
      for (size_t k = i0; k < size_t(s0.dim); ++k)
        if (in[k] != 1) no_rule(n, fmt::format("merges the sharded dim {} behind dim {} of size {}", s0.dim, k, in[k]));
      size_t od = o0;
      while (od < o && out[od] == 1) ++od;
      bool same = o - o0 == 1 && out[od] == in[size_t(s0.dim)];
      if (!same && s0.blocks != 1)
        no_rule(n, fmt::format("reshapes dim {}, which module {} splits in {} blocks", s0.dim, s0.module, s0.blocks));
      if (out[od] % world_ != 0)
        fail("tensor parallel: {} views dim {} of {}, sharded by module {}, as {}: its leading size {} (the heads) does "
             "not divide by the world size {}", what(n), s0.dim, shape_str(in), s0.module,
             shape_str(Shape(out.begin() + int64_t(o0), out.begin() + int64_t(o))), out[od], world_);
      s.dim = int64_t(od);
      Shape local = out;
      local[od] /= world_;
      n->attrs().set("shape", local);
      return s;
    }
    no_rule(n, "is a view whose sizes do not match");
  }

  Sharding slice_rule(ir::Node* n, const Sharding& s0) {
    Attrs& a = n->attrs();
    const Shape& in = global(n->input(0));
    if (wrap_dim(a.i("dim"), in.size()) != s0.dim) return s0;
    const int64_t size = in[size_t(s0.dim)], bs = size / s0.blocks, part = bs / world_;
    int64_t start = a.i_or("start", 0), end = a.has("end") ? a.i("end") : size;
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, start, size);
    if (a.i_or("step", 1) != 1 || start % bs != 0 || end % bs != 0)
      no_rule(n, fmt::format("slices [{}, {}) of the sharded dim {}, which module {} splits in blocks of {}", start, end,
                             s0.dim, s0.module, bs));
    a.set("start", start / bs * part);
    a.set("end", end / bs * part);
    Sharding s = s0;
    s.blocks = (end - start) / bs;
    return s;
  }

  Sharding matmul_rule(const ir::Node* n, bool& partial) {
    const Shape& a = global(n->input(0));
    const Shape& b = global(n->input(1));
    const int64_t r = int64_t(global(n->output()).size());
    if (a.size() < 2 || b.size() < 2) no_rule(n, "is a matmul of a vector and a sharded value");
    const Sharding sa = of(n->input(0)), sb = of(n->input(1));
    const int64_t ra = int64_t(a.size()), rb = int64_t(b.size());
    const bool a_rows = sa.dim == ra - 2, a_k = sa.dim == ra - 1, b_k = sb.dim == rb - 2, b_cols = sb.dim == rb - 1;
    if (a_k && b_k && sa.blocks == sb.blocks) {
      partial = true;
      return {};
    }
    if (a_rows && !sb.sharded()) return {r - 2, sa.blocks, sa.module};
    if (b_cols && !sa.sharded()) return {r - 1, sb.blocks, sb.module};
    if (a_k && !sb.sharded())
      no_rule(n, fmt::format("multiplies module {}'s split features by a replicated matrix; a rowwise module takes them", sa.module));
    if (b_k && !sa.sharded())
      no_rule(n, fmt::format("multiplies a replicated input by module {}'s split rows; a rowwise module reads the "
                             "output of a colwise one", sb.module));
    // a batch dim (the heads) split on one side or both
    Sharding out;
    for (auto [s, rank, v] : {std::tuple{sa, ra, n->input(0)}, std::tuple{sb, rb, n->input(1)}}) {
      if (!s.sharded()) continue;
      if (s.dim >= rank - 2) no_rule(n, "is a matmul of operands sharded on dims it cannot split");
      s.dim += r - rank;
      if (out.sharded() && (out.dim != s.dim || out.blocks != s.blocks)) no_rule(n, "is a matmul of operands sharded differently");
      out = s;
    }
    for (const ir::Value* v : n->inputs()) {
      const Shape& s = global(v);
      if (of(v).sharded()) continue;
      int64_t at = out.dim - (r - int64_t(s.size()));
      if (at >= 0 && at < int64_t(s.size()) - 2 && s[size_t(at)] != 1)
        no_rule(n, fmt::format("combines a value sharded on dim {} with a replicated one of size {} on that dim", out.dim, s[size_t(at)]));
    }
    return out;
  }

  std::shared_ptr<ir::Graph> graph_;
  ir::Graph& g_;
  int64_t world_;
  std::vector<ir::Node*> nodes_;
  std::unordered_map<const ir::Node*, size_t> index_;
  std::unordered_map<const ir::Value*, Shape> shapes_;
  std::unordered_map<const ir::Value*, Sharding> state_;
  std::unordered_map<const ir::Value*, ir::Value*> copies_;
  std::unordered_set<const ir::Value*> constant_;
  TensorParallelGraph result_;
};

}  // namespace

TensorParallelGraph shard_for_tensor_parallel(const Function& forward, const TensorParallelPlan& plan, int64_t world) {
  return ShardingPass(forward, plan, world).run();
}

Tensor shard_part(const Tensor& whole, const ParameterShard& shard, int64_t rank, int64_t world) {
  if (shard.dim < 0) return whole.detach().clone();
  const int64_t bs = whole.size(shard.dim) / shard.blocks, part = bs / world;
  std::vector<Tensor> pieces;
  for (int64_t j = 0; j < shard.blocks; ++j)
    pieces.push_back(whole.detach().slice(shard.dim, j * bs + rank * part, j * bs + (rank + 1) * part));
  return cat(pieces, shard.dim).contiguous().clone();
}

Tensor placed_part(const Tensor& part, const ParameterShard& shard, int64_t rank, int64_t world) {
  if (shard.dim < 0) return part.detach().clone();
  Shape shape = part.sizes();
  const int64_t p = shape[size_t(shard.dim)] / shard.blocks, bs = p * world;
  shape[size_t(shard.dim)] *= world;
  Tensor whole = zeros(shape, {part.dtype(), part.device()});
  for (int64_t j = 0; j < shard.blocks; ++j)
    whole.slice(shard.dim, j * bs + rank * p, j * bs + (rank + 1) * p).copy_(part.detach().slice(shard.dim, j * p, (j + 1) * p));
  return whole;
}

}  // namespace kiln::jit
