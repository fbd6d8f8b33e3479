// Tensor's methods: thin forwards to the eager free functions, as in torch.
#include "eager/autograd/graph.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/views.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {

Tensor Tensor::view(const Shape& shape) const {
  Shape s = cpu::infer_shape("view", shape, numel());
  if (!cpu::view_strides(*this, s))
    fail("view: size {} is not compatible with the input's size {} and stride {} (at least one dimension "
         "spans across two contiguous subspaces); use reshape instead",
         shape_str(s), shape_str(sizes()), shape_str(strides()));
  return kiln::reshape(*this, s);
}
Tensor Tensor::reshape(const Shape& shape) const { return kiln::reshape(*this, shape); }
Tensor Tensor::permute(const Shape& dims) const { return kiln::permute(*this, dims); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return kiln::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  if (dim() > 2) fail("t: expects a tensor with <= 2 dimensions, but self is {}-D", dim());
  return dim() < 2 ? *this : kiln::transpose(*this, 0, 1);
}
Tensor Tensor::expand(const Shape& shape) const { return dispatch1(OpId::Expand, {*this}, Attrs().set("shape", shape)); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  Attrs a;
  a.set("dim", d).set("step", step);
  if (start) a.set("start", *start);
  if (end) a.set("end", *end);
  return dispatch1(OpId::Slice, {*this}, a);
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  int64_t w = wrap_dim("narrow", d, dim());
  int64_t size = sizes()[size_t(w)];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start + length > size)
    fail("narrow: start ({}) + length ({}) exceeds dimension size ({})", start, length, size);
  return slice(w, start, start + length);
}
Tensor Tensor::select(int64_t d, int64_t index) const {
  return dispatch1(OpId::Select, {*this}, Attrs().set("dim", d).set("index", index));
}
Tensor Tensor::squeeze() const { return kiln::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return kiln::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return kiln::flatten(*this, s, e); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : dispatch1(OpId::Contiguous, {*this}); }
Tensor Tensor::clone() const { return dispatch1(OpId::Clone, {*this}); }
Tensor Tensor::to(DType d) const { return d == dtype() ? *this : dispatch1(OpId::Cast, {*this}, Attrs().set("dtype", d)); }
Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  if (trace_hooks())
    fail("to: moving a tensor from {} to {} inside a traced function is not recorded; move the inputs before "
         "tracing", device().str(), d.str());
  if (GradMode::enabled() && requires_grad())
    fail("to: moving a tensor that requires grad from {} to {} is not recorded by autograd; detach() it, or "
         "create the leaf on {}", device().str(), d.str(), d.str());
  Tensor out = Tensor::empty(sizes(), dtype(), d);
  kiln::copy_into(out, *this);
  return out;
}
Tensor Tensor::detach() const {
  const TensorImpl* i = impl();
  Tensor d = cpu::make_view(*this, i->sizes, i->strides, i->offset);
  if (TraceHooks* tracer = trace_hooks()) tracer->on_alias(*this, d);
  return d;
}

namespace {
// Writes `value` into self and tells a running trace that self now holds that op output.
void write_back(const char* method, Tensor& self, const Tensor& value) {
  {
    QuietTraceReads quiet;
    kiln::copy_into(self, value);
  }
  self.bump_version();
  if (TraceHooks* tracer = trace_hooks()) tracer->on_inplace(method, self, value);
}

// self takes the history of r, the value written back into it
void adopt_history(Tensor& self, const Tensor& r) {
  AutogradMeta& m = ensure_autograd_meta(self);
  AutogradMeta* rm = autograd_meta(r);
  m.requires_grad = true;
  m.grad_fn = rm->grad_fn;
  m.output_nr = rm->output_nr;
}

// In-place under autograd or a trace: the op runs out of place (on a copy of self under autograd,
// so what backward saves is not overwritten), the result is written back, and self takes the
// result's history and graph value.
void inplace(OpId op, Tensor& self, const Tensor& other) {
  bool tracked = GradMode::enabled() && (self.requires_grad() || other.requires_grad());
  if (!tracked && !trace_hooks()) return cpu::binary_inplace(op, self, other);
  if (tracked && self.requires_grad() && self.is_leaf())
    fail("{}_: a leaf tensor that requires grad is being used in an in-place operation", op_name(op));
  Tensor r = dispatch1(op, {tracked ? self.clone() : self, other});
  if (r.dtype() != self.dtype())
    fail("{}_: result type {} can't be cast to the desired output type {}", op_name(op), dtype_name(r.dtype()),
         dtype_name(self.dtype()));
  write_back(op_name(op).data(), self, r);
  if (tracked) adopt_history(self, r);
}

// fill_/copy_ while tracing: the new value as ops (cast, broadcast, fresh copy), so the graph has it.
Tensor traced_fill_value(const Tensor& self, const Tensor& src) {
  QuietTraceReads quiet;  // self's sizes are the target's, not user code reading numbers
  return src.to(self.dtype()).expand(self.sizes()).clone();
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o) { inplace(OpId::Add, *this, o); return *this; }
Tensor& Tensor::sub_(const Tensor& o) { inplace(OpId::Sub, *this, o); return *this; }
Tensor& Tensor::mul_(const Tensor& o) { inplace(OpId::Mul, *this, o); return *this; }
Tensor& Tensor::div_(const Tensor& o) { inplace(OpId::Div, *this, o); return *this; }
Tensor& Tensor::add_(Scalar s) { return add_(wrap_scalar(s)); }
Tensor& Tensor::sub_(Scalar s) { return sub_(wrap_scalar(s)); }
Tensor& Tensor::mul_(Scalar s) { return mul_(wrap_scalar(s)); }
Tensor& Tensor::div_(Scalar s) { return div_(wrap_scalar(s)); }
Tensor& Tensor::zero_() { return fill_(0); }
Tensor& Tensor::fill_(Scalar s) { return copy_(wrap_scalar(s)); }
Tensor& Tensor::copy_(const Tensor& src) {
  if (trace_hooks()) {
    write_back("copy_", *this, traced_fill_value(*this, src));
    return *this;
  }
  kiln::copy_into(*this, src);
  bump_version();
  return *this;
}

// masked_fill_ writes the composite's result back, as the binary in-place ops do under autograd
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  bool tracked = GradMode::enabled() && requires_grad();
  if (tracked && is_leaf()) fail("masked_fill_: a leaf tensor that requires grad is being used in an in-place operation");
  Tensor r = kiln::masked_fill(tracked ? clone() : *this, mask, value);
  write_back("masked_fill_", *this, r);
  if (tracked) adopt_history(*this, r);
  return *this;
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const { return kiln::masked_fill(*this, mask, value); }
Tensor Tensor::tril(int64_t diagonal) const { return kiln::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return kiln::triu(*this, diagonal); }
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return kiln::topk(*this, k, dim, largest, sorted);
}
std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const { return kiln::sort(*this, dim, descending); }
Tensor Tensor::median() const { return kiln::median(*this); }
std::pair<Tensor, Tensor> Tensor::median(int64_t dim, bool keepdim) const { return kiln::median(*this, dim, keepdim); }
std::pair<Tensor, Tensor> Tensor::kthvalue(int64_t k, int64_t dim, bool keepdim) const { return kiln::kthvalue(*this, k, dim, keepdim); }
Tensor Tensor::argsort(int64_t dim, bool descending) const { return kiln::argsort(*this, dim, descending); }
Tensor Tensor::repeat(const Shape& repeats) const { return kiln::repeat(*this, repeats); }

Tensor Tensor::neg() const { return kiln::neg(*this); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }
Tensor Tensor::sigmoid() const { return kiln::sigmoid(*this); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::pow(const Tensor& e) const { return kiln::pow(*this, e); }
Tensor Tensor::pow(Scalar e) const { return kiln::pow(*this, e); }
Tensor Tensor::sum() const { return kiln::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return kiln::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return kiln::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return kiln::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return kiln::max(*this); }
std::pair<Tensor, Tensor> Tensor::max(int64_t d, bool keepdim) const { return kiln::max(*this, d, keepdim); }
Tensor Tensor::min() const { return kiln::min(*this); }
std::pair<Tensor, Tensor> Tensor::min(int64_t d, bool keepdim) const { return kiln::min(*this, d, keepdim); }
Tensor Tensor::argmax() const { return kiln::argmax(*this); }
Tensor Tensor::argmax(int64_t d, bool keepdim) const { return kiln::argmax(*this, d, keepdim); }
Tensor Tensor::argmin() const { return kiln::argmin(*this); }
Tensor Tensor::argmin(int64_t d, bool keepdim) const { return kiln::argmin(*this, d, keepdim); }
Tensor Tensor::prod() const { return kiln::prod(*this); }
Tensor Tensor::prod(int64_t d, bool keepdim) const { return kiln::prod(*this, {d}, keepdim); }
Tensor Tensor::var(const Shape& dims, int64_t correction, bool keepdim) const {
  return kiln::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const Shape& dims, int64_t correction, bool keepdim) const {
  return kiln::std(*this, dims, correction, keepdim);
}
Tensor Tensor::matmul(const Tensor& o) const { return kiln::matmul(*this, o); }
Tensor Tensor::softmax(int64_t d) const { return kiln::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return kiln::log_softmax(*this, d); }

}  // namespace kiln
