#pragma once
// ZeroRedundancyOptimizer (torch.distributed.optim.ZeroRedundancyOptimizer, ZeRO stage 1): the optimizer
// state sharded over the ranks of a data-parallel group. Each parameter has one owner rank; only the owner
// keeps its state (Adam's exp_avg and exp_avg_sq: two thirds of a model's training memory beside weights
// and gradients) and updates it. After each step every parameter is broadcast from its owner, so all ranks
// hold the same weights, as with a whole optimizer on each.
//
//   auto ddp = std::make_shared<dist::DistributedDataParallel>(model);     // gradients averaged
//   auto opt = dist::zero_redundancy_optimizer<optim::AdamW>(parameter_groups(*model, 0.1), {1e-3});
//   loss.backward(); opt->step();
//
// With shard_gradients (ZeRO stage 2's gradient layout, fairscale's ShardedDDP + OSS), no DDP: step()
// averages the gradients with one reduce-scatter, so each rank receives only the gradients of the
// parameters it owns and drops the others, steps, then gathers the updated parameters with one all-gather
// (the parameters in owner blocks of equal size, one float dtype). Between steps a rank then holds 1/world
// of the gradients; during backward they are whole, as under DDP, unless reduce_in_backward (below) reduces
// them bucket by bucket as backward produces them.
// The constructor broadcasts rank 0's parameters, as DDP's does.
//
// Owners as torch assigns them: within each parameter group, largest first, each to the rank that owns
// the fewest elements so far. state_dict() is the whole optimizer's, in torch's layout, on the rank that
// consolidate_state_dict(to) gathered it to (torch's rule: elsewhere, or before, it raises);
// load_state_dict() takes a whole optimizer's and each rank keeps its part.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "eager/dist/dist.h"
#include "eager/optim/optimizer.h"

namespace kiln::dist {

namespace detail {
class ShardedGradBuckets;
}

struct ZeroRedundancyOptions {
  bool shard_gradients = false;  // see above: stage 2's gradients, no DDP
  // With shard_gradients: reduce the gradients bucket by bucket while backward runs (DeepSpeed's overlap_comm),
  // each dropped from .grad as soon as it is in its bucket, so the step's peak holds about 1/world of them plus the
  // buckets in flight, not the whole model's; after backward a rank's .grads are its own parameters' means. One
  // backward per step() (accumulating over several raises: use the default, which reduces in step()).
  bool reduce_in_backward = false;
  double bucket_cap_mb = 25;  // reduce_in_backward's bucket size (torch's DDP default)
};

class ZeroRedundancyOptimizer : public optim::Optimizer {
 public:
  // Builds the optimizer of one rank's parameters (the same kind and options on every rank).
  using Factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup>)>;
  // lr and weight_decay: the defaults of groups that give none, as the optimizer's options have them.
  using Options = ZeroRedundancyOptions;
  ZeroRedundancyOptimizer(std::vector<optim::ParamGroup> groups, double lr, double weight_decay, const Factory& make,
                          Options options = {});

  void step() override;
  // The rank that keeps parameter i's state and updates it (i numbers params() across the groups).
  int owner(size_t i) const { return owner_[i]; }
  // This rank's optimizer, over the parameters it owns (their state only).
  optim::Optimizer& local_optimizer() { return *local_; }

  // Gathers every rank's state on rank `to` (a collective: every rank calls it).
  void consolidate_state_dict(int to = 0);
  IValue state_dict() const override;
  void load_state_dict(const IValue& state) override;

 private:
  std::vector<int> owner_;
  std::vector<size_t> local_index_;  // params_[i]'s index in the local optimizer, where this rank owns it
  std::vector<size_t> owned_;        // the local optimizer's parameters, as indices into params_
  void step_sharded();
  Options options_;
  std::vector<int64_t> block_offset_;  // shard_gradients: params_[i]'s offset in its owner's block
  int64_t block_ = 0;                  // the elements of the largest owner's block
  std::unique_ptr<optim::Optimizer> local_;
  std::shared_ptr<detail::ShardedGradBuckets> buckets_;  // reduce_in_backward
  std::optional<IValue> consolidated_;
  int consolidated_to_ = -1;
};

// zero_redundancy_optimizer<optim::AdamW>(groups, options): torch's
// ZeroRedundancyOptimizer(params, optimizer_class=AdamW, **defaults).
template <class Opt, class Options>
std::unique_ptr<ZeroRedundancyOptimizer> zero_redundancy_optimizer(std::vector<optim::ParamGroup> groups,
                                                                   const Options& options,
                                                                   ZeroRedundancyOptimizer::Options zero = {}) {
  return std::make_unique<ZeroRedundancyOptimizer>(
      std::move(groups), options.lr, options.weight_decay,
      [options](std::vector<optim::ParamGroup> local) -> std::unique_ptr<optim::Optimizer> {
        return std::make_unique<Opt>(std::move(local), options);
      },
      zero);
}
template <class Opt, class Options>
std::unique_ptr<ZeroRedundancyOptimizer> zero_redundancy_optimizer(std::vector<Tensor> params, const Options& options,
                                                                   ZeroRedundancyOptimizer::Options zero = {}) {
  return zero_redundancy_optimizer<Opt>(std::vector<optim::ParamGroup>{{std::move(params), {}, {}}}, options, zero);
}

}  // namespace kiln::dist
