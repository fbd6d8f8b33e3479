#pragma once
// Fusion groups with a kernel of their own. A pass that makes such a group marks it with its kind
// (`prim::FusionGroup[name=..., kind="gemm"]`); the executor has it compiled by the kernels for that
// kind of the device type the graph runs on (backends::compile_kind, backends/fusion_backend.h: the
// CPU's are in backends/cpu/), whichever code generator compiles the plain groups (elementwise chains
// and rows), which carry no kind. A new kind is one row here (group_kinds.cpp) and one in the kernels'
// table of each device type that runs it (backends/cpu/group_kernels.cpp).
#include <span>
#include <string_view>

#include "core/ir/graph.h"

namespace kiln::jit {

inline constexpr std::string_view kGemmKind = "gemm";                    // backends/cpu/gemm_group.h
inline constexpr std::string_view kConvBackwardKind = "conv_backward";   // backends/cpu/conv_backward_group.h
inline constexpr std::string_view kScatterZerosKind = "scatter_zeros";   // backends/cpu/scatter_zeros_group.h

struct GroupKind {
  std::string_view name;
  bool gemm;  // counted as a GEMM kernel in GroupCompileStats
};

// Every kind a pass marks.
std::span<const GroupKind> group_kinds();

// The kind a pass marked the group with; empty for a plain group and for any other node.
std::string_view group_kind(const ir::Node& n);
void set_group_kind(ir::Node& group, std::string_view kind);
// The registry's row for the node's kind; null for a plain group or an unknown kind (a group read from
// a file written by a newer kiln runs on the interpreter).
const GroupKind* find_group_kind(const ir::Node& n);

}  // namespace kiln::jit
