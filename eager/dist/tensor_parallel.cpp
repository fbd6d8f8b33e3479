#include "eager/dist/tensor_parallel.h"

#include <memory>

#include "eager/autograd/graph.h"
#include "eager/dist/dist.h"
#include "eager/nn/layers.h"
#include "eager/ops.h"

namespace kiln::dist {
namespace {

Tensor all_reduced(const Tensor& g) {
  Tensor r = g.contiguous().clone();
  all_reduce(r, ReduceOp::Sum);
  return r;
}

// this rank's slice of x along the last dim
Tensor own_slice(const Tensor& x) {
  int64_t w = get_world_size(), n = x.size(-1);
  if (n % w != 0)
    fail("scatter_to_tensor_parallel_region: the last dim {} of shape {} does not divide by the world size {}", n,
         shape_str(x.sizes()), w);
  int64_t part = n / w, r = get_rank();
  return x.slice(-1, r * part, (r + 1) * part).contiguous();
}

// every rank's x side by side along the last dim: each rank writes its slice into zeros, then one sum
Tensor gathered(const Tensor& x) {
  int64_t w = get_world_size(), part = x.size(-1), r = get_rank();
  Shape shape = x.sizes();
  shape.back() = part * w;
  Tensor full = zeros(shape, {x.dtype(), x.device()});
  full.slice(-1, r * part, (r + 1) * part).copy_(x);
  all_reduce(full, ReduceOp::Sum);
  return full;
}

// A node whose backward is `backward` of the output's gradient, for the one input x.
struct RegionNode : Node {
  std::string what;
  Tensor (*backward)(const Tensor&);
  std::string name() const override { return what; }
  Tensors apply(const Tensors& g) override { return {g.at(0).defined() ? backward(g[0]) : Tensor()}; }
};

Tensor with_backward(const Tensor& x, Tensor out, const char* what, Tensor (*backward)(const Tensor&)) {
  if (!GradMode::enabled() || !x.requires_grad()) return out;
  auto node = std::make_shared<RegionNode>();
  node->what = what;
  node->backward = backward;
  node->next.push_back(gradient_edge(x));
  node->pre_hooks.resize(1);
  node->outputs.resize(1);
  AutogradMeta& m = ensure_autograd_meta(out);
  m.requires_grad = true;
  m.grad_fn = node;
  m.output_nr = 0;
  node->outputs[0] = out.impl_ptr();
  return out;
}

Tensor identity(const Tensor& g) { return g; }

// this rank's part of t along dim, a tensor of its own
Tensor own_part(const Tensor& t, int64_t dim) {
  int64_t part = t.size(dim) / get_world_size(), r = get_rank();
  return t.detach().slice(dim, r * part, (r + 1) * part).contiguous().clone();
}

void require_divisible(const char* layer, const char* what, int64_t n) {
  int64_t w = get_world_size();
  if (n % w != 0) fail("{}: {} {} does not divide by the world size {}", layer, what, n, w);
}

}  // namespace

Tensor copy_to_tensor_parallel_region(const Tensor& x) {
  return with_backward(x, x.detach(), "CopyToTensorParallelRegion", &all_reduced);
}

Tensor reduce_from_tensor_parallel_region(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = all_reduced(x);
  }
  return with_backward(x, out, "ReduceFromTensorParallelRegion", &identity);
}

Tensor gather_from_tensor_parallel_region(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = gathered(x.contiguous());
  }
  return with_backward(x, out, "GatherFromTensorParallelRegion", &own_slice);
}

Tensor scatter_to_tensor_parallel_region(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = own_slice(x);
  }
  return with_backward(x, out, "ScatterToTensorParallelRegion", +[](const Tensor& g) { return gathered(g.contiguous()); });
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features, bool has_bias, bool gather)
    : gather_output(gather) {
  require_divisible("ColumnParallelLinear", "out_features", out_features);
  // Megatron's initialisation: the whole weight by nn::Linear's rule, then this rank's part of it
  nn::Linear full(in_features, out_features, has_bias);
  weight = register_parameter("weight", own_part(full.weight, 0));
  if (has_bias) bias = register_parameter("bias", own_part(full.bias, 0));
}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  Tensor y = linear(copy_to_tensor_parallel_region(x), weight, bias);
  return gather_output ? gather_from_tensor_parallel_region(y) : y;
}

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features, bool has_bias, bool input_parallel)
    : input_is_parallel(input_parallel) {
  require_divisible("RowParallelLinear", "in_features", in_features);
  nn::Linear full(in_features, out_features, has_bias);
  weight = register_parameter("weight", own_part(full.weight, 1));
  if (has_bias) bias = register_parameter("bias", full.bias.detach().clone());
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  Tensor local = input_is_parallel ? x : scatter_to_tensor_parallel_region(x);
  if (local.size(-1) != weight.size(1))
    fail("RowParallelLinear: input of shape {} has {} features on this rank, the weight shard takes {}",
         shape_str(x.sizes()), local.size(-1), weight.size(1));
  Tensor y = reduce_from_tensor_parallel_region(linear(local, weight));
  return bias.defined() ? y + bias : y;
}

}  // namespace kiln::dist
