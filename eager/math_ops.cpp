// The eager entry points of eager/composites_math_ops.h (norms, normalize, addmm / baddbmm, bernoulli) and
// the tensor-bound clamp and number-only where, run with EagerBuilder.
#include "eager/composites_einsum.h"
#include "eager/composites_math_ops.h"
#include "eager/ops.h"
#include "eager/tensor_ops.h"

namespace kiln {

Tensor vector_norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  EagerBuilder b;
  return composite::vector_norm(b, x, p, dims, keepdim);
}

Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) { return vector_norm(x, p, dims, keepdim); }

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  EagerBuilder b;
  return composite::normalize(b, x, p, dim, eps);
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha) {
  if (m1.dim() != 2 || m2.dim() != 2)
    fail("addmm: expected 2-D matrices, got {} and {}", shape_str(m1.sizes()), shape_str(m2.sizes()));
  EagerBuilder b;
  return composite::addmm(b, input, m1, m2, beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta, double alpha) {
  if (b1.dim() != 3 || b2.dim() != 3)
    fail("baddbmm: expected 3-D batches, got {} and {}", shape_str(b1.sizes()), shape_str(b2.sizes()));
  EagerBuilder b;
  return composite::addmm(b, input, b1, b2, beta, alpha);
}

Tensor einsum(const std::string& equation, const Tensors& operands) {
  EagerBuilder b;
  return composite::einsum(b, equation, operands);
}

Tensor bernoulli(const Tensor& p) {
  EagerBuilder b;
  return composite::bernoulli(b, p);
}

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  if (!min.defined() && !max.defined()) fail("clamp: at least one of min or max must not be None");
  Tensor y = x;
  if (min.defined()) y = maximum(y, min);
  if (max.defined()) y = minimum(y, max);
  return y;
}

Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  return where(cond, Tensor::wrap_scalar(a), Tensor::wrap_scalar(b));
}

}  // namespace kiln
