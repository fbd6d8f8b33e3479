// The eager entry points of eager/composites_tensor_ops.h: masked_fill, tril/triu, sort/argsort/topk, median/kthvalue,
// multinomial and repeat, run with EagerBuilder so autograd and the tracer see their rows.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/shape.h"
#include "eager/composites_tensor_ops.h"
#include "eager/index_put_dim.h"
#include "eager/ops.h"
#include "eager/tensor_ops.h"

namespace kiln {

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  EagerBuilder b;
  return composite::masked_fill(b, x, mask, value);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  EagerBuilder b;
  return composite::masked_fill(b, x, mask, value);
}

Tensor index_tensors(const Tensor& x, int64_t first, const Tensors& indices) {
  if (indices.empty()) fail("index_tensors: no index tensors");
  if (first < 0 || first + int64_t(indices.size()) > x.dim())
    fail("index_tensors: {} indices from dim {} for a tensor of rank {}", indices.size(), first, x.dim());
  EagerBuilder b;
  return composite::index_tensors(b, x, first, indices);
}

std::string mask_mismatch(const Shape& mask, const Shape& x, int64_t d) {
  for (size_t i = 0; i < mask.size(); ++i)
    if (d + int64_t(i) >= int64_t(x.size()) || mask[i] != x[size_t(d) + i])
      return fmt::format("the shape of the mask [{}] at index {} does not match the shape of the indexed tensor [{}] at index {}",
                         fmt::join(mask, ", "), i, fmt::join(x, ", "), d + int64_t(i));
  return {};
}

Tensor masked_rows(const Tensor& x, const Tensor& mask) {
  if (std::string bad = mask_mismatch(mask.sizes(), x.sizes(), 0); !bad.empty()) fail("{}", bad);
  EagerBuilder b;
  return composite::masked_rows(b, x, mask);
}

Tensor index_dims(const Tensor& x, const Shape& dims, const Tensors& indices) {
  if (indices.empty() || indices.size() != dims.size()) fail("index_dims: {} dims for {} index tensors", dims.size(), indices.size());
  // dims where each index starts in x; a mask covers its rank of them, so the dims after it shift once it is merged
  Shape at;
  int64_t next = 0;
  for (size_t j = 0; j < dims.size(); ++j) {
    int64_t d = wrap_dim("index_dims", dims[j], x.dim());
    int64_t k = indices[j].dtype() == DType::Bool ? indices[j].dim() : 1;
    if (d < next || d + k > x.dim()) fail("index_dims: dims {} must ascend within a tensor of rank {}", shape_str(dims), x.dim());
    next = d + k;
    at.push_back(d);
  }
  EagerBuilder b;
  Tensor y = x;
  Tensors idx = indices;
  int64_t merged = 0;
  for (size_t j = 0; j < at.size(); ++j) {
    if (idx[j].dtype() != DType::Bool) {
      at[j] -= merged;
      continue;
    }
    int64_t d = at[j] - merged;
    if (std::string bad = mask_mismatch(idx[j].sizes(), y.sizes(), d); !bad.empty()) fail("{}", bad);
    y = composite::merge_mask_dims(b, y, d, idx[j]);
    merged += idx[j].dim() - 1;
    idx[j] = composite::mask_positions(b, idx[j]);
    at[j] = d;
  }
  return composite::index_dims(b, y, at, idx);
}

Tensor masked_dim(const Tensor& x, int64_t d, const Tensor& mask) {
  int64_t at = wrap_dim("masked_dim", d, x.dim());
  if (d < 0) at -= mask.dim() - 1;
  if (std::string bad = mask_mismatch(mask.sizes(), x.sizes(), at); !bad.empty() || at < 0) fail("{}", bad.empty() ? mask_mismatch(mask.sizes(), Shape{}, 0) : bad);
  EagerBuilder b;
  return composite::masked_dim(b, x, d, mask);
}

Tensor masked_put(const Tensor& x, const Tensor& mask, const Tensor& v) {
  if (std::string bad = mask_mismatch(mask.sizes(), x.sizes(), 0); !bad.empty()) fail("{}", bad);
  EagerBuilder b;
  return composite::masked_put(b, x, mask, v);
}

Tensor masked_put_dim(const Tensor& x, int64_t d, const Tensor& mask, const Tensor& v) {
  int64_t at = wrap_dim("masked_put_dim", d, x.dim());
  if (d < 0) at -= mask.dim() - 1;
  if (std::string bad = mask_mismatch(mask.sizes(), x.sizes(), at); !bad.empty() || at < 0) fail("{}", bad.empty() ? mask_mismatch(mask.sizes(), Shape{}, 0) : bad);
  EagerBuilder b;
  return composite::masked_put_dim(b, x, d, mask, v);
}

Tensor index_put(const Tensor& x, const Tensor& index, const Tensor& v, bool accumulate) {
  if (x.dim() == 0) fail("index_put: invalid index of a 0-dim tensor");
  EagerBuilder b;
  return accumulate ? composite::index_put_accumulate(b, x, index, v) : composite::index_put(b, x, index, v);
}

Tensor index_put(const Tensor& x, const Tensors& indices, const Tensor& v, bool accumulate) {
  if (x.dim() == 0) fail("index_put: invalid index of a 0-dim tensor");
  // torch reads a k-D bool mask inside the tuple as k index tensors: the coordinates of its true elements
  // (nonzero()), over the k dims of x it covers
  Tensors expanded;
  int64_t at = 0;
  for (const Tensor& i : indices) {
    if (!i.defined() || i.dtype() != DType::Bool) {
      expanded.push_back(i);
      ++at;
      continue;
    }
    if (std::string bad = mask_mismatch(i.sizes(), x.sizes(), at); !bad.empty()) fail("index_put: {}", bad);
    EagerBuilder b;
    Tensor pos = composite::mask_positions(b, i);  // int64
    int64_t stride = 1;
    Tensors coords(size_t(i.dim()));
    for (int64_t d = i.dim() - 1; d >= 0; --d) {
      Tensor q = stride == 1 ? pos : b.op(OpId::FloorDivide, {pos, b.scalar(Scalar(stride))});
      coords[size_t(d)] = d == 0 ? q : composite::remainder(b, q, b.scalar(Scalar(i.size(d))));
      stride *= std::max<int64_t>(i.size(d), 1);
    }
    expanded.insert(expanded.end(), coords.begin(), coords.end());
    at += i.dim();
  }
  EagerBuilder b;
  return composite::index_put_tuple(b, x, expanded, v, accumulate);
}

Tensor index_put_dim(const Tensor& x, int64_t d, const Tensor& index, const Tensor& v) {
  int64_t at = wrap_dim("index_put_dim", d, x.dim());
  EagerBuilder b;
  return composite::index_put_dim(b, x, at, index, v);
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  EagerBuilder b;
  return composite::triangle(b, x, diagonal, false);
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  EagerBuilder b;
  return composite::triangle(b, x, diagonal, true);
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  EagerBuilder b;
  return composite::argsort(b, x, dim, descending);
}

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  EagerBuilder b;
  return composite::sort(b, x, dim, descending);
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool) {
  EagerBuilder b;
  return composite::topk(b, x, k, dim, largest);
}

Tensor median(const Tensor& x) {
  if (x.numel() == 0 && !is_floating(x.dtype())) fail("median: an empty {} tensor has no median (torch reads uninitialized memory)", dtype_name(x.dtype()));
  EagerBuilder b;
  return composite::median_all(b, x);
}

std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  EagerBuilder b;
  return composite::median(b, x, dim, keepdim);
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  EagerBuilder b;
  return composite::kthvalue(b, x, k, dim, keepdim);
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  EagerBuilder b;
  return composite::multinomial(b, probs, num_samples, replacement);
}

Tensor repeat(const Tensor& x, const Shape& repeats) {
  if (int64_t(repeats.size()) < x.dim())
    fail("repeat: number of dimensions of repeat dims can not be smaller than number of dimensions of tensor ({} < {})",
         repeats.size(), x.dim());
  Shape padded(repeats.size() - size_t(x.dim()), 1);
  padded.insert(padded.end(), x.sizes().begin(), x.sizes().end());
  EagerBuilder b;
  return composite::repeat(b, x.dim() == int64_t(padded.size()) ? x : x.reshape(padded), repeats);
}

Tensor flip(const Tensor& x, const Shape& dims) {
  EagerBuilder b;
  return composite::flip(b, x, dims);
}

Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims) {
  EagerBuilder b;
  return composite::roll(b, x, shifts, dims);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  EagerBuilder b;
  return composite::repeat_interleave(b, x, repeats, dim);
}

static std::vector<int64_t> repeat_counts(const Tensor& repeats) {
  if (!is_integral(repeats.dtype()))
    fail("repeat_interleave: repeats has to be Long or Int tensor, got {}", dtype_name(repeats.dtype()));
  Tensor r = repeats.detach().to(DType::Int64).host_contiguous();
  const int64_t* p = r.data_ptr<int64_t>();
  std::vector<int64_t> counts(p, p + r.numel());
  for (int64_t c : counts)
    if (c < 0) fail("repeat_interleave: repeats can not be negative");
  return counts;
}

Tensor repeat_interleave(const Tensor& repeats) {
  if (repeats.dim() != 1) fail("repeat_interleave: repeat_interleave only accept 1D vector as repeat");
  std::vector<int64_t> index;
  const std::vector<int64_t> counts = repeat_counts(repeats);
  for (size_t i = 0; i < counts.size(); ++i) index.insert(index.end(), size_t(counts[i]), int64_t(i));
  return tensor(index, {int64_t(index.size())}).to(repeats.device());
}

// index_select with the repeated indices: its gradient sums each copy's back onto its element, as torch's
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  if (repeats.dim() > 1) fail("repeat_interleave: repeats must be 0-dim or 1-dim tensor");
  if (!dim) return repeat_interleave(x.reshape({-1}), repeats, int64_t(0));
  const int64_t d = wrap_dim("repeat_interleave", *dim, x.dim());
  const int64_t n = x.size(d);
  std::vector<int64_t> counts = repeat_counts(repeats);
  if (counts.size() == 1) counts.assign(size_t(n), counts[0]);
  if (int64_t(counts.size()) != n)
    fail("repeat_interleave: repeats must have the same size as input along dim, but got repeats.size(0) = {} and "
         "input.size({}) = {}", counts.size(), d, n);
  return index_select(x, d, repeat_interleave(tensor(counts, {n})).to(x.device()));
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  if (num_classes == -1) num_classes = x.numel() == 0 ? 0 : int64_t(amax(x).item<int64_t>()) + 1;
  if (x.dtype() == DType::Int64 && x.numel() > 0 && amin(x).item<int64_t>() < 0) fail("one_hot: class values must be non-negative");
  if (x.dtype() == DType::Int64 && x.numel() > 0 && amax(x).item<int64_t>() >= num_classes)
    fail("one_hot: class values must be smaller than num_classes ({})", num_classes);
  EagerBuilder b;
  return composite::one_hot(b, x, num_classes);
}

Tensor pad(const Tensor& x, const Shape& pads, const std::string& mode, double value) {
  EagerBuilder b;
  return composite::pad(b, x, pads, mode, value);
}

Tensor cumsum(const Tensor& x, int64_t dim) {
  EagerBuilder b;
  return composite::cumsum(b, x, dim);
}

Tensor cumprod(const Tensor& x, int64_t dim) {
  EagerBuilder b;
  return composite::cumprod(b, x, dim);
}

}  // namespace kiln
