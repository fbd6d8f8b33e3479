#include "eager/autograd/gradcheck.h"

#include <cmath>

#include "eager/autograd/engine.h"
#include "eager/autograd/graph.h"
#include "eager/ops.h"

namespace kiln {
namespace {

// A fixed projection so that non-scalar outputs reduce to one number.
Tensor projection(const Shape& shape) {
  Tensor v = Tensor::empty(shape, DType::Float64);
  double* p = v.data_ptr<double>();
  for (int64_t i = 0; i < v.numel(); ++i) p[i] = 0.5 + 0.25 * std::sin(double(i) * 1.7 + 0.3);
  return v;
}

double scalar_of(const DiffFn& fn, const Tensors& xs, const Tensor& v) {
  NoGradGuard ng;
  Tensor y = fn(xs);
  return sum(y.to(DType::Float64) * v).item<double>();
}

}  // namespace

bool gradcheck(const DiffFn& fn, const Tensors& inputs, GradcheckOptions opt) {
  Tensors diff;
  for (const Tensor& x : inputs) {
    if (!x.requires_grad()) continue;
    if (x.dtype() != DType::Float64)
      fail("gradcheck: inputs that require grad must be float64 for finite differences, got {}", dtype_name(x.dtype()));
    diff.push_back(x);
  }
  if (diff.empty()) fail("gradcheck: no input requires grad");
  Tensor y = fn(inputs);
  Tensor v = projection(y.sizes());
  // An output that does not depend on the inputs through the graph (the gradient of a linear op,
  // under gradgradcheck) has a zero derivative.
  Tensors analytic = y.requires_grad() ? grad({sum(y.to(DType::Float64) * v)}, diff, {}, false, false, true)
                                       : Tensors(diff.size());
  size_t k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    Tensor a = analytic[k].defined() ? analytic[k].contiguous() : zeros_like(inputs[i]);
    ++k;
    // Perturb a contiguous copy element by element; the other inputs stay as they are.
    Tensor base = inputs[i].detach().contiguous().clone();
    double* p = base.data_ptr<double>();
    Tensors xs = inputs;
    xs[i] = base;
    double worst = 0, worst_num = 0, worst_ana = 0;
    int64_t worst_j = -1;
    for (int64_t j = 0; j < base.numel(); ++j) {
      double orig = p[j];
      p[j] = orig + opt.eps;
      double fp = scalar_of(fn, xs, v);
      p[j] = orig - opt.eps;
      double fm = scalar_of(fn, xs, v);
      p[j] = orig;
      double num = (fp - fm) / (2 * opt.eps);
      double ana = a.to(DType::Float64).reshape({-1})[j].item<double>();
      double excess = std::fabs(num - ana) - (opt.atol + opt.rtol * std::fabs(num));
      if (std::isnan(num) != std::isnan(ana)) excess = INFINITY;
      if (excess > worst) { worst = excess; worst_j = j; worst_num = num; worst_ana = ana; }
    }
    if (worst_j >= 0)
      fail("gradcheck: input {} (shape {}): element {} has analytic gradient {} but numerical {} (atol {}, rtol {})",
           i, shape_str(inputs[i].sizes()), worst_j, worst_ana, worst_num, opt.atol, opt.rtol);
  }
  return true;
}

bool gradgradcheck(const DiffFn& fn, const Tensors& inputs, GradcheckOptions opt) {
  std::vector<bool> wanted;
  for (const Tensor& x : inputs) wanted.push_back(x.requires_grad());
  DiffFn first = [&fn, wanted](const Tensors& xs) {
    EnableGradGuard eg;
    // gradcheck hands in detached perturbed copies: re-attach the inputs that are differentiated.
    Tensors live = xs, want;
    for (size_t i = 0; i < live.size(); ++i)
      if (wanted[i]) {
        if (!live[i].requires_grad()) live[i] = live[i].detach().requires_grad_();
        want.push_back(live[i]);
      }
    Tensor y = fn(live);
    Tensors g = grad({sum(y * projection(y.sizes()))}, want, {}, true, true, true);
    Tensor total = zeros({}, DType::Float64);
    for (const Tensor& gi : g)
      if (gi.defined()) total = total + sum(gi * projection(gi.sizes()));
    return total;
  };
  return gradcheck(first, inputs, opt);
}

}  // namespace kiln
