#pragma once
// Per-lane calls to the scalar expression of an ops.def row, for what the emitter has no vector code
// for (pow with a variable exponent, erf in f64, sin/cos of huge or non-finite arguments, rows added
// to the table later). Signature: void fn(T* a, const T* b, int64_t lanes): a[i] = expr(a[i], b[i]).
#include "core/op.h"

namespace kiln::x86::detail {

// nullptr when op is not a unary or binary row.
const void* scalar_fn(OpId op, bool f64);

}  // namespace kiln::x86::detail
