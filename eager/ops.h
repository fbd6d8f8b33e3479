#pragma once
// The eager API with PyTorch's names: free functions, operators, factories. Each primitive goes
// through dispatch(); composite ops (softmax, cross_entropy, layer_norm, ...) are written with them.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "eager/losses.h"

namespace kiln {

// ---- factories ----
struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}  // NOLINT: allows zeros({2}, DType::Int64)
  TensorOptions(Device dev) : device(dev) {}  // NOLINT: allows zeros({2}, Device::cuda())
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
};
Tensor empty(const Shape& shape, TensorOptions opt = {});
Tensor zeros(const Shape& shape, TensorOptions opt = {});
Tensor ones(const Shape& shape, TensorOptions opt = {});
Tensor full(const Shape& shape, Scalar value, TensorOptions opt = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
// arange(end), arange(start, end, step): int64 when all are integers, else float32 (as torch)
Tensor arange(Scalar end);
Tensor arange(Scalar start, Scalar end, Scalar step = 1);
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions opt);
Tensor linspace(double start, double end, int64_t steps, TensorOptions opt = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions opt = {});
void manual_seed(uint64_t seed);
// The default generator's state (torch.get_rng_state / set_rng_state): setting a saved state replays
// the same draws from there.
struct RngState {
  std::string engine;
};
RngState get_rng_state();
void set_rng_state(const RngState& state);
// Puts the generator's state back at the end of a scope, for runs that must not consume the stream
// (a trace or a compile's recording run of a function that draws random numbers).
class RestoreRngState {
 public:
  RestoreRngState() : saved_(get_rng_state()) {}
  ~RestoreRngState() { set_rng_state(saved_); }
  RestoreRngState(const RestoreRngState&) = delete;
  RestoreRngState& operator=(const RestoreRngState&) = delete;

 private:
  RngState saved_;
};
Tensor rand(const Shape& shape, TensorOptions opt = {});   // U[0, 1)
Tensor randn(const Shape& shape, TensorOptions opt = {});  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opt = DType::Int64);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
// Builds a tensor from values; the shape defaults to 1-D.
Tensor tensor(const std::vector<double>& values, const Shape& shape = {}, TensorOptions opt = {});
// tensor({1.5, 2.0}): a braced list is float32 unless opt says otherwise (integers: std::vector<int64_t>)
Tensor tensor(std::initializer_list<double> values, const Shape& shape = {}, TensorOptions opt = {});
Tensor tensor(const std::vector<float>& values, const Shape& shape = {}, TensorOptions opt = {});
Tensor tensor(const std::vector<int64_t>& values, const Shape& shape = {}, TensorOptions opt = DType::Int64);
Tensor tensor(const std::vector<int>& values, const Shape& shape = {}, TensorOptions opt = DType::Int64);
Tensor scalar_tensor(Scalar s, TensorOptions opt = {});

// ---- type promotion (torch.result_type rules: 0-d tensors and C++ scalars do not widen) ----
DType result_type(const Tensor& a, const Tensor& b);

// ---- elementwise ----
#define KILN_UNARY(Id, name, rule, expr) Tensor name(const Tensor& x);
#define KILN_BINARY(Id, name, rule, expr)     \
  Tensor name(const Tensor& a, const Tensor& b); \
  Tensor name(const Tensor& a, Scalar b);        \
  Tensor name(Scalar a, const Tensor& b);
#include "core/ops.def"
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor square(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor gelu(const Tensor& x, const std::string& approximate);  // "none" or "tanh"
Tensor remainder(const Tensor& a, const Tensor& b);     // Python's %: takes the divisor's sign

Tensor operator-(const Tensor& x);
Tensor operator!(const Tensor& x);
#define KILN_DECLARE_OPERATOR(sym)                      \
  Tensor operator sym(const Tensor& a, const Tensor& b); \
  Tensor operator sym(const Tensor& a, Scalar b);        \
  Tensor operator sym(Scalar a, const Tensor& b);
KILN_DECLARE_OPERATOR(+)
KILN_DECLARE_OPERATOR(-)
KILN_DECLARE_OPERATOR(*)
KILN_DECLARE_OPERATOR(/)
KILN_DECLARE_OPERATOR(==)
KILN_DECLARE_OPERATOR(!=)
KILN_DECLARE_OPERATOR(<)
KILN_DECLARE_OPERATOR(<=)
KILN_DECLARE_OPERATOR(>)
KILN_DECLARE_OPERATOR(>=)
#undef KILN_DECLARE_OPERATOR

// ---- reductions (dims empty = all dims) ----
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);

// ---- tensor ops (eager/composites_tensor_ops.h) ----
// value where mask (bool, broadcast to x's shape) is true; x's dtype
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);  // a 0-d value
// x[i0, i1, ...]: integer index tensors on x's dims first, first + 1, ..., broadcast together (torch's advanced
// indexing); x.shape[:first] + their shape + the dims after
Tensor index_tensors(const Tensor& x, int64_t first, const Tensors& indices);
// x[mask]: mask bool, shaped as x's leading dims; the selected elements (rows) in order, as one dim
Tensor masked_rows(const Tensor& x, const Tensor& mask);
// the lower / upper triangle of the last two dims (col - row <= diagonal / >= diagonal), the rest zero
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// stable sorts, NaN as the largest value; values and int64 indices
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
// the k largest (smallest) along dim, always in sorted order
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
// torch.median / kthvalue along dim: (values, int64 indices), the lower median, NaN propagating for median; a tie's
// index is the stable sort's. median(x): the lower median of all elements, its gradient shared by the ties
Tensor median(const Tensor& x);
std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);
// int64 indices drawn from the rows of a 1-D or 2-D tensor of weights, from kiln's generator (manual_seed)
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
Tensor repeat(const Tensor& x, const Shape& repeats);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});  // x @ weight.T + bias

// ---- shape ----
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor cat(const Tensors& xs, int64_t dim = 0);
Tensor stack(const Tensors& xs, int64_t dim = 0);
Tensors split(const Tensor& x, int64_t split_size, int64_t dim = 0);
Tensors split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
Tensors chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// zeros of `shape` with grad placed at x.slice(dim, start, end, step): the gradient of slice
Tensor slice_backward(const Tensor& grad, const Shape& shape, int64_t dim, int64_t start, int64_t end,
                      int64_t step);

// ---- nn functional ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// the loss functions: eager/losses.h
// A convolution's padding as torch takes it: ints (one for every spatial dim, or one each), or "same" (the
// output as long as the input: stride 1 only; an odd total puts the extra on the right / bottom, as torch) or
// "valid" (none).
struct ConvPadding {
  ConvPadding(std::initializer_list<int64_t> v) : ints(v) {}
  ConvPadding(Shape v) : ints(std::move(v)) {}  // NOLINT: implicit, as torch's int-or-tuple-or-str argument
  ConvPadding(int v) : ints{v} {}                // NOLINT
  ConvPadding(int64_t v) : ints{v} {}            // NOLINT
  ConvPadding(const char* s) : mode(s) {}        // NOLINT
  ConvPadding(std::string s) : mode(std::move(s)) {}  // NOLINT
  Shape ints;        // when mode is empty
  std::string mode;  // "same" or "valid" (anything else is refused by the convolution)
};
// padding_mode: "zeros", or F.pad's "reflect", "replicate", "circular" (the input padded, then no padding)
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1, 1},
              const ConvPadding& padding = {0, 0}, Shape dilation = {1, 1}, int64_t groups = 1,
              const std::string& padding_mode = "zeros");
// channel dropout over (N, C, *): whole feature maps kept (scaled by 1 / (1 - p)) or zeroed
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);
// (*, C r^2, H, W) <-> (*, C, H r, W r)
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
// F.interpolate of a 4-D (N, C, H, W) input, modes 'nearest' and 'bilinear'; size or scale_factor (one value
// standing for both dims), torch's defaults
Tensor interpolate(const Tensor& x, std::optional<Shape> size, std::optional<std::vector<double>> scale_factor = std::nullopt,
                   const std::string& mode = "nearest", std::optional<bool> align_corners = std::nullopt,
                   std::optional<bool> recompute_scale_factor = std::nullopt, bool antialias = false);
// (N, C, *): group_norm over C / num_groups channels and the trailing dims; instance_norm per (N, C) over the
// trailing dims, with running statistics as torch's F.instance_norm
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
// weight [in_channels, out_channels / groups, kh, kw] (torch's); one value stands for both dims
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1, 1},
                        Shape padding = {0, 0}, Shape output_padding = {0, 0}, int64_t groups = 1, Shape dilation = {1, 1});
// torch's arguments and defaults; stride empty means kernel_size, one value stands for both dims
Tensor max_pool2d(const Tensor& x, Shape kernel_size, Shape stride = {}, Shape padding = {0, 0},
                  Shape dilation = {1, 1}, bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Shape kernel_size, Shape stride = {},
                                                  Shape padding = {0, 0}, Shape dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, Shape kernel_size, Shape stride = {}, Shape padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt);
// F.embedding (the weight first): padding_idx (negative counts from the end) gets no gradient; max_norm
// renormalises the looked-up rows of the weight in place (norm_type-norm), as torch; scale_grad_by_freq divides
// each row's gradient by its index's count in the batch. sparse=True raises: kiln's gradients are dense.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt,
                 std::optional<double> max_norm = std::nullopt, double norm_type = 2.0, bool scale_grad_by_freq = false,
                 bool sparse = false);
// F.embedding_bag: mode 'sum' / 'mean' / 'max' over bags of a 2-D input's rows, or of a 1-D input cut at offsets
// (include_last_offset: offsets ends with the end of the last bag); per_sample_weights for 'sum'; padding_idx
// entries left out of their bags; empty bags give zeros
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets = {}, const std::string& mode = "mean",
                     const Tensor& per_sample_weights = {}, bool include_last_offset = false,
                     std::optional<int64_t> padding_idx = std::nullopt);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// training=true uses batch statistics and updates running_mean/var in place (momentum as torch)
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// F.scaled_dot_product_attention: (..., L, E), (..., S, E), (..., S, Ev) -> (..., L, Ev). A bool attn_mask is
// True where to attend, a float one is added; scale defaults to 1 / sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {},
                                    double dropout_p = 0.0, bool is_causal = false, std::optional<double> scale = std::nullopt);
// Activations (silu is an op row). torch's inplace=True is not offered: these always return a new tensor.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// F.prelu: weight holds one slope, or one per channel (x's dim 1)
Tensor prelu(const Tensor& x, const Tensor& weight);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor selu(const Tensor& x);
Tensor celu(const Tensor& x, double alpha = 1.0);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);  // x where beta * x > threshold
Tensor mish(const Tensor& x);
Tensor logsigmoid(const Tensor& x);
Tensor softsign(const Tensor& x);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
// (N, C, H, W) or (C, H, W) pooled to output_size: one entry for both dims or two, nullopt keeping that dim
// (torch's None); adaptive_avg_pool2d(x, {1}) is the global average
Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);
Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);

// ---- threads ----
void set_num_threads(int n);  // kernels and BLAS
int get_num_threads();

}  // namespace kiln
