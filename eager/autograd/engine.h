#pragma once
// The backward engine and the public autograd entry points.
#include <functional>
#include <vector>

#include "eager/autograd/graph.h"

namespace kiln {

// Gradients of sum(outputs * grad_outputs) with respect to inputs (torch.autograd.grad); does not
// touch .grad. An input that outputs do not depend on raises unless allow_unused.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// Accumulates into the .grad of every leaf that roots depend on (torch.autograd.backward).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots = {},
              bool retain_graph = false, bool create_graph = false);

// Runs `callback` once the backward() (or grad()) now running has processed its whole graph, before
// it returns (torch's Variable._execution_engine.queue_callback). Called from a hook during backward;
// outside one it raises. DistributedDataParallel waits for its last all-reduce here, so gradients are
// averaged when backward() returns, whether backward ran eagerly or as a compiled graph.
void queue_callback(std::function<void()> callback);

}  // namespace kiln
