#pragma once
// A fusion group rendered to one CUDA C kernel and compiled by NVRTC. The group is the standalone
// graph of a prim::FusionGroup's block (jit/group_kernel.h): tensor inputs of any dtype broadcast to one
// iteration shape, a DAG of elementwise ops.def rows, casts, where and scalar constants, and at most
// one trailing sum/prod/amax/amin over every dim or the last one; or a row group (softmax, layer_norm and
// their gradients): sums and maxima over the last dim, keepdim, whose results the elementwise nodes read. Each op is its ops.def `expr`, the
// text the CPU kernels and the eager CUDA kernels compile, evaluated in the eager kernels' compute
// dtype and stored in the op's dtype, so fused results round as eager's do.
//
// The kernel takes one struct by value: per operand (inputs, then elementwise outputs) a pointer and
// byte strides over up to 16 collapsed dims, dim 0 innermost; the reduction's output pointer last. An
// elementwise group is a grid-stride loop over the elements, rendered twice: `<name>` for any strides and
// `<name>_v` for one merged dim where every operand is contiguous and 16-byte aligned or a broadcast
// scalar (four elements a thread, vector loads, no index arithmetic); a reducing one gives each output element
// to a block of 256 threads that folds its row (the last dim, or everything) and stores the
// elementwise outputs on the way; a row group gives each row to a block that makes one pass per reduction
// and a last one storing the outputs (render_rows in fusion_compiler.cpp).
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/op.h"

namespace kiln::ir {
class Graph;
class Node;
}  // namespace kiln::ir

namespace kiln::cuda {

// Kernel parameters stay under the 4 KiB every architecture accepts.
constexpr int kMaxFusedOperands = 24;
constexpr int kFusedReduceThreads = 256;

struct FusedKernelSource {
  std::string name;    // the extern "C" symbol
  std::string source;  // a whole module: the prelude and the kernel
  std::vector<DType> inputs;
  std::vector<DType> ew_outputs;  // elementwise outputs, stored over the iteration shape
  std::vector<int> out_slot;      // per group output: its index in ew_outputs, or -1 for the reduction
  bool reduces = false;
  bool rows = false;              // a row kernel: a block per row, reductions over the last dim read inside
  std::vector<bool> row_outputs;  // rows: per elementwise output, whether it holds one number per row
  bool reduce_all = false;  // over every dim; else over the last
  bool keepdim = false;
  DType red_dtype = DType::Float32;
};

// Whether n may join a group this compiler renders: an elementwise row, where or a cast (`to`) whose
// tensors have known dtypes; with `reduction`, a sum/prod/amax/amin of a floating tensor over every
// dim or the last one.
bool can_fuse(const ir::Node& n, bool reduction);

// Raises kiln::Error naming the node when the group holds something the renderer does not know.
FusedKernelSource render_fusion(const ir::Graph& group, const std::string& name);

// The cubin for sm_<arch> through the kernel cache (memory, disk, NVRTC); NVRTC errors quote the
// generated line they point at.
std::vector<char> compile_fusion(const FusedKernelSource& k, int arch);

}  // namespace kiln::cuda
