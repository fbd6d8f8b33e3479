#pragma once
// The eager functions of the second group of tensor ops (eager/composites_tensor_ops.h,
// eager/composites_math_ops.h): flip, roll, repeat_interleave, one_hot, pad, cumsum/cumprod, norms, normalize,
// addmm / baddbmm, bernoulli, the tensor-bound clamp and the number-only where.
#include <optional>
#include <string>

#include "eager/ops.h"

namespace kiln {

Tensor flip(const Tensor& x, const Shape& dims);
// without dims: over the flattened tensor, the shape kept
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims = {});
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
// a count per element along dim (or one for all), an integer tensor: the result's size is the counts' sum,
// read now, so this is eager only (a script graph would need a size known when it runs)
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);
// torch.repeat_interleave(repeats): each index i repeats[i] times, int64 (the index the one above selects)
Tensor repeat_interleave(const Tensor& repeats);
// int64 (..., num_classes); -1: the input's max + 1
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
// F.pad: (left, right) of the last dim, then of the one before, ...; modes constant, reflect, replicate
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant", double value = 0.0);
Tensor cumsum(const Tensor& x, int64_t dim);   // integers and bool: int64
Tensor cumprod(const Tensor& x, int64_t dim);
// torch.linalg.vector_norm (torch.norm of a vector p): p = inf, -inf, 0, or any other number
Tensor vector_norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);  // F.normalize
// beta * input + alpha * (m1 @ m2), batched for baddbmm
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1.0, double alpha = 1.0);
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta = 1.0, double alpha = 1.0);
Tensor bernoulli(const Tensor& p);
// torch.einsum of any number of operands, with '...' ('bhid,bhjd->bhij', 'ij,jk,kl->il', '...ij,...jk->...ik')
Tensor einsum(const std::string& equation, const Tensors& operands);  // 1 with probability p, in p's dtype, from kiln's generator
Tensor where(const Tensor& cond, Scalar a, Scalar b);  // torch's dtype of two Python numbers
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);  // tensor bounds, broadcast; undefined: none
// x[i, :, j], x[..., i], x[mask, i]: index tensors starting on the ascending dims `dims` (negative: from the end);
// apart, the broadcast index dims come first (torch). A bool mask covers as many dims as it has and stands for the
// positions of its true elements (torch's nonzero()).
Tensor index_dims(const Tensor& x, const Shape& dims, const Tensors& indices);
// x[:, mask], x[..., mask], x[:, mask2d]: a bool mask over x's dims from d (negative: its last dim lands on d)
Tensor masked_dim(const Tensor& x, int64_t d, const Tensor& mask);
// x[mask] = v as a new tensor: v broadcast to x[mask]'s shape and cast to x's dtype (torch's index_put_)
Tensor masked_put(const Tensor& x, const Tensor& mask, const Tensor& v);
// x[:, mask] = v as a new tensor, the mask over x's dims from d as masked_dim's
Tensor masked_put_dim(const Tensor& x, int64_t d, const Tensor& mask, const Tensor& v);
// x[idx] = v as a new tensor, idx an integer tensor over dim 0 (torch's index_put_); accumulate: v's rows are
// added to x's, repeated indices adding up
Tensor index_put(const Tensor& x, const Tensor& index, const Tensor& v, bool accumulate = false);
// x[i0, i1, ...] = v (or += with accumulate) as a new tensor: integer index tensors over x's leading dims,
// broadcast together (torch's index_put_ with a tuple of indices)
Tensor index_put(const Tensor& x, const Tensors& indices, const Tensor& v, bool accumulate = false);
// torch's IndexError for a mask over x's dims from d whose shape differs from theirs; empty when it matches
std::string mask_mismatch(const Shape& mask, const Shape& x, int64_t d);

}  // namespace kiln
