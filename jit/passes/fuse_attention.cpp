// Attention written out, as published GPT code writes it, becomes the fused flash_attention row:
//   Given:   %s = matmul(%q, transpose(%k, -2, -1))        Result:  %keep = logical_not(%drop)
//            %t = mul(%s, %scale)        (or div(%s, %d))           %y, %lse = flash_attention(%q, %k, %v, %scale, %keep)
//            %x = where(%drop, -inf, %t) (or where(%keep, %t, -inf), or no mask)
//            %w = softmax(%x, -1)        (amax, sub, exp, sum, div: the composite's nodes)
//            %y = matmul(%w, %v)
// The mask stays an input: whether it is causal is a fact of the values the graph runs with (a buffer
// sliced to the sequence length), so the kernel checks it per call, in one pass over one head's [L,S] mask
// where it is shared by every head, and then generates it and skips the keys above the diagonal. The
// scores, masked scores and probabilities ([B,H,T,T] each) are no longer written, nor saved for the backward.
// Only a chain whose intermediate values feed nothing else is rewritten. Under bf16 (or f16) autocast the
// softmax runs in f32 between two casts, %x = to(%masked, f32) and %w = to(div, bf16): those casts join the
// chain, and the kernel (which computes in f32 whatever its inputs) returns the products' dtype, as sdpa
// under autocast does.
#include <algorithm>
#include <limits>
#include <optional>

#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

using ir::Node;
using ir::Value;

Node* made_by(const Value* v, OpId op) {
  Node* n = v->node();
  return n->is_op(op) ? n : nullptr;
}

bool used_once(const Value* v) { return v->uses().size() == 1; }

// The autocast cast node making v, else null.
Node* cast_of(const Value* v) {
  Node* n = made_by(v, OpId::Cast);
  return n && n->inputs().size() == 1 ? n : nullptr;
}

std::optional<int64_t> rank_of(const Value* v) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dims) return std::nullopt;
  return int64_t(t.dims->size());
}

// The number a value holds: a constant, or a constant number wrapped as a tensor (cast to the scores'
// dtype, as a trace under autocast records masked_fill's -inf).
std::optional<double> number_of(const Value* v) {
  if (auto c = scalar_constant(v)) return c;
  const Node* n = v->node();
  if (n->prim() == ir::Prim::NumToTensor) return scalar_constant(n->input(0));
  if (n->is_op(OpId::Cast) && n->inputs().size() == 1 && rank_of(v) == std::optional<int64_t>(0))
    return number_of(n->input(0));
  return std::nullopt;
}

// One value however it multiplies: a wrapped number, or a tensor known to be 0-d.
bool is_scalar(const Value* v) {
  if (v->node()->prim() == ir::Prim::NumToTensor || scalar_constant(v)) return true;
  return rank_of(v) == std::optional<int64_t>(0);
}

// A reduction over the last dim, keeping it (the softmax composite's amax and sum).
bool over_last_dim(const Node* n, const Value* x) {
  if (!n->attrs().has("dims") || !n->attrs().b_or("keepdim", false)) return false;
  const Shape& d = n->attrs().ints("dims");
  if (d.size() != 1) return false;
  std::optional<int64_t> r = rank_of(x);
  return d[0] == -1 || (r && d[0] == *r - 1);
}

// How %k is reached from kt's producer when kt is %k with its last two dims swapped: the transposed value
// itself (prim::transpose before the shapes are known, a swapping permute after), or a permute that also
// moves the heads, which simplify makes of the heads' permute and the transpose together
// (permute(x, [0, 2, 3, 1]) for k^T of x [B, T, H, D]): %k is then x permuted with the last two dims swapped back.
struct Untransposed {
  Value* base = nullptr;
  std::optional<Shape> dims;  // set: %k = permute(base, dims)
};

std::optional<Untransposed> untransposed(Value* kt) {
  Node* n = kt->node();
  if (!used_once(kt)) return std::nullopt;
  if (n->prim() == ir::Prim::Transpose) {
    std::optional<double> a = scalar_constant(n->input(1)), b = scalar_constant(n->input(2));
    if (!a || !b) return std::nullopt;
    // without the rank only -2 and -1 are known to be the last two dims
    std::optional<int64_t> r = rank_of(n->input(0));
    const int64_t last = r ? *r - 1 : -1;
    auto wrap = [&](double d) { return int64_t(d) < 0 && r ? int64_t(d) + *r : int64_t(d); };
    const int64_t lo = std::min(wrap(*a), wrap(*b)), hi = std::max(wrap(*a), wrap(*b));
    if (lo != last - 1 || hi != last) return std::nullopt;
    return Untransposed{n->input(0), std::nullopt};
  }
  if (n->is_op(OpId::Permute)) {
    Shape d = n->attrs().ints("dims");
    const size_t r = d.size();
    if (r < 2) return std::nullopt;
    std::swap(d[r - 2], d[r - 1]);
    bool identity = true;
    for (size_t i = 0; i < r; ++i) identity = identity && d[i] == int64_t(i);
    return Untransposed{n->input(0), identity ? std::nullopt : std::optional<Shape>(d)};
  }
  return std::nullopt;
}

struct Chain {
  Value *q = nullptr, *k = nullptr, *v = nullptr, *scale = nullptr, *mask = nullptr;
  bool divide = false;     // the scores were divided by `scale`
  bool mask_drops = false;  // True in `mask` drops the key (masked_fill), rather than keeps it
  Node* k_cast = nullptr;   // autocast cast k after transposing it: the row gets k cast the same way
  std::optional<Shape> k_dims;  // %k is c.k permuted by these (the heads' permute folded into k's transpose)
  std::vector<Node*> nodes;  // the chain, last first: destroyed in this order
};

std::optional<Chain> match(Node* pv) {
  Chain c;
  c.nodes.push_back(pv);
  Value* w = pv->input(0);
  c.v = pv->input(1);
  Node* cast_out = used_once(w) ? cast_of(w) : nullptr;
  if (cast_out) w = cast_out->input(0);
  Node* div = made_by(w, OpId::Div);
  if (!div || !used_once(w)) return std::nullopt;
  Node* ex = made_by(div->input(0), OpId::Exp);
  Node* sum = made_by(div->input(1), OpId::Sum);
  if (!ex || !sum || sum->input(0) != ex->output() || ex->output()->uses().size() != 2 || !used_once(sum->output()) ||
      !over_last_dim(sum, ex->output()))
    return std::nullopt;
  Node* sub = made_by(ex->input(0), OpId::Sub);
  if (!sub || !used_once(sub->output())) return std::nullopt;
  Value* x = sub->input(0);
  Node* amax = made_by(sub->input(1), OpId::Amax);
  if (!amax || !used_once(amax->output()) || !over_last_dim(amax, x)) return std::nullopt;
  Node* detach = amax->input(0)->node();
  const bool detached = detach->prim() == ir::Prim::Detach && detach->input(0) == x;
  if (!(detached ? used_once(detach->output()) : amax->input(0) == x) || x->uses().size() != 2) return std::nullopt;
  if (cast_out) c.nodes.push_back(cast_out);
  c.nodes.insert(c.nodes.end(), {div, sum, ex, sub, amax});
  if (detached) c.nodes.push_back(detach);
  // both casts or neither: the softmax in f32 of scores in the products' dtype, its result cast back
  Node* cast_in = cast_of(x);
  if (bool(cast_in) != bool(cast_out)) return std::nullopt;
  if (cast_in) {
    x = cast_in->input(0);
    if (!used_once(x) || x->type().dtype != pv->output()->type().dtype) return std::nullopt;
    c.nodes.push_back(cast_in);
  }
  // the mask: where(drop, -inf, t) as masked_fill writes it, where(keep, t, -inf) as the sdpa composite does
  Value* t = x;
  if (Node* wh = made_by(x, OpId::Where)) {
    const std::optional<double> a = number_of(wh->input(1)), b = number_of(wh->input(2));
    const double ninf = -std::numeric_limits<double>::infinity();
    if (a == ninf) {
      c.mask_drops = true;
      t = wh->input(2);
    } else if (b == ninf) {
      t = wh->input(1);
    } else {
      return std::nullopt;
    }
    c.mask = wh->input(0);
    if (!used_once(t)) return std::nullopt;
    c.nodes.push_back(wh);
  }
  Node* scaled = t->node();
  Value* s = nullptr;
  if (scaled->is_op(OpId::Mul)) {
    const bool first = is_scalar(scaled->input(0)) && !is_scalar(scaled->input(1));
    s = scaled->input(first ? 1 : 0);
    c.scale = scaled->input(first ? 0 : 1);
  } else if (scaled->is_op(OpId::Div)) {
    s = scaled->input(0);
    c.scale = scaled->input(1);
    c.divide = true;
  } else {
    return std::nullopt;
  }
  if (!is_scalar(c.scale) || !used_once(s)) return std::nullopt;
  Node* qk = made_by(s, OpId::Matmul);
  if (!qk) return std::nullopt;
  c.q = qk->input(0);
  Value* kt = qk->input(1);
  c.nodes.insert(c.nodes.end(), {scaled, qk});
  if ((c.k_cast = used_once(kt) ? cast_of(kt) : nullptr)) {
    c.nodes.push_back(c.k_cast);
    kt = c.k_cast->input(0);
  }
  std::optional<Untransposed> u = untransposed(kt);
  if (!u) return std::nullopt;
  c.k = u->base;
  c.k_dims = u->dims;
  c.nodes.push_back(kt->node());
  return c;
}

int64_t rewrite_block(ir::Graph& g, ir::Block& b) {
  std::vector<Node*> pvs;
  for (Node* n : b.nodes())
    if (n->is_op(OpId::Matmul)) pvs.push_back(n);
  int64_t changed = 0;
  for (Node* pv : pvs) {
    if (!pv->in_block_list()) continue;  // taken by an earlier chain
    std::optional<Chain> c = match(pv);
    if (!c) continue;
    auto before = [&](Node* n) {
      n->line = pv->line;
      n->insert_before(pv);
      return n->output();
    };
    // the new values typed as far as their inputs are (the pass runs after shape propagation)
    Value* scale = c->scale;
    if (c->divide) {
      scale = before(g.create_op(OpId::Reciprocal, {c->scale}));
      if (c->scale->type().dtype && is_floating(*c->scale->type().dtype)) scale->set_type(c->scale->type());
    }
    Value* k = c->k;
    if (c->k_dims) {
      k = before(g.create_op(OpId::Permute, {k}, Attrs().set("dims", *c->k_dims)));
      ir::Type t = c->k->type();
      if (t.dims && t.dims->size() == c->k_dims->size()) {
        std::vector<ir::Dim> permuted(t.dims->size());
        for (size_t i = 0; i < permuted.size(); ++i) permuted[i] = (*t.dims)[size_t((*c->k_dims)[i])];
        t.dims = permuted;
      } else {
        t.dims.reset();
      }
      k->set_type(t);
    }
    if (c->k_cast) {
      Value* uncast = k;
      k = before(g.create_op(OpId::Cast, {k}, c->k_cast->attrs()));
      ir::Type t = uncast->type();
      t.dtype = c->k_cast->output()->type().dtype;
      k->set_type(t);
    }
    std::vector<Value*> in{c->q, k, c->v, scale};
    if (c->mask && c->mask_drops) {
      Value* keep = before(g.create_op(OpId::LogicalNot, {c->mask}));
      keep->set_type(ir::Type::tensor(DType::Bool, c->mask->type().dims));
      in.push_back(keep);
    } else if (c->mask) {
      in.push_back(c->mask);
    }
    Node* fa = g.create_op(OpId::FlashAttention, in, Attrs().set("causal", false), 2);
    fa->output(0)->set_type(pv->output()->type());
    fa->output(1)->set_type(flash_attention_lse_type(pv->output()->type()));
    fa->output(0)->set_name(pv->output()->name());
    before(fa);
    pv->output()->replace_all_uses_with(fa->output(0));
    for (Node* n : c->nodes) n->destroy();
    changed += int64_t(c->nodes.size());
  }
  return changed;
}

}  // namespace

PassResult fuse_attention(ir::Graph& g) {
  return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return rewrite_block(g, b); }), {}};
}

}  // namespace kiln::jit
