#pragma once
// The layers of torch.nn that kiln has, with torch's parameter names and default initialisation. Most are
// registered (eager/nn/registry.h) in layers.cpp, which is what makes them scriptable.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eager/nn/module.h"
#include "eager/ops.h"

namespace kiln::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Linear"; }
  Tensor weight, bias;
};

class Conv2d : public Module {
 public:
  // padding: ints, "same" or "valid"; padding_mode: "zeros", "reflect", "replicate" or "circular" (eager/ops.h)
  Conv2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride = {1, 1},
         ConvPadding padding = {0, 0}, Shape dilation = {1, 1}, int64_t groups = 1, bool bias = true,
         std::string padding_mode = "zeros");
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Conv2d"; }
  Tensor weight, bias;
  Shape stride;
  ConvPadding padding;
  Shape dilation;
  int64_t groups;
  std::string padding_mode;
};

// torch's weight [in_channels, out_channels / groups, kh, kw] and bias [out_channels], initialised as torch's
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride = {1, 1},
                  Shape padding = {0, 0}, Shape output_padding = {0, 0}, int64_t groups = 1, bool bias = true,
                  Shape dilation = {1, 1});
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ConvTranspose2d"; }
  Tensor weight, bias;
  Shape stride, padding, output_padding, dilation;
  int64_t groups;
};

// Conv2d's arguments with one spatial dim: (N, C, L) inputs, weight (out, in / groups, kernel).
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, ConvPadding padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros");
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Conv1d"; }
  Tensor weight, bias;
  int64_t stride;
  ConvPadding padding;
  int64_t dilation, groups;
  std::string padding_mode;
};

// The pooling layers share their window arguments; stride empty means kernel_size (torch).
class Pool2d : public Module {
 public:
  explicit Pool2d(Shape kernel_size, Shape stride = {}, Shape padding = {0, 0})
      : kernel_size(std::move(kernel_size)), stride(std::move(stride)), padding(std::move(padding)) {}
  Shape kernel_size, stride, padding;
};

class MaxPool2d : public Pool2d {
 public:
  explicit MaxPool2d(Shape kernel_size, Shape stride = {}, Shape padding = {0, 0}, Shape dilation = {1, 1},
                     bool ceil_mode = false)
      : Pool2d(std::move(kernel_size), std::move(stride), std::move(padding)), dilation(std::move(dilation)),
        ceil_mode(ceil_mode) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "MaxPool2d"; }
  Shape dilation;
  bool ceil_mode;
};

class AvgPool2d : public Pool2d {
 public:
  explicit AvgPool2d(Shape kernel_size, Shape stride = {}, Shape padding = {0, 0}, bool ceil_mode = false,
                     bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt)
      : Pool2d(std::move(kernel_size), std::move(stride), std::move(padding)), ceil_mode(ceil_mode),
        count_include_pad(count_include_pad), divisor_override(divisor_override) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "AvgPool2d"; }
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;
};

#define KILN_ACTIVATION(Cls)                                        \
  class Cls : public Module {                                       \
   public:                                                          \
    Tensor forward(const Tensor& x) override;                       \
    std::string name() const override { return #Cls; }              \
  };
KILN_ACTIVATION(ReLU)
KILN_ACTIVATION(Tanh)
KILN_ACTIVATION(Sigmoid)
KILN_ACTIVATION(SELU)
KILN_ACTIVATION(Mish)
KILN_ACTIVATION(SiLU)
KILN_ACTIVATION(LogSigmoid)
KILN_ACTIVATION(Softsign)
KILN_ACTIVATION(ReLU6)
KILN_ACTIVATION(Hardsigmoid)
KILN_ACTIVATION(Hardswish)
#undef KILN_ACTIVATION

// torch's inplace=True is accepted by the registered constructors and ignored: the activations return a new
// tensor, which is the same values unless the caller reads the input again.
// the slopes are a parameter, `weight` [num_parameters], each `init`
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "PReLU"; }
  int64_t num_parameters;
  Tensor weight;
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LeakyReLU"; }
  double negative_slope;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha(alpha) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ELU"; }
  double alpha;
};

class CELU : public Module {
 public:
  explicit CELU(double alpha = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "CELU"; }
  double alpha;
};

class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0) : beta(beta), threshold(threshold) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Softplus"; }
  double beta, threshold;
};

class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Hardtanh"; }
  double min_val, max_val;
};

// output_size: one entry for both spatial dims or two; nullopt keeps the input's size (torch's None).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::vector<std::optional<int64_t>> output_size) : output_size(std::move(output_size)) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  std::vector<std::optional<int64_t>> output_size;
};

class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(std::vector<std::optional<int64_t>> output_size) : output_size(std::move(output_size)) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "AdaptiveMaxPool2d"; }
  std::vector<std::optional<int64_t>> output_size;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : approximate(std::move(approximate)) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "GELU"; }
  std::string approximate;
};

// softmax / log_softmax over `dim`, as modules (torch.nn.Softmax, torch.nn.LogSoftmax).
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Softmax"; }
  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LogSoftmax"; }
  int64_t dim;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Dropout"; }
  double p;
};

// Channel dropout: one draw per (sample, channel)
class Dropout2d : public Module {
 public:
  explicit Dropout2d(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Dropout2d"; }
  double p;
};

class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor) : upscale_factor(upscale_factor) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "PixelShuffle"; }
  int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor) : downscale_factor(downscale_factor) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "PixelUnshuffle"; }
  int64_t downscale_factor;
};

// F.interpolate as a layer: size or scale_factor (one value standing for both dims), modes 'nearest' and
// 'bilinear' of a 4-D input
class Upsample : public Module {
 public:
  Upsample(std::optional<Shape> size, std::optional<std::vector<double>> scale_factor, std::string mode = "nearest",
           std::optional<bool> align_corners = std::nullopt, std::optional<bool> recompute_scale_factor = std::nullopt)
      : size(std::move(size)), scale_factor(std::move(scale_factor)), mode(std::move(mode)), align_corners(align_corners),
        recompute_scale_factor(recompute_scale_factor) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Upsample"; }
  std::optional<Shape> size;
  std::optional<std::vector<double>> scale_factor;
  std::string mode;
  std::optional<bool> align_corners, recompute_scale_factor;
};

// torch's deprecated alias: Upsample with mode 'nearest'
class UpsamplingNearest2d : public Upsample {
 public:
  UpsamplingNearest2d(std::optional<Shape> size, std::optional<std::vector<double>> scale_factor)
      : Upsample(std::move(size), std::move(scale_factor), "nearest") {}
  std::string name() const override { return "UpsamplingNearest2d"; }
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Flatten"; }
  int64_t start_dim, end_dim;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LayerNorm"; }
  Shape normalized_shape;
  double eps;
  Tensor weight, bias;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "BatchNorm2d"; }
  double eps, momentum;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

// weight and bias [num_channels] when affine (ones and zeros, as torch)
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "GroupNorm"; }
  int64_t num_groups, num_channels;
  double eps;
  Tensor weight, bias;
};

// (N, C, H, W) or unbatched (C, H, W). torch's defaults: no affine parameters and no running statistics;
// with track_running_stats the buffers are BatchNorm's (running_mean, running_var, num_batches_tracked) and
// evaluation normalises with them.
class InstanceNorm2d : public Module {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "InstanceNorm2d"; }
  int64_t num_features;
  double eps, momentum;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

// BatchNorm2d's parameters and statistics over (N, C) or (N, C, L) inputs.
class BatchNorm1d : public BatchNorm2d {
 public:
  using BatchNorm2d::BatchNorm2d;
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "BatchNorm1d"; }
};

// padding_idx (negative counts from the end, as torch): that row starts at zero and gets no gradient.
class Embedding : public Module {
 public:
  // max_norm: the looked-up rows with a larger norm_type-norm are renormalised in the weight, in place, as torch;
  // scale_grad_by_freq: a row's gradient divided by its index's count in the batch
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            std::optional<double> max_norm = std::nullopt, double norm_type = 2.0, bool scale_grad_by_freq = false);
  Tensor forward(const Tensor& indices) override;
  std::string name() const override { return "Embedding"; }
  Tensor weight;
  std::optional<int64_t> padding_idx;  // in [0, num_embeddings)
  std::optional<double> max_norm;
  double norm_type;
  bool scale_grad_by_freq;
};

// torch's EmbeddingBag: weight [num_embeddings, embedding_dim] ~ N(0, 1) (the padding row zeroed); forward reduces
// the rows of each bag (eager/ops.h embedding_bag)
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, std::string mode = "mean", bool include_last_offset = false,
               std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights = {});
  std::string name() const override { return "EmbeddingBag"; }
  Tensor weight;
  std::string mode;
  bool include_last_offset;
  std::optional<int64_t> padding_idx;  // in [0, num_embeddings)
};

// torch.nn.Identity: its constructor takes any arguments and ignores them.
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Identity"; }
};

// Children named "0", "1", ... as torch.nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  Sequential& add(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }
  size_t size() const { return layers_.size(); }
  Module& operator[](size_t i) { return *layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// torch.nn.ModuleList: children named "0", "1", ... in the order appended; indexing takes torch's negative
// indices. It has no forward: calling it raises torch's error, as the modules are called one by one.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules);
  ModuleList& append(std::shared_ptr<Module> m);
  void push_back(std::shared_ptr<Module> m) { append(std::move(m)); }
  ModuleList& extend(const std::vector<std::shared_ptr<Module>>& modules);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ModuleList"; }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  Module& operator[](int64_t i) const { return *ptr(i); }
  std::shared_ptr<Module> ptr(int64_t i) const;
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace kiln::nn
