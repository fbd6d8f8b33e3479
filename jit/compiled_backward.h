#pragma once
// The autograd node a compiled function leaves on its outputs when inputs require grad: its apply()
// runs the compiled backward graph on the values the compiled forward saved. It composes with eager
// autograd like any other node (a compiled block inside an eager model), so loss.backward() reaches
// parameters through it.
#include <memory>
#include <string>
#include <vector>

#include "eager/autograd/graph.h"
#include "jit/compiled_graph.h"

namespace kiln::jit {

struct CompiledBackward final : Node {
  std::string fn_name;
  std::shared_ptr<const CompiledGraph> backward;  // saved values, then one gradient per output → input gradients
  std::vector<SavedTensor> saved;
  std::vector<Shape> output_shapes;  // to fill in a zero gradient for an output the loss did not use
  std::vector<DType> output_dtypes;
  bool released = false;

  std::string name() const override { return "CompiledFunctionBackward"; }
  int num_outputs() const override { return int(output_shapes.size()); }
  Tensors apply(const Tensors& grad_outputs) override;
  void release_saved() override;
};

// Attaches `node` to the differentiable outputs (outs[k] for k in `which`) as their grad_fn; an
// output that is one of `inputs` gets its own handle first so the input keeps its history.
void attach_grad_fn(const std::shared_ptr<CompiledBackward>& node, std::vector<IValue>& outs,
                    const std::vector<size_t>& which, const std::vector<IValue>& inputs);

}  // namespace kiln::jit
