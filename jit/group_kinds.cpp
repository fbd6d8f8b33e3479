#include "jit/group_kinds.h"

#include "jit/conv_backward_group.h"
#include "jit/gemm_group.h"
#include "jit/scatter_zeros_group.h"

namespace kiln::jit {

namespace {

constexpr const char* kKindAttr = "kind";

const GroupKind kKinds[] = {
    {kGemmKind, compile_gemm_group, true},
    {kConvBackwardKind,
     [](const ir::Graph& g, const std::string& name, const GroupCompiler&, std::string* why) {
       return compile_conv_backward_group(g, name, why);
     },
     false},
    {kScatterZerosKind,
     [](const ir::Graph& g, const std::string& name, const GroupCompiler&, std::string* why) {
       return compile_scatter_zeros_group(g, name, why);
     },
     false},
};

}  // namespace

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
