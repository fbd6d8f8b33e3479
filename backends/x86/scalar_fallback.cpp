#include "backends/x86/scalar_fallback.h"

#include <cstdint>

#include "core/scalar_math.h"

namespace kiln::x86::detail {
namespace {

#include "core/scalar_functors.inc"

template <class T, class F>
void unary_lanes(T* a, const T*, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = T(F{}(a[i]));
}
template <class T, class F>
void binary_lanes(T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = T(F{}(a[i], b[i]));
}

}  // namespace

const void* scalar_fn(OpId op, bool f64) {
  switch (op) {
#define KILN_UNARY(Id, name, rule, expr) \
  case OpId::Id:                         \
    return f64 ? reinterpret_cast<const void*>(&unary_lanes<double, Fn_##Id>) : reinterpret_cast<const void*>(&unary_lanes<float, Fn_##Id>);
#define KILN_BINARY(Id, name, rule, expr) \
  case OpId::Id:                          \
    return f64 ? reinterpret_cast<const void*>(&binary_lanes<double, Fn_##Id>) : reinterpret_cast<const void*>(&binary_lanes<float, Fn_##Id>);
#define KILN_OTHER(Id) \
  case OpId::Id:       \
    return nullptr;
#include "core/ops.def"
  }
  return nullptr;
}

}  // namespace kiln::x86::detail
