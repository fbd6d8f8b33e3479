// The public reductions. sum, prod, amax, amin, argmax and argmin are primitives (one dispatch each);
// mean, var, std, logsumexp and max/min over a dim are composites of kiln ops, so autograd, the tracer
// and the JIT see only primitives and get these for free.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "eager/autocast/autocast.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {
namespace {

Attrs reduce_attrs(const Shape& dims, bool keepdim) { return Attrs().set("dims", dims).set("keepdim", keepdim); }

bool is_half(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

// Elements folded into each output (all dims when dims is empty); checks dims as the kernels do, so a
// composite fails with its own name before any work.
int64_t reduced_count(std::string_view op, const Tensor& x, const Shape& dims) {
  if (dims.empty()) return x.numel();
  std::vector<bool> seen(size_t(std::max<int64_t>(x.dim(), 1)), false);
  int64_t n = 1;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(op, d, x.dim());
    if (seen[size_t(w)]) fail("{}: dim {} appears multiple times in the list of dims {}", op, w, shape_str(dims));
    seen[size_t(w)] = true;
    if (x.dim() > 0) n *= x.size(w);
  }
  return n;
}

void require_floating(std::string_view op, const Tensor& x) {
  if (!x.is_floating_point())
    fail("{}: std and var only support floating point dtypes, got {}", op, dtype_name(x.dtype()));
}

Tensor arg_reduce(OpId op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  Attrs a;
  if (dim) a.set("dim", *dim);
  a.set("keepdim", keepdim);
  return dispatch1(op, {x}, a);
}

void require_elements(std::string_view op, const Tensor& x) {
  if (x.numel() == 0)
    fail("{}: expected reduction dim to be specified for an input with no elements, got shape {}", op,
         shape_str(x.sizes()));
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { return dispatch1(OpId::Sum, {x}, reduce_attrs(dims, keepdim)); }
Tensor prod(const Tensor& x, const Shape& dims, bool keepdim) { return dispatch1(OpId::Prod, {x}, reduce_attrs(dims, keepdim)); }
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { return dispatch1(OpId::Amax, {x}, reduce_attrs(dims, keepdim)); }
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) { return dispatch1(OpId::Amin, {x}, reduce_attrs(dims, keepdim)); }

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_reduce(OpId::Argmax, x, dim, keepdim); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_reduce(OpId::Argmin, x, dim, keepdim); }

Tensor max(const Tensor& x) {
  require_elements("max", x);
  return amax(x);
}
Tensor min(const Tensor& x) {
  require_elements("min", x);
  return amin(x);
}
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return {amax(x, {dim}, keepdim), argmax(x, dim, keepdim)};
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return {amin(x, {dim}, keepdim), argmin(x, dim, keepdim)};
}

Tensor mean(const Tensor& x_in, const Shape& dims, bool keepdim) {
  Tensor x = autocast_input("mean", x_in);
  if (!x.is_floating_point())
    fail("mean: could not infer output dtype. input dtype must be floating point, got {}", dtype_name(x.dtype()));
  int64_t n = reduced_count("mean", x, dims);
  // Half types divide the float32 sum, rounding once as torch does.
  if (is_half(x.dtype())) return div(sum(x.to(DType::Float32), dims, keepdim), double(n)).to(x.dtype());
  return div(sum(x, dims, keepdim), double(n));  // an empty reduction gives 0 / 0 = nan, as torch
}

Tensor var(const Tensor& x_in, const Shape& dims, int64_t correction, bool keepdim) {
  Tensor x = autocast_input("var", x_in);
  require_floating("var", x);
  if (is_half(x.dtype())) return var(x.to(DType::Float32), dims, correction, keepdim).to(x.dtype());
  int64_t n = reduced_count("var", x, dims);
  // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
  Tensor d = sub(x, mean(x, dims, /*keepdim=*/true));
  // torch clamps the divisor at 0, so too large a correction gives inf or nan rather than a sign flip.
  return div(sum(mul(d, d), dims, keepdim), double(std::max<int64_t>(n - correction, 0)));
}

Tensor std(const Tensor& x_in, const Shape& dims, int64_t correction, bool keepdim) {
  Tensor x = autocast_input("std", x_in);
  require_floating("std", x);
  return sqrt(var(x, dims, correction, keepdim));
}

Tensor logsumexp(const Tensor& x_in, const Shape& dims, bool keepdim) {
  Tensor x = autocast_input("logsumexp", x_in);
  reduced_count("logsumexp", x, dims);
  Tensor xf = x.is_floating_point() ? x : x.to(default_dtype());
  // amax has nothing to reduce on an empty input; there the sum is 0 and the result -inf
  if (xf.numel() == 0) return log(sum(exp(xf), dims, keepdim));
  // Shifting by the max keeps exp in range. An infinite max would make x - m nan (inf - inf), so those
  // shift by 0 instead: +inf then gives log(inf) = inf and an all -inf slice gives log(0) = -inf.
  Tensor m = amax(xf, dims, /*keepdim=*/true);
  m = where(eq(abs(m), std::numeric_limits<double>::infinity()), 0.0, m);
  Tensor r = log(sum(exp(sub(xf, m)), dims, keepdim));
  if (!keepdim) m = dispatch1(OpId::Squeeze, {m}, Attrs().set("dims", dims));
  return add(r, m);
}

}  // namespace kiln
