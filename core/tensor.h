#pragma once
// Tensor: a refcounted handle to sizes, strides and an offset over shared Storage. Copying a Tensor
// copies the handle (as in PyTorch's C++ API); ops and methods are defined in eager/.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"
#include "core/trace_hooks.h"

namespace kiln {

struct AutogradMeta;  // eager/autograd: grad, grad_fn, requires_grad; null for plain tensors
struct Node;          // eager/autograd: a recorded op's backward

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  bool wrapped_number = false;  // a C++ scalar turned into a 0-d tensor: it does not widen float types
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor;
using Tensors = std::vector<Tensor>;

// A scalar operand: a C++ bool, integer or floating value, kept with its category for type promotion.
struct Scalar {
  double v;
  DType type;      // Bool, Int64 or Float64
  int64_t i = 0;   // the exact value of an integer scalar (v rounds past 2^53)
  Scalar(double x) : v(x), type(DType::Float64) {}
  Scalar(float x) : v(x), type(DType::Float64) {}
  Scalar(int x) : v(x), type(DType::Int64), i(x) {}
  Scalar(long x) : v(double(x)), type(DType::Int64), i(x) {}
  Scalar(long long x) : v(double(x)), type(DType::Int64), i(x) {}
  Scalar(bool x) : v(x), type(DType::Bool), i(x) {}
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A fresh, uninitialised, contiguous tensor.
  static Tensor empty(const Shape& sizes, DType dtype = DType::Float32, Device device = Device::cpu());
  // A view of caller-owned memory (not freed by kiln); strides default to contiguous.
  static Tensor from_blob(void* data, const Shape& sizes, DType dtype, Shape strides = {});
  // A 0-d tensor holding a C++ scalar, marked as a wrapped number for type promotion.
  static Tensor wrap_scalar(Scalar s);

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // Reading sizes as numbers specialises a trace to them (core/trace_hooks.h); dim() does not.
  const Shape& sizes() const {
    note_trace_read(impl_.get(), TraceRead::Size);
    return checked()->sizes;
  }
  const Shape& shape() const { return sizes(); }
  const Shape& strides() const { return checked()->strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return int64_t(checked()->sizes.size()); }
  int64_t numel() const { return numel_of(sizes()); }
  int64_t storage_offset() const { return checked()->offset; }
  DType dtype() const { return checked()->dtype; }
  Device device() const { return checked()->storage->device; }
  size_t element_size() const { return itemsize(dtype()); }
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  const std::shared_ptr<Storage>& storage() const { return checked()->storage; }
  uint64_t version() const { return storage()->version.load(std::memory_order_relaxed); }
  void bump_version() const { storage()->version.fetch_add(1, std::memory_order_relaxed); }

  void* raw_data() const {
    note_trace_read(impl_.get(), TraceRead::Data);
    auto* i = checked();
    if (i->storage->data == nullptr) [[unlikely]] check_released();
    return static_cast<char*>(i->storage->data) + i->offset * int64_t(itemsize(i->dtype));
  }
  // Typed pointer to the first element; raises when T does not match the dtype.
  template <class T>
  T* data_ptr() const {
    if (dtype_of<T>() != dtype())
      fail("data_ptr: tensor has dtype {} but {} was requested", dtype_name(dtype()), dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }
  // The value of a one-element tensor converted to T; raises for more than one element.
  template <class T>
  T item() const {
    note_trace_read(impl_.get(), TraceRead::Item);
    if (numel_of(checked()->sizes) != 1) return static_cast<T>(item_double());  // raises
    if (!device().is_cpu()) return detach().cpu().item<T>();    // reading a value synchronises
    // Converted from the stored type, so an int64 past 2^53 stays exact.
    return visit_dtype(dtype(), [&](auto v) -> T {
      using S = decltype(v);
      S s = *static_cast<const S*>(raw_data());
      if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Float16>) return static_cast<T>(float(s));
      else return static_cast<T>(s);
    });
  }
  double item_double() const;

  // ---- views (share storage) ----
  Tensor view(const Shape& shape) const;     // raises when strides cannot express it
  Tensor reshape(const Shape& shape) const;  // copies only when needed
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // ---- copies and conversion ----
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // A copy on another device (this tensor itself when already there). Not recorded by autograd: a
  // tensor that requires grad raises under grad mode rather than silently losing its history.
  Tensor to(Device device) const;
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor detach() const;  // shares storage, no autograd history
  // A contiguous CPU tensor with this one's values (itself when it is one), made with core alone:
  // printing and item() use it below the eager layer.
  Tensor host_contiguous() const;

  // ---- in-place (bump the version counter) ----
  Tensor& add_(const Tensor& other);
  Tensor& sub_(const Tensor& other);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
  Tensor& add_(Scalar s);
  Tensor& sub_(Scalar s);
  Tensor& mul_(Scalar s);
  Tensor& div_(Scalar s);
  Tensor& zero_();
  Tensor& fill_(Scalar s);
  Tensor& copy_(const Tensor& src);  // broadcasts src, converts dtype
  Tensor& masked_fill_(const Tensor& mask, Scalar value);

  // ---- math methods (the free functions of eager/ops.h) ----
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor pow(const Tensor& e) const;
  Tensor pow(Scalar e) const;
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor sum(int64_t dim, bool keepdim = false) const { return sum(Shape{dim}, keepdim); }
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor mean(int64_t dim, bool keepdim = false) const { return mean(Shape{dim}, keepdim); }
  Tensor max() const;
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor var(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor median() const;
  std::pair<Tensor, Tensor> median(int64_t dim, bool keepdim = false) const;
  std::pair<Tensor, Tensor> kthvalue(int64_t k, int64_t dim = -1, bool keepdim = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  Tensor repeat(const Shape& repeats) const;

  // ---- autograd (eager/autograd) ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // leaves of floating dtype only
  Tensor grad() const;                     // accumulated by backward(); undefined before
  void set_grad(const Tensor& g) const;    // e.g. an undefined tensor to zero it (optimizers)
  std::shared_ptr<Node> grad_fn() const;   // null for leaves
  bool is_leaf() const;
  void retain_grad() const;                // keep .grad of a non-leaf
  // Calls hook(grad) when this tensor's gradient is computed; a defined result replaces it.
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Leaves: calls hook(*this) after backward() has added into .grad (torch's
  // register_post_accumulate_grad_hook); kiln::dist's DistributedDataParallel starts its all-reduce here.
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;

  std::string str() const;  // as torch prints it

 private:
  TensorImpl* checked() const {
    if (!impl_) fail("tensor: use of an undefined tensor");
    return impl_.get();
  }
  // A storage without memory holds only empty tensors, unless its memory was released on purpose
  // (a FullyShardedDataParallel parameter between steps): reading one raises instead of crashing.
  void check_released() const;
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace kiln
