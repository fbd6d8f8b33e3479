#pragma once
// FullyShardedDataParallel (torch.distributed.fsdp, ZeRO stage 3): parameters, gradients and optimizer
// state all sharded over the ranks of a data-parallel group. Between steps a rank holds 1/world of each:
// the parameters of each optimizer group live as one flat shard per rank (what the optimizer steps), and
// the module's own parameters hold no memory. forward() gathers them (one all_gather_into_tensor per group,
// the module's parameters become views of the gathered buffer); at the end of backward the gradients are
// averaged with one reduce_scatter_tensor per group, so each rank keeps the mean of its own shard's, and
// the full parameters and gradients are freed.
//
//   auto fsdp = std::make_shared<dist::FullyShardedDataParallel>(model, parameter_groups(*model, 0.1));
//   optim::AdamW opt(fsdp->shard_groups(), {1e-3});        // state for this rank's shard only
//   loss = cross_entropy((*fsdp)(x_local), y_local); opt.zero_grad(); loss.backward(); opt.step();
//
// A module called another way (a scripted module's call(...)) is gathered by calling gather() first.
// Reading a parameter of the module between steps raises (its storage is released); full_state_dict()
// gathers a copy of the whole state_dict on every rank (torch's FULL_STATE_DICT).
//
// The whole module is one unit: during forward and backward a rank holds every parameter and gradient,
// as under DDP; what is saved is the memory between steps, where the optimizer state and the gradients
// dominate. (torch wraps submodules as units of their own, gathered one at a time; not done here.)
// Eager training only: CompiledTrainStep does not take a FullyShardedDataParallel.
#include <memory>
#include <string>
#include <vector>

#include "eager/dist/dist.h"
#include "eager/nn/module.h"
#include "eager/optim/optimizer.h"

namespace kiln::dist {

class FullyShardedDataParallel : public nn::Module {
 public:
  // groups: the module's parameters in optimizer groups (every parameter in exactly one, each group of
  // one floating dtype on the CPU), e.g. parameter_groups(*model, 0.1); empty: one group of them all.
  // Rank 0's parameters and buffers are broadcast first, as DDP does.
  explicit FullyShardedDataParallel(std::shared_ptr<nn::Module> module, std::vector<optim::ParamGroup> groups = {});
  ~FullyShardedDataParallel() override;

  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "FullyShardedDataParallel"; }
  nn::Module& module() { return *module_; }

  // The shards, one per group, with the groups' lr and weight_decay: what the optimizer takes.
  std::vector<optim::ParamGroup> shard_groups() const;
  // Gathers the full parameters into the module (a collective); nothing when they are gathered already.
  void gather();
  // Frees the full parameters (and any gradients of theirs not reduced): the state between steps.
  void release();
  bool gathered() const;
  // The module's state_dict, whole, on every rank (a collective; the parameters are released after unless
  // they were gathered before).
  std::map<std::string, Tensor> full_state_dict();
  int64_t reductions() const;  // backward passes whose gradients were reduced into the shards

  struct State;

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<State> state_;
};

}  // namespace kiln::dist
