// View kernels: each returns a tensor that shares its input's storage.
#include "eager/cpu/views.h"

#include <algorithm>

#include "eager/cpu/copy.h"
#include "eager/kernels.h"

namespace kiln::cpu {

Shape infer_shape(const char* op, const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) fail("{}: only one dimension can be inferred in shape {}", op, shape_str(shape));
      infer = int(i);
    } else if (out[i] < 0) {
      fail("{}: invalid shape dimension {} in shape {}", op, out[i], shape_str(shape));
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      fail("{}: shape {} is invalid for input of size {}", op, shape_str(shape), numel);
    out[size_t(infer)] = numel / known;
  } else if (known != numel) {
    fail("{}: shape {} is invalid for input of size {}", op, shape_str(shape), numel);
  }
  return out;
}

std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  const Shape& old_sizes = x.sizes();
  const Shape& old_strides = x.strides();
  Shape new_strides(shape.size());
  if (x.numel() == 0) return contiguous_strides(shape);
  if (old_sizes.empty()) return contiguous_strides(shape);  // one element: any all-ones shape views it
  // Walk chunks of old dims that are contiguous among themselves and match them to new dims.
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[size_t(tensor_d)];
    if (tensor_d == 0 || (old_sizes[size_t(tensor_d - 1)] != 1 &&
                          old_strides[size_t(tensor_d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[size_t(view_d)] == 1)) {
        new_strides[size_t(view_d)] = view_numel * chunk_base_stride;
        view_numel *= shape[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[size_t(tensor_d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor make_view(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

Tensors kernel_reshape(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  Shape shape = infer_shape("reshape", attrs.ints("shape"), x.numel());
  if (auto st = view_strides(x, shape)) return {make_view(x, shape, *st, x.storage_offset())};
  Tensor c = cast_to(x, x.dtype());
  return {make_view(c, shape, contiguous_strides(shape), 0)};
}

Tensors kernel_permute(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  const Shape& dims = attrs.ints("dims");
  int64_t n = x.dim();
  if (int64_t(dims.size()) != n)
    fail("permute: number of dims {} doesn't match the tensor's rank {}", shape_str(dims), n);
  Shape sizes(static_cast<size_t>(n)), strides(static_cast<size_t>(n));
  std::vector<bool> seen(size_t(n), false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim("permute", dims[size_t(i)], n);
    if (seen[size_t(d)]) fail("permute: dim {} appears more than once in {}", d, shape_str(dims));
    seen[size_t(d)] = true;
    sizes[size_t(i)] = x.sizes()[size_t(d)];
    strides[size_t(i)] = x.strides()[size_t(d)];
  }
  return {make_view(x, sizes, strides, x.storage_offset())};
}

Tensors kernel_expand(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  const Shape& shape = attrs.ints("shape");
  int64_t n = int64_t(shape.size()), xd = x.dim();
  if (n < xd)
    fail("expand: the number of sizes provided ({}) must be at least the tensor's rank ({})", n, xd);
  Shape sizes(static_cast<size_t>(n)), strides(static_cast<size_t>(n));
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - xd);
    int64_t want = shape[size_t(i)];
    if (j < 0) {
      if (want < 0) fail("expand: -1 is not allowed in a leading, new dimension (shape {})", shape_str(shape));
      sizes[size_t(i)] = want;
      strides[size_t(i)] = 0;
      continue;
    }
    int64_t have = x.sizes()[size_t(j)];
    if (want == -1) want = have;
    if (want < 0) fail("expand: invalid size {} in shape {}", want, shape_str(shape));
    if (have == want) {
      sizes[size_t(i)] = have;
      strides[size_t(i)] = x.strides()[size_t(j)];
    } else if (have == 1) {
      sizes[size_t(i)] = want;
      strides[size_t(i)] = 0;
    } else {
      fail("expand: the expanded size of the tensor ({}) must match the existing size ({}) at non-singleton "
           "dimension {}; target sizes {}, tensor sizes {}",
           want, have, i, shape_str(shape), shape_str(x.sizes()));
    }
  }
  return {make_view(x, sizes, strides, x.storage_offset())};
}

Tensors kernel_slice(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  if (x.dim() == 0) fail("slice: cannot slice a 0-d tensor");
  int64_t d = wrap_dim("slice", attrs.i("dim"), x.dim());
  int64_t size = x.sizes()[size_t(d)];
  int64_t step = attrs.i_or("step", 1);
  if (step <= 0) fail("slice: step must be positive, got {}", step);
  auto clampi = [&](int64_t v) {
    if (v < 0) v += size;
    return std::clamp<int64_t>(v, 0, size);
  };
  int64_t start = clampi(attrs.i_or("start", 0));
  int64_t end = clampi(attrs.i_or("end", size));
  int64_t len = end > start ? (end - start + step - 1) / step : 0;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[size_t(d)] = len;
  strides[size_t(d)] *= step;
  return {make_view(x, sizes, strides, x.storage_offset() + start * x.strides()[size_t(d)])};
}

Tensors kernel_select(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  if (x.dim() == 0) fail("select: cannot select from a 0-d tensor");
  int64_t d = wrap_dim("select", attrs.i("dim"), x.dim());
  int64_t size = x.sizes()[size_t(d)];
  int64_t idx = attrs.i("index");
  if (idx < -size || idx >= size)
    fail("select: index {} is out of range for dimension {} of size {}", idx, d, size);
  if (idx < 0) idx += size;
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t off = x.storage_offset() + idx * strides[size_t(d)];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return {make_view(x, sizes, strides, off)};
}

Tensors kernel_squeeze(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  const Shape& dims = attrs.ints("dims");
  std::vector<bool> drop(size_t(x.dim()), false);
  if (dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i) drop[size_t(i)] = x.sizes()[size_t(i)] == 1;
  } else {
    for (int64_t d : dims) {
      int64_t w = wrap_dim("squeeze", d, x.dim());
      if (x.dim() > 0) drop[size_t(w)] = x.sizes()[size_t(w)] == 1;
    }
  }
  Shape sizes, strides;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!drop[size_t(i)]) {
      sizes.push_back(x.sizes()[size_t(i)]);
      strides.push_back(x.strides()[size_t(i)]);
    }
  return {make_view(x, sizes, strides, x.storage_offset())};
}

Tensors kernel_unsqueeze(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  int64_t d = wrap_dim("unsqueeze", attrs.i("dim"), x.dim() + 1);
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t st = d < x.dim() ? x.strides()[size_t(d)] * x.sizes()[size_t(d)] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return {make_view(x, sizes, strides, x.storage_offset())};
}

}  // namespace kiln::cpu
