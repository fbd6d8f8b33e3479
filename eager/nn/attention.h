#pragma once
// torch.nn's attention layers: MultiheadAttention and the Transformer family built on it, with torch's
// arguments, parameter names (in_proj_weight, out_proj.weight, layers.0.self_attn.in_proj_weight, ...),
// initialisation and masks. The forwards are templates over the builder (eager/builder.h), so the script
// frontend lowers the same text (registered in attention.cpp).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eager/nn/layers.h"
#include "eager/nn/module.h"
#include "eager/nn/registry.h"

namespace kiln::nn {

// The masks and flags of one attention call (torch's names). A bool mask is True where attention is not
// allowed, a float one is added to the scores.
struct AttentionMasks {
  Tensor attn_mask, key_padding_mask;
  bool is_causal = false;
};

class MultiheadAttention : public Module {
 public:
  // kdim, vdim: 0 for embed_dim (torch's None)
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true, bool add_bias_kv = false,
                     bool add_zero_attn = false, int64_t kdim = 0, int64_t vdim = 0, bool batch_first = false);
  // attn_output and the attention weights (undefined unless need_weights): averaged over the heads,
  // (N, L, S), or per head, (N, num_heads, L, S); unbatched inputs ((L, E), a (S) key_padding_mask) give them
  // without N, as torch
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask,
                                    bool need_weights = true, const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                    bool is_causal = false);
  Tensor forward(const Tensor& x) override;  // self-attention's output alone
  std::string name() const override { return "MultiheadAttention"; }
  int64_t embed_dim, num_heads, kdim, vdim;
  double dropout;
  bool batch_first, add_zero_attn;
  Tensor in_proj_weight, in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight;
  Tensor bias_k, bias_v;  // (1, 1, embed_dim) with add_bias_kv, else undefined
  std::shared_ptr<Linear> out_proj;
  bool packed() const { return in_proj_weight.defined(); }
};

// What TransformerEncoderLayer and TransformerDecoderLayer share: the feed-forward block and its settings.
struct TransformerConfig {
  int64_t d_model, nhead, dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false, norm_first = false;
};

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(TransformerConfig c);
  Tensor forward(const Tensor& src, const AttentionMasks& src_masks);
  Tensor forward(const Tensor& src) override { return forward(src, AttentionMasks{}); }
  std::string name() const override { return "TransformerEncoderLayer"; }
  // copy.deepcopy: the same settings and parameter values, the training mode kept
  std::shared_ptr<TransformerEncoderLayer> clone() const;
  TransformerConfig config;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;
};

class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(TransformerConfig c);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tgt_masks = {},
                 const AttentionMasks& memory_masks = {});
  Tensor forward(const Tensor& tgt) override { return forward(tgt, tgt); }
  std::string name() const override { return "TransformerDecoderLayer"; }
  std::shared_ptr<TransformerDecoderLayer> clone() const;
  TransformerConfig config;
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
};

// num_layers deep copies of encoder_layer under layers.0, layers.1, ...; norm (a LayerNorm or null) after them.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers, std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& src, const AttentionMasks& masks);
  Tensor forward(const Tensor& src) override { return forward(src, AttentionMasks{}); }
  std::string name() const override { return "TransformerEncoder"; }
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerDecoderLayer& decoder_layer, int64_t num_layers, std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tgt_masks = {},
                 const AttentionMasks& memory_masks = {});
  Tensor forward(const Tensor& tgt) override { return forward(tgt, tgt); }
  std::string name() const override { return "TransformerDecoder"; }
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

// An encoder and a decoder of num_*_layers each, LayerNorm after both; every matrix xavier-uniform.
class Transformer : public Module {
 public:
  Transformer(TransformerConfig c, int64_t num_encoder_layers = 6, int64_t num_decoder_layers = 6);
  // src_masks: src_mask and src_key_padding_mask; tgt_masks: tgt's; memory_masks: memory_mask and
  // memory_key_padding_mask
  Tensor forward(const Tensor& src, const Tensor& tgt, const AttentionMasks& src_masks = {}, const AttentionMasks& tgt_masks = {},
                 const AttentionMasks& memory_masks = {});
  Tensor forward(const Tensor& x) override { return forward(x, x); }
  std::string name() const override { return "Transformer"; }
  // float (sz, sz): -inf above the diagonal, 0 elsewhere
  static Tensor generate_square_subsequent_mask(int64_t sz);
  TransformerConfig config;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

void add_attention_layers(std::vector<LayerSpec>& r);

}  // namespace kiln::nn
