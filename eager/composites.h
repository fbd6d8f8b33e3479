#pragma once
// The composites of torch.nn.functional and friends, each written once over a builder (eager/builder.h):
// eager runs them with EagerBuilder, the script frontend lowers them with its GraphBuilder, so a scripted
// softmax is eager's softmax, op for op (the max detached, autocast's policy row applied).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"
#include "eager/builder.h"

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

// torch.remainder / Python's %: a - (a // b) * b, so the result takes the divisor's sign; exact for integers,
// as the floor_divide row is.
template <class B>
Val<B> remainder(B& b, Val<B> a, Val<B> d) {
  return b.op(OpId::Sub, {a, b.op(OpId::Mul, {b.op(OpId::FloorDivide, {a, d}), d})});
}

}  // namespace kiln::composite
