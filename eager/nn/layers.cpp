#include "eager/nn/layers.h"

#include <cmath>

#include "eager/autograd/graph.h"
#include "eager/composites.h"
#include "eager/conv1d.h"
#include "eager/nn/init.h"
#include "eager/nn/losses.h"
#include "eager/nn/attention.h"
#include "eager/nn/recurrent.h"
#include "eager/nn/registry.h"
#include "eager/ops.h"

namespace kiln::nn {

template <class B>
using Val = composite::Val<B>;

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
template <class B>
Val<B> forward_with(B& b, Linear& m, Val<B> x) {
  return composite::linear(b, x, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"));
}
Tensor Linear::forward(const Tensor& x) { return eager_forward(*this, x); }

namespace {
// torch's checks of a convolution's padding against its sizes (one per spatial dim), when it is built
void check_conv_padding(const char* op, const ConvPadding& p, const std::string& mode, Shape k, Shape s, Shape d) {
  auto each = [&](Shape& v) { if (v.size() == 1) v.resize(k.size(), v[0]); };
  each(s);
  each(d);
  if (s.size() != k.size() || d.size() != k.size())
    fail("{}: stride {} and dilation {} must have 1 or {} elements", op, shape_str(s), shape_str(d), k.size());
  composite::conv_pad_amounts([](const std::string& m) { fail("{}", m); }, op, p, mode, k, s, d);
}
}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Shape k, Shape s, ConvPadding p, Shape d, int64_t g, bool with_bias, std::string pm)
    : stride(std::move(s)), padding(std::move(p)), dilation(std::move(d)), groups(g), padding_mode(std::move(pm)) {
  if (k.size() == 1) k = {k[0], k[0]};
  if (g <= 0 || in % g != 0 || out % g != 0)
    fail("Conv2d: in_channels {} and out_channels {} must be divisible by groups {}", in, out, g);
  check_conv_padding("Conv2d", padding, padding_mode, k, stride, dilation);
  weight = register_parameter("weight", empty({out, in / g, k[0], k[1]}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}
template <class B>
Val<B> forward_with(B& b, Conv2d& m, Val<B> x) {
  return composite::conv2d(b, x, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"), m.stride, m.padding, m.dilation, m.groups,
                           m.padding_mode, Shape{m.weight.size(2), m.weight.size(3)});
}
Tensor Conv2d::forward(const Tensor& x) { return eager_forward(*this, x); }

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Shape k, Shape s, Shape p, Shape op, int64_t g, bool with_bias, Shape d)
    : stride(std::move(s)), padding(std::move(p)), output_padding(std::move(op)), dilation(std::move(d)), groups(g) {
  if (k.size() == 1) k = {k[0], k[0]};
  if (k.size() != 2) fail("ConvTranspose2d: kernel_size must have 1 or 2 elements, got {}", shape_str(k));
  if (g <= 0) fail("ConvTranspose2d: groups must be positive, got {}", g);
  if (in % g != 0) fail("ConvTranspose2d: in_channels must be divisible by groups (in_channels {}, groups {})", in, g);
  if (out % g != 0) fail("ConvTranspose2d: out_channels must be divisible by groups (out_channels {}, groups {})", out, g);
  weight = register_parameter("weight", empty({in, out / g, k[0], k[1]}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}
template <class B>
Val<B> forward_with(B& b, ConvTranspose2d& m, Val<B> x) {
  return composite::conv_transpose2d(b, x, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"), m.stride, m.padding,
                                     m.output_padding, m.groups, m.dilation);
}
Tensor ConvTranspose2d::forward(const Tensor& x) { return eager_forward(*this, x); }

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, int64_t s, ConvPadding p, int64_t d, int64_t g, bool with_bias, std::string pm)
    : stride(s), padding(std::move(p)), dilation(d), groups(g), padding_mode(std::move(pm)) {
  if (g <= 0 || in % g != 0 || out % g != 0)
    fail("Conv1d: in_channels {} and out_channels {} must be divisible by groups {}", in, out, g);
  check_conv_padding("Conv1d", padding, padding_mode, {k}, {s}, {d});
  weight = register_parameter("weight", empty({out, in / g, k}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}
template <class B>
Val<B> forward_with(B& b, Conv1d& m, Val<B> x) {
  return composite::conv1d(b, x, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"), m.stride, m.padding, m.dilation, m.groups,
                           m.padding_mode, m.weight.size(2));
}
Tensor Conv1d::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, MaxPool2d& m, Val<B> x) {
  return composite::max_pool2d(b, x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode);
}
template <class B>
Val<B> forward_with(B& b, AvgPool2d& m, Val<B> x) {
  return composite::avg_pool2d(b, x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad, m.divisor_override);
}
Tensor MaxPool2d::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor AvgPool2d::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, AdaptiveAvgPool2d& m, Val<B> x) { return composite::adaptive_avg_pool2d(b, x, m.output_size); }
template <class B>
Val<B> forward_with(B& b, AdaptiveMaxPool2d& m, Val<B> x) { return composite::adaptive_max_pool2d(b, x, m.output_size); }
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor AdaptiveMaxPool2d::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, ReLU&, Val<B> x) { return b.op(OpId::Relu, {x}); }
template <class B>
Val<B> forward_with(B& b, Tanh&, Val<B> x) { return b.op(OpId::Tanh, {x}); }
template <class B>
Val<B> forward_with(B& b, Sigmoid&, Val<B> x) { return b.op(OpId::Sigmoid, {x}); }
template <class B>
Val<B> forward_with(B& b, GELU& m, Val<B> x) {
  if (m.approximate != "none" && m.approximate != "tanh")
    b.fail(fmt::format("gelu: approximate must be 'none' or 'tanh', got '{}'", m.approximate));
  return b.op(m.approximate == "tanh" ? OpId::GeluTanh : OpId::Gelu, {x});
}
Tensor ReLU::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor Tanh::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor Sigmoid::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor GELU::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, LeakyReLU& m, Val<B> x) { return composite::leaky_relu(b, x, m.negative_slope); }
template <class B>
Val<B> forward_with(B& b, ELU& m, Val<B> x) { return composite::elu(b, x, m.alpha); }
template <class B>
Val<B> forward_with(B& b, SELU&, Val<B> x) { return composite::selu(b, x); }
CELU::CELU(double alpha) : alpha(alpha) {
  if (alpha == 0.0) fail("CELU: alpha cannot be 0 for CELU");
}
template <class B>
Val<B> forward_with(B& b, CELU& m, Val<B> x) { return composite::celu(b, x, m.alpha); }
template <class B>
Val<B> forward_with(B& b, Softplus& m, Val<B> x) { return composite::softplus(b, x, m.beta, m.threshold); }
template <class B>
Val<B> forward_with(B& b, Mish&, Val<B> x) { return composite::mish(b, x); }
template <class B>
Val<B> forward_with(B& b, SiLU&, Val<B> x) { return b.op(OpId::Silu, {x}); }
template <class B>
Val<B> forward_with(B& b, LogSigmoid&, Val<B> x) { return composite::logsigmoid(b, x); }
template <class B>
Val<B> forward_with(B& b, Softsign&, Val<B> x) { return composite::softsign(b, x); }
Tensor LeakyReLU::forward(const Tensor& x) { return eager_forward(*this, x); }

PReLU::PReLU(int64_t n, double init) : num_parameters(n) {
  weight = register_parameter("weight", full({n}, init));
}
template <class B>
Val<B> forward_with(B& b, PReLU& m, Val<B> x) { return composite::prelu(b, x, b.parameter(m.weight, "weight"), m.num_parameters); }
Tensor PReLU::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor ELU::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor SELU::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor CELU::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor Softplus::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor Mish::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor SiLU::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor LogSigmoid::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor Softsign::forward(const Tensor& x) { return eager_forward(*this, x); }

Hardtanh::Hardtanh(double min_val, double max_val) : min_val(min_val), max_val(max_val) {
  if (!(max_val > min_val)) fail("Hardtanh: max_val must be larger than min_val, got min_val={} and max_val={}", min_val, max_val);
}
template <class B>
Val<B> forward_with(B& b, Hardtanh& m, Val<B> x) { return composite::hardtanh(b, x, m.min_val, m.max_val); }
template <class B>
Val<B> forward_with(B& b, ReLU6&, Val<B> x) { return composite::relu6(b, x); }
template <class B>
Val<B> forward_with(B& b, Hardsigmoid&, Val<B> x) { return composite::hardsigmoid(b, x); }
template <class B>
Val<B> forward_with(B& b, Hardswish&, Val<B> x) { return composite::hardswish(b, x); }
Tensor Hardtanh::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor ReLU6::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor Hardsigmoid::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor Hardswish::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, Softmax& m, Val<B> x) { return composite::softmax(b, x, m.dim); }
template <class B>
Val<B> forward_with(B& b, LogSoftmax& m, Val<B> x) { return composite::log_softmax(b, x, m.dim); }
Tensor Softmax::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor LogSoftmax::forward(const Tensor& x) { return eager_forward(*this, x); }

Dropout::Dropout(double p) : p(p) {
  if (p < 0 || p > 1) fail("Dropout: probability has to be between 0 and 1, but got {}", p);
}
template <class B>
Val<B> forward_with(B& b, Dropout& m, Val<B> x) { return composite::dropout(b, x, m.p, m.is_training()); }
Tensor Dropout::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, Flatten& m, Val<B> x) { return b.flatten(x, m.start_dim, m.end_dim); }
Tensor Flatten::forward(const Tensor& x) { return eager_forward(*this, x); }

LayerNorm::LayerNorm(Shape shape, double eps, bool affine) : normalized_shape(std::move(shape)), eps(eps) {
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
}
template <class B>
Val<B> forward_with(B& b, LayerNorm& m, Val<B> x) {
  return composite::layer_norm(b, x, m.normalized_shape, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"), m.eps);
}
Tensor LayerNorm::forward(const Tensor& x) { return eager_forward(*this, x); }

BatchNorm2d::BatchNorm2d(int64_t n, double eps, double momentum, bool affine) : eps(eps), momentum(momentum) {
  if (affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  running_mean = register_buffer("running_mean", zeros({n}));
  running_var = register_buffer("running_var", ones({n}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
}
// num_batches_tracked counts the training calls; the statistics are batch_norm's over a rank-4 input.
template <class B>
Val<B> batch_norm_4d(B& b, BatchNorm2d& m, Val<B> x) {
  Val<B> rm = b.parameter(m.running_mean, "running_mean"), rv = b.parameter(m.running_var, "running_var");
  if (m.is_training()) {
    Val<B> n = b.parameter(m.num_batches_tracked, "num_batches_tracked");
    b.update_buffer(n, b.op(OpId::Add, {n, b.scalar(1)}));
  }
  return composite::batch_norm(b, x, rm, rv, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"), m.is_training(),
                               m.momentum, m.eps, 4);
}
template <class B>
Val<B> forward_with(B& b, BatchNorm2d& m, Val<B> x) {
  b.check_rank(x, {4}, [](const std::optional<Shape>& s) {
    return "BatchNorm2d: expected 4D input" + (s ? ", got shape " + shape_str(*s) : std::string());
  });
  return batch_norm_4d(b, m, x);
}
// (N, C) and (N, C, L) as (N, C, L, 1): the same statistics per channel.
template <class B>
Val<B> forward_with(B& b, BatchNorm1d& m, Val<B> x) {
  b.check_rank(x, {2, 3}, [](const std::optional<Shape>& s) {
    return "BatchNorm1d: expected 2D or 3D input" + (s ? ", got shape " + shape_str(*s) : std::string());
  });
  return b.reshape_like(batch_norm_4d(b, m, b.pad_rank(x, 4)), x, {});
}
Tensor BatchNorm2d::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor BatchNorm1d::forward(const Tensor& x) { return eager_forward(*this, x); }

Dropout2d::Dropout2d(double p) : p(p) {
  if (p < 0 || p > 1) fail("Dropout2d: dropout probability has to be between 0 and 1, but got {}", p);
}
template <class B>
Val<B> forward_with(B& b, Dropout2d& m, Val<B> x) { return composite::dropout2d(b, x, m.p, m.is_training()); }
Tensor Dropout2d::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, PixelShuffle& m, Val<B> x) { return composite::pixel_shuffle(b, x, m.upscale_factor); }
Tensor PixelShuffle::forward(const Tensor& x) { return eager_forward(*this, x); }
template <class B>
Val<B> forward_with(B& b, PixelUnshuffle& m, Val<B> x) { return composite::pixel_unshuffle(b, x, m.downscale_factor); }
Tensor PixelUnshuffle::forward(const Tensor& x) { return eager_forward(*this, x); }

template <class B>
Val<B> forward_with(B& b, Upsample& m, Val<B> x) {
  return composite::interpolate(b, x, {m.size, m.scale_factor, m.mode, m.align_corners, m.recompute_scale_factor, false});
}
Tensor Upsample::forward(const Tensor& x) { return eager_forward(*this, x); }

GroupNorm::GroupNorm(int64_t g, int64_t c, double eps, bool affine) : num_groups(g), num_channels(c), eps(eps) {
  if (g <= 0 || c % g != 0) fail("GroupNorm: num_channels must be divisible by num_groups (num_channels {}, num_groups {})", c, g);
  if (affine) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
}
template <class B>
Val<B> forward_with(B& b, GroupNorm& m, Val<B> x) {
  return composite::group_norm(b, x, m.num_groups, b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"), m.eps,
                               m.num_channels);
}
Tensor GroupNorm::forward(const Tensor& x) { return eager_forward(*this, x); }

InstanceNorm2d::InstanceNorm2d(int64_t n, double eps, double momentum, bool affine, bool track)
    : num_features(n), eps(eps), momentum(momentum) {
  if (affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
  }
}
template <class B>
Val<B> forward_with(B& b, InstanceNorm2d& m, Val<B> x) {
  b.check_rank(x, {3, 4}, [](const std::optional<Shape>& s) {
    return "InstanceNorm2d: expected 3D or 4D input" + (s ? fmt::format(" (got {}D input)", s->size()) : std::string());
  });
  if (std::optional<Shape> s = b.shape(x); s && (*s)[s->size() - 3] != m.num_features && m.weight.defined())
    b.fail(fmt::format("InstanceNorm2d: expected input's size at dim={} to match num_features ({}), but got: {}.", s->size() - 3,
                       m.num_features, (*s)[s->size() - 3]));
  bool tracked = m.running_mean.defined();
  if (tracked && m.is_training()) {
    Val<B> n = b.parameter(m.num_batches_tracked, "num_batches_tracked");
    b.update_buffer(n, b.op(OpId::Add, {n, b.scalar(1)}));
  }
  return composite::instance_norm(b, x, b.parameter(m.running_mean, "running_mean"), b.parameter(m.running_var, "running_var"),
                                  b.parameter(m.weight, "weight"), b.parameter(m.bias, "bias"), m.is_training() || !tracked,
                                  m.momentum, m.eps, int64_t(2), m.num_features);
}
Tensor InstanceNorm2d::forward(const Tensor& x) { return eager_forward(*this, x); }

namespace {

// An embedding table's padding_idx, checked and made non-negative, and its weight: N(0, 1) with the
// padding row zero (torch's Embedding and EmbeddingBag alike).
std::optional<int64_t> table_padding_idx(const char* layer, int64_t num, std::optional<int64_t> pad) {
  if (pad && (*pad < -num || *pad >= num)) fail("{}: padding_idx {} must be within num_embeddings {}", layer, *pad, num);
  if (pad && *pad < 0) return *pad + num;
  return pad;
}
Tensor table_weight(int64_t num, int64_t dim, std::optional<int64_t> padding_idx) {
  Tensor w = empty({num, dim});
  init::normal_(w, 0, 1);
  if (padding_idx) {
    NoGradGuard no_grad;
    w.select(0, *padding_idx).zero_();
  }
  return w;
}

}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad, std::optional<double> mn, double nt, bool freq)
    : max_norm(mn), norm_type(nt), scale_grad_by_freq(freq) {
  if (max_norm && !(*max_norm > 0)) fail("Embedding: max_norm must be positive, got {}", *max_norm);
  padding_idx = table_padding_idx("Embedding", num, pad);
  weight = register_parameter("weight", table_weight(num, dim, padding_idx));
}
template <class B>
Val<B> forward_with(B& b, Embedding& m, Val<B> indices) {
  Val<B> w = b.parameter(m.weight, "weight");
  if (m.max_norm) w = composite::embedding_renorm(b, w, indices, *m.max_norm, m.norm_type);
  return composite::embedding(b, w, indices, m.padding_idx, m.scale_grad_by_freq);
}
Tensor Embedding::forward(const Tensor& indices) { return eager_forward(*this, indices); }

EmbeddingBag::EmbeddingBag(int64_t num, int64_t dim, std::string m, bool last, std::optional<int64_t> pad)
    : mode(std::move(m)), include_last_offset(last) {
  if (mode != "sum" && mode != "mean" && mode != "max") fail("EmbeddingBag: mode has to be one of sum, mean or max, got '{}'", mode);
  padding_idx = table_padding_idx("EmbeddingBag", num, pad);
  weight = register_parameter("weight", table_weight(num, dim, padding_idx));
}
template <class B>
Val<B> embedding_bag_forward(B& b, EmbeddingBag& m, Val<B> input, Val<B> offsets, Val<B> per_sample_weights) {
  return composite::embedding_bag(b, b.parameter(m.weight, "weight"), input, offsets, m.mode, per_sample_weights,
                                  m.include_last_offset, m.padding_idx);
}
template <class B>
Val<B> forward_with(B& b, EmbeddingBag& m, Val<B> input) { return embedding_bag_forward(b, m, input, Val<B>{}, Val<B>{}); }
Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights) {
  EagerBuilder b;
  return embedding_bag_forward(b, *this, input, offsets, per_sample_weights);
}

template <class B>
Val<B> forward_with(B&, Identity&, Val<B> x) { return x; }
Tensor Identity::forward(const Tensor& x) { return eager_forward(*this, x); }

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

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> modules) { extend(modules); }
ModuleList& ModuleList::append(std::shared_ptr<Module> m) {
  if (!m) fail("ModuleList.append: expected a module, got none");
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
  return *this;
}
ModuleList& ModuleList::extend(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) append(m);
  return *this;
}
std::shared_ptr<Module> ModuleList::ptr(int64_t i) const {
  const int64_t n = int64_t(modules_.size());
  if (i < -n || i >= n) fail("ModuleList: index {} is out of range", i);
  return modules_[size_t(i < 0 ? i + n : i)];
}
Tensor ModuleList::forward(const Tensor&) { fail("Module [ModuleList] is missing the required \"forward\" function"); }


// ---- the registry: torch's constructor arguments, how to build each layer from them, a sample ----

const std::vector<LayerSpec>& layer_registry() {
  static const std::vector<LayerSpec> all = [] {
    auto t = [](Shape s) { return [s] { return randn(s); }; };
    auto no_args = [](auto make) { return [make](const LayerArgs&) -> std::shared_ptr<Module> { return make(); }; };
    std::vector<LayerSpec> r;
    r.push_back(layer_spec<Linear>(
        "Linear", {{"in_features"}, {"out_features"}, {"bias", true}},
        [](const LayerArgs& a) { return std::make_shared<Linear>(a.positive("in_features"), a.positive("out_features"), a.flag("bias")); },
        {{"in_features", 6}, {"out_features", 4}}, t({3, 6})));
    r.push_back(layer_spec<LayerNorm>(
        "LayerNorm", {{"normalized_shape"}, {"eps", 1e-5}, {"elementwise_affine", true}},
        [](const LayerArgs& a) { return std::make_shared<LayerNorm>(a.ints("normalized_shape"), a.number("eps"), a.flag("elementwise_affine")); },
        {{"normalized_shape", 5}}, t({2, 3, 5})));
    r.push_back(layer_spec<Dropout>(
        "Dropout", {{"p", 0.5}, {"inplace", false}},
        [](const LayerArgs& a) {
          double p = a.number("p");
          if (!(p >= 0 && p <= 1)) a.fail(fmt::format("dropout probability has to be between 0 and 1, but got {}", p));
          return std::make_shared<Dropout>(p);
        },
        {{"p", 0.25}}, t({4, 6})));
    r.push_back(layer_spec<Dropout2d>(
        "Dropout2d", {{"p", 0.5}, {"inplace", false}},
        [](const LayerArgs& a) {
          double p = a.number("p");
          if (!(p >= 0 && p <= 1)) a.fail(fmt::format("dropout probability has to be between 0 and 1, but got {}", p));
          return std::make_shared<Dropout2d>(p);
        },
        {{"p", 0.5}}, t({4, 6, 2, 3})));
    r.push_back(layer_spec<PixelShuffle>(
        "PixelShuffle", {{"upscale_factor"}},
        [](const LayerArgs& a) { return std::make_shared<PixelShuffle>(a.positive("upscale_factor")); },
        {{"upscale_factor", 2}}, t({2, 8, 3, 2})));
    r.push_back(layer_spec<PixelUnshuffle>(
        "PixelUnshuffle", {{"downscale_factor"}},
        [](const LayerArgs& a) { return std::make_shared<PixelUnshuffle>(a.positive("downscale_factor")); },
        {{"downscale_factor", 2}}, t({2, 3, 4, 6})));
    // size: None, an int or a tuple of ints; scale_factor: None, a number or a tuple of numbers. Checked as
    // torch does, in forward (interpolate's errors).
    auto upsample_size = [](const LayerArgs& a) -> std::optional<Shape> {
      if (a.is_none("size")) return std::nullopt;
      return a.ints("size");
    };
    auto upsample_scale = [](const LayerArgs& a) -> std::optional<std::vector<double>> {
      const IValue& v = a["scale_factor"];
      if (v.is_none()) return std::nullopt;
      std::vector<double> r;
      auto one = [&](const IValue& e) {
        if (!e.is_int() && !e.is_double()) a.fail(fmt::format("scale_factor must be a number or a tuple of numbers, got {}", v.type_name()));
        r.push_back(e.to_double());
      };
      if (v.is_tuple() || v.is_list())
        for (const IValue& e : v.elements()) one(e);
      else
        one(v);
      return r;
    };
    auto optional_flag = [](const LayerArgs& a, std::string_view name) {
      return a.is_none(name) ? std::nullopt : std::optional<bool>(a.flag(name));
    };
    r.push_back(layer_spec<Upsample>(
        "Upsample", {{"size", IValue()}, {"scale_factor", IValue()}, {"mode", "nearest"}, {"align_corners", IValue()},
                     {"recompute_scale_factor", IValue()}},
        [=](const LayerArgs& a) {
          return std::make_shared<Upsample>(upsample_size(a), upsample_scale(a), a.str("mode"), optional_flag(a, "align_corners"),
                                            optional_flag(a, "recompute_scale_factor"));
        },
        {{"scale_factor", 2}, {"mode", "bilinear"}}, t({2, 3, 3, 4})));
    r.push_back(layer_spec<UpsamplingNearest2d>(
        "UpsamplingNearest2d", {{"size", IValue()}, {"scale_factor", IValue()}},
        [=](const LayerArgs& a) { return std::make_shared<UpsamplingNearest2d>(upsample_size(a), upsample_scale(a)); },
        {{"scale_factor", 3}}, t({2, 3, 2, 3})));
    r.push_back(layer_spec<ReLU>("ReLU", {{"inplace", false}}, no_args([] { return std::make_shared<ReLU>(); }), {}, t({3, 4})));
    r.push_back(layer_spec<Tanh>("Tanh", {}, no_args([] { return std::make_shared<Tanh>(); }), {}, t({3, 4})));
    r.push_back(layer_spec<Sigmoid>("Sigmoid", {}, no_args([] { return std::make_shared<Sigmoid>(); }), {}, t({3, 4})));
    r.push_back(layer_spec<GELU>(
        "GELU", {{"approximate", "none"}},
        [](const LayerArgs& a) {
          std::string ap = a.str("approximate");
          if (ap != "none" && ap != "tanh") a.fail(fmt::format("approximate must be 'none' or 'tanh', got '{}'", ap));
          return std::make_shared<GELU>(ap);
        },
        {{"approximate", "tanh"}}, t({3, 4})));
    // activations: the samples reach |x| ~ 30, where an exp that a where() drops would overflow; inplace is
    // accepted and ignored (a new tensor is returned)
    auto wide = [](Shape s, double scale) { return [s, scale] { return mul(randn(s), scale); }; };
    r.push_back(layer_spec<LeakyReLU>(
        "LeakyReLU", {{"negative_slope", 0.01}, {"inplace", false}},
        [](const LayerArgs& a) { return std::make_shared<LeakyReLU>(a.number("negative_slope")); }, {{"negative_slope", 0.2}},
        wide({3, 4}, 10)));
    r.push_back(layer_spec<PReLU>(
        "PReLU", {{"num_parameters", 1}, {"init", 0.25}},
        [](const LayerArgs& a) { return std::make_shared<PReLU>(a.integer("num_parameters"), a.number("init")); },
        {{"num_parameters", 3}, {"init", 0.1}}, wide({2, 3, 4}, 10)));
    r.push_back(layer_spec<ELU>(
        "ELU", {{"alpha", 1.0}, {"inplace", false}}, [](const LayerArgs& a) { return std::make_shared<ELU>(a.number("alpha")); },
        {{"alpha", 0.5}}, wide({3, 4}, 10)));
    r.push_back(layer_spec<SELU>("SELU", {{"inplace", false}}, no_args([] { return std::make_shared<SELU>(); }), {}, wide({3, 4}, 10)));
    r.push_back(layer_spec<CELU>(
        "CELU", {{"alpha", 1.0}, {"inplace", false}},
        [](const LayerArgs& a) {
          if (a.number("alpha") == 0.0) a.fail("alpha cannot be 0 for CELU");
          return std::make_shared<CELU>(a.number("alpha"));
        },
        {{"alpha", 2.0}}, wide({3, 4}, 10)));
    r.push_back(layer_spec<Softplus>(
        "Softplus", {{"beta", 1.0}, {"threshold", 20.0}},
        [](const LayerArgs& a) { return std::make_shared<Softplus>(a.number("beta"), a.number("threshold")); },
        {{"beta", 2.0}, {"threshold", 10.0}}, wide({3, 4}, 10)));
    r.push_back(layer_spec<Mish>("Mish", {{"inplace", false}}, no_args([] { return std::make_shared<Mish>(); }), {}, wide({3, 4}, 10)));
    r.push_back(layer_spec<SiLU>("SiLU", {{"inplace", false}}, no_args([] { return std::make_shared<SiLU>(); }), {}, wide({3, 4}, 10)));
    r.push_back(layer_spec<LogSigmoid>("LogSigmoid", {}, no_args([] { return std::make_shared<LogSigmoid>(); }), {}, wide({3, 4}, 10)));
    r.push_back(layer_spec<Softsign>("Softsign", {}, no_args([] { return std::make_shared<Softsign>(); }), {}, wide({3, 4}, 10)));
    // min_value / max_value: torch's deprecated spellings, which win when given
    r.push_back(layer_spec<Hardtanh>(
        "Hardtanh", {{"min_val", -1.0}, {"max_val", 1.0}, {"inplace", false}, {"min_value", IValue()}, {"max_value", IValue()}},
        [](const LayerArgs& a) {
          double lo = a.number(a.is_none("min_value") ? "min_val" : "min_value");
          double hi = a.number(a.is_none("max_value") ? "max_val" : "max_value");
          if (!(hi > lo)) a.fail(fmt::format("max_val must be larger than min_val, got min_val={} and max_val={}", lo, hi));
          return std::make_shared<Hardtanh>(lo, hi);
        },
        {{"min_val", -2.0}, {"max_val", 3.0}}, wide({3, 4}, 3)));
    r.push_back(layer_spec<ReLU6>("ReLU6", {{"inplace", false}}, no_args([] { return std::make_shared<ReLU6>(); }), {}, wide({3, 4}, 5)));
    r.push_back(layer_spec<Hardsigmoid>("Hardsigmoid", {{"inplace", false}}, no_args([] { return std::make_shared<Hardsigmoid>(); }), {},
                                        wide({3, 4}, 4)));
    r.push_back(layer_spec<Hardswish>("Hardswish", {{"inplace", false}}, no_args([] { return std::make_shared<Hardswish>(); }), {},
                                      wide({3, 4}, 4)));
    for (const char* name : {"Softmax", "LogSoftmax"}) {
      bool log = name[0] == 'L';
      auto make = [log](const LayerArgs& a) -> std::shared_ptr<Module> {
        if (a.is_none("dim")) a.fail("give dim (the implicit choice is deprecated in PyTorch)");
        if (log) return std::make_shared<LogSoftmax>(a.integer("dim"));
        return std::make_shared<Softmax>(a.integer("dim"));
      };
      r.push_back(log ? layer_spec<LogSoftmax>(name, {{"dim", IValue()}}, make, {{"dim", 1}}, t({3, 5}))
                      : layer_spec<Softmax>(name, {{"dim", IValue()}}, make, {{"dim", -1}}, t({3, 5})));
    }
    r.push_back(layer_spec<Flatten>(
        "Flatten", {{"start_dim", 1}, {"end_dim", -1}},
        [](const LayerArgs& a) { return std::make_shared<Flatten>(a.integer("start_dim"), a.integer("end_dim")); },
        {}, t({2, 3, 4})));
    r.push_back(layer_spec<MaxPool2d>(
        "MaxPool2d",
        {{"kernel_size"}, {"stride", IValue()}, {"padding", 0}, {"dilation", 1}, {"return_indices", false}, {"ceil_mode", false}},
        [](const LayerArgs& a) {
          a.unsupported_if_true("return_indices");
          Shape k = a.pair("kernel_size");
          return std::make_shared<MaxPool2d>(k, a.is_none("stride") ? k : a.pair("stride"), a.pair("padding"), a.pair("dilation"),
                                             a.flag("ceil_mode"));
        },
        {{"kernel_size", 3}, {"stride", 2}, {"ceil_mode", true}}, t({2, 3, 6, 6})));
    r.push_back(layer_spec<AvgPool2d>(
        "AvgPool2d",
        {{"kernel_size"}, {"stride", IValue()}, {"padding", 0}, {"ceil_mode", false}, {"count_include_pad", true},
         {"divisor_override", IValue()}},
        [](const LayerArgs& a) {
          Shape k = a.pair("kernel_size");
          std::optional<int64_t> div;
          if (!a.is_none("divisor_override")) div = a.integer("divisor_override");
          return std::make_shared<AvgPool2d>(k, a.is_none("stride") ? k : a.pair("stride"), a.pair("padding"), a.flag("ceil_mode"),
                                             a.flag("count_include_pad"), div);
        },
        {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"ceil_mode", true}, {"count_include_pad", false}}, t({2, 3, 6, 6})));
    // output_size: an int, None, or a pair of them (None keeps that dim). The samples' bins overlap.
    auto output_size = [](const LayerArgs& a) {
      std::vector<std::optional<int64_t>> r;
      const IValue& v = a["output_size"];
      auto one = [&](const IValue& e) {
        if (!e.is_none() && !e.is_int()) a.fail(fmt::format("output_size must be an int, None or a tuple of them, got {}", v.type_name()));
        r.push_back(e.is_none() ? std::nullopt : std::optional<int64_t>(e.to_int()));
      };
      if (v.is_tuple() || v.is_list())
        for (const IValue& e : v.elements()) one(e);
      else
        one(v);
      if (r.size() != 1 && r.size() != 2) a.fail(fmt::format("output_size must have 2 elements, got {}", r.size()));
      for (const auto& o : r)
        if (o && *o < 0) a.fail(fmt::format("elements of output_size must be greater than or equal to 0, got {}", *o));
      return r;
    };
    r.push_back(layer_spec<AdaptiveAvgPool2d>(
        "AdaptiveAvgPool2d", {{"output_size"}},
        [output_size](const LayerArgs& a) { return std::make_shared<AdaptiveAvgPool2d>(output_size(a)); },
        {{"output_size", IValue::tuple({IValue(3), IValue(2)})}},
        t({2, 3, 5, 7})));
    r.push_back(layer_spec<AdaptiveMaxPool2d>(
        "AdaptiveMaxPool2d", {{"output_size"}, {"return_indices", false}},
        [output_size](const LayerArgs& a) {
          a.unsupported_if_true("return_indices");
          return std::make_shared<AdaptiveMaxPool2d>(output_size(a));
        },
        {{"output_size", IValue::tuple({IValue(), IValue(3)})}}, t({2, 3, 5, 7})));
    // padding: ints, or 'valid' / 'same' (the constructor checks them, and padding_mode, as torch)
    auto conv_padding = [](const LayerArgs& a) -> ConvPadding {
      if (a["padding"].is_string()) return ConvPadding(a.str("padding"));
      return ConvPadding(a.ints("padding"));
    };
    std::vector<LayerParam> conv_params = {{"in_channels"}, {"out_channels"}, {"kernel_size"}, {"stride", 1}, {"padding", 0},
                                           {"dilation", 1}, {"groups", 1}, {"bias", true}, {"padding_mode", "zeros"}};
    r.push_back(layer_spec<Conv2d>(
        "Conv2d", conv_params,
        [conv_padding](const LayerArgs& a) {
          Shape k = a.pair("kernel_size"), s = a.pair("stride"), d = a.pair("dilation");
          return std::make_shared<Conv2d>(a.positive("in_channels"), a.positive("out_channels"), k, s, conv_padding(a), d,
                                          a.positive("groups"), a.flag("bias"), a.str("padding_mode"));
        },
        {{"in_channels", 3}, {"out_channels", 4}, {"kernel_size", IValue::tuple({IValue(2), IValue(3)})}, {"padding", "same"},
         {"padding_mode", "reflect"}},
        t({2, 3, 6, 6})));
    r.push_back(layer_spec<ConvTranspose2d>(
        "ConvTranspose2d",
        {{"in_channels"}, {"out_channels"}, {"kernel_size"}, {"stride", 1}, {"padding", 0}, {"output_padding", 0}, {"groups", 1},
         {"bias", true}, {"dilation", 1}, {"padding_mode", "zeros"}},
        [](const LayerArgs& a) {
          if (a.str("padding_mode") != "zeros")
            a.fail(fmt::format("Only \"zeros\" padding mode is supported for ConvTranspose2d, got '{}'", a.str("padding_mode")));
          return std::make_shared<ConvTranspose2d>(a.positive("in_channels"), a.positive("out_channels"), a.pair("kernel_size"),
                                                   a.pair("stride"), a.pair("padding"), a.pair("output_padding"),
                                                   a.positive("groups"), a.flag("bias"), a.pair("dilation"));
        },
        {{"in_channels", 4}, {"out_channels", 6}, {"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"output_padding", 1},
         {"groups", 2}},
        t({2, 4, 3, 4})));
    r.push_back(layer_spec<Conv1d>(
        "Conv1d", conv_params,
        [conv_padding](const LayerArgs& a) {
          auto one = [&](const char* what) {
            Shape v = a.ints(what);
            if (v.size() != 1) a.fail(fmt::format("{} must be an int or a 1-tuple, got {} values", what, v.size()));
            return v[0];
          };
          int64_t k = one("kernel_size"), s = one("stride"), d = one("dilation");
          return std::make_shared<Conv1d>(a.positive("in_channels"), a.positive("out_channels"), k, s, conv_padding(a), d,
                                          a.positive("groups"), a.flag("bias"), a.str("padding_mode"));
        },
        {{"in_channels", 3}, {"out_channels", 4}, {"kernel_size", 3}, {"stride", 2}}, t({2, 3, 9})));
    for (const char* name : {"BatchNorm2d", "BatchNorm1d"}) {
      bool one_d = name[9] == '1';
      auto make = [one_d](const LayerArgs& a) -> std::shared_ptr<Module> {
        if (!a.flag("track_running_stats")) a.fail("track_running_stats=False is not supported");
        if (a.is_none("momentum")) a.fail("momentum=None (a cumulative average) is not supported");
        int64_t n = a.positive("num_features");
        double eps = a.number("eps"), mom = a.number("momentum");
        if (one_d) return std::make_shared<BatchNorm1d>(n, eps, mom, a.flag("affine"));
        return std::make_shared<BatchNorm2d>(n, eps, mom, a.flag("affine"));
      };
      std::vector<LayerParam> ps = {{"num_features"}, {"eps", 1e-5}, {"momentum", 0.1}, {"affine", true}, {"track_running_stats", true}};
      r.push_back(one_d ? layer_spec<BatchNorm1d>(name, ps, make, {{"num_features", 3}}, t({4, 3, 5}))
                        : layer_spec<BatchNorm2d>(name, ps, make, {{"num_features", 3}, {"momentum", 0.2}}, t({4, 3, 5, 5})));
    }
    r.push_back(layer_spec<GroupNorm>(
        "GroupNorm", {{"num_groups"}, {"num_channels"}, {"eps", 1e-5}, {"affine", true}},
        [](const LayerArgs& a) {
          int64_t g = a.positive("num_groups"), c = a.positive("num_channels");
          if (c % g != 0) a.fail("num_channels must be divisible by num_groups");
          return std::make_shared<GroupNorm>(g, c, a.number("eps"), a.flag("affine"));
        },
        {{"num_groups", 2}, {"num_channels", 4}}, t({3, 4, 3, 5})));
    r.push_back(layer_spec<InstanceNorm2d>(
        "InstanceNorm2d", {{"num_features"}, {"eps", 1e-5}, {"momentum", 0.1}, {"affine", false}, {"track_running_stats", false}},
        [](const LayerArgs& a) {
          if (a.is_none("momentum")) a.fail("momentum=None (a cumulative average) is not supported");
          return std::make_shared<InstanceNorm2d>(a.positive("num_features"), a.number("eps"), a.number("momentum"), a.flag("affine"),
                                                  a.flag("track_running_stats"));
        },
        {{"num_features", 3}, {"affine", true}, {"track_running_stats", true}, {"momentum", 0.3}}, t({2, 3, 4, 5})));
    r.push_back(layer_spec<Embedding>(
        "Embedding",
        {{"num_embeddings"}, {"embedding_dim"}, {"padding_idx", IValue()}, {"max_norm", IValue()}, {"norm_type", 2.0},
         {"scale_grad_by_freq", false}, {"sparse", false}},
        [](const LayerArgs& a) {
          if (a.flag("sparse")) a.fail("sparse=True is not supported: kiln's gradients are dense (sparse=False gives the same values)");
          int64_t num = a.positive("num_embeddings");
          std::optional<double> max_norm;
          if (!a.is_none("max_norm")) max_norm = a.number("max_norm");
          std::optional<int64_t> pad;
          if (!a.is_none("padding_idx")) {
            pad = a.integer("padding_idx");
            if (*pad < -num || *pad >= num) a.fail(fmt::format("padding_idx {} must be within num_embeddings {}", *pad, num));
          }
          return std::make_shared<Embedding>(num, a.positive("embedding_dim"), pad, max_norm, a.number("norm_type"),
                                             a.flag("scale_grad_by_freq"));
        },
        {{"num_embeddings", 10}, {"embedding_dim", 4}, {"padding_idx", 0}}, [] { return randint(0, 10, {2, 5}); }));
    {
      LayerSpec bag = layer_spec<EmbeddingBag>(
          "EmbeddingBag",
          {{"num_embeddings"}, {"embedding_dim"}, {"max_norm", IValue()}, {"norm_type", 2.0}, {"scale_grad_by_freq", false},
           {"mode", "mean"}, {"sparse", false}, {"_weight", IValue()}, {"include_last_offset", false}, {"padding_idx", IValue()},
           {"device", IValue()}, {"dtype", IValue()}},
          [](const LayerArgs& a) {
            if (!a.is_none("max_norm")) a.fail("max_norm is not supported");
            if (!a.is_none("_weight") || !a.is_none("device") || !a.is_none("dtype"))
              a.fail("_weight, device and dtype arguments are not supported");
            a.unsupported_if_true("scale_grad_by_freq");
            a.unsupported_if_true("sparse");
            std::optional<int64_t> pad;
            if (!a.is_none("padding_idx")) pad = a.integer("padding_idx");
            return std::make_shared<EmbeddingBag>(a.positive("num_embeddings"), a.positive("embedding_dim"), a.str("mode"),
                                                  a.flag("include_last_offset"), pad);
          },
          {{"num_embeddings", 10}, {"embedding_dim", 4}, {"mode", "max"}, {"padding_idx", 2}}, nullptr);
      bag.call_params = {{"input"}, {"offsets", IValue()}, {"per_sample_weights", IValue()}};
      bag.lower_call = [](GraphBuilder& b, Module& m, const std::vector<GraphBuilder::V>& t, const std::map<std::string, bool>&) {
        return std::vector<GraphBuilder::V>{embedding_bag_forward(b, static_cast<EmbeddingBag&>(m), t[0], t[1], t[2])};
      };
      bag.inputs = {"input", "offsets"};
      bag.example_inputs = [] { return Tensors{tensor(std::vector<int64_t>{1, 2, 4, 5, 2, 3, 9, 2}, {8}), tensor(std::vector<int64_t>{0, 2, 2, 5}, {4})}; };
      bag.eager_call = [](Module& m, const Tensors& xs) { return static_cast<EmbeddingBag&>(m).forward(xs[0], xs[1]); };
      r.push_back(std::move(bag));
    }
    LayerSpec identity = layer_spec<Identity>("Identity", {}, no_args([] { return std::make_shared<Identity>(); }), {}, t({3, 4}));
    identity.ignores_extra_args = true;
    r.push_back(std::move(identity));
    register_losses(r);
    add_recurrent_layers(r);
    add_attention_layers(r);
    return r;
  }();
  return all;
}

}  // namespace kiln::nn
