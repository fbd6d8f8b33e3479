#pragma once
// torch.result_type and the op table's dtype rules, on dtypes alone, so the kernels and the IR
// verifier agree on what an elementwise op returns.
#include <optional>

#include "core/dtype.h"
#include "core/op.h"

namespace kiln {

// bool < integer < floating: promotion across groups only looks at these categories.
enum class DTypeCategory : uint8_t { Bool, Int, Float };
inline DTypeCategory category(DType t) {
  return t == DType::Bool ? DTypeCategory::Bool : is_floating(t) ? DTypeCategory::Float : DTypeCategory::Int;
}

// Dimensioned tensors, 0-d tensors and wrapped C++ scalars are promoted in three groups; a lower
// group only matters when it is of a higher category (int tensor + 2.5 → float32).
struct ResultTypeState {
  std::optional<DType> dim, zero, wrapped;
  void add(DType d, bool zero_dim, bool wrapped_number);
  DType result() const;
};

// The dtype an elementwise row computes in (before Compare/Logical rules turn the result to bool).
DType unary_compute_dtype(OpId op, DType x);
DType binary_compute_dtype(OpId op, const ResultTypeState& operands);
// The dtype a row returns, given its compute dtype.
DType elementwise_out_dtype(OpId op, DType compute);

}  // namespace kiln
