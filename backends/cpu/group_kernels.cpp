#include "backends/cpu/group_kernels.h"

#include <fmt/format.h>

#include "backends/cpu/conv_backward_group.h"
#include "backends/cpu/gemm_group.h"
#include "backends/cpu/scatter_zeros_group.h"
#include "eager/cpu/gemm_warm_up.h"

namespace kiln::backends::cpu {

namespace {

struct KindRow {
  std::string_view kind;  // as the JIT's pass marks it (jit/group_kinds.h)
  std::shared_ptr<FusedKernel> (*compile)(const ir::Graph& group, const std::string& name,
                                          const GroupCompiler& epilogue, std::string* why_not);
};

const KindRow kRows[] = {
    {"gemm", compile_gemm_group},
    {"conv_backward",
     [](const ir::Graph& g, const std::string& name, const GroupCompiler&, std::string* why) {
       return compile_conv_backward_group(g, name, why);
     }},
    {"scatter_zeros",
     [](const ir::Graph& g, const std::string& name, const GroupCompiler&, std::string* why) {
       return compile_scatter_zeros_group(g, name, why);
     }},
};

const KindRow* find(std::string_view kind) {
  for (const KindRow& row : kRows)
    if (row.kind == kind) return &row;
  return nullptr;
}

}  // namespace

bool compiles_kind(std::string_view kind) { return find(kind) != nullptr; }

std::shared_ptr<FusedKernel> compile_kind(std::string_view kind, const ir::Graph& group, const std::string& name,
                                          const GroupCompiler& epilogue, std::string* why_not) {
  if (const KindRow* row = find(kind)) return row->compile(group, name, epilogue, why_not);
  if (why_not) *why_not = fmt::format("no cpu kernel runs groups of kind {}", kind);
  return nullptr;
}

void warm_up_in_background() { kiln::cpu::blas::warm_up_in_background(); }

}  // namespace kiln::backends::cpu
