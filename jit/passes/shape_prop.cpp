// Shape and dtype propagation: each op node's output type computed from its inputs' types, symbolic
// dims carried through (broadcasting N against 1 gives N; N against 3 gives 3, the only size both
// can have at run time; N against M is unknown). Only table ops are typed here; the result replaces
// an output type only when it knows more (a traced graph's types are already exact).
#include <numeric>

#include "core/ir/dtype_rules.h"
#include "core/matmul_shape.h"
#include "core/rnn_mode.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"
#include "jit/passes/shape_prop.h"

namespace kiln::jit {

namespace {

using ir::Dim;
using ir::Type;
using Dims = std::vector<Dim>;

std::optional<Dims> dims_of(const ir::Value* v) { return v->type().is_tensor() ? v->type().dims : std::nullopt; }

Dim broadcast_dim(const Dim& a, const Dim& b) {
  if (a.is_known() && a.size == 1) return b;
  if (b.is_known() && b.size == 1) return a;
  if (a.is_known()) return a;
  if (b.is_known()) return b;
  if (!a.sym.empty() && a.sym == b.sym) return a;
  return Dim::unknown();
}

std::optional<Dims> broadcast(const std::vector<ir::Value*>& ins) {
  Dims out;
  for (const ir::Value* v : ins) {
    auto d = dims_of(v);
    if (!d) return std::nullopt;
    if (d->size() > out.size()) out.insert(out.begin(), d->size() - out.size(), Dim::known(1));
    size_t off = out.size() - d->size();
    for (size_t i = 0; i < d->size(); ++i) out[off + i] = broadcast_dim(out[off + i], (*d)[i]);
  }
  return out;
}

int64_t wrap(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }

std::optional<Dims> reduce_dims(const Dims& in, const Attrs& a, const char* key, bool single) {
  bool keep = a.b_or("keepdim", false);
  std::vector<bool> mask(in.size(), !a.has(key));
  if (a.has(key)) {
    Shape ds = single ? Shape{a.i(key)} : a.ints(key);
    if (ds.empty()) mask.assign(in.size(), true);
    for (int64_t d : ds) {
      int64_t w = wrap(d, in.size());
      if (w < 0 || w >= int64_t(in.size())) return std::nullopt;
      mask[size_t(w)] = true;
    }
  }
  Dims out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!mask[i]) out.push_back(in[i]);
    else if (keep) out.push_back(Dim::known(1));
  }
  return out;
}

std::optional<Dims> reshape_dims(const Dims& in, const Shape& shape) {
  int64_t known = 1;
  bool all_known = true;
  for (const Dim& d : in) {
    if (d.is_known()) known *= d.size;
    else all_known = false;
  }
  int64_t rest = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) infer = int64_t(i);
    else rest *= shape[i];
  }
  Dims out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (int64_t(i) != infer) out.push_back(Dim::known(shape[i]));
    else if (all_known && rest > 0) out.push_back(Dim::known(known / rest));
    else out.push_back(Dim::unknown());
  }
  return out;
}

std::optional<Dims> matmul_dims(const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  return matmul_out<Dim>(a, b, Dim::known(1), broadcast_dim);
}

// One spatial dim of a sliding window (conv, pool), core's window_out. Unknown when the input or the
// window is, or when the sizes do not fit (the kernel raises then, with the facts).
Dim window_dim(const Dim& in, const Dim& k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  if (!in.is_known() || !k.is_known() || s <= 0) return Dim::unknown();
  int64_t out = window_out(in.size, k.size, s, p, d, ceil_mode);
  return out < 1 ? Dim::unknown() : Dim::known(out);
}

Shape pair_or(const Attrs& a, const char* name, Shape fallback) {
  if (!a.has(name) || a.ints(name).empty()) return fallback;
  return a.ints(name).size() == 2 ? a.ints(name) : Shape{};
}

// conv2d and the pools: the leading dims kept (conv2d: the channels become the weight's rows), the
// last two slide. window: [kh, kw] of the kernel, as dims.
std::optional<Dims> window_dims(const ir::Node& n, const Dims& in, const Dim& channels, const Dims& window,
                                bool dilated) {
  const Attrs& a = n.attrs();
  Shape k = {window[0].size, window[1].size};
  Shape s = pair_or(a, "stride", k), p = pair_or(a, "padding", {0, 0}), d = dilated ? pair_or(a, "dilation", {1, 1}) : Shape{1, 1};
  if (in.size() < 3 || s.size() != 2 || p.size() != 2 || d.size() != 2) return std::nullopt;
  Dims out = in;
  size_t r = in.size();
  if (channels.is_known() || !channels.sym.empty()) out[r - 3] = channels;
  bool ceil_mode = a.b_or("ceil_mode", false);
  out[r - 2] = window_dim(in[r - 2], window[0], s[0], p[0], d[0], ceil_mode);
  out[r - 1] = window_dim(in[r - 1], window[1], s[1], p[1], d[1], ceil_mode);
  return out;
}

// conv_transpose2d: x [N, C, H, W] (or unbatched), w [C, O / groups, kh, kw].
std::optional<Dims> transposed_dims(const ir::Node& n, const std::optional<Dims>& x, const std::optional<Dims>& w) {
  if (!x || !w || w->size() != 4 || x->size() < 3) return std::nullopt;
  const Attrs& a = n.attrs();
  Shape s = pair_or(a, "stride", {1, 1}), p = pair_or(a, "padding", {0, 0}), d = pair_or(a, "dilation", {1, 1}),
        o = pair_or(a, "output_padding", {0, 0});
  if (s.size() != 2 || p.size() != 2 || d.size() != 2 || o.size() != 2) return std::nullopt;
  Dims out = *x;
  size_t r = out.size();
  const Dim& og = (*w)[1];
  out[r - 3] = og.is_known() ? Dim::known(og.size * a.i_or("groups", 1)) : Dim::unknown();
  for (size_t i = 0; i < 2; ++i) {
    const Dim &in = (*x)[r - 2 + i], &k = (*w)[2 + i];
    int64_t len = in.is_known() && k.is_known() ? transposed_window_out(in.size, k.size, s[i], p[i], d[i], o[i]) : 0;
    out[r - 2 + i] = len >= 1 ? Dim::known(len) : Dim::unknown();
  }
  return out;
}

std::optional<Dims> cat_dims(const ir::Node& n) {
  auto first = dims_of(n.input(0));
  if (!first || first->empty()) return std::nullopt;
  int64_t d = wrap(n.attrs().i_or("dim", 0), first->size());
  if (d < 0 || d >= int64_t(first->size())) return std::nullopt;
  Dims out = *first;
  int64_t total = 0;
  for (const ir::Value* v : n.inputs()) {
    auto dv = dims_of(v);
    if (!dv || dv->size() != out.size()) return std::nullopt;
    const Dim& x = (*dv)[size_t(d)];
    total = total >= 0 && x.is_known() ? total + x.size : -1;
    for (size_t i = 0; i < out.size(); ++i)
      if (int64_t(i) != d && !out[i].is_known()) out[i] = (*dv)[i];
  }
  out[size_t(d)] = total >= 0 ? Dim::known(total) : Dim::unknown();
  return out;
}

Dims known_dims(const Shape& shape) {
  Dims out;
  for (int64_t s : shape) out.push_back(Dim::known(s));
  return out;
}

// One case per row of ops.def, no default: a new row does not build until its shape rule is here.
std::optional<Dims> out_dims(const ir::Node& n) {
  auto in0 = dims_of(n.input(0));
  auto in1 = n.inputs().size() > 1 ? dims_of(n.input(1)) : std::nullopt;
  const Attrs& a = n.attrs();
  if (!in0 && op_info(n.op()).kind == OpKind::View) return std::nullopt;
  switch (n.op()) {
#define KILN_UNARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
      return in0;
#define KILN_BINARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
    case OpId::Where:
      return broadcast(n.inputs());
#define KILN_REDUCE(Id, name, ...) case OpId::Id:
#include "core/ops.def"
      return in0 ? reduce_dims(*in0, a, "dims", false) : std::nullopt;
    case OpId::Argmax: case OpId::Argmin:
      if (!in0) return std::nullopt;
      if (!a.has("dim")) return Dims{};
      return reduce_dims(*in0, a, "dim", true);
    case OpId::Argsort: case OpId::Cumsum: case OpId::Cumprod: return in0;
    case OpId::Reshape: return reshape_dims(*in0, a.ints("shape"));
    case OpId::Permute: {
      Dims out;
      for (int64_t d : a.ints("dims")) {
        int64_t w = wrap(d, in0->size());
        if (w < 0 || w >= int64_t(in0->size())) return std::nullopt;
        out.push_back((*in0)[size_t(w)]);
      }
      return out;
    }
    case OpId::Expand: {
      const Shape& s = a.ints("shape");
      if (s.size() < in0->size()) return std::nullopt;
      Dims out;
      size_t off = s.size() - in0->size();
      for (size_t i = 0; i < s.size(); ++i) out.push_back(s[i] == -1 && i >= off ? (*in0)[i - off] : Dim::known(s[i]));
      return out;
    }
    case OpId::Slice: {
      int64_t d = wrap(a.i("dim"), in0->size());
      if (d < 0 || d >= int64_t(in0->size())) return std::nullopt;
      Dims out = *in0;
      const Dim& src = (*in0)[size_t(d)];
      if (!src.is_known()) {
        out[size_t(d)] = Dim::unknown();
        return out;
      }
      int64_t size = src.size, step = a.i_or("step", 1);
      int64_t start = a.i_or("start", 0), end = a.has("end") ? a.i("end") : size;
      if (step <= 0) return std::nullopt;
      if (start < 0) start += size;
      if (end < 0) end += size;
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, start, size);
      out[size_t(d)] = Dim::known((end - start + step - 1) / step);
      return out;
    }
    case OpId::Select: {
      int64_t d = wrap(a.i("dim"), in0->size());
      if (d < 0 || d >= int64_t(in0->size())) return std::nullopt;
      Dims out = *in0;
      out.erase(out.begin() + d);
      return out;
    }
    case OpId::Squeeze: {
      Shape ds = a.has("dims") ? a.ints("dims") : Shape{};
      Dims out;
      for (size_t i = 0; i < in0->size(); ++i) {
        bool listed = ds.empty();
        for (int64_t d : ds) listed |= wrap(d, in0->size()) == int64_t(i);
        if (listed && !(*in0)[i].is_known()) return std::nullopt;  // squeezed or not depends on the run
        if (!(listed && (*in0)[i].size == 1)) out.push_back((*in0)[i]);
      }
      return out;
    }
    case OpId::Unsqueeze: {
      int64_t d = wrap(a.i("dim"), in0->size() + 1);
      if (d < 0 || d > int64_t(in0->size())) return std::nullopt;
      Dims out = *in0;
      out.insert(out.begin() + d, Dim::known(1));
      return out;
    }
    case OpId::Contiguous: case OpId::Clone: case OpId::Cast:
    case OpId::IndexAdd: case OpId::ScatterAdd:
      return in0;
    case OpId::Matmul:
      return in0 && in1 ? matmul_dims(*in0, *in1) : std::nullopt;
    case OpId::Conv2d:  // weight [O, C/groups, kh, kw]
      if (!in0 || !in1 || in1->size() != 4) return std::nullopt;
      return window_dims(n, *in0, (*in1)[0], Dims{(*in1)[2], (*in1)[3]}, true);
    case OpId::MaxPool2d: case OpId::AvgPool2d: {
      if (!in0 || !a.has("kernel_size") || a.ints("kernel_size").size() != 2) return std::nullopt;
      const Shape& k = a.ints("kernel_size");
      return window_dims(n, *in0, Dim::unknown(), known_dims(k), n.is_op(OpId::MaxPool2d));
    }
    case OpId::RnnLayer: {  // [T+S, N, H] from x_proj [T,N,G*H] and w_hh [G*H,H]
      auto mode = a.has("mode") ? rnn_mode(a.s("mode")) : std::nullopt;
      if (!in0 || !in1 || !mode || in0->size() != 3 || in1->size() != 2) return std::nullopt;
      Dim t = (*in0)[0];
      return Dims{t.is_known() ? Dim::known(t.size + mode->states) : Dim::unknown(), (*in0)[1], (*in1)[1]};
    }
    case OpId::FlashAttention: {  // [..., L, Ev]: q's batch dims where q, k and v agree on them
      auto in2 = dims_of(n.input(2));
      if (!in0 || !in1 || !in2 || in0->size() < 2 || in1->size() != in0->size() || in2->size() != in0->size())
        return std::nullopt;
      for (size_t i = 0; i + 2 < in0->size(); ++i)
        if (!((*in0)[i] == (*in1)[i]) || !((*in0)[i] == (*in2)[i])) return std::nullopt;
      Dims out = *in0;
      out.back() = in2->back();
      return out;
    }
    case OpId::RnnLayerBackward:  // four outputs: run_block leaves them to the graph's run
    case OpId::FlashAttentionBackward:
      return std::nullopt;
    case OpId::Cat:
      return cat_dims(n);
    case OpId::IndexSelect: {  // the dim takes the index's length
      if (!in0 || !in1 || in1->size() > 1) return std::nullopt;
      int64_t d = wrap(a.i("dim"), in0->size());
      if (d < 0 || d >= int64_t(in0->size())) return std::nullopt;
      Dims out = *in0;
      out[size_t(d)] = in1->empty() ? Dim::known(1) : (*in1)[0];
      return out;
    }
    case OpId::Gather:
      return in1;
    case OpId::Conv2dBackwardInput:  // without "shape": conv_transpose2d, its size from the input's
      if (!a.has("shape")) return transposed_dims(n, in0, in1);
      return known_dims(a.ints("shape"));
    case OpId::SliceBackward: case OpId::AvgPool2dBackward:
    case OpId::Conv2dBackwardWeight:  // the gradient of a value of this shape
      return a.has("shape") ? std::optional<Dims>(known_dims(a.ints("shape"))) : std::nullopt;
  }
  return std::nullopt;
}

// How much a type pins down: each known dtype, rank and dim counts.
int knowledge(const Type& t) {
  if (!t.is_tensor()) return 0;
  int k = t.dtype ? 1 : 0;
  if (t.dims) {
    k += 1;
    for (const Dim& d : *t.dims) k += d.is_known() ? 2 : !d.sym.empty() ? 1 : 0;
  }
  return k;
}

int64_t run_block(ir::Block& b) {
  int64_t changed = 0;
  for (ir::Node* n : b.nodes()) {
    for (ir::Block* sub : n->blocks()) changed += run_block(*sub);
    // prim::detach (a composite's detached max) is its input's values: its type too
    if (n->prim() == ir::Prim::Detach) {
      const Type& in = n->input(0)->type();
      if (knowledge(in) > knowledge(n->output()->type())) {
        n->output()->set_type(in);
        ++changed;
      }
      continue;
    }
    if (!n->is_op() || n->inputs().empty()) continue;
    // max_pool2d's second output holds the indices: the same dims, int64; rnn_layer's second (the steps it
    // kept for the backward, or none) is left to the run
    // flash_attention's second (each query row's log-sum-exp) follows from its first
    const size_t typed = n->outputs().size() == 1                                                  ? 1
                         : n->is_op(OpId::MaxPool2d) || n->is_op(OpId::FlashAttention)            ? 2
                         : n->is_op(OpId::RnnLayer)                                                ? 1
                                                                                                   : 0;
    if (typed == 0) continue;
    auto dims = out_dims(*n);
    for (size_t i = 0; i < typed; ++i) {
      Type t = Type::tensor(i == 0 ? ir::op_result_dtype(*n, /*others_keep_first=*/true) : DType::Int64, dims);
      if (i == 1 && n->is_op(OpId::FlashAttention)) t = flash_attention_lse_type(n->outputs()[0]->type());
      const Type& old = n->outputs()[i]->type();
      if (knowledge(t) > knowledge(old) || (knowledge(t) == knowledge(old) && t != old && knowledge(t) > 0 &&
                                            !old.has_static_shape())) {
        n->outputs()[i]->set_type(t);
        ++changed;
      }
    }
  }
  return changed;
}

}  // namespace

std::optional<Dims> op_output_dims(const ir::Node& n) { return out_dims(n); }

PassResult propagate_shapes(ir::Graph& g) { return {run_block(*g.block()), {}}; }

}  // namespace kiln::jit
