#include "eager/nn/layers.h"

#include <cmath>

#include "eager/nn/init.h"
#include "eager/autograd/graph.h"
#include "eager/conv1d.h"
#include "eager/ops.h"

namespace kiln::nn {
namespace {
// torch's default for Linear and Conv2d: kaiming_uniform(a=sqrt(5)) weights, U(-1/sqrt(fan_in), ..) bias.
void default_init(Tensor& w, Tensor& b) {
  init::kaiming_uniform_(w, std::sqrt(5.0));
  if (b.defined()) {
    double bound = 1.0 / std::sqrt(double(init::fans(w).first));
    init::uniform_(b, -bound, bound);
  }
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias) {
  if (in <= 0 || out <= 0) fail("Linear: features must be positive, got in={} out={}", in, out);
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}
Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

Conv2d::Conv2d(int64_t in, int64_t out, Shape k, Shape s, Shape p, Shape d, int64_t g, bool with_bias)
    : stride(std::move(s)), padding(std::move(p)), dilation(std::move(d)), groups(g) {
  if (k.size() == 1) k = {k[0], k[0]};
  if (g <= 0 || in % g != 0 || out % g != 0)
    fail("Conv2d: in_channels {} and out_channels {} must be divisible by groups {}", in, out, g);
  weight = register_parameter("weight", empty({out, in / g, k[0], k[1]}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}
Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight, bias, stride, padding, dilation, groups); }

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d, int64_t g, bool with_bias)
    : stride(s), padding(p), dilation(d), groups(g) {
  if (g <= 0 || in % g != 0 || out % g != 0)
    fail("Conv1d: in_channels {} and out_channels {} must be divisible by groups {}", in, out, g);
  weight = register_parameter("weight", empty({out, in / g, k}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}
Tensor Conv1d::forward(const Tensor& x) { return conv1d(x, weight, bias, stride, padding, dilation, groups); }

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_size, stride, padding); }
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, kernel_size, stride, padding); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }

Dropout::Dropout(double p) : p(p) {
  if (p < 0 || p > 1) fail("Dropout: probability has to be between 0 and 1, but got {}", p);
}
Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }
Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

LayerNorm::LayerNorm(Shape shape, double eps, bool affine) : normalized_shape(std::move(shape)), eps(eps) {
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
}
Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

BatchNorm2d::BatchNorm2d(int64_t n, double eps, double momentum, bool affine) : eps(eps), momentum(momentum) {
  if (affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  running_mean = register_buffer("running_mean", zeros({n}));
  running_var = register_buffer("running_var", ones({n}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
}
Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.dim() != 4) fail("BatchNorm2d: expected 4D input, got shape {}", shape_str(x.sizes()));
  if (is_training()) num_batches_tracked.add_(1);
  return batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

Tensor BatchNorm1d::forward(const Tensor& x) {
  if (x.dim() != 2 && x.dim() != 3) fail("BatchNorm1d: expected 2D or 3D input, got shape {}", shape_str(x.sizes()));
  // As (N, C, L, 1): batch_norm's statistics per channel over every other dim.
  Tensor x4 = x.dim() == 2 ? x.unsqueeze(2).unsqueeze(3) : x.unsqueeze(3);
  if (is_training()) num_batches_tracked.add_(1);
  Tensor y = batch_norm(x4, running_mean, running_var, weight, bias, is_training(), momentum, eps);
  return x.dim() == 2 ? y.squeeze(3).squeeze(2) : y.squeeze(3);
}

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad) {
  if (pad && (*pad < -num || *pad >= num))
    fail("Embedding: padding_idx {} must be within num_embeddings {}", *pad, num);
  if (pad) padding_idx = *pad < 0 ? *pad + num : *pad;
  weight = register_parameter("weight", empty({num, dim}));
  init::normal_(weight, 0, 1);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).zero_();
  }
}
Tensor Embedding::forward(const Tensor& idx) {
  Tensor rows = embedding(weight, idx);
  if (!padding_idx) return rows;
  // The padding row's value without a path back to the weight: it gets no gradient.
  Tensor pad = (idx == Scalar(*padding_idx)).unsqueeze(-1);
  return where(pad, embedding(weight.detach(), idx), rows);
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (auto& m : layers) add(m);
}
Sequential& Sequential::add(std::shared_ptr<Module> m) {
  register_module(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
  return *this;
}
Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : layers_) h = (*m)(h);
  return h;
}

}  // namespace kiln::nn
