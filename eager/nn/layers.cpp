#include "eager/nn/layers.h"

#include <cmath>

#include "eager/autograd/graph.h"
#include "eager/composites.h"
#include "eager/conv1d.h"
#include "eager/nn/init.h"
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

// The window of a pool as its op's attributes; one value stands for both dims, no stride means the kernel.
static Attrs window_attrs(const char* op, const Pool2d& p) {
  auto pair = [&](const char* what, const Shape& v) -> Shape {
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() != 2) fail("{}: {} must have 1 or 2 elements, got {}", op, what, shape_str(v));
    return v;
  };
  Shape k = pair("kernel_size", p.kernel_size);
  return Attrs().set("kernel_size", k).set("stride", p.stride.empty() ? k : pair("stride", p.stride)).set("padding", pair("padding", p.padding));
}
template <class B>
Val<B> forward_with(B& b, MaxPool2d& m, Val<B> x) {
  Attrs a = window_attrs("max_pool2d", m);
  a.set("dilation", m.dilation.size() == 1 ? Shape{m.dilation[0], m.dilation[0]} : m.dilation);
  return b.op(OpId::MaxPool2d, {x}, a);
}
template <class B>
Val<B> forward_with(B& b, AvgPool2d& m, Val<B> x) {
  return b.op(OpId::AvgPool2d, {x}, window_attrs("avg_pool2d", m));
}
Tensor MaxPool2d::forward(const Tensor& x) { return eager_forward(*this, x); }
Tensor AvgPool2d::forward(const Tensor& x) { return eager_forward(*this, x); }

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
          a.unsupported_if_true("ceil_mode");
          Shape k = a.pair("kernel_size");
          return std::make_shared<MaxPool2d>(k, a.is_none("stride") ? k : a.pair("stride"), a.pair("padding"), a.pair("dilation"));
        },
        {{"kernel_size", 2}}, t({2, 3, 6, 6})));
    r.push_back(layer_spec<AvgPool2d>(
        "AvgPool2d", {{"kernel_size"}, {"stride", IValue()}, {"padding", 0}, {"ceil_mode", false}, {"count_include_pad", true}},
        [](const LayerArgs& a) {
          a.unsupported_if_true("ceil_mode");
          if (!a.flag("count_include_pad")) a.fail("count_include_pad=False is not supported");
          Shape k = a.pair("kernel_size");
          return std::make_shared<AvgPool2d>(k, a.is_none("stride") ? k : a.pair("stride"), a.pair("padding"));
        },
        {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}}, t({2, 3, 7, 7})));
    return r;
  }();
  return all;
}

}  // namespace kiln::nn
