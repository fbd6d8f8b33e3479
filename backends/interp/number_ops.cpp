#include "backends/interp/number_ops.h"

#include <cmath>
#include <limits>

namespace kiln::interp {

namespace {

int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) fail("integer overflow in {} // {}", a, b);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python ints do not overflow; TorchScript's wrap silently. kiln says so instead.
template <class F>
int64_t checked(F overflows, const char* op, int64_t a, int64_t b) {
  int64_t r;
  if (overflows(a, b, &r)) fail("integer overflow in {} {} {}", a, op, b);
  return r;
}

int64_t ipow(int64_t base, int64_t e) {
  int64_t r = 1, b = base;
  for (int64_t k = e; k > 0; k >>= 1) {
    if ((k & 1) && __builtin_mul_overflow(r, b, &r)) fail("integer overflow in {} ** {}", base, e);
    if (k > 1 && __builtin_mul_overflow(b, b, &b)) fail("integer overflow in {} ** {}", base, e);
  }
  return r;
}

template <class T>
IValue compare(ir::Prim op, T x, T y) {
  switch (op) {
    case ir::Prim::NumLt: return x < y;
    case ir::Prim::NumLe: return x <= y;
    case ir::Prim::NumGt: return x > y;
    case ir::Prim::NumGe: return x >= y;
    case ir::Prim::NumEq: return x == y;
    case ir::Prim::NumNe: return x != y;
    default: return IValue();
  }
}

}  // namespace

IValue number_binary(ir::Prim op, const IValue& a, const IValue& b) {
  if (!a.is_number() || !b.is_number())
    fail("{}: expects numbers, got {} and {}", ir::prim_name(op), a.type_name(), b.type_name());
  bool ints = !a.is_double() && !b.is_double();
  IValue cmp = ints ? compare(op, a.to_int(), b.to_int()) : compare(op, a.to_double(), b.to_double());
  if (!cmp.is_none()) return cmp;
  if (ints) {
    int64_t x = a.to_int(), y = b.to_int();
    switch (op) {
      case ir::Prim::NumAdd: return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_add_overflow(p, q, r); }, "+", x, y);
      case ir::Prim::NumSub: return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_sub_overflow(p, q, r); }, "-", x, y);
      case ir::Prim::NumMul: return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_mul_overflow(p, q, r); }, "*", x, y);
      case ir::Prim::NumDiv:
        if (y == 0) fail("division by zero");
        return double(x) / double(y);
      case ir::Prim::NumFloorDiv: return floordiv(x, y);
      case ir::Prim::NumMod: return y == -1 ? int64_t(0) : x - floordiv(x, y) * y;
      case ir::Prim::NumPow:
        if (y < 0) return std::pow(double(x), double(y));
        return ipow(x, y);
      case ir::Prim::Min: return std::min(x, y);
      case ir::Prim::Max: return std::max(x, y);
      default: break;
    }
  } else {
    double x = a.to_double(), y = b.to_double();
    switch (op) {
      case ir::Prim::NumAdd: return x + y;
      case ir::Prim::NumSub: return x - y;
      case ir::Prim::NumMul: return x * y;
      case ir::Prim::NumDiv:
        if (y == 0) fail("float division by zero");
        return x / y;
      case ir::Prim::NumFloorDiv:
        if (y == 0) fail("float floor division by zero");
        return std::floor(x / y);
      case ir::Prim::NumMod: {
        if (y == 0) fail("float modulo by zero");
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return r;
      }
      case ir::Prim::NumPow: return std::pow(x, y);
      case ir::Prim::Min: return std::min(x, y);
      case ir::Prim::Max: return std::max(x, y);
      default: break;
    }
  }
  fail("{} is not a binary number op", ir::prim_name(op));
}

}  // namespace kiln::interp
