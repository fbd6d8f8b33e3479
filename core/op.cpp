#include "core/op.h"

#include <array>
#include <iterator>

namespace kiln {
namespace {

constexpr std::array<OpInfo, kNumOps> kTable = {{
#define KILN_UNARY(Id, name, rule, expr) {#name, OpKind::Unary, DTypeRule::rule, #expr, ""},
#define KILN_BINARY(Id, name, rule, expr) {#name, OpKind::Binary, DTypeRule::rule, #expr, ""},
#define KILN_REDUCE(Id, name, init, fold) {#name, OpKind::Reduce, DTypeRule::None, #fold, #init},
#define KILN_OP(Id, name, kind) {#name, OpKind::kind, DTypeRule::None, "", ""},
#include "core/ops.def"
}};

constexpr bool Yes = true, No = false;
constexpr OpCost Cheap = OpCost::Cheap, Math = OpCost::Math, Saved = OpCost::Saved;
constexpr OpUnit NoUnit{}, Zero{true, true, 0}, ZeroRight{true, false, 0}, One{true, true, 1}, OneRight{true, false, 1};
constexpr OpFacts kFacts[] = {
#define KILN_FACTS(Id, grad, reads, cost, unit) {OpId::Id, grad, reads, cost, unit},
#include "core/op_facts.def"
};

// op_facts.def follows ops.def row for row: a missing, extra or misplaced row fails the build here.
constexpr bool facts_in_table_order() {
  for (size_t i = 0; i < std::size(kFacts); ++i)
    if (kFacts[i].id != OpId(i)) return false;
  return true;
}
static_assert(std::size(kFacts) == kNumOps, "core/op_facts.def needs one row per row of core/ops.def");
static_assert(facts_in_table_order(), "core/op_facts.def's rows must follow core/ops.def's order");

}  // namespace

const OpInfo& op_info(OpId op) { return kTable[size_t(op)]; }
const OpFacts& op_facts(OpId op) { return kFacts[size_t(op)]; }

bool op_from_name(std::string_view name, OpId* out) {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (kTable[i].name == name) {
      *out = OpId(i);
      return true;
    }
  return false;
}

}  // namespace kiln
