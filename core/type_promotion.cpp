#include "core/type_promotion.h"

namespace kiln {

void ResultTypeState::add(DType d, bool zero_dim, bool wrapped_number) {
  std::optional<DType>* slot = &dim;
  if (wrapped_number) {
    slot = &wrapped;
    if (is_floating(d)) d = default_dtype();
  } else if (zero_dim) {
    slot = &zero;
  }
  *slot = slot->has_value() ? promote_types(**slot, d) : d;
}

namespace {
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

DType ResultTypeState::result() const { return *combine(dim, combine(zero, wrapped)); }

DType unary_compute_dtype(OpId op, DType x) {
  return op_info(op).rule == DTypeRule::Float && !is_floating(x) ? default_dtype() : x;
}

DType binary_compute_dtype(OpId op, const ResultTypeState& operands) {
  DType t = operands.result();
  return op_info(op).rule == DTypeRule::Float && !is_floating(t) ? default_dtype() : t;
}

DType elementwise_out_dtype(OpId op, DType compute) {
  DTypeRule r = op_info(op).rule;
  return r == DTypeRule::Compare || r == DTypeRule::Logical ? DType::Bool : compute;
}

}  // namespace kiln
