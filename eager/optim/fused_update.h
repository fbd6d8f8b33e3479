#pragma once
// Single-pass optimizer updates (torch's fused=True): one loop per parameter that reads the
// parameter, its gradient and its state once and writes them once, instead of a chain of tensor ops
// that each walk memory and allocate a temporary. Same formulas and order as the op-by-op path.
#include "core/tensor.h"

namespace kiln::optim {

// Whether p, g and the state tensors can take the fused loop: CPU, contiguous, one floating dtype
// (float32 or float64), same shape.
bool can_fuse_update(const Tensor& p, const Tensor& g, std::initializer_list<const Tensor*> state);

struct SGDStep {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first;  // the momentum buffer is being created: it takes the gradient as is
};
void fused_sgd(const Tensor& p, const Tensor& g, const Tensor& buf, const SGDStep& s);

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  double bias_correction1, bias_correction2;
};
void fused_adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamStep& s);

}  // namespace kiln::optim
