#pragma once
// A traced module trained with tensor parallelism over the ranks of the process group: the sharding pass
// (jit/tensor_parallel_plan.h) rewrites its graph by a plan naming Linear submodules, each rank keeps only
// its part of the split parameters, and the graph runs on the interpreter with autograd, the pass's
// collectives performed as Megatron's copy_to / reduce_from_tensor_parallel_region (eager/dist).
//
//   manual_seed(7);                                     // the same whole weights on every rank
//   auto gpt = file.build("GPT", {...});
//   Function fwd = trace_module(*gpt, [&](const Tensors& in) { return Tensors{loss_of(in[0], in[1])}; }, {x, y});
//   jit::TensorParallelModule tp(fwd, {{"transformer.h.*.attn.c_attn", jit::ParallelStyle::Colwise},
//                                      {"transformer.h.*.attn.c_proj", jit::ParallelStyle::Rowwise},
//                                      {"transformer.h.*.mlp.c_fc", jit::ParallelStyle::Colwise},
//                                      {"transformer.h.*.mlp.c_proj", jit::ParallelStyle::Rowwise}});
//   optim::AdamW opt(tp.parameters(), {1e-3});
//   opt.zero_grad(); Tensor loss = tp({x, y})[0]; loss.backward(); opt.step();
//
// Every rank passes the same inputs and gets the same outputs. The trace is specialised to its shapes.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eager/nn/module.h"
#include "jit/tensor_parallel_plan.h"

namespace kiln::interp {
class Plan;
}

namespace kiln::jit {

class TensorParallelModule : public nn::Module {
 public:
  // Local work only (no collective): each rank cuts its parts from the trace's whole parameters, so once
  // the caller drops the model and the trace, a rank holds only its parts of the split ones.
  TensorParallelModule(const Function& traced, const TensorParallelPlan& plan);
  ~TensorParallelModule() override;

  // The traced function's inputs in, its outputs out (collective: every rank calls with the same inputs).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "TensorParallel"; }

  // This rank's parameters and buffers by the traced model's names (a split one: this rank's part).
  std::vector<std::pair<std::string, Tensor>> local_state() const;
  // Every one whole, put together from the ranks' parts. Collective.
  std::vector<std::pair<std::string, Tensor>> full_state() const;
  const TensorParallelGraph& sharded() const { return tp_; }

 private:
  TensorParallelGraph tp_;
  std::unique_ptr<interp::Plan> plan_;
  std::vector<Tensor> local_;  // the bound inputs, this rank's parts
};

}  // namespace kiln::jit
