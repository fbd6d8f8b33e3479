#pragma once
// Gemm groups: prim::FusionGroup nodes of kind "gemm" (made by jit/passes/fuse_gemm_epilogue.cpp)
// whose block is a matmul of two of its arguments ([..., M, K] by [K, N]) followed by an elementwise epilogue (adds of
// other arguments, relu, gelu). The executor runs them as one GEMM call with the epilogue folded in
// (oneDNN post-ops, eager/cpu/gemm_epilogue.h), or as the matmul followed by the epilogue as a
// compiled fusion group when oneDNN is absent or off. The interpreter runs the block as it runs any.
#include <memory>
#include <string>

#include "backends/fusion_backend.h"
#include "core/ir/graph.h"

namespace kiln::backends::cpu {

// The kernel for a gemm group's standalone graph (its block as a graph of its own); `epilogue_backend` compiles the
// epilogue of the fallback path (none: it is interpreted). Null, with the reason in *why_not, when
// the block is not a matmul followed by steps the kernel knows.
std::shared_ptr<FusedKernel> compile_gemm_group(const ir::Graph& group, const std::string& name,
                                                const GroupCompiler& epilogue_backend, std::string* why_not);

}  // namespace kiln::backends::cpu
