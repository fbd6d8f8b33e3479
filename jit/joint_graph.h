#pragma once
// IR autodiff: the joint forward+backward graph of a captured forward graph, recorded from the eager
// autograd engine as it runs the derivative formulas of eager/autograd/derivatives.cpp on sample
// inputs (one source of formulas for eager and compiled backward; AOTAutograd's approach).
//
// Given:   graph(%x : f32[4], %w : f32[4]):  %0 = mul(%x, %w)  %1 = sum(%0)  return (%1)
//          requires_grad = {false, true}
// Result:  graph(%x, %w, %t0 : f32[]):          primals, then one tangent per differentiable output
//            %0 = mul(%x, %w)  %1 = sum(%0)
//            %2 = expand(%t0) ... %3 = mul(%2, %x)
//          return (%1, %3)                      forward outputs, then one gradient per primal that has one
#include <memory>
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/ivalue.h"

namespace kiln::jit {

struct JointGraph {
  std::shared_ptr<ir::Graph> graph;
  size_t num_primals = 0;
  size_t num_forward_outputs = 0;
  std::vector<size_t> tangent_of;  // per tangent input: the forward output it is the gradient of
  std::vector<size_t> grad_of;     // per gradient output: the primal it is the gradient of
};

// Whether autodiff can record g: no control flow and only tensor inputs and outputs (a recorded
// If/Loop would bake in the branch the sample took). Says why not.
bool can_differentiate(const ir::Graph& g, std::string* why_not);

// Records g run on `sample` with the primals flagged in requires_grad requiring grad, then the
// engine's gradients of the differentiable outputs (floating, depending on such a primal, not in
// `hidden_outputs`) with respect to them.
JointGraph build_joint_graph(const ir::Graph& g, const std::vector<IValue>& sample,
                             const std::vector<bool>& requires_grad, const std::vector<bool>& hidden_outputs);

// The clean-up of a recorded joint graph (graph outputs: the forward's, then the gradients), for a
// recording made elsewhere: CompiledTrainStep records its first step's own eager run.
void finish_joint_graph(ir::Graph& g);

}  // namespace kiln::jit

namespace kiln {
class Function;
namespace jit {
// Gives fn (a compile() result) its forward+backward entry for a differentiable call on `inputs` (the
// bound trailing inputs included) from `joint`, instead of recording one when such a call comes.
// Nothing when fn records its own (a rewrite before autodiff) or already has the entry.
void add_train_entry(const Function& fn, const std::vector<IValue>& inputs, const JointGraph& joint);
}  // namespace jit
}  // namespace kiln
