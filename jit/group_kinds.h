#pragma once
// Fusion groups with a kernel of their own. A pass that makes such a group marks it with its kind
// (`prim::FusionGroup[name=..., kind="gemm"]`); the executor compiles a marked group with its kind's
// compiler, whichever backend compiles the plain groups (elementwise chains and rows), which carry no
// kind. A new kind is one row of the registry in group_kinds.cpp.
#include <memory>
#include <string>
#include <string_view>

#include "core/ir/graph.h"
#include "jit/group_kernel.h"

namespace kiln::jit {

inline constexpr std::string_view kGemmKind = "gemm";                    // jit/gemm_group.h
inline constexpr std::string_view kConvBackwardKind = "conv_backward";   // jit/conv_backward_group.h
inline constexpr std::string_view kScatterZerosKind = "scatter_zeros";   // jit/scatter_zeros_group.h

struct GroupKind {
  std::string_view name;
  // The kernel for the group's standalone graph (group_graph()); `backend` compiles what the kind leaves
  // to it (a gemm group's epilogue where oneDNN is off). Null, with the reason in *why_not, when the
  // block is not what the kind takes.
  std::shared_ptr<GroupKernel> (*compile)(const ir::Graph& group, const std::string& name, const GroupCompiler& backend,
                                          std::string* why_not);
  bool gemm;  // counted as a GEMM kernel in GroupCompileStats
};

// The kind a pass marked the group with; empty for a plain group and for any other node.
std::string_view group_kind(const ir::Node& n);
void set_group_kind(ir::Node& group, std::string_view kind);
// The registry's row for the node's kind; null for a plain group or an unknown kind (a group read from
// a file written by a newer kiln runs on the interpreter).
const GroupKind* find_group_kind(const ir::Node& n);

}  // namespace kiln::jit
