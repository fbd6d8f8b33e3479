#pragma once
// Tensor parallelism of a captured forward by a plan naming its Linear submodules, as PyTorch's
// parallelize_module takes one ({"transformer.h.*.attn.c_attn": colwise, ...}), and a sharding
// propagation pass over the traced graph in the manner of DTensor: the sizes are constants there, so the
// pass decides for every value whether each rank holds all of it (replicated) or a slice along one dim
// (sharded), rewrites the sizes the graph names (a view's shape, a slice's bounds) to the slice's, and
// places Megatron's two collectives where a region of sharded values begins and ends:
//
//   - a colwise Linear's weight rows are split (its output is sharded on the last dim); a rowwise one's
//     columns (its input must be sharded on the last dim; each rank's product is a partial sum);
//   - a replicated value (not one computed from constants) that a node combines into a sharded result passes through
//     copy_to_tensor_parallel_region (identity forward; its gradient, of which each rank computed only
//     its part, all-reduced in backward): the block's input, a replicated weight;
//   - a partial sum (a contraction or a sum over the sharded dim) passes through
//     reduce_from_tensor_parallel_region (all-reduced forward, identity backward) before anything reads it.
//
// Whole heads stay on a rank: a view that splits a sharded dim into (heads, head_dim) shards the heads,
// which must divide by the ranks. A colwise output read only as equal slices along the sharded dim (the
// q, k, v of one c_attn Linear, `split(n_embd, dim=2)`) is split block by block, so each rank keeps the
// same heads of each block. A value the pass has no rule for, a sharded graph output, or a width that does
// not divide raises naming the node, the module and the numbers.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/interp/function.h"

namespace kiln::jit {

enum class ParallelStyle { Colwise, Rowwise };

// (module path, style); a path component "*" matches any one name ("transformer.h.*.mlp.c_fc").
using TensorParallelPlan = std::vector<std::pair<std::string, ParallelStyle>>;

// How one bound input (Binding::bound) is split: dim -1 replicated; else each of `blocks` equal blocks
// along dim is cut into world parts, and a rank holds its part of each, side by side.
struct ParameterShard {
  std::string name;    // the graph input's ("transformer.h.0.attn.c_attn.weight")
  std::string module;  // the plan's module that splits it, empty when replicated
  int64_t dim = -1;
  int64_t blocks = 1;
};

struct TensorParallelGraph {
  // The graph every rank runs (the same on each; the sizes are one rank's). A collective is a `clone` node
  // with attr tensor_parallel "copy" or "reduce", which TensorParallelModule's runner performs.
  std::shared_ptr<ir::Graph> graph;
  std::vector<ParameterShard> shards;  // one per bound input
};

// The pass. `forward` is a traced module (trace_module: its parameters bound, named by their paths).
TensorParallelGraph shard_for_tensor_parallel(const Function& forward, const TensorParallelPlan& plan, int64_t world);

// This rank's part of a whole tensor as `shard` splits it; and a rank's part put where it lies in the
// whole, zeros elsewhere (the ranks' placed parts sum to the whole).
Tensor shard_part(const Tensor& whole, const ParameterShard& shard, int64_t rank, int64_t world);
Tensor placed_part(const Tensor& part, const ParameterShard& shard, int64_t rank, int64_t world);

}  // namespace kiln::jit
