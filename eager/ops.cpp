// Public wrappers of the non-elementwise primitives, and the shape composites built from them.
#include "eager/ops.h"

#include "eager/autocast/autocast.h"
#include "eager/composites.h"
#include "eager/dispatch.h"

namespace kiln {

Tensor reshape(const Tensor& x, const Shape& shape) { return dispatch1(OpId::Reshape, {x}, Attrs().set("shape", shape)); }
Tensor permute(const Tensor& x, const Shape& dims) { return dispatch1(OpId::Permute, {x}, Attrs().set("dims", dims)); }

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  int64_t n = x.dim();
  if (n == 0) return x;
  d0 = wrap_dim("transpose", d0, n);
  d1 = wrap_dim("transpose", d1, n);
  Shape dims(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) dims[size_t(i)] = i;
  std::swap(dims[size_t(d0)], dims[size_t(d1)]);
  return permute(x, dims);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  int64_t s = wrap_dim("flatten", start_dim, x.dim()), e = wrap_dim("flatten", end_dim, x.dim());
  if (s > e) fail("flatten: start_dim {} cannot come after end_dim {}", start_dim, end_dim);
  Shape shape(x.sizes().begin(), x.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= x.sizes()[size_t(i)];
  shape.push_back(n);
  shape.insert(shape.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  return dispatch1(OpId::Squeeze, {x}, Attrs().set("dims", dim ? Shape{*dim} : Shape{}));
}
Tensor unsqueeze(const Tensor& x, int64_t dim) { return dispatch1(OpId::Unsqueeze, {x}, Attrs().set("dim", dim)); }

Tensor cat(const Tensors& xs, int64_t dim) {
  if (xs.empty()) fail("cat: expected a non-empty list of tensors");
  return dispatch1(OpId::Cat, xs, Attrs().set("dim", dim));
}

Tensor stack(const Tensors& xs_in, int64_t dim) {
  if (xs_in.empty()) fail("stack: expected a non-empty list of tensors");
  Tensors xs = autocast_inputs("stack", xs_in);
  int64_t d = wrap_dim("stack", dim, xs[0].dim() + 1);
  Tensors us;
  for (const Tensor& x : xs) {
    if (x.sizes() != xs[0].sizes())
      fail("stack: expects each tensor to be equal size, but got {} and {}", shape_str(xs[0].sizes()),
           shape_str(x.sizes()));
    us.push_back(unsqueeze(x, d));
  }
  return cat(us, d);
}

Tensors split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  int64_t d = wrap_dim("split", dim, x.dim());
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x.size(d))
    fail("split: split sizes {} do not sum to the size {} of dimension {}", shape_str(sizes), x.size(d), d);
  Tensors out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(x.slice(d, start, start + s));
    start += s;
  }
  return out;
}

Tensors split(const Tensor& x, int64_t split_size, int64_t dim) {
  int64_t d = wrap_dim("split", dim, x.dim());
  if (split_size <= 0) fail("split: split_size must be positive, got {}", split_size);
  std::vector<int64_t> sizes;
  for (int64_t left = x.size(d); left > 0; left -= split_size) sizes.push_back(std::min(left, split_size));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, d);
}

Tensors chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  if (chunks <= 0) fail("chunk: number of chunks must be positive, got {}", chunks);
  int64_t d = wrap_dim("chunk", dim, x.dim());
  int64_t size = x.size(d);
  return split(x, std::max<int64_t>(1, (size + chunks - 1) / chunks), d);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return dispatch1(OpId::IndexSelect, {x, index}, Attrs().set("dim", dim));
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return dispatch1(OpId::Gather, {x, index}, Attrs().set("dim", dim));
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  return dispatch1(OpId::IndexAdd, {self, index, source}, Attrs().set("dim", dim));
}
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return dispatch1(OpId::ScatterAdd, {self, index, src}, Attrs().set("dim", dim));
}
Tensor slice_backward(const Tensor& grad, const Shape& shape, int64_t dim, int64_t start, int64_t end,
                      int64_t step) {
  return dispatch1(OpId::SliceBackward, {grad},
                   Attrs().set("shape", shape).set("dim", dim).set("start", start).set("end", end).set("step", step));
}

Tensor matmul(const Tensor& a, const Tensor& b) { return dispatch1(OpId::Matmul, autocast_inputs("matmul", {a, b})); }
Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  Tensors cast = autocast_inputs("mm", {a_in, b_in});
  const Tensor &a = cast[0], &b = cast[1];
  if (a.dim() != 2 || b.dim() != 2)
    fail("mm: expected 2-D tensors, got shapes {} and {}", shape_str(a.sizes()), shape_str(b.sizes()));
  return matmul(a, b);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  EagerBuilder b;
  return composite::linear(b, x, weight, bias);
}

}  // namespace kiln
