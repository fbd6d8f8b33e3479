// Elementwise kernels: type promotion and broadcasting around the per-ISA loops, plus the public
// elementwise functions and operators.
#include "core/op.h"
#include "core/type_promotion.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/composites.h"
#include "eager/cpu/copy.h"
#include "eager/dispatch.h"
#include "eager/kernels.h"
#include "eager/ops.h"

namespace kiln {
namespace {


ResultTypeState operand_types(const Tensor& a, const Tensor& b) {
  ResultTypeState st;
  for (const Tensor* t : {&a, &b}) st.add(t->dtype(), t->dim() == 0, t->impl()->wrapped_number);
  return st;
}

bool is_half(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

Tensor cast_if(const Tensor& t, DType d) { return t.dtype() == d ? t : cpu::cast_to(t, d); }

// Runs a binary row into `out` (already shaped as the broadcast result and of the right dtype).
void binary_into(OpId op, DType compute, const Tensor& a, const Tensor& b, const Tensor& out) {
  auto L = cpu::make_loop(op_name(op).data(), out, {&a, &b});
  cpu::isa_kernels().binary(op, compute, L);
}

DType binary_compute_type(OpId op, const Tensor& a, const Tensor& b) {
  DType t = binary_compute_dtype(op, operand_types(a, b));
  if (op == OpId::Sub && (a.dtype() == DType::Bool || b.dtype() == DType::Bool))
    fail("sub: subtraction with a bool tensor is not supported, use logical_not to invert a mask");
  return t;
}

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) { return operand_types(a, b).result(); }

namespace cpu {

namespace {
// An integer floor_divide (and remainder, built on it) by zero raises, as torch's ZeroDivisionError: the
// kernel itself has no value to give (a float one gives inf or nan).
void check_integer_divisor(OpId op, DType t, const Tensor& divisor) {
  if (op != OpId::FloorDivide || !is_integral(t)) return;
  Tensor d = cast_to(divisor, DType::Int64);
  const int64_t* p = d.data_ptr<int64_t>();
  for (int64_t i = 0; i < d.numel(); ++i)
    if (p[i] == 0) fail("floor_divide: integer division by zero (ZeroDivisionError), divisor of shape {}", shape_str(divisor.sizes()));
}
}  // namespace

Tensors kernel_unary(OpId op, const Tensors& in, const Attrs&) {
  const Tensor& x = in.at(0);
  const OpInfo& info = op_info(op);
  DType t = unary_compute_dtype(op, x.dtype());
  if (t == DType::Bool && op == OpId::Neg) fail("neg: negation of a bool tensor is not supported, use logical_not");
  DType out_t = elementwise_out_dtype(op, t);
  DType compute = is_half(t) ? DType::Float32 : t;
  Tensor xc = cast_if(x, compute);
  Tensor out = Tensor::empty(x.sizes(), out_t == t ? compute : out_t);
  auto L = make_loop(info.name.data(), out, {&xc});
  isa_kernels().unary(op, compute, L);
  return {cast_if(out, out_t)};
}

Tensors kernel_binary(OpId op, const Tensors& in, const Attrs&) {
  const Tensor& a = in.at(0);
  const Tensor& b = in.at(1);
  Shape shape = broadcast_shapes(op_name(op), a.sizes(), b.sizes());
  DType t = binary_compute_type(op, a, b);
  if (op == OpId::FloorDivide && t == DType::Bool)
    fail("floor_divide: bool tensors cannot be divided, got {} and {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  check_integer_divisor(op, t, b);
  DType out_t = elementwise_out_dtype(op, t);
  DType compute = is_half(t) ? DType::Float32 : t;
  Tensor out = Tensor::empty(shape, out_t == t ? compute : out_t);
  binary_into(op, compute, cast_if(a, compute), cast_if(b, compute), out);
  return {cast_if(out, out_t)};
}

Tensors kernel_where(OpId, const Tensors& in, const Attrs&) {
  const Tensor& c = in.at(0);
  if (c.dtype() != DType::Bool) fail("where: condition must be a bool tensor, got {}", dtype_name(c.dtype()));
  Shape shape = broadcast_shapes("where", broadcast_shapes("where", c.sizes(), in.at(1).sizes()), in.at(2).sizes());
  DType t = result_type(in.at(1), in.at(2));
  Tensor a = cast_if(in.at(1), t), b = cast_if(in.at(2), t);
  Tensor out = Tensor::empty(shape, t);
  auto L = make_loop("where", out, {&c, &a, &b});
  isa_kernels().where(t, L);
  return {out};
}

void binary_inplace(OpId op, const Tensor& self, const Tensor& other) {
  std::string_view name = op_name(op);
  Shape shape = broadcast_shapes(name, self.sizes(), other.sizes());
  if (shape != self.sizes())
    fail("{}_: output with shape {} doesn't match the broadcast shape {}", name, shape_str(self.sizes()),
         shape_str(shape));
  DType t = binary_compute_type(op, self, other);
  // torch's can_cast: the result may narrow within its category (float64 into float32) but not cross
  // into a lower one (float into int, int into bool).
  if (category(t) > category(self.dtype()) || elementwise_out_dtype(op, t) != t)
    fail("{}_: result type {} can't be cast to the desired output type {}", name, dtype_name(t),
         dtype_name(self.dtype()));
  if (t != self.dtype() || is_half(self.dtype()) || !self.device().is_cpu()) {
    // Out of place, then written back (a device's kernels live behind dispatch); the fresh result
    // cannot overlap self.
    Tensor r = dispatch1(op, {self, other});
    kiln::copy_into(self, r);
  } else {
    check_integer_divisor(op, t, other);
    // An operand sharing memory with self is read as it was before the op, as if cloned first.
    Tensor o = partially_overlaps(self, other) ? cast_to(other, other.dtype()) : other;
    binary_into(op, t, self, cast_if(o, t), self);
  }
  self.bump_version();
}

}  // namespace cpu

// ---- public elementwise functions ----
#define KILN_UNARY(Id, name, rule, expr) \
  Tensor name(const Tensor& x) { return dispatch1(OpId::Id, {x}); }
#define KILN_BINARY(Id, name, rule, expr)                                                          \
  Tensor name(const Tensor& a, const Tensor& b) { return dispatch1(OpId::Id, {a, b}); }             \
  Tensor name(const Tensor& a, Scalar b) { return dispatch1(OpId::Id, {a, Tensor::wrap_scalar(b)}); } \
  Tensor name(Scalar a, const Tensor& b) { return dispatch1(OpId::Id, {Tensor::wrap_scalar(a), b}); }
#include "core/ops.def"

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return dispatch1(OpId::Where, {c, a, b}); }
Tensor where(const Tensor& c, const Tensor& a, Scalar b) { return where(c, a, Tensor::wrap_scalar(b)); }
Tensor where(const Tensor& c, Scalar a, const Tensor& b) { return where(c, Tensor::wrap_scalar(a), b); }

Tensor square(const Tensor& x) { return mul(x, x); }
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Tensor r = x;
  if (lo) r = maximum(r, *lo);
  if (hi) r = minimum(r, *hi);
  return r;
}
// torch.remainder / Python's % : the divisor's sign (eager/composites.h).
Tensor remainder(const Tensor& a, const Tensor& b) {
  EagerBuilder eb;
  return composite::remainder(eb, a, b);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return gelu(x);
  if (approximate == "tanh") return gelu_tanh(x);
  fail("gelu: approximate must be 'none' or 'tanh', got '{}'", approximate);
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator!(const Tensor& x) { return logical_not(x); }
#define KILN_DEFINE_OPERATOR(sym, fn)                                          \
  Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  Tensor operator sym(const Tensor& a, Scalar b) { return fn(a, b); }        \
  Tensor operator sym(Scalar a, const Tensor& b) { return fn(a, b); }
KILN_DEFINE_OPERATOR(+, add)
KILN_DEFINE_OPERATOR(-, sub)
KILN_DEFINE_OPERATOR(*, mul)
KILN_DEFINE_OPERATOR(/, div)
KILN_DEFINE_OPERATOR(==, eq)
KILN_DEFINE_OPERATOR(!=, ne)
KILN_DEFINE_OPERATOR(<, lt)
KILN_DEFINE_OPERATOR(<=, le)
KILN_DEFINE_OPERATOR(>, gt)
KILN_DEFINE_OPERATOR(>=, ge)
#undef KILN_DEFINE_OPERATOR

}  // namespace kiln
