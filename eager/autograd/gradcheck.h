#pragma once
// gradcheck: analytic gradients against float64 central differences, reporting the worst element.
#include <functional>
#include <string>

#include "core/tensor.h"

namespace kiln {

using DiffFn = std::function<Tensor(const Tensors&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// Checks d(sum(fn(inputs) * v))/d(input) for a fixed random v against central differences, for
// every input that requires grad (all must be float64). Raises kiln::Error naming the input, the
// worst element and both values; returns true otherwise.
bool gradcheck(const DiffFn& fn, const Tensors& inputs, GradcheckOptions opt = {});
// The same for the gradient itself (second order), through create_graph.
bool gradgradcheck(const DiffFn& fn, const Tensors& inputs, GradcheckOptions opt = {});

}  // namespace kiln
