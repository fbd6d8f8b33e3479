#pragma once
// One pass per file; each returns how many nodes it changed. Golden tests: tests/jit/*.ir.
#include <string>

#include "core/ir/graph.h"
#include "jit/group_kernel.h"
#include "jit/pass_manager.h"

namespace kiln::jit {

PassResult eliminate_dead_code(ir::Graph& g);    // dce.cpp
PassResult fold_constants(ir::Graph& g);         // constant_fold.cpp
PassResult eliminate_common_subexpressions(ir::Graph& g);  // cse.cpp
PassResult simplify_algebra(ir::Graph& g);       // simplify.cpp
PassResult propagate_shapes(ir::Graph& g);       // shape_prop.cpp
PassResult fold_shapes(ir::Graph& g);            // fold_shapes.cpp
PassResult hoist_loop_invariants(ir::Graph& g);  // licm.cpp
PassResult pool_before_relu(ir::Graph& g);       // pool_before_relu.cpp
PassResult fuse_attention(ir::Graph& g);         // fuse_attention.cpp
PassResult join_slice_backward(ir::Graph& g);    // join_slice_backward.cpp
PassResult gather_first(ir::Graph& g);           // gather_first.cpp
PassResult fuse_gemm_epilogue(ir::Graph& g);     // fuse_gemm_epilogue.cpp
PassResult fuse_conv_backward(ir::Graph& g);     // fuse_conv_backward.cpp
PassResult fuse_scatter_zeros(ir::Graph& g);     // fuse_scatter_zeros.cpp
// The fusion passes build groups `backend` can compile (Backend::can_fuse); null: backends::default_fusion_rules().
PassResult fuse_vertical(ir::Graph& g, const Backend* backend = nullptr);    // fuse_vertical.cpp
PassResult fuse_horizontal(ir::Graph& g, const Backend* backend = nullptr);  // fuse_horizontal.cpp
PassResult gelu_shares_erf(ir::Graph& g);        // gelu_shares_erf.cpp
PassResult report_memory(ir::Graph& g);            // memory_report.cpp

}  // namespace kiln::jit
