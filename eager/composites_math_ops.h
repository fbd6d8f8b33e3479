#pragma once
// Norms and small linear-algebra and random composites model files call (vector_norm / norm, F.normalize,
// addmm / baddbmm, bernoulli, randn_like), each written once over a builder (eager/builder.h).
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/dtype.h"
#include "eager/composites.h"

namespace kiln::composite {

// torch.linalg.vector_norm over dims (all when empty): p = inf / -inf is the max / min of |x|, p = 0 the
// count of non-zeros, else sum(|x|^p)^(1/p) (p = 2 as sqrt of a sum of squares)
template <class B>
Val<B> vector_norm(B& b, Val<B> x, double p, const Shape& dims, bool keepdim) {
  if (std::optional<DType> dt = b.dtype(x); dt && !is_floating(*dt))
    b.fail(fmt::format("linalg.vector_norm: expected a floating point input, got {}", dtype_name(*dt)));
  Shape ds;
  for (int64_t d : dims) ds.push_back(b.dim("norm", d, x));
  Attrs red = Attrs().set("dims", ds).set("keepdim", keepdim);
  Val<B> a = b.op(OpId::Abs, {x});
  if (std::isinf(p)) return b.op(p > 0 ? OpId::Amax : OpId::Amin, {a}, red);
  if (p == 0) return b.op(OpId::Sum, {b.op(OpId::Cast, {b.op(OpId::Ne, {x, b.scalar(0.0)})}, Attrs().set("dtype", b.dtype(x).value_or(DType::Float32)))}, red);
  if (p == 1) return b.op(OpId::Sum, {a}, red);
  if (p == 2) return b.op(OpId::Sqrt, {b.op(OpId::Sum, {b.op(OpId::Mul, {x, x})}, red)});
  return b.op(OpId::Pow, {b.op(OpId::Sum, {b.op(OpId::Pow, {a, b.scalar(p)})}, red), b.scalar(1.0 / p)});
}

// F.normalize: x / max(||x||_p over dim, eps)
template <class B>
Val<B> normalize(B& b, Val<B> x, double p, int64_t dim, double eps) {
  Val<B> n = vector_norm(b, x, p, {dim}, true);
  return b.op(OpId::Div, {x, b.op(OpId::Maximum, {n, b.scalar(eps)})});
}

// torch.addmm / baddbmm: beta * input + alpha * (m1 @ m2); beta = 0 ignores input (NaN included), as torch
template <class B>
Val<B> addmm(B& b, Val<B> input, Val<B> m1, Val<B> m2, double beta, double alpha) {
  Val<B> prod = b.op(OpId::Matmul, {m1, m2});
  if (alpha != 1.0) prod = b.op(OpId::Mul, {prod, b.scalar(alpha)});
  if (beta == 0.0) return b.op(OpId::Add, {prod, b.op(OpId::Mul, {b.op(OpId::LogicalAnd, {input, b.scalar(false)}), b.scalar(0)})});
  return b.op(OpId::Add, {beta == 1.0 ? input : b.op(OpId::Mul, {input, b.scalar(beta)}), prod});
}

// torch.bernoulli(x, p) / x.bernoulli_(p): 1 where a fresh uniform of x's shape is below p (a tensor or a
// number), 0 elsewhere, in x's dtype; torch.bernoulli(probs) is bernoulli(b, probs, probs)
template <class B>
Val<B> bernoulli(B& b, Val<B> x, Val<B> p) {
  Val<B> u = b.rand_like(x);
  return b.op(OpId::Where, {b.op(OpId::Lt, {u, p}), b.scalar(1.0), b.op(OpId::Mul, {b.detach(x), b.scalar(0.0)})});
}
template <class B>
Val<B> bernoulli(B& b, Val<B> p) {
  return bernoulli(b, p, p);
}

// randn_like by Box-Muller over two fresh uniforms (1 - u keeps the log finite)
template <class B>
Val<B> randn_like(B& b, Val<B> x) {
  Val<B> u1 = b.op(OpId::Sub, {b.scalar(1.0), b.rand_like(x)});
  Val<B> u2 = b.rand_like(x);
  Val<B> r = b.op(OpId::Sqrt, {b.op(OpId::Mul, {b.op(OpId::Log, {u1}), b.scalar(-2.0)})});
  return b.op(OpId::Mul, {r, b.op(OpId::Cos, {b.op(OpId::Mul, {u2, b.scalar(2.0 * M_PI)})})});
}

}  // namespace kiln::composite
