#pragma once
// F.scaled_dot_product_attention, written once over the builder (eager/builder.h): the fused flash_attention
// row, or with dropout as torch documents it, softmax(q @ k^T * scale + mask) @ v. nn.MultiheadAttention (eager/nn/attention.cpp) runs it per head.
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "eager/composites.h"

namespace kiln::composite {

// A bool mask says where to attend (True, as torch); a float mask is added to the scores. Rows that attend
// nowhere give NaN, as in torch. The masked scores are dropped by `where`, not added to -inf, so their
// gradient is an exact zero.
template <class B>
Val<B> scaled_dot_product_attention(B& b, Val<B> q, Val<B> k, Val<B> v, Val<B> attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  const char* name = "scaled_dot_product_attention";
  if (is_causal && present(attn_mask))
    b.fail(fmt::format("{}: explicit attn_mask should not be set when is_causal=True", name));
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    b.fail(fmt::format("{}: dropout_p has to be between 0 and 1, but got {}", name, dropout_p));
  for (auto [x, what] : {std::pair{q, "query"}, std::pair{k, "key"}, std::pair{v, "value"}}) {
    std::optional<int64_t> r = b.rank(x);
    if (r && *r < 2) b.fail(fmt::format("{}: {} must be at least 2-D, got {}-D", name, what, *r));
  }
  std::optional<Shape> qs = b.shape(q), ks = b.shape(k), vs = b.shape(v);
  if (qs && ks && qs->back() != ks->back())
    b.fail(fmt::format("{}: query's last dim ({}) must equal key's ({}), got query {} and key {}", name, qs->back(), ks->back(),
                       shape_str(*qs), shape_str(*ks)));
  if (ks && vs && (*ks)[ks->size() - 2] != (*vs)[vs->size() - 2])
    b.fail(fmt::format("{}: key and value must have the same sequence length, got key {} and value {}", name, shape_str(*ks),
                       shape_str(*vs)));
  std::optional<Shape> ms = present(attn_mask) ? b.shape(attn_mask) : std::nullopt;
  if (ms && qs && ks) {
    Shape want = Shape(qs->begin(), qs->end() - 1);
    want.push_back((*ks)[ks->size() - 2]);
    bool fits = ms->size() <= want.size();
    for (size_t i = 1; fits && i <= ms->size(); ++i) fits = (*ms)[ms->size() - i] == 1 || (*ms)[ms->size() - i] == want[want.size() - i];
    if (!fits)
      b.fail(fmt::format("{}: attn_mask of shape {} does not broadcast to the attention's shape {}", name, shape_str(*ms), shape_str(want)));
  }
  Val<B> s;
  if (scale) {
    s = b.scalar(Scalar(*scale));
  } else {
    // 1 / sqrt(E), E read when the graph runs where the shape is not known now
    std::optional<int64_t> r = b.rank(q);
    s = b.op(OpId::Rsqrt, {b.op(OpId::Cast, {b.count(q, {r ? *r - 1 : -1}, -1, nullptr)}, Attrs().set("dtype", DType::Float64))});
  }
  // Without dropout one fused row does it all (eager/cpu/attention.cpp): the scores are never stored, a causal
  // mask is generated, not read, and the backward recomputes the probabilities from each row's log-sum-exp.
  if (dropout_p == 0.0) {
    std::vector<Val<B>> in{q, k, v, s};
    if (present(attn_mask)) in.push_back(attn_mask);
    return b.op(OpId::FlashAttention, in, Attrs().set("causal", is_causal));
  }
  Val<B> scores = b.op(OpId::Mul, {b.op(OpId::Matmul, {q, b.transpose(k, -2, -1)}), s});
  Val<B> keep = is_causal ? b.causal_mask(q, k) : Val<B>{};
  auto masked = [&](Val<B> keep_) { return b.op(OpId::Where, {keep_, scores, b.scalar(-INFINITY)}); };
  if (present(keep)) scores = masked(keep);
  if (present(attn_mask))
    scores = b.if_bool(attn_mask, [&] { return masked(attn_mask); }, [&] { return b.op(OpId::Add, {scores, attn_mask}); });
  Val<B> w = softmax(b, scores, -1);
  w = dropout(b, w, dropout_p, true);
  return b.op(OpId::Matmul, {w, v});
}

}  // namespace kiln::composite
