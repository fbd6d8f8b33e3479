#pragma once
// The two kinds of graph node: OpNode (any op of the table, derivative from derivatives.cpp) and
// AccumulateGrad (the sink that adds into a leaf's .grad).
#include "eager/autograd/graph.h"

namespace kiln {

struct OpNode : Node {
  OpId op;
  Attrs attrs;
  std::vector<SavedTensor> inputs;
  std::vector<SavedTensor> outputs_saved;  // per output: saved when the derivative reads it (op_facts' Out)
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  int n_outputs = 1;
  bool released = false;
  std::string name() const override;
  int num_outputs() const override { return n_outputs; }
  Tensors apply(const Tensors& grad_outputs) override;
  void release_saved() override;
};

struct AccumulateGrad : Node {
  std::weak_ptr<TensorImpl> leaf;
  std::string name() const override { return "AccumulateGrad"; }
  Tensors apply(const Tensors& grad_outputs) override;  // adds into leaf.grad; returns nothing
};

// Installs the dispatcher observer that records OpNodes (done once, on first requires_grad_).
void install_autograd_recorder();

}  // namespace kiln
