#pragma once
// The composites of torch.nn.functional and friends, each written once over a builder (eager/builder.h):
// eager runs them with EagerBuilder, the script frontend lowers them with its GraphBuilder, so a scripted
// softmax is eager's softmax, op for op (the max detached, autocast's policy row applied).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"
#include "eager/builder.h"
#include "eager/ops.h"

namespace kiln::composite {

template <class B>
using Val = typename B::V;

inline bool present(const Tensor& t) { return t.defined(); }
inline bool present(const ir::Value* v) { return v != nullptr; }

inline Attrs keep_dims(const Shape& dims) { return Attrs().set("dims", dims).set("keepdim", true); }

// mean over dims (keepdim): the sum divided by `count`, the number of elements summed. Half types sum in
// float32 and round once, as eager's mean, when the builder knows the dtype.
template <class B>
Val<B> mean_keep(B& b, Val<B> x, const Shape& dims, Val<B> count) {
  std::optional<DType> dt = b.dtype(x);
  if (dt && (*dt == DType::BFloat16 || *dt == DType::Float16)) {
    Val<B> wide = b.op(OpId::Cast, {x}, Attrs().set("dtype", DType::Float32));
    Val<B> m = b.op(OpId::Div, {b.op(OpId::Sum, {wide}, keep_dims(dims)), count});
    return b.op(OpId::Cast, {m}, Attrs().set("dtype", *dt));
  }
  return b.op(OpId::Div, {b.op(OpId::Sum, {x}, keep_dims(dims)), count});
}

// Subtracting the max keeps exp from overflowing; the result is unchanged mathematically, and so is the
// gradient, whose path through the max sums to zero: the max is detached, so backward does not spend a
// comparison, a count and four elementwise ops on rounding noise (torch's formula, too).
template <class B>
Val<B> softmax_impl(B& b, Val<B> x_in, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  Val<B> x = b.autocast(name, {x_in})[0];
  if (b.rank(x) == std::optional<int64_t>(0)) {
    Val<B> y = softmax_impl(b, b.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{1})), dim, log);
    return b.op(OpId::Reshape, {y}, Attrs().set("shape", Shape{}));
  }
  Attrs keep = keep_dims({b.dim(name, dim, x)});
  Val<B> shifted = b.op(OpId::Sub, {x, b.op(OpId::Amax, {b.detach(x)}, keep)});
  if (log) return b.op(OpId::Sub, {shifted, b.op(OpId::Log, {b.op(OpId::Sum, {b.op(OpId::Exp, {shifted})}, keep)})});
  Val<B> e = b.op(OpId::Exp, {shifted});
  return b.op(OpId::Div, {e, b.op(OpId::Sum, {e}, keep)});
}

template <class B>
Val<B> softmax(B& b, Val<B> x, int64_t dim) {
  return softmax_impl(b, x, dim, false);
}

template <class B>
Val<B> log_softmax(B& b, Val<B> x, int64_t dim) {
  return softmax_impl(b, x, dim, true);
}

template <class B>
Val<B> layer_norm(B& b, Val<B> x_in, const Shape& normalized_shape, Val<B> weight_in, Val<B> bias_in, double eps) {
  std::vector<Val<B>> cast = b.autocast("layer_norm", {x_in, weight_in, bias_in});
  Val<B> x = cast[0], weight = cast[1], bias = cast[2];
  const Shape& ns = normalized_shape;
  int64_t k = int64_t(ns.size());
  if (k == 0) b.fail("layer_norm: normalized_shape must have at least one element, got []");
  b.check_shape(x, ns, true, [&](const std::optional<Shape>& s) {
    return fmt::format("layer_norm: normalized_shape {} does not match the trailing dims of {}", shape_str(ns),
                       s ? "input shape " + shape_str(*s) : std::string("the input"));
  });
  const char* names[] = {"weight", "bias"};
  Val<B> params[] = {weight, bias};
  for (int i = 0; i < 2; ++i)
    if (present(params[i]))
      b.check_shape(params[i], ns, false, [&](const std::optional<Shape>& s) {
        return fmt::format("layer_norm: {}{} must have normalized_shape {}", names[i],
                           s ? " of shape " + shape_str(*s) : std::string(), shape_str(ns));
      });
  Shape dims;
  for (int64_t i = -k; i < 0; ++i) dims.push_back(b.dim("layer_norm", i, x));
  int64_t n = 1;  // the trailing dims are normalized_shape (checked above)
  for (int64_t s : ns) n *= s;
  Val<B> xc = b.op(OpId::Sub, {x, mean_keep(b, x, dims, b.scalar(double(n)))});
  Val<B> var = mean_keep(b, b.op(OpId::Mul, {xc, xc}), dims, b.scalar(double(n)));  // biased, as torch normalises
  Val<B> y = b.op(OpId::Mul, {xc, b.op(OpId::Rsqrt, {b.op(OpId::Add, {var, b.scalar(eps)})})});
  if (present(weight)) y = b.op(OpId::Mul, {y, weight});
  if (present(bias)) y = b.op(OpId::Add, {y, bias});
  return y;
}

// The bias is cast with the rest, so the add stays in the lower precision (torch's linear is one op).
template <class B>
Val<B> linear(B& b, Val<B> x_in, Val<B> weight_in, Val<B> bias_in) {
  std::vector<Val<B>> cast = b.autocast("linear", {x_in, weight_in, bias_in});
  Val<B> x = cast[0], weight = cast[1], bias = cast[2];
  std::optional<int64_t> r = b.rank(weight);
  if (r && *r != 1 && *r != 2) {
    std::optional<Shape> s = b.shape(weight);
    b.fail(fmt::format("linear: weight must be 1-D or 2-D, got {}", s ? "shape " + shape_str(*s) : fmt::format("{}-D", *r)));
  }
  Val<B> wt = r == std::optional<int64_t>(1) ? weight : b.op(OpId::Permute, {weight}, Attrs().set("dims", Shape{1, 0}));
  Val<B> y = b.op(OpId::Matmul, {x, wt});
  return present(bias) ? b.op(OpId::Add, {y, bias}) : y;
}

// Inverted dropout: kept elements scaled by 1/(1-p). The mask is drawn by rand_like, so a traced, scripted
// or compiled graph draws a new one at each run. Dropped elements are x * 0, so NaN stays NaN as in torch's
// mask multiply; p == 1 drops everything the same way.
template <class B>
Val<B> dropout(B& b, Val<B> x, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0)) b.fail(fmt::format("dropout: probability has to be between 0 and 1, but got {}", p));
  if (!training || p == 0.0) return x;
  if (p == 1.0) return b.op(OpId::Mul, {x, b.scalar(0.0)});
  Val<B> keep = b.op(OpId::Lt, {b.rand_like(x), b.scalar(1.0 - p)});
  return b.op(OpId::Where, {keep, b.op(OpId::Mul, {x, b.scalar(1.0 / (1.0 - p))}), b.op(OpId::Mul, {x, b.scalar(0.0)})});
}

// Channel dropout (torch's feature_dropout, F.dropout2d): one draw per (sample, channel) of an (N, C, *)
// input keeps the whole feature map (scaled by 1 / (1 - p)) or zeroes it. The mask is (N, C, 1) against the
// (N, C, S) view, sizes read when the graph runs; a new one is drawn at each run.
template <class B>
Val<B> dropout2d(B& b, Val<B> x, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0)) b.fail(fmt::format("dropout2d: dropout probability has to be between 0 and 1, but got {}", p));
  if (std::optional<int64_t> r = b.rank(x); r && *r < 2)
    b.fail(fmt::format("dropout2d: expected an input with at least 2 dims (N, C, *), got {}-D", *r));
  if (!training || p == 0.0) return x;
  Val<B> x3 = b.flatten(b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", int64_t(-1))), 2, -1);
  if (p == 1.0) return b.reshape_like(b.op(OpId::Mul, {x3, b.scalar(0.0)}), x, {});
  Val<B> per_channel = b.op(OpId::Slice, {x3}, Attrs().set("dim", int64_t(2)).set("start", int64_t(0)).set("end", int64_t(1)));
  Val<B> keep = b.op(OpId::Lt, {b.rand_like(per_channel), b.scalar(1.0 - p)});
  Val<B> y = b.op(OpId::Where, {keep, b.op(OpId::Mul, {x3, b.scalar(1.0 / (1.0 - p))}), b.op(OpId::Mul, {x3, b.scalar(0.0)})});
  return b.reshape_like(y, x, {});
}

// pixel_shuffle: (*, C r^2, H, W) -> (*, C, H r, W r); the inverse, pixel_unshuffle, back. Over (N, C', H', W')
// (leading dims as one where the rank is known now; a script graph of unknown rank takes 4-D, checked when
// it runs), with the unknown sizes as -1 and the rest read from the input when the graph runs.
template <class B>
Val<B> pixel_shuffle_impl(B& b, Val<B> x, int64_t r, bool inverse) {
  const char* name = inverse ? "pixel_unshuffle" : "pixel_shuffle";
  const char* factor = inverse ? "downscale_factor" : "upscale_factor";
  if (r <= 0) b.fail(fmt::format("{}: expected {} to be positive, but got {}", name, factor, r));
  std::optional<Shape> xs = b.shape(x);
  if (xs) {
    if (xs->size() < 3)
      b.fail(fmt::format("{}: {} expects input to have at least 3 dimensions, but got input with {} dimension(s)", name, name,
                         xs->size()));
    const int64_t c = (*xs)[xs->size() - 3], h = (*xs)[xs->size() - 2], w = (*xs)[xs->size() - 1];
    if (!inverse && c % (r * r) != 0)
      b.fail(fmt::format("pixel_shuffle: pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                         "of upscale_factor, but input.size(-3)={} is not divisible by {}", c, r * r));
    if (inverse && h % r != 0)
      b.fail(fmt::format("pixel_unshuffle: pixel_unshuffle expects height to be divisible by downscale_factor, but "
                         "input.size(-2)={} is not divisible by {}", h, r));
    if (inverse && w % r != 0)
      b.fail(fmt::format("pixel_unshuffle: pixel_unshuffle expects width to be divisible by downscale_factor, but "
                         "input.size(-1)={} is not divisible by {}", w, r));
    if (xs->size() != 4) {
      Shape lead(xs->begin(), xs->end() - 3), out = lead;
      Shape tail = inverse ? Shape{c * r * r, h / r, w / r} : Shape{c / (r * r), h * r, w * r};
      out.insert(out.end(), tail.begin(), tail.end());
      Val<B> x4 = b.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1, c, h, w}));
      return b.op(OpId::Reshape, {pixel_shuffle_impl(b, x4, r, inverse)}, Attrs().set("shape", out));
    }
  } else {
    b.check_rank(x, {4}, [name](const std::optional<Shape>& s) {
      return fmt::format("{}: a script graph takes a 4-D (N, C, H, W) input, got {}", name, s ? "shape " + shape_str(*s) : "another rank");
    });
  }
  auto at = [&](Val<B> v, int64_t d) { return b.op(OpId::Select, {v}, Attrs().set("dim", d).set("index", int64_t(0))); };
  auto perm = [&](Val<B> v, Shape dims) { return b.op(OpId::Permute, {v}, Attrs().set("dims", std::move(dims))); };
  if (!inverse) {
    Val<B> xp = perm(x, {0, 2, 3, 1});                                       // (N, H, W, C r^2)
    Val<B> t = b.reshape_like(xp, at(xp, 3), {-1, r, r});                    // (N, H, W, C, r, r)
    Val<B> y = perm(t, {0, 3, 1, 4, 2, 5});                                  // (N, C, H, r, W, r)
    return b.flatten(b.flatten(y, 4, 5), 2, 3);
  }
  Val<B> rows = b.op(OpId::Slice, {x}, Attrs().set("dim", int64_t(2)).set("start", int64_t(0)).set("step", r));  // (N, C, H, W r)
  Val<B> t = b.reshape_like(x, at(rows, 3), {r, -1, r});                    // (N, C, H, r, W, r)
  return b.flatten(perm(t, {0, 1, 3, 5, 2, 4}), 1, 3);                     // (N, C r^2, H, W)
}

template <class B>
Val<B> pixel_shuffle(B& b, Val<B> x, int64_t upscale_factor) {
  return pixel_shuffle_impl(b, x, upscale_factor, false);
}

template <class B>
Val<B> pixel_unshuffle(B& b, Val<B> x, int64_t downscale_factor) {
  return pixel_shuffle_impl(b, x, downscale_factor, true);
}

// F.pad over the last len(pad) / 2 dims (pad = (left, right) of the last dim, then of the one before, ...):
// 'constant' cats blocks of `value` (a negative pad slices), 'reflect' and 'replicate' cat the mirrored or
// edge slices, one per padded position, 'circular' the slices from the other end (at most the dim's size).
// Its gradients are slice's and cat's: a reflected or repeated position adds its gradient to the one it copies.
template <class B>
Val<B> pad(B& b, Val<B> x, const Shape& pads, const std::string& mode, double value) {
  if (pads.size() % 2 != 0) b.fail(fmt::format("pad: padding length must be divisible by 2, got {}", pads.size()));
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    b.fail(fmt::format("pad: mode '{}' is not supported (kiln has 'constant', 'reflect', 'replicate' and 'circular')", mode));
  const int64_t k = int64_t(pads.size()) / 2;
  if (std::optional<int64_t> r = b.rank(x); r && k > *r)
    b.fail(fmt::format("pad: padding length too large: {} values for a {}-D input", pads.size(), *r));
  std::optional<Shape> s = b.shape(x);
  auto slice = [&](Val<B> v, int64_t d, int64_t start, std::optional<int64_t> end) {
    Attrs a = Attrs().set("dim", d).set("start", start).set("step", int64_t(1));
    if (end) a.set("end", *end);
    return b.op(OpId::Slice, {v}, a);
  };
  Val<B> y = x;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = -1 - i, lo = pads[size_t(2 * i)], hi = pads[size_t(2 * i + 1)];
    if (s) {
      const int64_t n = (*s)[s->size() - 1 - size_t(i)];
      if (mode == "reflect" && (lo >= n || hi >= n))
        b.fail(fmt::format("pad: padding size should be less than the corresponding input dimension, but got: padding ({}, {}) at dimension {} of input {}",
                           lo, hi, s->size() - 1 - size_t(i), shape_str(*s)));
      if (mode == "replicate" && n == 0 && (lo > 0 || hi > 0)) b.fail("pad: replicate padding of an empty dim");
      if (mode == "circular" && (lo > n || hi > n))
        b.fail(fmt::format("pad: circular padding ({}, {}) at dimension {} of input {} wraps around more than once", lo, hi,
                           s->size() - 1 - size_t(i), shape_str(*s)));
    }
    if (lo < 0) y = slice(y, d, -lo, std::nullopt);
    if (hi < 0) y = slice(y, d, 0, hi);
    std::vector<Val<B>> parts;
    if (mode == "circular") {  // the last lo positions, the input, the first hi
      if (lo > 0) parts.push_back(slice(y, d, -lo, std::nullopt));
      parts.push_back(y);
      if (hi > 0) parts.push_back(slice(y, d, 0, hi));
      if (parts.size() > 1) y = b.op(OpId::Cat, parts, Attrs().set("dim", d));
      continue;
    }
    auto edge = [&](bool left, int64_t j) -> Val<B> {  // the j-th slice outward from the edge, j >= 1
      if (mode == "constant") {
        Val<B> one = slice(y, d, 0, 1);
        return b.op(OpId::Where, {b.scalar(true), b.scalar(value), one});
      }
      if (mode == "replicate") return left ? slice(y, d, 0, 1) : slice(y, d, -1, std::nullopt);
      return left ? slice(y, d, j, j + 1) : slice(y, d, -1 - j, -j);
    };
    for (int64_t j = std::max<int64_t>(lo, 0); j >= 1; --j) parts.push_back(edge(true, j));
    parts.push_back(y);
    for (int64_t j = 1; j <= std::max<int64_t>(hi, 0); ++j) parts.push_back(edge(false, j));
    if (parts.size() > 1) y = b.op(OpId::Cat, parts, Attrs().set("dim", d));
  }
  return y;
}

// torch's padding='same' of one spatial dim, (left / top, right / bottom): dilation * (kernel - 1) in all, half on the
// left and the rest (one more when odd) on the right. Int is int64_t, or a number read when a script graph runs (a
// function's weight has no shape before), which needs `-` and `*` by an int64_t, `/` by 2 (floor) and `-` of two.
template <class Int>
std::pair<Int, Int> same_padding(Int kernel, int64_t dilation) {
  Int total = (kernel - int64_t(1)) * dilation;
  Int left = total / int64_t(2);
  return {left, total - left};
}

// A convolution's padding (eager/ops.h ConvPadding) as F.pad's amounts over its spatial dims, last dim first:
// ints pad both sides alike, 'valid' not at all, 'same' as same_padding, as torch. `fail` raises torch's argument
// errors.
template <class Fail>
Shape conv_pad_amounts(Fail&& fail, const char* op, const ConvPadding& padding, const std::string& padding_mode,
                       const Shape& kernel, const Shape& stride, const Shape& dilation) {
  if (padding_mode != "zeros" && padding_mode != "reflect" && padding_mode != "replicate" && padding_mode != "circular")
    fail(fmt::format("{}: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', but got padding_mode='{}'",
                     op, padding_mode));
  const size_t k = kernel.size();
  Shape pads(2 * k, 0);
  if (padding.mode.empty()) {
    if (padding.ints.size() != 1 && padding.ints.size() != k)
      fail(fmt::format("{}: padding must have 1 or {} elements, got {}", op, k, shape_str(padding.ints)));
    for (size_t i = 0; i < k; ++i) {
      int64_t p = padding.ints[padding.ints.size() == 1 ? 0 : k - 1 - i];
      if (p < 0) fail(fmt::format("{}: padding must be non-negative, got {}", op, shape_str(padding.ints)));
      pads[2 * i] = pads[2 * i + 1] = p;
    }
    return pads;
  }
  if (padding.mode == "valid") return pads;
  if (padding.mode != "same")
    fail(fmt::format("{}: invalid padding string '{}', should be one of 'valid', 'same'", op, padding.mode));
  for (size_t i = 0; i < k; ++i) {
    if (stride[i] != 1)
      fail(fmt::format("{}: padding='same' is not supported for strided convolutions, got stride {}", op, shape_str(stride)));
    std::tie(pads[2 * i], pads[2 * i + 1]) = same_padding(kernel[k - 1 - i], dilation[k - 1 - i]);
  }
  return pads;
}

// conv2d with torch's padding forms. Symmetric zero padding is the row's own; the rest pads the input first with
// F.pad's composite: the extra right / bottom zeros of an odd 'same', or every side for another padding_mode (torch
// pads with F.pad then convolves with none). 'same' takes the kernel size (kh, kw) a layer knows, or reads it from
// the weight's shape (a script graph knows it only for a layer's weight).
template <class B>
Val<B> conv2d_as(B& b, const char* op, Val<B> x_in, Val<B> weight_in, Val<B> bias_in, const Shape& stride,
                 const ConvPadding& padding, const Shape& dilation, int64_t groups, const std::string& padding_mode,
                 std::optional<Shape> kernel_size) {
  std::vector<Val<B>> cast = b.autocast("conv2d", {x_in, weight_in, bias_in});
  auto pair = [&](const char* what, const Shape& v) -> Shape {  // one value stands for both dims (torch's _pair)
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() != 2) b.fail(fmt::format("{}: {} must have 1 or 2 elements, got {}", op, what, shape_str(v)));
    return v;
  };
  Shape s = pair("stride", stride), d = pair("dilation", dilation), kernel{1, 1};
  if (padding.mode == "same" && kernel_size) {
    kernel = *kernel_size;
  } else if (padding.mode == "same") {
    std::optional<Shape> ws = b.shape(weight_in);
    if (!ws) b.fail(fmt::format("{}: padding='same' needs the weight's shape when the graph is built", op));
    if (ws->size() != 4) b.fail(fmt::format("{}: expected a 4D weight, got shape {}", op, shape_str(*ws)));
    kernel = {(*ws)[2], (*ws)[3]};
  }
  Shape pads = conv_pad_amounts([&](const std::string& m) { b.fail(m); }, op, padding, padding_mode, kernel, s, d);
  Val<B> x = cast[0];
  Shape conv_pad{0, 0};
  if (padding_mode == "zeros") {
    conv_pad = {pads[2], pads[0]};
    Shape extra{0, pads[1] - pads[0], 0, pads[3] - pads[2]};
    if (extra[1] || extra[3]) x = pad(b, x, extra, "constant", 0.0);
  } else if (std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v != 0; })) {
    x = pad(b, x, pads, padding_mode, 0.0);
  }
  Attrs a = Attrs().set("stride", s).set("padding", conv_pad).set("dilation", d).set("groups", groups);
  if (present(cast[2])) return b.op(OpId::Conv2d, {x, cast[1], cast[2]}, a);
  return b.op(OpId::Conv2d, {x, cast[1]}, a);
}

template <class B>
Val<B> conv2d(B& b, Val<B> x, Val<B> weight, Val<B> bias, const Shape& stride, const ConvPadding& padding,
              const Shape& dilation, int64_t groups, const std::string& padding_mode = "zeros",
              std::optional<Shape> kernel_size = std::nullopt) {
  return conv2d_as(b, "conv2d", x, weight, bias, stride, padding, dilation, groups, padding_mode, std::move(kernel_size));
}

// ---- pooling windows ----
// A max_pool2d / avg_pool2d row's attrs from torch's arguments: one value stands for both dims (torch's
// _pair), no stride means the kernel. Flags at their defaults are left out, so graphs print as before.
template <class B>
Attrs pool2d_attrs(B& b, const char* op, const Shape& kernel_size, const Shape& stride, const Shape& padding, bool ceil_mode) {
  auto pair = [&](const char* what, const Shape& v) -> Shape {
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() != 2) b.fail(fmt::format("{}: {} must have 1 or 2 elements, got {}", op, what, shape_str(v)));
    return v;
  };
  Shape k = pair("kernel_size", kernel_size);
  Attrs a = Attrs().set("kernel_size", k).set("stride", stride.empty() ? k : pair("stride", stride)).set("padding", pair("padding", padding));
  if (ceil_mode) a.set("ceil_mode", true);
  return a;
}

template <class B>
Attrs max_pool2d_attrs(B& b, const Shape& kernel_size, const Shape& stride, const Shape& padding, const Shape& dilation,
                       bool ceil_mode) {
  Attrs a = pool2d_attrs(b, "max_pool2d", kernel_size, stride, padding, ceil_mode);
  if (dilation.size() != 1 && dilation.size() != 2)
    b.fail(fmt::format("max_pool2d: dilation must have 1 or 2 elements, got {}", shape_str(dilation)));
  return a.set("dilation", dilation.size() == 1 ? Shape{dilation[0], dilation[0]} : dilation);
}

template <class B>
Val<B> max_pool2d(B& b, Val<B> x, const Shape& kernel_size, const Shape& stride, const Shape& padding, const Shape& dilation,
                  bool ceil_mode) {
  return b.op(OpId::MaxPool2d, {x}, max_pool2d_attrs(b, kernel_size, stride, padding, dilation, ceil_mode));
}

template <class B>
Val<B> avg_pool2d(B& b, Val<B> x, const Shape& kernel_size, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  Attrs a = pool2d_attrs(b, "avg_pool2d", kernel_size, stride, padding, ceil_mode);
  if (!count_include_pad) a.set("count_include_pad", false);
  if (divisor_override) {
    if (*divisor_override == 0) b.fail("avg_pool2d: divisor must be not zero");
    a.set("divisor_override", *divisor_override);
  }
  return b.op(OpId::AvgPool2d, {x}, a);
}

// conv2d over a height of 1. A graph whose input rank is unknown when lowering takes the batched form.
template <class B>
Val<B> conv1d(B& b, Val<B> x, Val<B> weight, Val<B> bias, int64_t stride, const ConvPadding& padding, int64_t dilation,
              int64_t groups, const std::string& padding_mode = "zeros", std::optional<int64_t> kernel_size = std::nullopt) {
  std::optional<int64_t> r = b.rank(x);
  b.check_rank(x, r ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{3}, [&](const std::optional<Shape>& s) {
    return s ? fmt::format("conv1d: expected a 2D (unbatched) or 3D (batched) input, got shape {}", shape_str(*s))
             : std::string("conv1d: expected a 3D (batched) input");
  });
  b.check_rank(weight, {3}, [&](const std::optional<Shape>& s) {
    return fmt::format("conv1d: expected a 3D weight (out_channels, in_channels / groups, kernel){}",
                       s ? ", got shape " + shape_str(*s) : std::string());
  });
  if (padding.mode.empty() && padding.ints.size() != 1)
    b.fail(fmt::format("conv1d: padding must be an int or a 1-tuple, got {}", shape_str(padding.ints)));
  ConvPadding p2 = padding.mode.empty() ? ConvPadding(Shape{0, padding.ints[0]}) : padding;
  bool batched = !r || *r == 3;
  auto unsqueeze = [&](Val<B> v, int64_t d) { return b.op(OpId::Unsqueeze, {v}, Attrs().set("dim", d)); };
  Val<B> x4 = unsqueeze(batched ? x : unsqueeze(x, 0), 2);
  Val<B> y = conv2d_as(b, "conv1d", x4, unsqueeze(weight, 2), bias, {1, stride}, p2, {1, dilation}, groups, padding_mode,
                         kernel_size ? std::optional<Shape>(Shape{1, *kernel_size}) : std::nullopt);
  y = b.op(OpId::Squeeze, {y}, Attrs().set("dims", Shape{2}));
  return batched ? y : b.op(OpId::Squeeze, {y}, Attrs().set("dims", Shape{0}));
}

// ---- transposed convolution ----
// conv2d's input gradient is a transposed convolution, and its weight layout [in, out / groups, kh, kw] is
// torch's ConvTranspose2d weight, so the forward is that row (oneDNN's backward-data primitive where it
// applies); with no "shape" attr the row works the output size out from its input, as torch:
// (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1. Its gradients are then conv2d
// (input) and conv2d's weight gradient. Autocast: conv2d's row (torch lists conv_transpose2d with it).
template <class B>
Val<B> conv_transpose2d(B& b, Val<B> x_in, Val<B> weight_in, Val<B> bias_in, const Shape& stride, const Shape& padding,
                        const Shape& output_padding, int64_t groups, const Shape& dilation) {
  std::vector<Val<B>> cast = b.autocast("conv2d", {x_in, weight_in, bias_in});
  Val<B> x = cast[0], weight = cast[1], bias = cast[2];
  auto pair = [&](const char* what, const Shape& v) -> Shape {
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() != 2)
      b.fail(fmt::format("conv_transpose2d: expected {} to be a single integer value or a list of 2 values to match the "
                         "convolution dimensions, but got {}={}", what, what, shape_str(v)));
    return v;
  };
  Shape s = pair("stride", stride), p = pair("padding", padding), op = pair("output_padding", output_padding),
        d = pair("dilation", dilation);
  if (s[0] <= 0 || s[1] <= 0) b.fail("conv_transpose2d: non-positive stride is not supported");
  if (d[0] <= 0 || d[1] <= 0) b.fail("conv_transpose2d: dilation should be greater than zero");
  if (p[0] < 0 || p[1] < 0) b.fail("conv_transpose2d: negative padding is not supported");
  if (op[0] < 0 || op[1] < 0) b.fail("conv_transpose2d: negative output_padding is not supported");
  if (groups <= 0) b.fail("conv_transpose2d: non-positive groups is not supported");
  for (int i = 0; i < 2; ++i)
    if (op[size_t(i)] >= s[size_t(i)] && op[size_t(i)] >= d[size_t(i)])
      b.fail(fmt::format("conv_transpose2d: output padding must be smaller than either stride or dilation, but got "
                         "output_padding_height: {} output_padding_width: {} stride_height: {} stride_width: {} "
                         "dilation_height: {} dilation_width: {}", op[0], op[1], s[0], s[1], d[0], d[1]));
  // output_padding at or past the stride (below the dilation, which torch allows) asks for rows past those a
  // convolution over the output maps back onto the input's, which the row cannot make: then the row makes
  // the whole uncropped output (no padding) and `pad` crops `padding` from its start and slices or
  // zero-pads its end to torch's size, before the bias as in torch
  const bool uncropped = op[0] >= s[0] || op[1] >= s[1];
  // checked now where the shapes are known; in a script graph the row checks them as it runs (no branch
  // in the graph, so its backward compiles whole)
  std::optional<Shape> xs = b.shape(x), ws = b.shape(weight);
  if (xs && xs->size() != 3 && xs->size() != 4)
    b.fail("conv_transpose2d: Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input of size: " +
           shape_str(*xs));
  if (ws && ws->size() != 4)
    b.fail("conv_transpose2d: expected a 4-D weight [in_channels,out_channels/groups,kh,kw], got shape " + shape_str(*ws));
  if (xs && ws) {
    int64_t c = (*xs)[xs->size() - 3];
    if ((*ws)[0] % groups != 0 || c != (*ws)[0])
      b.fail(fmt::format("conv_transpose2d: Given transposed=1, weight of size {}, expected input{} to have {} channels, but "
                         "got {} channels instead", shape_str(*ws), shape_str(*xs), (*ws)[0], c));
  }
  if (present(bias) && ws)
    b.check_shape(bias, {(*ws)[1] * groups}, false, [&](const std::optional<Shape>& sh) {
      return fmt::format("conv_transpose2d: Given transposed=1, weight of size {}, expected bias to be 1-dimensional with {} "
                         "elements, but got bias of size {} instead", shape_str(*ws), (*ws)[1] * groups, sh ? shape_str(*sh) : "?");
    });
  Attrs a = Attrs().set("stride", s).set("padding", p).set("dilation", d).set("groups", groups);
  if (uncropped) a.set("padding", Shape{0, 0});
  else if (op[0] || op[1]) a.set("output_padding", op);
  Val<B> y = b.op(OpId::Conv2dBackwardInput, {x, weight}, a);
  if (uncropped) y = pad(b, y, {-p[1], op[1] - p[1], -p[0], op[0] - p[0]}, "constant", 0.0);
  if (!present(bias)) return y;
  return b.op(OpId::Add, {y, b.op(OpId::Reshape, {bias}, Attrs().set("shape", Shape{-1, 1, 1}))});
}

// ---- group and instance normalisation ----
// (N, C, *) normalised over each group of C / num_groups channels and the trailing dims (biased variance,
// as torch), then scaled and shifted per channel. The input is viewed as (N, C, S) and grouped as (N, G, -1),
// its sizes read from the input when the graph runs (a script graph knows neither N nor the rank when
// lowering). `channels` (nn.GroupNorm's num_channels) stands for C where the input's shape is not known now.
template <class B>
Val<B> group_norm(B& b, Val<B> x_in, int64_t num_groups, Val<B> weight_in, Val<B> bias_in, double eps,
                  std::optional<int64_t> channels = std::nullopt) {
  std::vector<Val<B>> cast = b.autocast("group_norm", {x_in, weight_in, bias_in});
  Val<B> x = cast[0], weight = cast[1], bias = cast[2];
  std::optional<Shape> xs = b.shape(x);
  if (xs && xs->size() < 2)
    b.fail(fmt::format("group_norm: expected at least 2 dims (N, C, *), got input of shape {}", shape_str(*xs)));
  if (num_groups <= 0) b.fail(fmt::format("group_norm: num_groups must be positive, got {}", num_groups));
  std::optional<int64_t> C = xs ? std::optional<int64_t>((*xs)[1]) : channels;
  auto input_str = [&] { return xs ? shape_str(*xs) : fmt::format("[N,{},...]", *C); };
  if (C && *C % num_groups != 0)
    b.fail(fmt::format("group_norm: Expected number of channels in input to be divisible by num_groups, but got input of "
                       "shape {} and num_groups={}", input_str(), num_groups));
  const char* names[] = {"weight", "bias"};
  Val<B> params[] = {weight, bias};
  for (int i = 0; i < 2; ++i)
    if (present(params[i]) && C)
      b.check_shape(params[i], {*C}, false, [&](const std::optional<Shape>& s) {
        return fmt::format("group_norm: Expected {} to be a vector of size equal to the number of channels in input, but "
                           "got {} of shape {} and input of shape {}", names[i], names[i], s ? shape_str(*s) : "?", input_str());
      });
  Val<B> x3 = b.flatten(b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", int64_t(-1))), 2, -1);  // (N, C, S)
  auto first = [&](Val<B> v, int64_t d) { return b.op(OpId::Select, {v}, Attrs().set("dim", d).set("index", int64_t(0))); };
  Val<B> n_like = first(first(x3, 2), 1);  // (N)
  Val<B> g = b.reshape_like(x3, n_like, {num_groups, -1});
  Val<B> count = b.count(g, {2}, 0, [&](const std::optional<Shape>& s) {
    return fmt::format("group_norm: expected a non-empty group, got input of shape {}", s ? shape_str(*s) : "?");
  });
  Val<B> xc = b.op(OpId::Sub, {g, mean_keep(b, g, {2}, count)});
  Val<B> var = mean_keep(b, b.op(OpId::Mul, {xc, xc}), {2}, count);
  Val<B> y = b.op(OpId::Mul, {xc, b.op(OpId::Rsqrt, {b.op(OpId::Add, {var, b.scalar(eps)})})});
  y = b.reshape_like(y, x3, {});
  auto col = [&](Val<B> v) { return b.op(OpId::Reshape, {v}, Attrs().set("shape", Shape{-1, 1})); };
  if (present(weight)) y = b.op(OpId::Mul, {y, col(weight)});
  if (present(bias)) y = b.op(OpId::Add, {y, col(bias)});
  return b.reshape_like(y, x, {});
}

// Each (sample, channel) normalised over the last `spatial` dims (biased variance), for (N, C, *) and, in a
// layer, unbatched (C, *) inputs. In training with running statistics (use_input_stats and running_mean
// given) those move by `momentum` toward the batch's average of the instances' means and unbiased variances,
// outside autograd, as torch's instance_norm; without use_input_stats they normalise. `channels` is C.
template <class B>
Val<B> instance_norm(B& b, Val<B> x_in, Val<B> running_mean, Val<B> running_var, Val<B> weight_in, Val<B> bias_in,
                     bool use_input_stats, double momentum, double eps, std::optional<int64_t> spatial_dims,
                     std::optional<int64_t> channels) {
  std::vector<Val<B>> cast = b.autocast("instance_norm", {x_in, weight_in, bias_in});
  Val<B> x = cast[0], weight = cast[1], bias = cast[2];
  if (!spatial_dims) {  // the rank unknown now: the trailing dims as one
    if (std::optional<int64_t> r = b.rank(x)) {
      spatial_dims = *r - 2;
    } else {
      Val<B> y = instance_norm(b, b.flatten(x, 2, -1), running_mean, running_var, weight, bias, use_input_stats, momentum, eps,
                               int64_t(1), channels);
      return b.reshape_like(y, x, {});
    }
  }
  if (*spatial_dims < 1) b.fail("instance_norm: expected an input of at least 3 dims (N, C, *)");
  if (!channels && present(running_mean))
    if (std::optional<Shape> s = b.shape(running_mean); s && s->size() == 1) channels = (*s)[0];
  const int64_t spatial = *spatial_dims;
  Shape per_channel{-1}, dims;
  for (int64_t d = -spatial; d < 0; ++d) {
    per_channel.push_back(1);
    dims.push_back(d);
  }
  auto col = [&](Val<B> v) { return b.op(OpId::Reshape, {v}, Attrs().set("shape", per_channel)); };
  const char* names[] = {"running_mean", "running_var", "weight", "bias"};
  Val<B> params[] = {running_mean, running_var, weight, bias};
  for (int i = 0; i < 4; ++i)
    if (present(params[i]) && channels)
      b.check_shape(params[i], {*channels}, false, [&](const std::optional<Shape>& s) {
        return fmt::format("instance_norm: {} should contain {} elements{}", names[i], *channels,
                           s ? fmt::format(", got {}", numel_of(*s)) : std::string());
      });
  Val<B> mean, var;
  if (use_input_stats) {
    Val<B> n = b.count(x, dims, 1, [&](const std::optional<Shape>& s) {
      return fmt::format("instance_norm: Expected more than 1 spatial element when training, got input size {}",
                         s ? shape_str(*s) : std::string("?"));
    });
    mean = mean_keep(b, x, dims, n);
    Val<B> xc = b.op(OpId::Sub, {x, mean});
    var = mean_keep(b, b.op(OpId::Mul, {xc, xc}), dims, n);
    if (present(running_mean) && present(running_var)) {
      if (!channels) b.fail("instance_norm: the running statistics' size must be known");
      // per instance as rows of C; their batch average, the variance unbiased per instance (torch's)
      auto batch_avg = [&](Val<B> v) {
        Val<B> rows = b.op(OpId::Reshape, {b.detach(v)}, Attrs().set("shape", Shape{-1, *channels}));
        Val<B> count = b.count(rows, {0}, 0, [](const std::optional<Shape>&) { return std::string("instance_norm: an empty batch"); });
        return b.op(OpId::Reshape, {mean_keep(b, rows, {0}, count)}, Attrs().set("shape", Shape{-1}));
      };
      Val<B> unbiased = b.op(OpId::Div, {b.op(OpId::Mul, {var, n}), b.op(OpId::Sub, {n, b.scalar(1)})});
      auto moved = [&](Val<B> run, Val<B> batch) {
        return b.op(OpId::Add, {b.op(OpId::Mul, {run, b.scalar(1.0 - momentum)}), b.op(OpId::Mul, {batch, b.scalar(momentum)})});
      };
      b.update_buffer(running_mean, moved(running_mean, batch_avg(mean)));
      b.update_buffer(running_var, moved(running_var, batch_avg(unbiased)));
    }
    Val<B> y = b.op(OpId::Mul, {xc, b.op(OpId::Rsqrt, {b.op(OpId::Add, {var, b.scalar(eps)})})});
    if (present(weight)) y = b.op(OpId::Mul, {y, col(weight)});
    if (present(bias)) y = b.op(OpId::Add, {y, col(bias)});
    return y;
  }
  if (!present(running_mean) || !present(running_var))
    b.fail("instance_norm: Expected running_mean and running_var to be defined when use_input_stats is false");
  Val<B> y = b.op(OpId::Mul, {b.op(OpId::Sub, {x, col(running_mean)}),
                              b.op(OpId::Rsqrt, {b.op(OpId::Add, {col(running_var), b.scalar(eps)})})});
  if (present(weight)) y = b.op(OpId::Mul, {y, col(weight)});
  if (present(bias)) y = b.op(OpId::Add, {y, col(bias)});
  return y;
}

// Statistics per channel (dim 1) over every other dim. In training the running estimates, when given,
// move by `momentum` toward the batch's mean and unbiased variance, outside autograd; in evaluation they
// normalise. `rank` is the input's when the builder cannot know it (a layer that has checked it).
template <class B>
Val<B> batch_norm(B& b, Val<B> x_in, Val<B> running_mean, Val<B> running_var, Val<B> weight_in, Val<B> bias_in, bool training,
                  double momentum, double eps, std::optional<int64_t> rank = std::nullopt) {
  std::optional<int64_t> known = b.rank(x_in);
  if (!known) known = rank;
  if (!known) {
    // the rank unknown now (a script's F.batch_norm): the dims after C as one, checked when the graph runs
    b.check_rank(x_in, {2, 3, 4, 5}, [](const std::optional<Shape>& s) {
      return fmt::format("batch_norm: expected a 2D to 5D input [N,C,...]{}", s ? ", got shape " + shape_str(*s) : std::string());
    });
    Val<B> y = batch_norm(b, b.flatten(x_in, 2, -1), running_mean, running_var, weight_in, bias_in, training, momentum, eps, int64_t(3));
    return b.reshape_like(y, x_in, {});
  }
  // The running statistics are updated in place, so they are never cast.
  std::vector<Val<B>> cast = b.autocast("batch_norm", {x_in, weight_in, bias_in});
  Val<B> x = cast[0], weight = cast[1], bias = cast[2];
  int64_t r = *known;
  std::optional<Shape> xs = b.shape(x);
  if (r < 2)
    b.fail(fmt::format("batch_norm: expected input with at least 2 dims [N,C,...], got {}", xs ? "shape " + shape_str(*xs) : fmt::format("{}-D", r)));
  if (xs) {
    const char* names[] = {"running_mean", "running_var", "weight", "bias"};
    Val<B> params[] = {running_mean, running_var, weight, bias};
    for (int i = 0; i < 4; ++i)
      if (present(params[i]))
        b.check_shape(params[i], {(*xs)[1]}, false, [&](const std::optional<Shape>& s) {
          return fmt::format("batch_norm: {} should contain {} elements{} (input shape {})", names[i], (*xs)[1],
                             s ? fmt::format(", got {}", numel_of(*s)) : std::string(), shape_str(*xs));
        });
  }
  Shape cs{-1};  // a per-channel vector against [N, C, ...]
  for (int64_t d = 2; d < r; ++d) cs.push_back(1);
  auto per_channel = [&](Val<B> v) { return b.op(OpId::Reshape, {v}, Attrs().set("shape", cs)); };
  Val<B> mean, var;
  if (training) {
    Shape dims{0};
    for (int64_t d = 2; d < r; ++d) dims.push_back(d);
    Val<B> n = b.count(x, dims, 1, [&](const std::optional<Shape>& s) {
      return fmt::format("batch_norm: expected more than 1 value per channel when training{}",
                         s ? ", got input shape " + shape_str(*s) : std::string());
    });
    mean = mean_keep(b, x, dims, n);
    Val<B> xc = b.op(OpId::Sub, {x, mean});
    var = mean_keep(b, b.op(OpId::Mul, {xc, xc}), dims, n);  // biased: what normalises the batch
    auto flat = [&](Val<B> v) { return b.op(OpId::Reshape, {b.detach(v)}, Attrs().set("shape", Shape{-1})); };
    auto move = [&](Val<B> running, Val<B> batch) {
      b.update_buffer(running, b.op(OpId::Add, {b.op(OpId::Mul, {running, b.scalar(1.0 - momentum)}),
                                                b.op(OpId::Mul, {batch, b.scalar(momentum)})}));
    };
    if (present(running_mean)) move(running_mean, flat(mean));
    if (present(running_var))
      move(running_var, b.op(OpId::Div, {b.op(OpId::Mul, {flat(var), n}), b.op(OpId::Sub, {n, b.scalar(1)})}));  // unbiased
  } else {
    if (!present(running_mean) || !present(running_var))
      b.fail("batch_norm: running_mean and running_var must be defined in evaluation mode");
    mean = per_channel(running_mean);
    var = per_channel(running_var);
  }
  Val<B> y = b.op(OpId::Mul, {b.op(OpId::Sub, {x, mean}), b.op(OpId::Rsqrt, {b.op(OpId::Add, {var, b.scalar(eps)})})});
  if (present(weight)) y = b.op(OpId::Mul, {y, per_channel(weight)});
  if (present(bias)) y = b.op(OpId::Add, {y, per_channel(bias)});
  return y;
}

// scale_grad_by_freq: each looked-up row's gradient divided by how often its index occurs in the batch, its
// value unchanged (detached rows plus a zero whose gradient is 1 / count). The count is an int tensor, so the
// division keeps the rows' dtype (bf16 stays bf16).
template <class B>
Val<B> embedding_grad_by_freq(B& b, Val<B> rows, Val<B> weight, Val<B> flat) {
  auto int64 = [&](Val<B> v) { return b.op(OpId::Cast, {b.op(OpId::Eq, {v, v})}, Attrs().set("dtype", DType::Int64)); };
  Val<B> col = b.op(OpId::Select, {b.detach(weight)}, Attrs().set("dim", int64_t(1)).set("index", int64_t(0)));
  Val<B> zeros = b.op(OpId::Sub, {int64(col), int64(col)});  // [num_embeddings], from the weight's shape alone
  Attrs dim0 = Attrs().set("dim", int64_t(0));
  Val<B> counts = b.op(OpId::IndexAdd, {zeros, flat, int64(flat)}, dim0);
  Val<B> per_row = b.op(OpId::Unsqueeze, {b.op(OpId::IndexSelect, {counts, flat}, dim0)}, Attrs().set("dim", int64_t(-1)));
  Val<B> fixed = b.detach(rows);
  return b.op(OpId::Add, {fixed, b.op(OpId::Div, {b.op(OpId::Sub, {rows, fixed}), per_row})});
}

// The weight's rows at the indices, shaped indices.shape + [embedding_dim]. The padding row's value comes
// without a path back to the weight, so it gets no gradient (torch's padding_idx).
template <class B>
Val<B> embedding(B& b, Val<B> weight, Val<B> indices, std::optional<int64_t> padding_idx = std::nullopt,
                 bool scale_grad_by_freq = false) {
  if (std::optional<int64_t> r = b.rank(weight); r && *r != 2) {
    std::optional<Shape> s = b.shape(weight);
    b.fail(fmt::format("embedding: weight must be 2-D, got {}", s ? "shape " + shape_str(*s) : fmt::format("{}-D", *r)));
  }
  if (std::optional<DType> dt = b.dtype(indices); dt && *dt != DType::Int64 && *dt != DType::Int32)
    b.fail(fmt::format("embedding: expected indices of dtype int64 or int32, got {}", dtype_name(*dt)));
  Val<B> flat = b.op(OpId::Reshape, {indices}, Attrs().set("shape", Shape{-1}));
  Attrs rows0 = Attrs().set("dim", int64_t(0));
  Val<B> rows = b.op(OpId::IndexSelect, {weight, flat}, rows0);
  if (scale_grad_by_freq) rows = embedding_grad_by_freq(b, rows, weight, flat);
  if (padding_idx) {
    Val<B> pad = b.op(OpId::Reshape, {b.op(OpId::Eq, {flat, b.scalar(*padding_idx)})}, Attrs().set("shape", Shape{-1, 1}));
    rows = b.op(OpId::Where, {pad, b.op(OpId::IndexSelect, {b.detach(weight), flat}, rows0), rows});
  }
  return b.reshape_like(rows, indices, {-1});
}

// 0, 1, ... along a 1-D v, from its shape alone (a cumsum of ones), so a script graph needs no size when lowering
template <class B>
Val<B> positions(B& b, Val<B> v) {
  Val<B> ones = b.op(OpId::Cast, {b.op(OpId::Eq, {v, v})}, Attrs().set("dtype", DType::Int64));
  return b.op(OpId::Sub, {b.op(OpId::Cumsum, {ones}, Attrs().set("dim", int64_t(0))), b.scalar(int64_t(1))});
}

// nn.Embedding's max_norm: the weight's rows the indices name whose norm_type-norm exceeds max_norm are scaled to
// max_norm / (norm + 1e-7) in place, outside autograd (torch's embedding_renorm_, under no_grad); the lookup then
// reads the renormalised rows, its gradient reaching the weight as a plain lookup's.
template <class B>
Val<B> embedding_renorm(B& b, Val<B> weight, Val<B> indices, double max_norm, double norm_type) {
  auto unsq = [&](Val<B> v, int64_t d) { return b.op(OpId::Unsqueeze, {v}, Attrs().set("dim", d)); };
  Val<B> wd = b.detach(weight);
  Val<B> flat = b.op(OpId::Reshape, {indices}, Attrs().set("shape", Shape{-1}));
  Val<B> row = positions(b, b.op(OpId::Select, {wd}, Attrs().set("dim", int64_t(1)).set("index", int64_t(0))));
  Val<B> hits = b.op(OpId::Cast, {b.op(OpId::Eq, {unsq(row, 1), unsq(flat, 0)})}, Attrs().set("dtype", DType::Int64));
  Val<B> named = b.op(OpId::Gt, {b.op(OpId::Sum, {hits}, Attrs().set("dims", Shape{1})), b.scalar(int64_t(0))});
  Val<B> p = b.scalar(norm_type);
  Val<B> norm = b.op(OpId::Pow, {b.op(OpId::Sum, {b.op(OpId::Pow, {b.op(OpId::Abs, {wd}), p})}, Attrs().set("dims", Shape{1})),
                                 b.scalar(1.0 / norm_type)});
  Val<B> scale = b.op(OpId::Div, {b.scalar(max_norm), b.op(OpId::Add, {norm, b.scalar(1e-7)})});
  Val<B> over = b.op(OpId::LogicalAnd, {named, b.op(OpId::Gt, {norm, b.scalar(max_norm)})});
  Val<B> renormed = b.op(OpId::Where, {unsq(over, -1), b.op(OpId::Mul, {wd, unsq(scale, -1)}), wd});
  Val<B> looked_up = b.op(OpId::Add, {weight, b.detach(b.op(OpId::Sub, {renormed, wd}))});
  b.update_buffer(weight, renormed);
  return looked_up;
}

// embedding_bag over a 1-D input cut at `starts` (each bag's first index, ascending), `valid` [n] the indices that
// count (not padding_idx, before include_last_offset's end): a segment reduction, in memory of the input's rows
// [n, D] and the output [bags, D]. Each index's bag is a cumsum of the starts scattered onto the positions (a
// position where several bags start belongs to the last of them; the ones before it are empty). 'sum' / 'mean' add
// each row into its bag (index_add); 'max' sorts each column by value (descending, stable) and then by bag (stable),
// so each bag's segment starts at its column maxima, the first of equal ones, and gathers them. Empty bags give zeros.
template <class B>
Val<B> embedding_bag_segments(B& b, Val<B> weight, Val<B> rows, Val<B> input, Val<B> starts, Val<B> valid,
                              const std::string& mode, Val<B> per_sample_weights) {
  auto unsq = [&](Val<B> v, int64_t d) { return b.op(OpId::Unsqueeze, {v}, Attrs().set("dim", d)); };
  Attrs i64 = Attrs().set("dtype", DType::Int64), dim0 = Attrs().set("dim", int64_t(0));
  auto slice0 = [&](Val<B> v) {  // v[:1]
    return b.op(OpId::Slice, {v}, Attrs().set("dim", int64_t(0)).set("start", int64_t(0)).set("end", int64_t(1)).set("step", int64_t(1)));
  };
  starts = b.op(OpId::Cast, {starts}, i64);
  Val<B> zero_b = b.op(OpId::Mul, {starts, b.scalar(int64_t(0))});  // [B]
  // one slot more per bag than the input has, so a start at n (an empty last bag) stays in range
  Val<B> slots = b.op(OpId::Cat, {b.op(OpId::Mul, {b.op(OpId::Cast, {input}, i64), b.scalar(int64_t(0))}), zero_b}, dim0);
  Val<B> marks = b.op(OpId::ScatterAdd, {slots, starts, b.op(OpId::Add, {zero_b, b.scalar(int64_t(1))})}, dim0);
  Val<B> n = b.count(input, {0}, -1, [](const std::optional<Shape>&) { return std::string(); });
  Val<B> bag = b.head(b.op(OpId::Sub, {b.op(OpId::Cumsum, {marks}, dim0), b.scalar(int64_t(1))}), n);  // -1 before the first start
  valid = b.op(OpId::LogicalAnd, {valid, b.op(OpId::Ge, {bag, b.scalar(int64_t(0))})});
  Val<B> at = b.op(OpId::Where, {valid, bag, b.scalar(int64_t(0))});
  auto count = [&](Val<B> per_index) { return b.op(OpId::IndexAdd, {zero_b, at, per_index}, dim0); };  // [B]
  Val<B> counted = count(b.op(OpId::Cast, {valid}, i64));
  if (mode == "max") {
    Val<B> vals = b.op(OpId::Where, {unsq(valid, -1), b.detach(rows), b.scalar(-INFINITY)});
    Val<B> by_value = b.op(OpId::Argsort, {vals}, Attrs().set("dim", int64_t(0)).set("descending", true));  // [n, D]
    Val<B> zero_nd = b.op(OpId::Mul, {by_value, b.scalar(int64_t(0))});
    Val<B> bag_sorted = b.op(OpId::Gather, {b.op(OpId::Add, {unsq(at, 1), zero_nd}), by_value}, dim0);
    Val<B> by_bag = b.op(OpId::Argsort, {bag_sorted}, Attrs().set("dim", int64_t(0)).set("descending", false));
    Val<B> order = b.op(OpId::Gather, {by_value, by_bag}, dim0);  // each column's rows by bag, then value descending
    Val<B> all = count(b.op(OpId::Add, {b.op(OpId::Mul, {at, b.scalar(int64_t(0))}), b.scalar(int64_t(1))}));
    Val<B> first = b.op(OpId::Sub, {b.op(OpId::Cumsum, {all}, dim0), all});  // each bag's segment start
    first = b.op(OpId::Minimum, {first, b.op(OpId::Sub, {n, b.scalar(int64_t(1))})});  // an empty last bag's
    Val<B> pick = b.op(OpId::Add, {unsq(first, 1), b.op(OpId::Mul, {slice0(order), b.scalar(int64_t(0))})});  // [B, D]
    Val<B> m = b.op(OpId::Gather, {rows, b.op(OpId::Gather, {order, pick}, dim0)}, dim0);
    return b.op(OpId::Where, {unsq(b.op(OpId::Gt, {counted, b.scalar(int64_t(0))}), -1), m, b.scalar(0.0)});
  }
  Val<B> values = rows;
  if (present(per_sample_weights)) values = b.op(OpId::Mul, {values, unsq(per_sample_weights, -1)});
  values = b.op(OpId::Where, {unsq(valid, -1), values, b.scalar(0.0)});
  // [B, D] zeros of the weight's dtype
  Val<B> zeros = b.op(OpId::Where, {unsq(b.op(OpId::Eq, {starts, starts}), 1), b.scalar(0.0), slice0(b.detach(weight))});
  Val<B> sum = b.op(OpId::IndexAdd, {zeros, at, values}, dim0);
  if (mode == "sum") return sum;
  return b.op(OpId::Div, {sum, unsq(b.op(OpId::Maximum, {counted, b.scalar(int64_t(1))}), -1)});
}

// F.embedding_bag: each bag's rows reduced by `mode` ('sum', 'mean', 'max'). A 2-D input is one bag per row;
// a 1-D input is cut into bags at `offsets` (each bag's start; with include_last_offset the last entry is the end
// of the last bag), embedding_bag_segments' reduction. padding_idx is left out of every bag, as torch. Empty bags
// give zeros. per_sample_weights (mode 'sum', the input's shape) scales each row. A 2-D input's bags are a mask
// [B, N] over its rows.
template <class B>
Val<B> embedding_bag(B& b, Val<B> weight, Val<B> input, Val<B> offsets, const std::string& mode, Val<B> per_sample_weights,
                     bool include_last_offset, std::optional<int64_t> padding_idx) {
  if (mode != "sum" && mode != "mean" && mode != "max")
    b.fail(fmt::format("embedding_bag: mode has to be one of sum, mean or max, got '{}'", mode));
  if (present(per_sample_weights) && mode != "sum")
    b.fail(fmt::format("embedding_bag: per_sample_weights is only supported for mode='sum' (got mode='{}')", mode));
  std::optional<int64_t> r = b.rank(input);
  if (r && *r != 1 && *r != 2)
    b.fail(fmt::format("embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension {}", *r));
  if (r && *r == 2 && present(offsets)) b.fail("embedding_bag: if input is 2D, then offsets has to be None");
  if (r && *r == 1 && !present(offsets))
    b.fail("embedding_bag: offsets has to be a 1D Tensor but got None (a 1D input needs the bags' offsets)");
  if (!present(offsets))  // a script graph learns the rank when it runs
    b.check_rank(input, {2}, [](const std::optional<Shape>& s) {
      return fmt::format("embedding_bag: input without offsets has to be a 2D Tensor{}", s ? ", got shape " + shape_str(*s) : "");
    });
  if (present(offsets))
    if (std::optional<int64_t> ro = b.rank(offsets); ro && *ro != 1)
      b.fail(fmt::format("embedding_bag: offsets has to be a 1D Tensor but got Tensor of dimension {}", *ro));
  auto unsq = [&](Val<B> v, int64_t d) { return b.op(OpId::Unsqueeze, {v}, Attrs().set("dim", d)); };
  Val<B> rows = embedding(b, weight, input);  // [..., D]
  if (present(offsets)) {
    Val<B> starts = include_last_offset ? b.op(OpId::Slice, {offsets}, Attrs().set("dim", int64_t(0)).set("start", int64_t(0))
                                                                         .set("end", int64_t(-1)).set("step", int64_t(1)))
                                        : offsets;
    Val<B> valid = b.op(OpId::Eq, {input, input});
    if (include_last_offset) {
      Val<B> last = b.op(OpId::Slice, {offsets}, Attrs().set("dim", int64_t(0)).set("start", int64_t(-1)).set("step", int64_t(1)));
      valid = b.op(OpId::Lt, {positions(b, input), last});
    }
    if (padding_idx) valid = b.op(OpId::LogicalAnd, {valid, b.op(OpId::Ne, {input, b.scalar(*padding_idx)})});
    return embedding_bag_segments(b, weight, rows, input, starts, valid, mode, per_sample_weights);
  }
  Val<B> mask = padding_idx ? b.op(OpId::Ne, {input, b.scalar(*padding_idx)}) : b.op(OpId::Eq, {input, input});  // [B, N]
  Val<B> values = rows, psw = per_sample_weights;
  Val<B> mask3 = unsq(mask, -1);
  Val<B> count = b.op(OpId::Sum, {b.op(OpId::Cast, {mask}, Attrs().set("dtype", DType::Int64))}, Attrs().set("dims", Shape{1}));
  Attrs over_bag = Attrs().set("dims", Shape{1});
  if (mode == "max") {
    Val<B> m = b.op(OpId::Amax, {b.op(OpId::Where, {mask3, values, b.scalar(-INFINITY)})}, over_bag);
    return b.op(OpId::Where, {unsq(b.op(OpId::Gt, {count, b.scalar(int64_t(0))}), -1), m, b.scalar(0.0)});
  }
  if (present(psw)) values = b.op(OpId::Mul, {values, unsq(psw, -1)});
  Val<B> sum = b.op(OpId::Sum, {b.op(OpId::Where, {mask3, values, b.scalar(0.0)})}, over_bag);
  if (mode == "sum") return sum;
  return b.op(OpId::Div, {sum, unsq(b.op(OpId::Maximum, {count, b.scalar(int64_t(1))}), -1)});
}

// ---- activations ----
// Written so that neither direction overflows: where() sends a zero gradient into the branch it drops, and
// zero times an infinite local derivative (exp of a large input) is NaN, so every exp reads an argument
// that is <= 0 whichever branch is kept.

template <class B>
Val<B> leaky_relu(B& b, Val<B> x, double negative_slope) {
  return b.op(OpId::Where, {b.op(OpId::Gt, {x, b.scalar(0.0)}), x, b.op(OpId::Mul, {x, b.scalar(negative_slope)})});
}

// F.prelu: x > 0 ? x : weight * x, with one weight or one per channel (dim 1). Channels are moved last so
// the weight broadcasts over any rank, which a script graph may not know; x == 0 takes the scaled branch, so
// the weight's gradient there is x * g = 0 and x's is weight * g, as torch's. `slopes` (nn.PReLU's
// num_parameters) stands for the weight's size where its shape is not known now.
template <class B>
Val<B> prelu(B& b, Val<B> x_in, Val<B> weight_in, std::optional<int64_t> slopes = std::nullopt) {
  std::vector<Val<B>> cast = b.autocast("prelu", {x_in, weight_in});
  Val<B> x = cast[0], weight = cast[1];
  std::optional<Shape> ws = b.shape(weight);
  if (ws && ws->size() <= 1) slopes = numel_of(*ws);
  if (ws && ws->size() > 1)
    b.fail(fmt::format("prelu: Expected `weight` to be a scalar or 1D tensor, but got ndim = {}", ws->size()));
  auto scaled = [&](Val<B> v, Val<B> w) {
    return b.op(OpId::Where, {b.op(OpId::Gt, {v, b.scalar(0.0)}), v, b.op(OpId::Mul, {v, w})});
  };
  std::optional<Shape> xs = b.shape(x);
  std::optional<int64_t> rank = b.rank(x);
  const int64_t channels = xs ? (xs->size() >= 2 ? (*xs)[1] : 1) : -1;
  if (slopes && *slopes != 1 && (channels >= 0 || (rank && *rank < 2)) && *slopes != std::max<int64_t>(channels, 1))
    b.fail(fmt::format("prelu: Mismatch of parameter numbers and input channel size. Found parameter numbers = {} and "
                       "channel size = {}", *slopes, std::max<int64_t>(channels, 1)));
  // one slope (or an input with no channel dim, where torch wants one): a 0-d weight broadcasts anywhere
  if ((slopes && *slopes == 1) || (rank && *rank < 2))
    return scaled(x, b.op(OpId::Reshape, {weight}, Attrs().set("shape", Shape{})));
  if (!rank)
    b.check_rank(x, {2, 3, 4, 5, 6, 7, 8}, [](const std::optional<Shape>& s) {
      return fmt::format("prelu: kiln script needs an input of 2 or more dims unless the weight is known to hold one "
                         "slope when lowering, got input of shape {}", s ? shape_str(*s) : "?");
    });
  return b.transpose(scaled(b.transpose(x, 1, -1), weight), 1, -1);
}

// torch's elu(x, alpha, scale, input_scale): scale * (x > 0 ? x : alpha * (exp(x * input_scale) - 1)), which
// is ELU, SELU and CELU. The exp reads min(x, 0); x == 0 takes the linear branch, whose gradient (1) is the
// one torch gives there.
template <class B>
Val<B> elu_scaled(B& b, Val<B> x, double alpha, double scale, double input_scale) {
  Val<B> xn = b.op(OpId::Minimum, {x, b.scalar(0.0)});
  if (input_scale != 1.0) xn = b.op(OpId::Mul, {xn, b.scalar(input_scale)});
  Val<B> em1 = b.op(OpId::Sub, {b.op(OpId::Exp, {xn}), b.scalar(1.0)});
  Val<B> y = b.op(OpId::Where, {b.op(OpId::Lt, {x, b.scalar(0.0)}), b.op(OpId::Mul, {em1, b.scalar(alpha)}), x});
  return scale == 1.0 ? y : b.op(OpId::Mul, {y, b.scalar(scale)});
}

template <class B>
Val<B> elu(B& b, Val<B> x, double alpha) {
  return elu_scaled(b, x, alpha, 1.0, 1.0);
}

template <class B>
Val<B> selu(B& b, Val<B> x) {
  return elu_scaled(b, x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0);
}

template <class B>
Val<B> celu(B& b, Val<B> x, double alpha) {
  if (alpha == 0.0) b.fail("celu: alpha cannot be 0 for CELU");
  return elu_scaled(b, x, alpha, 1.0, 1.0 / alpha);
}

// log(1 + exp(t)) as max(t, 0) + log1p(exp(-|t|)): exp never sees a positive argument. At t == 0 the
// maximum's tie rule (half the gradient to each side) and abs's zero derivative give 1/2, the true slope.
template <class B>
Val<B> log1p_exp(B& b, Val<B> t) {
  Val<B> tail = b.op(OpId::Log1p, {b.op(OpId::Exp, {b.op(OpId::Neg, {b.op(OpId::Abs, {t})})})});
  return b.op(OpId::Add, {b.op(OpId::Maximum, {t, b.scalar(0.0)}), tail});
}

// torch's rule: x where beta * x > threshold, else log(1 + exp(beta * x)) / beta.
template <class B>
Val<B> softplus(B& b, Val<B> x, double beta, double threshold) {
  Val<B> bx = beta == 1.0 ? x : b.op(OpId::Mul, {x, b.scalar(beta)});
  Val<B> soft = log1p_exp(b, bx);
  if (beta != 1.0) soft = b.op(OpId::Div, {soft, b.scalar(beta)});
  return b.op(OpId::Where, {b.op(OpId::Gt, {bx, b.scalar(threshold)}), x, soft});
}

// x * tanh(softplus(x)), with no threshold (torch's mish has none).
template <class B>
Val<B> mish(B& b, Val<B> x) {
  return b.op(OpId::Mul, {x, b.op(OpId::Tanh, {log1p_exp(b, x)})});
}

// log(sigmoid(x)) = -softplus(-x)
template <class B>
Val<B> logsigmoid(B& b, Val<B> x) {
  return b.op(OpId::Neg, {log1p_exp(b, b.op(OpId::Neg, {x}))});
}

template <class B>
Val<B> softsign(B& b, Val<B> x) {
  return b.op(OpId::Div, {x, b.op(OpId::Add, {b.op(OpId::Abs, {x}), b.scalar(1.0)})});
}

// clamp to [min_val, max_val] with comparisons that include the bounds, so the gradient is 0 on them as
// torch's hardtanh_backward gives (maximum/minimum would pass half), and NaN passes through.
template <class B>
Val<B> hardtanh(B& b, Val<B> x, double min_val, double max_val) {
  if (!(max_val > min_val))
    b.fail(fmt::format("hardtanh: max_val must be larger than min_val, got min_val={} and max_val={}", min_val, max_val));
  Val<B> upper = b.op(OpId::Where, {b.op(OpId::Ge, {x, b.scalar(max_val)}), b.scalar(max_val), x});
  return b.op(OpId::Where, {b.op(OpId::Le, {x, b.scalar(min_val)}), b.scalar(min_val), upper});
}

template <class B>
Val<B> relu6(B& b, Val<B> x) {
  return hardtanh(b, x, 0.0, 6.0);
}

// relu6(x + 3) / 6, in torch's order of operations
template <class B>
Val<B> hardsigmoid(B& b, Val<B> x) {
  return b.op(OpId::Div, {relu6(b, b.op(OpId::Add, {x, b.scalar(3.0)})), b.scalar(6.0)});
}

// x * relu6(x + 3) / 6, in torch's order of operations
template <class B>
Val<B> hardswish(B& b, Val<B> x) {
  return b.op(OpId::Div, {b.op(OpId::Mul, {x, relu6(b, b.op(OpId::Add, {x, b.scalar(3.0)}))}), b.scalar(6.0)});
}

// ---- adaptive pooling ----
// output_size: one entry standing for both spatial dims, or two; nullopt keeps the input's size there.
using OptionalSizes = std::vector<std::optional<int64_t>>;

// Output i of n over an input of n_in covers [floor(i * n_in / n), ceil((i + 1) * n_in / n)) (torch's bins).
// A size of 1 or None in each dim is a reduction. Other sizes: a pool row with kernel = stride where the
// shape is known and divides, else the bins one dim at a time (a bin's mean of row means is its mean, as
// its rows are equally long), each sliced by the builder's bin() (its bounds computed when the graph runs
// where the shape is not known now), reduced and concatenated.
template <class B>
Val<B> adaptive_pool2d(B& b, Val<B> x, const OptionalSizes& output_size, bool max) {
  const char* name = max ? "adaptive_max_pool2d" : "adaptive_avg_pool2d";
  if (output_size.size() != 1 && output_size.size() != 2) b.fail(fmt::format("{}: output_size must be 2", name));
  OptionalSizes out = output_size.size() == 1 ? OptionalSizes{output_size[0], output_size[0]} : output_size;
  for (const auto& o : out)
    if (o && *o < 0) {
      auto str = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("None"); };
      b.fail(fmt::format("{}: elements of output_size must be greater than or equal to 0 but received {{{}, {}}}", name,
                         str(out[0]), str(out[1])));
    }
  b.check_rank(x, {3, 4}, [&](const std::optional<Shape>& s) {
    return fmt::format("{}(): Expected 3D or 4D tensor, but got {}", name, s ? shape_str(*s) : std::string("another rank"));
  });
  std::optional<Shape> s = b.shape(x);
  if (s)
    for (size_t d = s->size() == 4 ? 1 : 0; d < s->size(); ++d)
      if ((*s)[d] == 0)
        b.fail(fmt::format("{}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {} with "
                           "dimension {} being empty", name, shape_str(*s), d));
  int64_t dims[2] = {b.dim(name, -2, x), b.dim(name, -1, x)};  // negative where the rank is unknown
  if ((!out[0] || *out[0] == 1) && (!out[1] || *out[1] == 1)) {
    Shape reduced;
    for (int i = 0; i < 2; ++i)
      if (out[i]) reduced.push_back(dims[i]);
    if (reduced.empty()) return x;
    if (max) return b.op(OpId::Amax, {x}, keep_dims(reduced));
    return mean_keep(b, x, reduced, b.count(x, reduced, 0, [&](const std::optional<Shape>& sh) {
      return fmt::format("{}(): Expected input to have non-zero size for the pooled dimensions{}", name,
                         sh ? ", got sizes " + shape_str(*sh) : std::string());
    }));
  }
  if (s) {
    int64_t n_in[2] = {(*s)[size_t(dims[0])], (*s)[size_t(dims[1])]};
    int64_t n[2] = {out[0].value_or(n_in[0]), out[1].value_or(n_in[1])};
    if (n[0] > 0 && n[1] > 0 && n_in[0] % n[0] == 0 && n_in[1] % n[1] == 0) {
      bool batched = s->size() == 4;
      Val<B> x4 = batched ? x : b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", int64_t(0)));
      Shape k{n_in[0] / n[0], n_in[1] / n[1]};
      Attrs a = Attrs().set("kernel_size", k).set("stride", k).set("padding", Shape{0, 0});
      if (max) a.set("dilation", Shape{1, 1});
      Val<B> y = b.op(max ? OpId::MaxPool2d : OpId::AvgPool2d, {x4}, a);
      return batched ? y : b.op(OpId::Squeeze, {y}, Attrs().set("dims", Shape{0}));
    }
  }
  Val<B> y = x;
  for (int i = 0; i < 2; ++i) {
    if (!out[i] || (s && *out[i] == (*s)[size_t(dims[i])])) continue;
    if (*out[i] == 0) {
      y = b.op(OpId::Slice, {y}, Attrs().set("dim", dims[i]).set("start", int64_t(0)).set("end", int64_t(0)).set("step", int64_t(1)));
      continue;
    }
    std::vector<Val<B>> bins;
    for (int64_t j = 0; j < *out[i]; ++j) {
      auto [bin, len] = b.bin(y, dims[i], j, *out[i]);
      bins.push_back(max ? b.op(OpId::Amax, {bin}, keep_dims({dims[i]})) : mean_keep(b, bin, {dims[i]}, len));
    }
    y = bins.size() == 1 ? bins[0] : b.op(OpId::Cat, bins, Attrs().set("dim", dims[i]));
  }
  return y;
}

template <class B>
Val<B> adaptive_avg_pool2d(B& b, Val<B> x, const OptionalSizes& output_size) {
  return adaptive_pool2d(b, x, output_size, false);
}

template <class B>
Val<B> adaptive_max_pool2d(B& b, Val<B> x, const OptionalSizes& output_size) {
  return adaptive_pool2d(b, x, output_size, true);
}

// torch.remainder / Python's %: a - (a // b) * b, so the result takes the divisor's sign; exact for integers,
// as the floor_divide row is.
template <class B>
Val<B> remainder(B& b, Val<B> a, Val<B> d) {
  return b.op(OpId::Sub, {a, b.op(OpId::Mul, {b.op(OpId::FloorDivide, {a, d}), d})});
}

// F.interpolate over a 4-D (N, C, H, W) input, modes 'nearest' and 'bilinear' (torch 1.13's rules). Each
// spatial axis is resampled on its own (separable): nearest is one index_select, bilinear two weighted
// ones, so autograd, tracing and compile need nothing new. The indices and weights depend only on the
// sizes, so they are computed here as constants when the input's shape is known now. A script graph of
// unknown shape has no way to build them at run time; an integer scale_factor (the common x2 upsampler)
// needs none there: nearest repeats each row s times, and bilinear without align_corners mixes each row
// with its clamped neighbour using s weights that repeat along the axis.
struct InterpolateArgs {
  std::optional<Shape> size;                         // one value standing for both, or (H, W)
  std::optional<std::vector<double>> scale_factor;  // likewise
  std::string mode = "nearest";
  std::optional<bool> align_corners;
  std::optional<bool> recompute_scale_factor;
  bool antialias = false;
};

namespace detail {
// torch's area_pixel_compute_source_index and nearest_idx, in float64
inline double interp_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> given) {
  if (align_corners) return out > 1 ? double(in - 1) / double(out - 1) : 0.0;
  if (given && *given > 0) return 1.0 / *given;
  return double(in) / double(out);
}
}  // namespace detail

// An output size read when the graph runs (a script's `size=skip.shape[2:]`): per spatial axis (H, W), the
// output positions 0..n-1 (float64) and n (a wrapped number), which the caller's builder makes.
template <class B>
struct RunSize {
  Val<B> positions[2];
  Val<B> length[2];
};

template <class B>
Val<B> interpolate(B& b, Val<B> x, const InterpolateArgs& a, const RunSize<B>* run_size = nullptr) {
  const std::string& mode = a.mode;
  const bool known_mode = mode == "nearest" || mode == "linear" || mode == "bilinear" || mode == "bicubic" ||
                          mode == "trilinear" || mode == "area" || mode == "nearest-exact";
  const bool sized = a.size || run_size;
  if (sized && a.scale_factor) b.fail("interpolate: only one of size or scale_factor should be defined");
  if (!sized && !a.scale_factor) b.fail("interpolate: either size or scale_factor should be defined");
  if (sized && a.recompute_scale_factor.value_or(false))
    b.fail("interpolate: recompute_scale_factor is not meaningful with an explicit size");
  const bool interpolating = mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
  if (a.align_corners && !interpolating)
    b.fail("interpolate: align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
           "trilinear");
  if (a.size && a.size->size() != 1 && a.size->size() != 2)
    b.fail(fmt::format("interpolate: input and output must have the same number of spatial dimensions, but got input with 2 "
                       "spatial dimensions and output size of {}", shape_str(*a.size)));
  if (a.scale_factor && a.scale_factor->size() != 1 && a.scale_factor->size() != 2)
    b.fail(fmt::format("interpolate: input and scale_factor must have the same number of spatial dimensions, but got input "
                       "with 2 spatial dimensions and {} scale factors", a.scale_factor->size()));
  if (!known_mode)
    b.fail(fmt::format("interpolate: only 3D, 4D and 5D input tensors are supported for the modes: nearest | linear | "
                       "bilinear | bicubic | trilinear | area | nearest-exact (got {})", mode));
  if (mode != "nearest" && mode != "bilinear")
    b.fail(fmt::format("interpolate: mode '{}' is not supported (kiln has 'nearest' and 'bilinear')", mode));
  if (a.antialias) b.fail("interpolate: antialias=True is not supported");
  const bool bilinear = mode == "bilinear", align = a.align_corners.value_or(false);
  auto msg = [&mode](const std::optional<Shape>& s) {
    std::string got = s ? fmt::format("{}-D input of shape {}", s->size(), shape_str(*s)) : "an input of another rank";
    return mode == "bilinear" ? fmt::format("interpolate: bilinear mode needs a 4-D (N, C, H, W) input, got {}", got)
                              : fmt::format("interpolate: kiln's nearest mode takes a 4-D (N, C, H, W) input, got {}", got);
  };
  b.check_rank(x, {4}, msg);
  auto pick = [](const auto& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };

  // every factor a whole number >= 1
  auto integral_factor = [&](const std::vector<double>& f) {
    for (size_t i = 0; i < 2; ++i)
      if (double s = pick(f, i); !(s >= 1 && s == double(int64_t(s)))) return false;
    return true;
  };
  // the integer scale_factor form, which reads no size
  bool integral = a.scale_factor && !(bilinear && align) && integral_factor(*a.scale_factor);
  std::optional<Shape> xs = b.shape(x);
  if (integral) {
    Val<B> y = x;
    for (int64_t d = 2; d < 4; ++d) {
      const int64_t s = int64_t(pick(*a.scale_factor, size_t(d - 2)));
      if (s == 1) continue;
      auto unsq = [&](Val<B> v) { return b.op(OpId::Unsqueeze, {v}, Attrs().set("dim", d + 1)); };
      if (!bilinear) {
        Shape e(5, -1);
        e[size_t(d + 1)] = s;
        y = b.flatten(b.op(OpId::Expand, {unsq(y)}, Attrs().set("shape", e)), d, d + 1);
        continue;
      }
      auto slice = [&](Val<B> v, std::optional<int64_t> start, std::optional<int64_t> end) {
        Attrs at = Attrs().set("dim", d).set("step", int64_t(1));
        if (start) at.set("start", *start);
        if (end) at.set("end", *end);
        return b.op(OpId::Slice, {v}, at);
      };
      // the neighbours with the edge repeated: where the source index falls off the axis, torch clamps it
      Val<B> prev = b.op(OpId::Cat, {slice(y, 0, 1), slice(y, 0, -1)}, Attrs().set("dim", d));
      Val<B> next = b.op(OpId::Cat, {slice(y, 1, std::nullopt), slice(y, -1, std::nullopt)}, Attrs().set("dim", d));
      std::vector<Val<B>> phases;
      for (int64_t r = 0; r < s; ++r) {
        const double off = (double(r) + 0.5) / double(s) - 0.5;  // source = row + off, |off| < 1/2
        Val<B> other = off < 0 ? prev : next;
        const double w = off < 0 ? -off : off;
        phases.push_back(unsq(b.op(OpId::Add, {b.op(OpId::Mul, {y, b.scalar(1.0 - w)}), b.op(OpId::Mul, {other, b.scalar(w)})})));
      }
      y = b.flatten(b.op(OpId::Cat, phases, Attrs().set("dim", d + 1)), d, d + 1);
    }
    return y;
  }
  if (!xs || run_size) {
    // The input's size is read when the graph runs: the source indices and weights are computed there, from
    // the output positions j (0..n-1) and the input length, with the static path's formulas in float64.
    // The output length is the given size (known now or read at run time), or in * s for an integer scale
    // factor (align_corners included).
    const bool whole = sized || integral_factor(*a.scale_factor);
    if (!whole)
      b.fail(fmt::format("interpolate: a script graph whose input shape is unknown when it is lowered needs a size or an "
                         "integer scale_factor; mode '{}' with a fractional scale_factor needs the input's size to know the "
                         "output's", mode));
    auto f64 = [&](Val<B> v) { return b.op(OpId::Cast, {v}, Attrs().set("dtype", DType::Float64)); };
    auto flat = [&](Val<B> v) { return b.op(OpId::Reshape, {v}, Attrs().set("shape", Shape{-1})); };
    auto sc = [&](double v) { return b.scalar(v); };
    const DType wt = b.dtype(x).value_or(DType::Float32);
    Val<B> y = x;
    for (int64_t d = 2; d < 4; ++d) {
      const size_t i = size_t(d - 2);
      Val<B> in = f64(b.count(y, {d}, -1, nullptr));
      Val<B> j, n;
      if (run_size) {
        j = run_size->positions[i];
        n = run_size->length[i];
      } else if (a.size) {
        const int64_t len = pick(*a.size, i);
        if (len <= 0)
          b.fail(fmt::format("interpolate: output sizes should be greater than 0, but got output (H: {}, W: {})",
                             pick(*a.size, 0), pick(*a.size, 1)));
        std::vector<double> pos(static_cast<size_t>(len));
        for (int64_t k = 0; k < len; ++k) pos[size_t(k)] = double(k);
        j = b.parameter(tensor(pos, {len}, DType::Float64), fmt::format("interpolate_positions_{}", d == 2 ? "h" : "w"));
        n = sc(double(len));
      } else {
        // j = k * s + r over the input's rows k (a cumsum of ones along the dim: its length is read at run time)
        const int64_t s = int64_t(pick(*a.scale_factor, i));
        Val<B> line = y;
        for (int64_t e = 0; e < 4; ++e)
          if (e != d)
            line = b.op(OpId::Slice, {line}, Attrs().set("dim", e).set("start", int64_t(0)).set("end", int64_t(1)).set("step", int64_t(1)));
        Val<B> ones = f64(b.op(OpId::LogicalOr, {line, b.op(OpId::LogicalNot, {line})}));  // 1 for every value, NaN too
        Val<B> k = b.op(OpId::Sub, {flat(b.op(OpId::Cumsum, {ones}, Attrs().set("dim", d))), sc(1.0)});
        std::vector<double> phase(static_cast<size_t>(s));
        for (int64_t r = 0; r < s; ++r) phase[size_t(r)] = double(r);
        Val<B> r = b.parameter(tensor(phase, {1, s}, DType::Float64), fmt::format("interpolate_phases_{}", d == 2 ? "h" : "w"));
        j = flat(b.op(OpId::Add, {b.op(OpId::Mul, {b.op(OpId::Reshape, {k}, Attrs().set("shape", Shape{-1, 1})), sc(double(s))}), r}));
        n = b.op(OpId::Mul, {in, sc(double(s))});
      }
      // detail::interp_scale, on values read when the graph runs
      Val<B> scale = align ? b.op(OpId::Div, {b.op(OpId::Sub, {in, sc(1.0)}),
                                               b.op(OpId::Maximum, {b.op(OpId::Sub, {n, sc(1.0)}), sc(1.0)})})
                           : (a.scale_factor && !a.recompute_scale_factor.value_or(false) && pick(*a.scale_factor, i) > 0)
                               ? sc(1.0 / pick(*a.scale_factor, i))
                               : b.op(OpId::Div, {in, n});
      Val<B> last = b.op(OpId::Sub, {in, sc(1.0)});
      auto index = [&](Val<B> v) { return b.op(OpId::Cast, {v}, Attrs().set("dtype", DType::Int64)); };
      const Attrs along = Attrs().set("dim", d);
      const Shape wshape = d == 2 ? Shape{-1, 1} : Shape{-1};
      if (!bilinear) {
        Val<B> src = b.op(OpId::Floor, {b.op(OpId::Mul, {j, scale})});
        y = b.op(OpId::IndexSelect, {y, index(b.op(OpId::Minimum, {src, last}))}, along);
        continue;
      }
      Val<B> src = align ? b.op(OpId::Mul, {j, scale})
                         : b.op(OpId::Maximum, {b.op(OpId::Sub, {b.op(OpId::Mul, {b.op(OpId::Add, {j, sc(0.5)}), scale}), sc(0.5)}),
                                                sc(0.0)});
      Val<B> lo = b.op(OpId::Minimum, {b.op(OpId::Floor, {src}), last});
      Val<B> hi = b.op(OpId::Minimum, {b.op(OpId::Add, {lo, sc(1.0)}), last});
      Val<B> w_hi = b.op(OpId::Sub, {src, lo});
      Val<B> w_lo = b.op(OpId::Sub, {sc(1.0), w_hi});
      auto weight = [&](Val<B> w) {
        return b.op(OpId::Cast, {b.op(OpId::Reshape, {w}, Attrs().set("shape", wshape))}, Attrs().set("dtype", wt));
      };
      Val<B> ylo = b.op(OpId::IndexSelect, {y, index(lo)}, along);
      Val<B> yhi = b.op(OpId::IndexSelect, {y, index(hi)}, along);
      y = b.op(OpId::Add, {b.op(OpId::Mul, {ylo, weight(w_lo)}), b.op(OpId::Mul, {yhi, weight(w_hi)})});
    }
    return y;
  }
  Shape out(2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t in = (*xs)[i + 2];
    out[i] = a.size ? pick(*a.size, i) : int64_t(std::floor(double(in) * pick(*a.scale_factor, i)));
  }
  if ((*xs)[2] <= 0 || (*xs)[3] <= 0 || out[0] <= 0 || out[1] <= 0)
    b.fail(fmt::format("interpolate: input and output sizes should be greater than 0, but got input (H: {}, W: {}) output "
                       "(H: {}, W: {})", (*xs)[2], (*xs)[3], out[0], out[1]));
  // torch passes the given scale to its kernels unless recompute_scale_factor is true
  const bool use_given = a.scale_factor && !a.recompute_scale_factor.value_or(false);
  const DType wt = b.dtype(x).value_or(DType::Float32);
  Val<B> y = x;
  for (int64_t d = 2; d < 4; ++d) {
    const int64_t in = (*xs)[size_t(d)], n = out[size_t(d - 2)];
    const double scale =
        detail::interp_scale(in, n, align, use_given ? std::optional<double>(pick(*a.scale_factor, size_t(d - 2))) : std::nullopt);
    const Attrs along = Attrs().set("dim", d);
    const Shape wshape = d == 2 ? Shape{n, 1} : Shape{n};
    std::vector<int64_t> idx_lo(static_cast<size_t>(n)), idx_hi(static_cast<size_t>(n));
    std::vector<double> wt_lo(static_cast<size_t>(n)), wt_hi(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      if (!bilinear) {
        idx_lo[size_t(j)] = std::min(int64_t(std::floor(double(j) * scale)), in - 1);
        continue;
      }
      const double src = align ? double(j) * scale : std::max((double(j) + 0.5) * scale - 0.5, 0.0);
      const int64_t lo = std::min(int64_t(src), in - 1);
      idx_lo[size_t(j)] = lo;
      idx_hi[size_t(j)] = std::min(lo + 1, in - 1);
      wt_hi[size_t(j)] = src - double(lo);
      wt_lo[size_t(j)] = 1.0 - wt_hi[size_t(j)];
    }
    const std::string axis = d == 2 ? "h" : "w";
    Val<B> lo = b.op(OpId::IndexSelect, {y, b.parameter(tensor(idx_lo, {n}), "interpolate_index0_" + axis)}, along);
    if (!bilinear) {
      y = lo;
      continue;
    }
    Val<B> hi = b.op(OpId::IndexSelect, {y, b.parameter(tensor(idx_hi, {n}), "interpolate_index1_" + axis)}, along);
    Val<B> lw = b.parameter(tensor(wt_lo, wshape, wt), "interpolate_weight0_" + axis);
    Val<B> hw = b.parameter(tensor(wt_hi, wshape, wt), "interpolate_weight1_" + axis);
    y = b.op(OpId::Add, {b.op(OpId::Mul, {lo, lw}), b.op(OpId::Mul, {hi, hw})});
  }
  return y;
}

}  // namespace kiln::composite
