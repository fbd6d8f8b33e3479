#include "eager/nn/clip_grad.h"

#include <cmath>

#include "eager/autograd/graph.h"
#include "eager/ops.h"

namespace kiln::nn {
namespace {

std::vector<Tensor> grads_of(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> gs;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) gs.push_back(p.grad());
  return gs;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  if (!(max_norm >= 0)) fail("clip_grad_norm_: max_norm must be non-negative, got {}", max_norm);
  if (!(norm_type > 0)) fail("clip_grad_norm_: norm_type must be positive (or inf), got {}", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> gs = grads_of(parameters);
  if (gs.empty()) return zeros({});
  // Each gradient's norm in float64, then the norm of those norms: one total over all of them.
  Tensors norms;
  for (const Tensor& g : gs) {
    Tensor a = abs(g.to(DType::Float64));
    if (std::isinf(norm_type)) norms.push_back(a.numel() ? amax(a) : zeros({}, DType::Float64));
    else norms.push_back(sum(a.pow(norm_type)).pow(1.0 / norm_type));
  }
  Tensor all = stack(norms);
  Tensor total = std::isinf(norm_type) ? amax(all) : sum(all.pow(norm_type)).pow(1.0 / norm_type);
  double t = total.item<double>();
  if (error_if_nonfinite && !std::isfinite(t))
    fail("clip_grad_norm_: the total norm of order {} of the gradients is {}, so they cannot be clipped", norm_type, t);
  double coef = max_norm / (t + 1e-6);
  if (coef < 1.0)
    for (Tensor g : gs) g.mul_(coef);  // a handle on the parameter's gradient: written in place
  return total.to(gs.front().dtype());
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  if (!(clip_value >= 0)) fail("clip_grad_value_: clip_value must be non-negative, got {}", clip_value);
  NoGradGuard no_grad;
  for (Tensor g : grads_of(parameters)) g.copy_(clamp(g, -clip_value, clip_value));
}

}  // namespace kiln::nn
