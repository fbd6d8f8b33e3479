#pragma once
// FullyShardedDataParallel (torch.distributed.fsdp, ZeRO stage 3): parameters, gradients and optimizer
// state all sharded over the ranks of a data-parallel group. Between steps a rank holds 1/world of each:
// the parameters of each unit (below) and optimizer group live as one flat shard per rank (what the
// optimizer steps), and the module's own parameters are views of a flat buffer with no memory. Gathering
// fills that buffer (one all_gather_into_tensor per unit and group); reducing averages the gradients with
// one reduce_scatter_tensor per unit and group, so each rank keeps the mean of its own shard's, and frees
// the full parameters and gradients. Without units the whole module is one unit, gathered by forward()
// and reduced at the end of backward.
//
//   auto fsdp = std::make_shared<dist::FullyShardedDataParallel>(model, parameter_groups(*model, 0.1));
//   optim::AdamW opt(fsdp->shard_groups(), {1e-3});        // state for this rank's shard only
//   loss = cross_entropy((*fsdp)(x_local), y_local); opt.zero_grad(); loss.backward(); opt.step();
//
// A scripted module's call(...) runs one graph: the interpreter gathers each unit (and the root) just before
// the first step reading its parameters, as they are the graph's inputs (eager/on_demand.h).
// Reading a parameter of the module between steps raises (its storage is released); full_state_dict()
// gathers a copy of the whole state_dict on every rank (torch's FULL_STATE_DICT).
//
// Units (torch's auto_wrap_policy): submodules named in `units` are sharded, gathered and freed on their own.
// A unit is gathered by a forward pre-hook and freed by the forward hook after it; a hook on its output
// gathers it again when backward reaches it, and once each of its parameters has its gradient, those are
// reduce-scattered into its shards and the unit is freed. So a rank holds one unit's full parameters (and
// gradients) at a time, beside the root's (the parameters no unit holds, gathered for the whole step).
// A saved-for-backward view of a parameter shares its storage, whose memory is what is freed and filled
// again. A graph (a scripted module's forward, a compiled step) does the same without module hooks: its
// executor gathers a unit before the first step reading the unit's parameters (or a view of them) and
// frees it after the last, and a hook on each such step's outputs gathers it again in backward:
//
//   auto gpt = script_file("gpt.py").module("GPT", {...});
//   dist::FullyShardedDataParallel fsdp(gpt, {}, {.units = {"transformer.h.0", "transformer.h.1"}});
//   auto out = gpt->call({idx, targets});  // one unit's parameters at a time
// A compiled step: CompiledTrainStep over module() with the shards' optimizer, gather() before each step; a
// scripted module needs none: its compiled forward and backward graphs gather each unit as they read it.
#include <memory>
#include <string>
#include <vector>

#include "eager/dist/dist.h"
#include "eager/nn/module.h"
#include "eager/optim/optimizer.h"

namespace kiln::dist {

struct FsdpOptions {
  // Qualified names of submodules ("layers.0", "encoder.layers.1") to shard as units of their own; a
  // parameter belongs to the innermost unit holding it, the rest to the root unit.
  std::vector<std::string> units;
};

class FullyShardedDataParallel : public nn::Module {
 public:
  // groups: the module's parameters in optimizer groups (every parameter in exactly one, each group of
  // one floating dtype on the CPU), e.g. parameter_groups(*model, 0.1); empty: one group of them all.
  // Rank 0's parameters and buffers are broadcast first, as DDP does.
  explicit FullyShardedDataParallel(std::shared_ptr<nn::Module> module, std::vector<optim::ParamGroup> groups = {},
                                    FsdpOptions options = {});
  ~FullyShardedDataParallel() override;

  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "FullyShardedDataParallel"; }
  nn::Module& module() { return *module_; }

  // The shards, one tensor per unit in each group, with the groups' lr and weight_decay: what the
  // optimizer takes.
  std::vector<optim::ParamGroup> shard_groups() const;
  // Gathers the full parameters of every unit into the module (a collective); nothing for units gathered
  // already. forward() gathers only the root; the units' hooks gather the rest as they run.
  void gather();
  // Frees the full parameters (and any gradients of theirs not reduced): the state between steps.
  void release();
  bool gathered() const;  // the root unit's parameters are
  // Bytes of parameters a rank holds gathered now (the full buffers of the gathered units).
  int64_t gathered_bytes() const;
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
