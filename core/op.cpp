#include "core/op.h"

#include <array>

namespace kiln {
namespace {

constexpr std::array<OpInfo, kNumOps> kTable = {{
#define KILN_UNARY(Id, name, rule, expr) {#name, OpKind::Unary, DTypeRule::rule, #expr},
#define KILN_BINARY(Id, name, rule, expr) {#name, OpKind::Binary, DTypeRule::rule, #expr},
#define KILN_REDUCE(Id, name) {#name, OpKind::Reduce, DTypeRule::None, ""},
#define KILN_OP(Id, name, kind) {#name, OpKind::kind, DTypeRule::None, ""},
#include "core/ops.def"
}};

}  // namespace

const OpInfo& op_info(OpId op) { return kTable[size_t(op)]; }

bool op_from_name(std::string_view name, OpId* out) {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (kTable[i].name == name) {
      *out = OpId(i);
      return true;
    }
  return false;
}

}  // namespace kiln
