// torch.nn.functional: the composites are written with kiln ops only, so autograd, the tracer and the
// JIT see primitives they already know; conv and pooling forward to their kernels through dispatch. Those
// the script frontend lowers too are written once, in eager/composites.h.
#include <cmath>
#include <string>
#include <utility>

#include "eager/autocast/autocast.h"
#include "eager/composites.h"
#include "eager/composites_attention.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {

Tensor softmax(const Tensor& x, int64_t dim) {
  EagerBuilder b;
  return composite::softmax(b, x, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  EagerBuilder b;
  return composite::log_softmax(b, x, dim);
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale) {
  EagerBuilder b;
  return composite::scaled_dot_product_attention(b, query, key, value, attn_mask, dropout_p, is_causal, scale);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Shape stride, const ConvPadding& padding, Shape dilation,
              int64_t groups, const std::string& padding_mode) {
  EagerBuilder b;
  return composite::conv2d(b, x, weight, bias, stride, padding, dilation, groups, padding_mode);
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  EagerBuilder b;
  return composite::dropout2d(b, x, p, training);
}

Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor) {
  EagerBuilder b;
  return composite::pixel_shuffle(b, x, upscale_factor);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor) {
  EagerBuilder b;
  return composite::pixel_unshuffle(b, x, downscale_factor);
}

Tensor interpolate(const Tensor& x, std::optional<Shape> size, std::optional<std::vector<double>> scale_factor, const std::string& mode,
                   std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor, bool antialias) {
  EagerBuilder b;
  return composite::interpolate(b, x, {std::move(size), std::move(scale_factor), mode, align_corners, recompute_scale_factor, antialias});
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  EagerBuilder b;
  return composite::group_norm(b, x, num_groups, weight, bias, eps);
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  if (x.dim() < 3) fail("instance_norm: expected an input of at least 3 dims (N, C, *), got shape {}", shape_str(x.sizes()));
  EagerBuilder b;
  return composite::instance_norm(b, x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps, x.dim() - 2,
                                  x.size(1));
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Shape stride, Shape padding,
                        Shape output_padding, int64_t groups, Shape dilation) {
  EagerBuilder b;
  return composite::conv_transpose2d(b, x, weight, bias, stride, padding, output_padding, groups, dilation);
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Shape kernel_size, Shape stride, Shape padding,
                                                  Shape dilation, bool ceil_mode) {
  EagerBuilder b;
  Tensors r = dispatch(OpId::MaxPool2d, {x}, composite::max_pool2d_attrs(b, kernel_size, stride, padding, dilation, ceil_mode));
  return {r[0], r[1]};
}

Tensor max_pool2d(const Tensor& x, Shape kernel_size, Shape stride, Shape padding, Shape dilation, bool ceil_mode) {
  EagerBuilder b;
  return composite::max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor avg_pool2d(const Tensor& x, Shape kernel_size, Shape stride, Shape padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  EagerBuilder b;
  return composite::avg_pool2d(b, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets, const std::string& mode,
                     const Tensor& per_sample_weights, bool include_last_offset, std::optional<int64_t> padding_idx) {
  EagerBuilder b;
  return composite::embedding_bag(b, weight, input, offsets, mode, per_sample_weights, include_last_offset, padding_idx);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx, std::optional<double> max_norm,
                 double norm_type, bool scale_grad_by_freq, bool sparse) {
  if (sparse) fail("embedding: sparse=True is not supported: kiln's gradients are dense (sparse=False gives the same values)");
  if (max_norm && !(*max_norm > 0)) fail("embedding: max_norm must be positive, got {}", *max_norm);
  if (padding_idx && weight.dim() == 2) {
    int64_t num = weight.size(0);
    if (*padding_idx < -num || *padding_idx >= num) fail("embedding: padding_idx {} is not within num_embeddings ({})", *padding_idx, num);
    if (*padding_idx < 0) *padding_idx += num;
  }
  EagerBuilder b;
  Tensor w = max_norm ? composite::embedding_renorm(b, weight, indices, *max_norm, norm_type) : weight;
  return composite::embedding(b, w, indices, padding_idx, scale_grad_by_freq);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  EagerBuilder b;
  return composite::layer_norm(b, x, normalized_shape, weight, bias, eps);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  EagerBuilder b;
  return composite::batch_norm(b, x, running_mean, running_var, weight, bias, training, momentum, eps);
}

Tensor dropout(const Tensor& x, double p, bool training) {
  EagerBuilder b;
  return composite::dropout(b, x, p, training);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  EagerBuilder b;
  return composite::leaky_relu(b, x, negative_slope);
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  EagerBuilder b;
  return composite::prelu(b, x, weight);
}

Tensor elu(const Tensor& x, double alpha) {
  EagerBuilder b;
  return composite::elu(b, x, alpha);
}

Tensor selu(const Tensor& x) {
  EagerBuilder b;
  return composite::selu(b, x);
}

Tensor celu(const Tensor& x, double alpha) {
  EagerBuilder b;
  return composite::celu(b, x, alpha);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  EagerBuilder b;
  return composite::softplus(b, x, beta, threshold);
}

Tensor mish(const Tensor& x) {
  EagerBuilder b;
  return composite::mish(b, x);
}

Tensor logsigmoid(const Tensor& x) {
  EagerBuilder b;
  return composite::logsigmoid(b, x);
}

Tensor softsign(const Tensor& x) {
  EagerBuilder b;
  return composite::softsign(b, x);
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  EagerBuilder b;
  return composite::hardtanh(b, x, min_val, max_val);
}

Tensor relu6(const Tensor& x) {
  EagerBuilder b;
  return composite::relu6(b, x);
}

Tensor hardsigmoid(const Tensor& x) {
  EagerBuilder b;
  return composite::hardsigmoid(b, x);
}

Tensor hardswish(const Tensor& x) {
  EagerBuilder b;
  return composite::hardswish(b, x);
}

Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size) {
  EagerBuilder b;
  return composite::adaptive_avg_pool2d(b, x, output_size);
}

Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size) {
  EagerBuilder b;
  return composite::adaptive_max_pool2d(b, x, output_size);
}

}  // namespace kiln
