#pragma once
// Tensor parallelism as Megatron-LM splits a transformer's Linears over the ranks of the process group:
//
//   ColumnParallelLinear: the weight's rows (output features) split; each rank computes its slice of the
//     output from the whole input. Its input passes through copy_to_tensor_parallel_region: identity
//     forward, the input's gradient all-reduced in backward (each rank holds only its part of it).
//   RowParallelLinear: the weight's columns (input features) split; each rank multiplies its slice of the
//     input, and reduce_from_tensor_parallel_region sums the partial outputs (identity backward). The bias
//     is whole and added after the sum.
//
// An MLP is Column (gather_output=false) -> activation -> Row (input_is_parallel=true): one all-reduce
// forward, one backward, and each rank stores 1/world of both weights. Each shard is cut from the whole
// weight nn::Linear would initialise from the same random state (Megatron's CPU initialisation), so with
// one seed on every rank training equals one process's. Parameter names are torch's ("weight", "bias").
#include <cstdint>
#include <string>

#include "eager/nn/module.h"

namespace kiln::dist {

// Megatron's f: identity forward; backward all-reduces (sums) the gradient over the ranks.
Tensor copy_to_tensor_parallel_region(const Tensor& x);
// Megatron's g: forward all-reduces (sums) over the ranks; identity backward.
Tensor reduce_from_tensor_parallel_region(const Tensor& x);
// Forward: every rank's slice side by side along the last dim; backward: this rank's slice of the gradient.
Tensor gather_from_tensor_parallel_region(const Tensor& x);
// Forward: this rank's slice along the last dim; backward: the slices gathered again.
Tensor scatter_to_tensor_parallel_region(const Tensor& x);

class ColumnParallelLinear : public nn::Module {
 public:
  ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias = true, bool gather_output = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ColumnParallelLinear"; }
  Tensor weight, bias;  // [out_features / world, in_features], [out_features / world]
  bool gather_output;
};

class RowParallelLinear : public nn::Module {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, bool bias = true, bool input_is_parallel = false);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "RowParallelLinear"; }
  Tensor weight, bias;  // [out_features, in_features / world], [out_features]
  bool input_is_parallel;
};

}  // namespace kiln::dist
