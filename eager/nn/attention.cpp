#include "eager/nn/attention.h"

#include <cmath>

#include "eager/composites.h"
#include "eager/nn/init.h"
#include "eager/ops.h"

namespace kiln::nn {

template <class B>
using Val = composite::Val<B>;

namespace {

template <class B>
struct Masks {
  Val<B> attn_mask{}, key_padding_mask{};
  bool is_causal = false;
};

Masks<EagerBuilder> eager_masks(const AttentionMasks& m) { return {m.attn_mask, m.key_padding_mask, m.is_causal}; }

template <class B>
Val<B> dim_op(B& b, OpId id, Val<B> x, const Shape& dims) {
  return b.op(id, {x}, Attrs().set("dims", dims));
}

template <class B>
Val<B> slice0(B& b, Val<B> x, int64_t start, int64_t end) {
  return b.op(OpId::Slice, {x}, Attrs().set("dim", int64_t(0)).set("start", start).set("end", end).set("step", int64_t(1)));
}

std::string shape_or_later(const std::optional<Shape>& s) { return s ? shape_str(*s) : "another shape"; }

// scores with a mask applied as MultiheadAttention reads it: a bool one is True where attention is not
// allowed (dropped by `where`, so its gradient is an exact zero), a float one is added.
template <class B>
Val<B> apply_mask(B& b, Val<B> scores, Val<B> mask) {
  return b.if_bool(
      mask, [&] { return b.op(OpId::Where, {mask, b.scalar(-INFINITY), scores}); },
      [&] { return b.op(OpId::Add, {scores, mask}); });
}

// (T, N, E) -> (N, H, T, E / H): one sequence per head.
template <class B>
Val<B> split_heads(B& b, Val<B> x, int64_t H, int64_t hd) {
  Val<B> tn = b.op(OpId::Select, {x}, Attrs().set("dim", int64_t(2)).set("index", int64_t(0)));  // shape (T, N)
  return dim_op(b, OpId::Permute, b.reshape_like(x, tn, {H, hd}), {1, 2, 0, 3});
}

}  // namespace

// ---- MultiheadAttention

MultiheadAttention::MultiheadAttention(int64_t E, int64_t H, double dropout_, bool bias, bool add_bias_kv, bool add_zero_attn,
                                       int64_t kdim_, int64_t vdim_, bool batch_first_)
    : embed_dim(E), num_heads(H), kdim(kdim_ ? kdim_ : E), vdim(vdim_ ? vdim_ : E), dropout(dropout_), batch_first(batch_first_),
      add_zero_attn(add_zero_attn) {
  if (E <= 0 || H <= 0) fail("MultiheadAttention: embed_dim and num_heads must be greater than 0, got {} and {}", E, H);
  if (E % H != 0) fail("MultiheadAttention: embed_dim must be divisible by num_heads, got {} and {}", E, H);
  if (kdim == E && vdim == E) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * E, E}));
    init::xavier_uniform_(in_proj_weight);
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({E, E}));
    k_proj_weight = register_parameter("k_proj_weight", empty({E, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({E, vdim}));
    for (Tensor* w : {&q_proj_weight, &k_proj_weight, &v_proj_weight}) init::xavier_uniform_(*w);
  }
  if (bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * E}));
  if (add_bias_kv) {
    bias_k = register_parameter("bias_k", empty({1, 1, E}));
    bias_v = register_parameter("bias_v", empty({1, 1, E}));
    init::xavier_normal_(bias_k);
    init::xavier_normal_(bias_v);
  }
  out_proj = register_module("out_proj", std::make_shared<Linear>(E, E, bias));
  if (bias) init::zeros_(out_proj->bias);
}

namespace {

// A mask for the keys with one more key, which every query may attend (add_bias_kv's and add_zero_attn's): a False
// or 0 column appended, whichever the mask's dtype, by `where` over a column of it.
template <class B>
Val<B> mask_one_more(B& b, Val<B> mask) {
  Val<B> col = b.op(OpId::Slice, {mask}, Attrs().set("dim", int64_t(-1)).set("start", int64_t(0)).set("end", int64_t(1)).set("step", int64_t(1)));
  Val<B> none = b.op(OpId::LogicalAnd, {col, b.scalar(false)});
  return b.op(OpId::Cat, {mask, b.op(OpId::Where, {none, col, b.scalar(false)})}, Attrs().set("dim", int64_t(-1)));
}

// x with one more step along dim d: `row` (broadcast to x's other dims), as add_bias_kv's bias or add_zero_attn's zeros
template <class B>
Val<B> one_more_step(B& b, Val<B> x, int64_t d, Val<B> row) {
  Val<B> first = b.op(OpId::Slice, {x}, Attrs().set("dim", d).set("start", int64_t(0)).set("end", int64_t(1)).set("step", int64_t(1)));
  Val<B> step = b.op(OpId::Add, {b.op(OpId::Mul, {b.detach(first), b.scalar(0.0)}), row});
  return b.op(OpId::Cat, {x, step}, Attrs().set("dim", d));
}

}  // namespace

// attn_mask's shape where it is known only when the graph runs: (L, S) or (N * H, L, S) against the (N, H, L, S)
// scores (S with the extra keys, which the mask has too by then), so that a wrong one fails naming the layer
// rather than in the broadcast. The check is made of counts: the mask's last two dims and its number of elements,
// which is L * S or N * H * L * S exactly when its leading dim is right; a wrong shape leaves a 0-long slice, which
// count() refuses with the message.
template <class B>
void check_mask_later(B& b, Val<B> mask, Val<B> q, Val<B> k, const std::string& layer) {
  auto n = [&](Val<B> x, Shape dims) { return b.count(x, dims, -1, nullptr); };
  auto eq = [&](Val<B> x, Val<B> y) { return b.op(OpId::Eq, {x, y}); };
  auto both = [&](Val<B> x, Val<B> y) { return b.op(OpId::LogicalAnd, {x, y}); };
  // the mask's dim counted from its end, as a size known now wants it counted from the front
  std::optional<int64_t> r = b.rank(mask);
  auto from_end = [&](int64_t i) { return Shape{r ? *r - i : -i}; };
  Val<B> L = n(q, {2}), S = n(k, {2}), NH = n(q, {0, 1});
  Val<B> numel = n(b.flatten(mask, 0, -1), {0}), LS = b.op(OpId::Mul, {L, S});
  Val<B> ok = both(both(eq(n(mask, from_end(1)), S), eq(n(mask, from_end(2)), L)),
                   b.op(OpId::LogicalOr, {eq(numel, LS), eq(numel, b.op(OpId::Mul, {NH, LS}))}));
  Val<B> one = b.op(OpId::Reshape, {ok}, Attrs().set("shape", Shape{1}));
  b.count(b.head(one, b.op(OpId::Cast, {ok}, Attrs().set("dtype", DType::Int64))), {0}, 0, [layer](const std::optional<Shape>&) {
    return fmt::format("{}: the shape of attn_mask should be (L, S) or (N * num_heads, L, S) for a query of length L, a key of "
                       "length S and a batch of N (checked when the graph ran)", layer);
  });
}

// torch 1.13's multi_head_attention_forward for batched inputs, the heads as a dim of their own: (N, H, L, S)
// scores, so a 3-D attn_mask is a view of them and the weights need no reshape.
template <class B>
std::vector<Val<B>> attention_forward(B& b, MultiheadAttention& m, const std::string& at, Val<B> query, Val<B> key, Val<B> value,
                                      const Masks<B>& masks, bool need_weights, bool average_attn_weights) {
  const std::string layer = "nn.MultiheadAttention";
  if (masks.is_causal && !composite::present(masks.attn_mask))
    b.fail(layer + ": need attn_mask if specifying the is_causal hint");
  const int64_t E = m.embed_dim, H = m.num_heads, hd = E / H;
  for (auto [x, what, last] : {std::tuple{query, "query", E}, std::tuple{key, "key", m.kdim}, std::tuple{value, "value", m.vdim}}) {
    b.check_rank(x, {2, 3}, [=](const std::optional<Shape>& s) {
      return fmt::format("{}: {} should be unbatched 2D or batched 3D tensor but received {}", layer, what, shape_or_later(s));
    });
    b.check_shape(x, {last}, true, [=](const std::optional<Shape>& s) {
      return fmt::format("{}: {}'s last dim must be {}, got {}", layer, what, last, shape_or_later(s));
    });
  }
  std::optional<int64_t> qr = b.rank(query), kr = b.rank(key), vr = b.rank(value);
  if (qr && kr && vr && (*qr != *kr || *qr != *vr))
    b.fail(fmt::format("{}: for {} query, expected key and value to be {}, but got key of dim {} and value of dim {}", layer,
                       *qr == 3 ? "batched (3-D)" : "unbatched (2-D)", *qr == 3 ? "3-D" : "2-D", *kr, *vr));
  // An unbatched input is a batch of one, and the results lose that dim again, as torch's. Where the rank is known
  // only when the graph runs, [L, E] and [L, N, E] are both viewed as [L, -1, E], and batch_first swaps dims 0
  // and -2, which in a 2-D input is no swap (batch_first does not apply to unbatched inputs).
  const Val<B> query_in = query;
  auto batched = [&](Val<B> x, int64_t last) {
    std::optional<int64_t> r = b.rank(x);
    if (m.batch_first && (!r || *r == 3)) x = b.transpose(x, 0, r ? 1 : -2);
    if (r) return *r == 3 ? x : b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", int64_t(1)));
    Val<B> steps = b.op(OpId::Select, {b.flatten(x, 1, -1)}, Attrs().set("dim", int64_t(1)).set("index", int64_t(0)));  // [L]
    return b.reshape_like(x, steps, {-1, last});
  };
  query = batched(query, E);
  key = batched(key, m.kdim);
  value = batched(value, m.vdim);
  std::optional<Shape> qs = b.shape(query), ks = b.shape(key), vs = b.shape(value);
  if (ks && vs && ((*ks)[0] != (*vs)[0] || (*ks)[1] != (*vs)[1]))
    b.fail(fmt::format("{}: key shape {} does not match value shape {}", layer, shape_str(*ks), shape_str(*vs)));
  if (qs && ks && (*qs)[1] != (*ks)[1])
    b.fail(fmt::format("{}: query and key must have the same batch size, got query {} and key {}", layer, shape_str(*qs), shape_str(*ks)));
  Val<B> bias = b.parameter(m.in_proj_bias, at + "in_proj_bias");
  auto project = [&](Val<B> x, int64_t i, const Tensor& separate, const char* name) {
    Val<B> w = m.packed() ? slice0(b, b.parameter(m.in_proj_weight, at + "in_proj_weight"), i * E, (i + 1) * E)
                          : b.parameter(separate, at + name);
    Val<B> bi = composite::present(bias) ? slice0(b, bias, i * E, (i + 1) * E) : Val<B>{};
    return composite::linear(b, x, w, bi);
  };
  Val<B> attn_mask = masks.attn_mask, kpm = masks.key_padding_mask;
  if (composite::present(kpm)) {  // an unbatched (S) mask is the batch of one's
    std::optional<int64_t> r = b.rank(kpm);
    if (r && *r == 1) kpm = b.op(OpId::Unsqueeze, {kpm}, Attrs().set("dim", int64_t(0)));
    if (!r) {
      Val<B> batch = b.op(OpId::Select, {b.op(OpId::Select, {query}, Attrs().set("dim", int64_t(2)).set("index", int64_t(0)))},
                          Attrs().set("dim", int64_t(0)).set("index", int64_t(0)));  // [N]
      kpm = b.reshape_like(kpm, batch, {-1});
    }
  }
  Val<B> kp = project(key, 1, m.k_proj_weight, "k_proj_weight"), vp = project(value, 2, m.v_proj_weight, "v_proj_weight");
  auto one_more_key = [&] {
    if (composite::present(attn_mask)) attn_mask = mask_one_more(b, attn_mask);
    if (composite::present(kpm)) kpm = mask_one_more(b, kpm);
  };
  if (m.bias_k.defined()) {  // add_bias_kv: one more key and value, the learned biases, after the projections
    kp = one_more_step(b, kp, 0, b.parameter(m.bias_k, at + "bias_k"));
    vp = one_more_step(b, vp, 0, b.parameter(m.bias_v, at + "bias_v"));
    one_more_key();
  }
  Val<B> q = split_heads(b, project(query, 0, m.q_proj_weight, "q_proj_weight"), H, hd);  // (N, H, L, hd)
  Val<B> k = split_heads(b, kp, H, hd);
  Val<B> v = split_heads(b, vp, H, hd);
  if (m.add_zero_attn) {  // one more key and value of zeros per head
    k = one_more_step(b, k, 2, b.scalar(0.0));
    v = one_more_step(b, v, 2, b.scalar(0.0));
    one_more_key();
  }
  q = b.op(OpId::Div, {q, b.scalar(std::sqrt(double(hd)))});
  Val<B> scores = b.op(OpId::Matmul, {q, b.transpose(k, -2, -1)});  // (N, H, L, S)
  if (composite::present(attn_mask)) {
    Val<B> mask = attn_mask;
    std::optional<Shape> ms = b.shape(mask);
    if (ms && qs && ks) {
      ms->back() -= (m.bias_k.defined() ? 1 : 0) + (m.add_zero_attn ? 1 : 0);  // the mask as given, before its extra keys
      int64_t L = (*qs)[0], N = (*qs)[1], S = (*ks)[0];
      if (ms->size() == 2 && *ms != Shape{L, S})
        b.fail(fmt::format("{}: the shape of the 2D attn_mask is {}, but should be {}", layer, shape_str(*ms), shape_str({L, S})));
      if (ms->size() == 3 && *ms != Shape{N * H, L, S})
        b.fail(fmt::format("{}: the shape of the 3D attn_mask is {}, but should be {}", layer, shape_str(*ms), shape_str({N * H, L, S})));
      if (ms->size() != 2 && ms->size() != 3)
        b.fail(fmt::format("{}: attn_mask's dimension {} is not supported", layer, ms->size()));
    }
    b.check_rank(mask, {2, 3}, [=](const std::optional<Shape>& s) {
      return fmt::format("{}: attn_mask must be 2-D or 3-D, got {}", layer, shape_or_later(s));
    });
    if (!ms || !qs || !ks) check_mask_later(b, mask, q, k, at.empty() ? layer : fmt::format("{} '{}'", layer, at.substr(0, at.size() - 1)));
    // against the (N * H, L, S) scores, as torch's, a 2-D mask broadcasts and a 3-D one matches
    scores = b.reshape_like(apply_mask(b, b.flatten(scores, 0, 1), mask), scores, {});
  }
  if (composite::present(kpm)) {
    std::optional<Shape> s = b.shape(kpm);
    if (s) s->back() -= (m.bias_k.defined() ? 1 : 0) + (m.add_zero_attn ? 1 : 0);  // the mask as given
    if (s && qs && ks && *s != Shape{(*qs)[1], (*ks)[0]})
      b.fail(fmt::format("{}: expecting key_padding_mask shape of {}, but got {}", layer, shape_str({(*qs)[1], (*ks)[0]}), shape_str(*s)));
    kpm = b.op(OpId::Unsqueeze, {b.op(OpId::Unsqueeze, {kpm}, Attrs().set("dim", int64_t(1)))}, Attrs().set("dim", int64_t(1)));
    scores = apply_mask(b, scores, kpm);  // (N, 1, 1, S)
  }
  // the weights returned are the ones applied, after dropout, as torch's
  Val<B> w = composite::dropout(b, composite::softmax(b, scores, -1), m.dropout, m.is_training());
  Val<B> out = b.op(OpId::Matmul, {w, v});  // (N, H, L, hd)
  out = b.flatten(dim_op(b, OpId::Permute, out, {2, 0, 1, 3}), 2, 3);                               // (L, N, E)
  out = composite::linear(b, out, b.parameter(m.out_proj->weight, at + "out_proj.weight"),
                          b.parameter(m.out_proj->bias, at + "out_proj.bias"));
  if (m.batch_first && qr != 2) out = b.transpose(out, 0, 1);
  if (!qr) out = b.reshape_like(out, query_in, {});
  else if (*qr == 2) out = b.op(OpId::Select, {out}, Attrs().set("dim", int64_t(1)).set("index", int64_t(0)));
  if (!need_weights) return {out, Val<B>{}};
  if (average_attn_weights)
    w = b.op(OpId::Div, {b.op(OpId::Sum, {w}, Attrs().set("dims", Shape{1}).set("keepdim", false)), b.scalar(double(H))});
  if (qr && *qr == 2) return {out, b.op(OpId::Select, {w}, Attrs().set("dim", int64_t(0)).set("index", int64_t(0)))};
  if (!qr) {
    // (N, L) or (L), from the query as batch-first; per head, (N, H, L) or (H, L) by a broadcast against (H, 1)
    Val<B> lead = b.op(OpId::Select, {m.batch_first ? query_in : b.transpose(query_in, 0, -2)},
                       Attrs().set("dim", int64_t(-1)).set("index", int64_t(0)));
    if (!average_attn_weights)
      lead = b.op(OpId::Add, {b.op(OpId::Unsqueeze, {lead}, Attrs().set("dim", int64_t(-2))), b.parameter(zeros({H, 1}), at + "heads")});
    w = b.reshape_like(w, lead, {-1});
  }
  return {out, w};
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                                                      bool need_weights, const Tensor& attn_mask, bool average, bool is_causal) {
  EagerBuilder b;
  Tensors r = attention_forward(b, *this, "", q, k, v, Masks<EagerBuilder>{attn_mask, key_padding_mask, is_causal}, need_weights, average);
  return {r[0], r[1]};
}
template <class B>
Val<B> forward_with(B& b, MultiheadAttention& m, Val<B> x) {
  return attention_forward(b, m, "", x, x, x, Masks<B>{}, false, true)[0];
}
Tensor MultiheadAttention::forward(const Tensor& x) { return eager_forward(*this, x); }

// ---- the Transformer layers

namespace {

void check_config(const std::string& layer, const TransformerConfig& c) {
  if (c.activation != "relu" && c.activation != "gelu")
    fail("{}: activation should be relu/gelu, not {}", layer, c.activation);
  if (!(c.dropout >= 0.0 && c.dropout <= 1.0)) fail("{}: dropout probability has to be between 0 and 1, but got {}", layer, c.dropout);
}

template <class B>
Val<B> apply_linear(B& b, Linear& l, const std::string& at, Val<B> x) {
  return composite::linear(b, x, b.parameter(l.weight, at + ".weight"), b.parameter(l.bias, at + ".bias"));
}

template <class B>
Val<B> apply_norm(B& b, LayerNorm& n, const std::string& at, Val<B> x) {
  return composite::layer_norm(b, x, n.normalized_shape, b.parameter(n.weight, at + ".weight"), b.parameter(n.bias, at + ".bias"), n.eps);
}

template <class B>
Val<B> apply_dropout(B& b, Dropout& d, Val<B> x) {
  return composite::dropout(b, x, d.p, d.is_training());
}

// linear2(dropout(activation(linear1(x)))), then dropout_last
template <class B, class L>
Val<B> feed_forward(B& b, L& m, const std::string& at, Val<B> x, Dropout& dropout_last) {
  Val<B> h = apply_linear(b, *m.linear1, at + "linear1", x);
  h = b.op(m.config.activation == "gelu" ? OpId::Gelu : OpId::Relu, {h});
  h = apply_linear(b, *m.linear2, at + "linear2", apply_dropout(b, *m.dropout, h));
  return apply_dropout(b, dropout_last, h);
}

template <class B>
Val<B> attention_block(B& b, MultiheadAttention& a, const std::string& at, Val<B> x, Val<B> mem, const Masks<B>& masks, Dropout& d) {
  return apply_dropout(b, d, attention_forward(b, a, at, x, mem, mem, masks, false, true)[0]);
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(TransformerConfig c) : config(std::move(c)) {
  check_config("TransformerEncoderLayer", config);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(config.d_model, config.nhead, config.dropout, true,
                                                                                false, false, 0, 0, config.batch_first));
  linear1 = register_module("linear1", std::make_shared<Linear>(config.d_model, config.dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(config.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(config.dim_feedforward, config.d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{config.d_model}, config.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{config.d_model}, config.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(config.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(config.dropout));
}

template <class B>
Val<B> encoder_layer_forward(B& b, TransformerEncoderLayer& m, const std::string& at, Val<B> x, const Masks<B>& masks) {
  auto sa = [&](Val<B> y) { return attention_block(b, *m.self_attn, at + "self_attn.", y, y, masks, *m.dropout1); };
  if (m.config.norm_first) {
    x = b.op(OpId::Add, {x, sa(apply_norm(b, *m.norm1, at + "norm1", x))});
    return b.op(OpId::Add, {x, feed_forward(b, m, at, apply_norm(b, *m.norm2, at + "norm2", x), *m.dropout2)});
  }
  x = apply_norm(b, *m.norm1, at + "norm1", b.op(OpId::Add, {x, sa(x)}));
  return apply_norm(b, *m.norm2, at + "norm2", b.op(OpId::Add, {x, feed_forward(b, m, at, x, *m.dropout2)}));
}
Tensor TransformerEncoderLayer::forward(const Tensor& src, const AttentionMasks& masks) {
  EagerBuilder b;
  return encoder_layer_forward(b, *this, "", src, eager_masks(masks));
}
template <class B>
Val<B> forward_with(B& b, TransformerEncoderLayer& m, Val<B> x) {
  return encoder_layer_forward(b, m, "", x, Masks<B>{});
}

namespace {
template <class M>
std::shared_ptr<M> copy_of(const M& m) {
  auto c = std::make_shared<M>(m.config);
  c->load_state_dict(m.state_dict());
  c->train(m.is_training());
  return c;
}
}  // namespace

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const { return copy_of(*this); }

TransformerDecoderLayer::TransformerDecoderLayer(TransformerConfig c) : config(std::move(c)) {
  check_config("TransformerDecoderLayer", config);
  auto mha = [&] {
    return std::make_shared<MultiheadAttention>(config.d_model, config.nhead, config.dropout, true, false, false, 0, 0, config.batch_first);
  };
  self_attn = register_module("self_attn", mha());
  multihead_attn = register_module("multihead_attn", mha());
  linear1 = register_module("linear1", std::make_shared<Linear>(config.d_model, config.dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(config.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(config.dim_feedforward, config.d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{config.d_model}, config.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{config.d_model}, config.layer_norm_eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(Shape{config.d_model}, config.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(config.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(config.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(config.dropout));
}

template <class B>
Val<B> decoder_layer_forward(B& b, TransformerDecoderLayer& m, const std::string& at, Val<B> x, Val<B> memory, const Masks<B>& tgt,
                             const Masks<B>& mem) {
  auto sa = [&](Val<B> y) { return attention_block(b, *m.self_attn, at + "self_attn.", y, y, tgt, *m.dropout1); };
  auto ca = [&](Val<B> y) { return attention_block(b, *m.multihead_attn, at + "multihead_attn.", y, memory, mem, *m.dropout2); };
  if (m.config.norm_first) {
    x = b.op(OpId::Add, {x, sa(apply_norm(b, *m.norm1, at + "norm1", x))});
    x = b.op(OpId::Add, {x, ca(apply_norm(b, *m.norm2, at + "norm2", x))});
    return b.op(OpId::Add, {x, feed_forward(b, m, at, apply_norm(b, *m.norm3, at + "norm3", x), *m.dropout3)});
  }
  x = apply_norm(b, *m.norm1, at + "norm1", b.op(OpId::Add, {x, sa(x)}));
  x = apply_norm(b, *m.norm2, at + "norm2", b.op(OpId::Add, {x, ca(x)}));
  return apply_norm(b, *m.norm3, at + "norm3", b.op(OpId::Add, {x, feed_forward(b, m, at, x, *m.dropout3)}));
}
Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const AttentionMasks& t, const AttentionMasks& mm) {
  EagerBuilder b;
  return decoder_layer_forward(b, *this, "", tgt, memory, eager_masks(t), eager_masks(mm));
}
template <class B>
Val<B> forward_with(B& b, TransformerDecoderLayer& m, Val<B> x) {
  return decoder_layer_forward(b, m, "", x, x, Masks<B>{}, Masks<B>{});
}
std::shared_ptr<TransformerDecoderLayer> TransformerDecoderLayer::clone() const { return copy_of(*this); }

// ---- the stacks

namespace {
// A stack's layers: n deep copies of layer, listed under layers.0, layers.1, ...
template <class Layer>
std::vector<std::shared_ptr<Layer>> stack_of(const char* stack, const Layer& layer, int64_t n, Sequential& list) {
  if (n <= 0) fail("{}: num_layers must be positive, got {}", stack, n);
  std::vector<std::shared_ptr<Layer>> r;
  for (int64_t i = 0; i < n; ++i) {
    r.push_back(layer.clone());
    list.add(r.back());
  }
  return r;
}

// A stack's layers in order, each reading its predecessor's output, then its norm if it has one.
template <class B, class Stack, class LayerForward>
Val<B> stack_forward(B& b, Stack& m, const std::string& at, Val<B> x, LayerForward&& layer_forward) {
  for (size_t i = 0; i < m.layers.size(); ++i) x = layer_forward(*m.layers[i], fmt::format("{}layers.{}.", at, i), x);
  return m.norm ? apply_norm(b, *m.norm, at + "norm", x) : x;
}
}  // namespace

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, int64_t n, std::shared_ptr<LayerNorm> norm_)
    : norm(std::move(norm_)) {
  layers = stack_of("TransformerEncoder", layer, n, *register_module("layers", std::make_shared<Sequential>()));
  if (norm) register_module("norm", norm);
}

template <class B>
Val<B> encoder_forward(B& b, TransformerEncoder& m, const std::string& at, Val<B> x, const Masks<B>& masks) {
  return stack_forward(b, m, at, x, [&](TransformerEncoderLayer& l, const std::string& in, Val<B> y) {
    return encoder_layer_forward(b, l, in, y, masks);
  });
}
Tensor TransformerEncoder::forward(const Tensor& src, const AttentionMasks& masks) {
  EagerBuilder b;
  return encoder_forward(b, *this, "", src, eager_masks(masks));
}
template <class B>
Val<B> forward_with(B& b, TransformerEncoder& m, Val<B> x) {
  return encoder_forward(b, m, "", x, Masks<B>{});
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& layer, int64_t n, std::shared_ptr<LayerNorm> norm_)
    : norm(std::move(norm_)) {
  layers = stack_of("TransformerDecoder", layer, n, *register_module("layers", std::make_shared<Sequential>()));
  if (norm) register_module("norm", norm);
}

template <class B>
Val<B> decoder_forward(B& b, TransformerDecoder& m, const std::string& at, Val<B> x, Val<B> memory, const Masks<B>& tgt,
                       const Masks<B>& mem) {
  return stack_forward(b, m, at, x, [&](TransformerDecoderLayer& l, const std::string& in, Val<B> y) {
    return decoder_layer_forward(b, l, in, y, memory, tgt, mem);
  });
}
Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const AttentionMasks& t, const AttentionMasks& mm) {
  EagerBuilder b;
  return decoder_forward(b, *this, "", tgt, memory, eager_masks(t), eager_masks(mm));
}
template <class B>
Val<B> forward_with(B& b, TransformerDecoder& m, Val<B> x) {
  return decoder_forward(b, m, "", x, x, Masks<B>{}, Masks<B>{});
}

Transformer::Transformer(TransformerConfig c, int64_t num_encoder_layers, int64_t num_decoder_layers) : config(std::move(c)) {
  auto norm = [&] { return std::make_shared<LayerNorm>(Shape{config.d_model}, config.layer_norm_eps); };
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(TransformerEncoderLayer(config), num_encoder_layers, norm()));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(TransformerDecoderLayer(config), num_decoder_layers, norm()));
  for (auto& [n, p] : named_parameters())
    if (p.dim() > 1) {
      Tensor t = p;
      init::xavier_uniform_(t);
    }
}

template <class B>
Val<B> transformer_forward(B& b, Transformer& m, Val<B> src, Val<B> tgt, const Masks<B>& src_masks, const Masks<B>& tgt_masks,
                           const Masks<B>& memory_masks) {
  std::optional<Shape> ss = b.shape(src), ts = b.shape(tgt);
  if (ss && ts && ss->size() == 3 && ts->size() == 3) {
    size_t batch = m.config.batch_first ? 0 : 1;
    if ((*ss)[batch] != (*ts)[batch]) b.fail("nn.Transformer: the batch number of src and tgt must be equal");
    if (ss->back() != m.config.d_model || ts->back() != m.config.d_model)
      b.fail("nn.Transformer: the feature number of src and tgt must be equal to d_model");
  }
  Val<B> memory = encoder_forward(b, *m.encoder, "encoder.", src, src_masks);
  return decoder_forward(b, *m.decoder, "decoder.", tgt, memory, tgt_masks, memory_masks);
}
Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const AttentionMasks& s, const AttentionMasks& t,
                            const AttentionMasks& mm) {
  EagerBuilder b;
  return transformer_forward(b, *this, src, tgt, eager_masks(s), eager_masks(t), eager_masks(mm));
}
template <class B>
Val<B> forward_with(B& b, Transformer& m, Val<B> x) {
  return transformer_forward(b, m, x, x, Masks<B>{}, Masks<B>{}, Masks<B>{});
}

Tensor Transformer::generate_square_subsequent_mask(int64_t sz) {
  Tensor i = arange(Scalar(0), Scalar(sz), Scalar(1), TensorOptions(DType::Int64));
  return where(gt(i, unsqueeze(i, 1)), Scalar(-INFINITY), zeros({sz, sz}));
}

}  // namespace kiln::nn

// ---- registration

namespace kiln::nn {

namespace {

using GV = GraphBuilder::V;
using Flags = std::map<std::string, bool>;

TransformerConfig config_of(const LayerArgs& a) {
  if (!a.is_none("device") || !a.is_none("dtype")) a.fail("device and dtype arguments are not supported");
  TransformerConfig c{a.positive("d_model"), a.positive("nhead"), a.positive("dim_feedforward"), a.number("dropout"),
                      a.str("activation"), a.number("layer_norm_eps"), a.flag("batch_first"), a.flag("norm_first")};
  if (c.activation != "relu" && c.activation != "gelu") a.fail(fmt::format("activation should be relu/gelu, not {}", c.activation));
  if (!(c.dropout >= 0.0 && c.dropout <= 1.0))
    a.fail(fmt::format("dropout probability has to be between 0 and 1, but got {}", c.dropout));
  if (c.d_model % c.nhead != 0) a.fail(fmt::format("d_model must be divisible by nhead, got {} and {}", c.d_model, c.nhead));
  return c;
}

std::vector<LayerParam> layer_params(std::vector<LayerParam> head) {
  for (LayerParam p : std::vector<LayerParam>{{"dim_feedforward", 2048}, {"dropout", 0.1}, {"activation", "relu"},
                                             {"layer_norm_eps", 1e-5}, {"batch_first", false}, {"norm_first", false},
                                             {"device", IValue()}, {"dtype", IValue()}})
    head.push_back(std::move(p));
  return head;
}

Masks<GraphBuilder> graph_masks(const std::vector<GV>& t, size_t mask, size_t kpm, const Flags& f, const std::string& causal) {
  return {t[mask], t[kpm], f.at(causal)};
}

const std::map<std::string, IValue> kLayerSample = {{"d_model", 8}, {"nhead", 2}, {"dim_feedforward", 16}, {"dropout", 0.0}};
const char* kEncoderLayerExpr = "nn.TransformerEncoderLayer(8, 2, 16, 0.0)";
const char* kDecoderLayerExpr = "nn.TransformerDecoderLayer(8, 2, 16, 0.0)";
TransformerConfig sample_config() { return TransformerConfig{8, 2, 16, 0.0}; }

// nn.TransformerEncoder(encoder_layer, num_layers, norm) and nn.TransformerDecoder's: the layer is required.
template <class Stack, class Layer>
std::shared_ptr<Module> make_stack(const LayerArgs& a, const char* layer_arg, const char* layer_cls) {
  auto layer = a.module_or_none<Layer>(layer_arg, layer_cls);
  if (!layer) a.fail(fmt::format("{} must be an nn.{}, got None", layer_arg, layer_cls));
  return std::make_shared<Stack>(*layer, a.positive("num_layers"), a.module_or_none<LayerNorm>("norm", "LayerNorm"));
}

}  // namespace

void add_attention_layers(std::vector<LayerSpec>& r) {
  auto seq = [](std::vector<Shape> shapes) {
    return [shapes] {
      Tensors xs;
      for (const Shape& s : shapes) xs.push_back(randn(s));
      return xs;
    };
  };
  {
    LayerSpec s = layer_spec<MultiheadAttention>(
        "MultiheadAttention",
        {{"embed_dim"}, {"num_heads"}, {"dropout", 0.0}, {"bias", true}, {"add_bias_kv", false}, {"add_zero_attn", false},
         {"kdim", IValue()}, {"vdim", IValue()}, {"batch_first", false}, {"device", IValue()}, {"dtype", IValue()}},
        [](const LayerArgs& a) {
          if (!a.is_none("device") || !a.is_none("dtype")) a.fail("device and dtype arguments are not supported");
          double p = a.number("dropout");
          if (!(p >= 0.0 && p <= 1.0)) a.fail(fmt::format("dropout probability has to be between 0 and 1, but got {}", p));
          int64_t E = a.positive("embed_dim"), H = a.positive("num_heads");
          if (E % H != 0) a.fail(fmt::format("embed_dim must be divisible by num_heads, got {} and {}", E, H));
          return std::make_shared<MultiheadAttention>(E, H, p, a.flag("bias"), a.flag("add_bias_kv"), a.flag("add_zero_attn"),
                                                      a.is_none("kdim") ? 0 : a.positive("kdim"),
                                                      a.is_none("vdim") ? 0 : a.positive("vdim"), a.flag("batch_first"));
        },
        {{"embed_dim", 8}, {"num_heads", 2}, {"kdim", 6}}, nullptr);
    s.inputs = {"query", "key", "value"};
    s.example_inputs = seq({{4, 3, 8}, {5, 3, 6}, {5, 3, 8}});
    s.call_params = {{"query"}, {"key"}, {"value"}, {"key_padding_mask", IValue()}, {"need_weights", true}, {"attn_mask", IValue()},
                     {"average_attn_weights", true}, {"is_causal", false}};
    s.results = 2;
    s.lower_call = [](GraphBuilder& b, Module& m, const std::vector<GV>& t, const Flags& f) {
      return attention_forward(b, static_cast<MultiheadAttention&>(m), "", t[0], t[1], t[2], graph_masks(t, 5, 3, f, "is_causal"),
                               f.at("need_weights"), f.at("average_attn_weights"));
    };
    s.eager_call = [](Module& m, const Tensors& xs) { return static_cast<MultiheadAttention&>(m).forward(xs[0], xs[1], xs[2], {}).first; };
    r.push_back(std::move(s));
  }
  {
    LayerSpec s = layer_spec<TransformerEncoderLayer>(
        "TransformerEncoderLayer", layer_params({{"d_model"}, {"nhead"}}),
        [](const LayerArgs& a) { return std::make_shared<TransformerEncoderLayer>(config_of(a)); }, kLayerSample,
        [] { return randn({5, 3, 8}); });
    s.inputs = {"src"};
    s.call_params = {{"src"}, {"src_mask", IValue()}, {"src_key_padding_mask", IValue()}, {"is_causal", false}};
    s.lower_call = [](GraphBuilder& b, Module& m, const std::vector<GV>& t, const Flags& f) {
      return std::vector<GV>{
          encoder_layer_forward(b, static_cast<TransformerEncoderLayer&>(m), "", t[0], graph_masks(t, 1, 2, f, "is_causal"))};
    };
    r.push_back(std::move(s));
  }
  {
    LayerSpec s = layer_spec<TransformerEncoder>(
        "TransformerEncoder",
        {{"encoder_layer"}, {"num_layers"}, {"norm", IValue()}, {"enable_nested_tensor", true}, {"mask_check", true}},
        [](const LayerArgs& a) { return make_stack<TransformerEncoder, TransformerEncoderLayer>(a, "encoder_layer", "TransformerEncoderLayer"); },
        {{"num_layers", 2}}, [] { return randn({5, 3, 8}); });
    s.example_modules["encoder_layer"] = {kEncoderLayerExpr, [] { return std::make_shared<TransformerEncoderLayer>(sample_config()); }};
    s.inputs = {"src"};
    s.call_params = {{"src"}, {"mask", IValue()}, {"src_key_padding_mask", IValue()}, {"is_causal", false}};
    s.lower_call = [](GraphBuilder& b, Module& m, const std::vector<GV>& t, const Flags& f) {
      return std::vector<GV>{encoder_forward(b, static_cast<TransformerEncoder&>(m), "", t[0], graph_masks(t, 1, 2, f, "is_causal"))};
    };
    r.push_back(std::move(s));
  }
  const std::vector<LayerParam> decoder_call = {{"tgt"},
                                                {"memory"},
                                                {"tgt_mask", IValue()},
                                                {"memory_mask", IValue()},
                                                {"tgt_key_padding_mask", IValue()},
                                                {"memory_key_padding_mask", IValue()},
                                                {"tgt_is_causal", false},
                                                {"memory_is_causal", false}};
  {
    LayerSpec s = layer_spec<TransformerDecoderLayer>(
        "TransformerDecoderLayer", layer_params({{"d_model"}, {"nhead"}}),
        [](const LayerArgs& a) { return std::make_shared<TransformerDecoderLayer>(config_of(a)); }, kLayerSample, nullptr);
    s.inputs = {"tgt", "memory"};
    s.example_inputs = seq({{4, 3, 8}, {5, 3, 8}});
    s.call_params = decoder_call;
    s.lower_call = [](GraphBuilder& b, Module& m, const std::vector<GV>& t, const Flags& f) {
      return std::vector<GV>{decoder_layer_forward(b, static_cast<TransformerDecoderLayer&>(m), "", t[0], t[1],
                                                   graph_masks(t, 2, 4, f, "tgt_is_causal"), graph_masks(t, 3, 5, f, "memory_is_causal"))};
    };
    s.eager_call = [](Module& m, const Tensors& xs) { return static_cast<TransformerDecoderLayer&>(m).forward(xs[0], xs[1]); };
    r.push_back(std::move(s));
  }
  {
    LayerSpec s = layer_spec<TransformerDecoder>(
        "TransformerDecoder", {{"decoder_layer"}, {"num_layers"}, {"norm", IValue()}},
        [](const LayerArgs& a) { return make_stack<TransformerDecoder, TransformerDecoderLayer>(a, "decoder_layer", "TransformerDecoderLayer"); },
        {{"num_layers", 2}}, nullptr);
    s.example_modules["decoder_layer"] = {kDecoderLayerExpr, [] { return std::make_shared<TransformerDecoderLayer>(sample_config()); }};
    s.inputs = {"tgt", "memory"};
    s.example_inputs = seq({{4, 3, 8}, {5, 3, 8}});
    s.call_params = decoder_call;
    s.lower_call = [](GraphBuilder& b, Module& m, const std::vector<GV>& t, const Flags& f) {
      return std::vector<GV>{decoder_forward(b, static_cast<TransformerDecoder&>(m), "", t[0], t[1], graph_masks(t, 2, 4, f, "tgt_is_causal"),
                                             graph_masks(t, 3, 5, f, "memory_is_causal"))};
    };
    s.eager_call = [](Module& m, const Tensors& xs) { return static_cast<TransformerDecoder&>(m).forward(xs[0], xs[1]); };
    r.push_back(std::move(s));
  }
  {
    std::vector<LayerParam> params = {{"d_model", 512},       {"nhead", 8},         {"num_encoder_layers", 6}, {"num_decoder_layers", 6},
                                      {"dim_feedforward", 2048}, {"dropout", 0.1},    {"activation", "relu"},    {"custom_encoder", IValue()},
                                      {"custom_decoder", IValue()}, {"layer_norm_eps", 1e-5}, {"batch_first", false}, {"norm_first", false},
                                      {"device", IValue()},     {"dtype", IValue()}};
    LayerSpec s = layer_spec<Transformer>(
        "Transformer", params,
        [](const LayerArgs& a) {
          if (!a.is_none("custom_encoder") || !a.is_none("custom_decoder")) a.fail("custom_encoder and custom_decoder are not supported");
          return std::make_shared<Transformer>(config_of(a), a.positive("num_encoder_layers"), a.positive("num_decoder_layers"));
        },
        {{"d_model", 8}, {"nhead", 2}, {"num_encoder_layers", 1}, {"num_decoder_layers", 1}, {"dim_feedforward", 16}, {"dropout", 0.0}},
        nullptr);
    s.inputs = {"src", "tgt"};
    s.example_inputs = seq({{5, 3, 8}, {4, 3, 8}});
    s.call_params = {{"src"},
                     {"tgt"},
                     {"src_mask", IValue()},
                     {"tgt_mask", IValue()},
                     {"memory_mask", IValue()},
                     {"src_key_padding_mask", IValue()},
                     {"tgt_key_padding_mask", IValue()},
                     {"memory_key_padding_mask", IValue()},
                     {"src_is_causal", false},
                     {"tgt_is_causal", false},
                     {"memory_is_causal", false}};
    s.lower_call = [](GraphBuilder& b, Module& m, const std::vector<GV>& t, const Flags& f) {
      return std::vector<GV>{transformer_forward(b, static_cast<Transformer&>(m), t[0], t[1], graph_masks(t, 2, 5, f, "src_is_causal"),
                                                 graph_masks(t, 3, 6, f, "tgt_is_causal"), graph_masks(t, 4, 7, f, "memory_is_causal"))};
    };
    s.eager_call = [](Module& m, const Tensors& xs) { return static_cast<Transformer&>(m).forward(xs[0], xs[1]); };
    r.push_back(std::move(s));
  }
}

}  // namespace kiln::nn
