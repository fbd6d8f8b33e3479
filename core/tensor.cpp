#include "core/tensor.h"

#include <cstring>

#include "core/device_runtime.h"

namespace kiln {

namespace detail {
thread_local TraceHooks* t_trace_hooks __attribute__((tls_model("initial-exec"))) = nullptr;
}  // namespace detail

TraceHooks* set_trace_hooks(TraceHooks* hooks) {
  TraceHooks* prev = detail::t_trace_hooks;
  detail::t_trace_hooks = hooks;
  return prev;
}

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device) {
  for (int64_t d : sizes)
    if (d < 0) fail("empty: negative dimension in shape {}", shape_str(sizes));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(size_t(numel_of(sizes)) * itemsize(dtype), device);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::from_blob(void* data, const Shape& sizes, DType dtype, Shape strides) {
  auto st = std::make_shared<Storage>();
  st->data = data;
  st->owned = false;
  st->nbytes = size_t(numel_of(sizes)) * itemsize(dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(st);
  impl->sizes = sizes;
  impl->strides = strides.empty() && !sizes.empty() ? contiguous_strides(sizes) : std::move(strides);
  if (impl->strides.size() != sizes.size())
    fail("from_blob: {} strides given for a shape of rank {}", impl->strides.size(), sizes.size());
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::wrap_scalar(Scalar s) {
  Tensor t = empty({}, s.type);
  switch (s.type) {
    case DType::Bool: *static_cast<bool*>(t.raw_data()) = s.v != 0; break;
    case DType::Int64: *static_cast<int64_t*>(t.raw_data()) = s.i; break;
    default: *static_cast<double*>(t.raw_data()) = s.v; break;
  }
  t.impl()->wrapped_number = true;
  return t;
}

void Tensor::check_released() const {
  if (numel_of(impl_->sizes) > 0)
    fail("tensor: a tensor of shape {} has no memory: its storage was released (a FullyShardedDataParallel "
         "parameter between steps; gather() it first)",
         shape_str(impl_->sizes));
}

int64_t Tensor::size(int64_t dim) const { return sizes()[size_t(wrap_dim("size", dim, this->dim()))]; }
int64_t Tensor::stride(int64_t dim) const { return strides()[size_t(wrap_dim("stride", dim, this->dim()))]; }

bool Tensor::is_contiguous() const {
  const Shape& sz = checked()->sizes;  // a layout query, not a size read by user code
  const Shape& st = strides();
  if (numel_of(sz) == 0) return true;  // no element to place, as torch
  int64_t expected = 1;
  for (size_t i = sz.size(); i-- > 0;) {
    if (sz[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sz[i];
  }
  return true;
}

double Tensor::item_double() const {
  note_trace_read(impl_.get(), TraceRead::Item);
  int64_t n = numel_of(checked()->sizes);
  if (n != 1) fail("item: a tensor with {} elements cannot be converted to a scalar", n);
  if (!device().is_cpu()) return host_contiguous().item_double();
  return visit_dtype(dtype(), [&](auto v) -> double {
    using T = decltype(v);
    return static_cast<double>(*static_cast<const T*>(raw_data()));
  });
}

Tensor Tensor::host_contiguous() const {
  if (device().is_cpu() && is_contiguous()) return *this;
  const Shape& sz = sizes();
  const Shape& st = strides();
  const int64_t item = int64_t(itemsize(dtype()));
  // the span of storage elements the view reaches, staged on the host for a device tensor
  int64_t lo = storage_offset(), hi = storage_offset();
  for (size_t d = 0; d < sz.size(); ++d) {
    if (sz[d] == 0) return Tensor::empty(sz, dtype());
    (st[d] < 0 ? lo : hi) += (sz[d] - 1) * st[d];
  }
  const char* base = static_cast<const char*>(storage()->data) + lo * item;
  std::vector<char> staged;
  if (!device().is_cpu()) {
    staged.resize(size_t((hi - lo + 1) * item));
    device_runtime(device()).copy_bytes(staged.data(), Device::cpu(), base, device(), staged.size());
    base = staged.data();
  }
  Tensor out = Tensor::empty(sz, dtype());
  char* dst = static_cast<char*>(out.raw_data());
  std::vector<int64_t> idx(sz.size(), 0);
  for (int64_t i = 0, n = numel(); i < n; ++i) {
    int64_t off = storage_offset() - lo;
    for (size_t d = 0; d < sz.size(); ++d) off += idx[d] * st[d];
    std::memcpy(dst + i * item, base + off * item, size_t(item));
    for (size_t d = sz.size(); d-- > 0;)
      if (++idx[d] < sz[d]) break;
      else idx[d] = 0;
  }
  return out;
}

}  // namespace kiln
