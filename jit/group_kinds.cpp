#include "jit/group_kinds.h"

namespace kiln::jit {

namespace {

constexpr const char* kKindAttr = "kind";

const GroupKind kKinds[] = {
    {kGemmKind, true},
    {kConvBackwardKind, false},
    {kScatterZerosKind, false},
};

}  // namespace

std::span<const GroupKind> group_kinds() { return kKinds; }

std::string_view group_kind(const ir::Node& n) {
  if (n.prim() != ir::Prim::FusionGroup || !n.attrs().has(kKindAttr)) return {};
  return n.attrs().s(kKindAttr);
}

void set_group_kind(ir::Node& group, std::string_view kind) { group.attrs().set(kKindAttr, std::string(kind)); }

const GroupKind* find_group_kind(const ir::Node& n) {
  std::string_view k = group_kind(n);
  if (k.empty()) return nullptr;
  for (const GroupKind& row : kKinds)
    if (row.name == k) return &row;
  return nullptr;
}

}  // namespace kiln::jit
