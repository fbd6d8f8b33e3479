#pragma once
// The CPU's kernels for marked fusion groups (backends/fusion_backend.h compile_kind): one row per kind
// in group_kernels.cpp. They exist on every CPU, with or without the x86 code generator.
#include <memory>
#include <string>
#include <string_view>

#include "backends/fusion_backend.h"

namespace kiln::backends::cpu {

bool compiles_kind(std::string_view kind);
std::shared_ptr<FusedKernel> compile_kind(std::string_view kind, const ir::Graph& group, const std::string& name,
                                          const GroupCompiler& epilogue, std::string* why_not);
void warm_up_in_background();

}  // namespace kiln::backends::cpu
