#pragma once
// DistributedDataParallel (torch.nn.parallel.DistributedDataParallel): the same model on every rank,
// each rank a different part of the batch; backward() returns with every gradient averaged over the
// ranks, so each rank's optimizer takes the same step.
//
//   dist::init_process_group();
//   auto ddp = std::make_shared<dist::DistributedDataParallel>(model);   // rank 0's weights everywhere
//   optim::Adam opt(ddp->parameters(), {1e-3});
//   loss = cross_entropy((*ddp)(x_local), y_local); opt.zero_grad(); loss.backward(); opt.step();
//
// How: at construction the parameters' names, dtypes and shapes are compared across ranks (a mismatch
// raises on every rank, naming the parameter) and parameters and buffers are broadcast from rank 0.
// Gradients are reduced in buckets of about bucket_cap_mb, filled in reverse parameter order (the
// order backward produces them). A hook after each parameter's gradient is accumulated copies it into
// its bucket; a full bucket starts its all-reduce (MPI_Iallreduce) at once, so communication overlaps the rest of
// backward. Buckets start in index order on every rank, which keeps the collectives matched. A callback
// at the end of backward waits for every bucket and points each .grad at its averaged slice.
//
// The first backward starts no all-reduce until it has checked, across ranks, that every parameter got
// a gradient: a parameter the loss does not use is reported by name on every rank instead of leaving
// its bucket waiting forever. Later steps must use the same parameters (a missing one raises).
//
// CUDA parameters (backend "nccl"): a CUDA bucket is filled by device copies and its ncclAllReduce is
// queued on the device's stream when full, so the hook never waits for the device; the end-of-backward
// callback waits on every bucket's event (bounded by the timeout) before the optimizer step.
//
// Compiled steps: CompiledTrainStep's compiled backward feeds the same per-parameter accumulators, so
// the hooks and the end-of-backward wait run unchanged before its optimizer update (all buckets fill
// when the single backward graph returns, so there the reduce does not overlap backward).
#include <memory>
#include <string>
#include <vector>

#include "eager/dist/dist.h"
#include "eager/nn/module.h"

namespace kiln::dist {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25;  // torch's default
  int broadcast_from = 0;     // the rank whose parameters and buffers every rank starts from
};

class DistributedDataParallel : public nn::Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;
  Tensor forward(const Tensor& x) override { return module_->forward(x); }
  std::string name() const override { return "DistributedDataParallel"; }
  nn::Module& module() { return *module_; }

  // Inside this guard backward accumulates locally and reduces nothing (torch's no_sync(), for
  // gradient accumulation); the next backward outside it reduces the accumulated gradients.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& d);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& d_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // The parameter names of each bucket, in launch order (for tests and tuning bucket_cap_mb).
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  int64_t reductions() const;  // backward passes whose gradients were averaged

  struct State;

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<State> state_;
};

}  // namespace kiln::dist
