#pragma once
// Pipeline parallelism over the ranks of the process group (torch.distributed.pipelining's ideas, the
// GPipe and 1F1B schedules): a model given as a sequence of modules is cut into stages, stage i on
// rank i, so each rank stores only its part of the parameters. A training step splits the batch into
// micro-batches; each stage runs its part on one micro-batch at a time, sends the activation to the
// next rank and, in backward, the gradient of its input to the previous one. The loss is computed on
// the last stage; parameter gradients accumulate over the micro-batches, each micro-batch's loss
// scaled by 1 / micro-batches, so one optimizer step equals the unsplit model's step on the whole
// batch (for a loss that is a mean over the batch).
//
//   dist::init_process_group();
//   auto model = std::make_shared<nn::Sequential>(...);       // the same model on every rank
//   dist::PipelineStage stage = dist::pipeline_stage(*model, {2, 3});  // rank 0: modules 0-1, rank 1: 2-4
//   optim::SGD opt(stage.parameters(), {0.1});
//   dist::Schedule1F1B schedule(stage, /*n_microbatches=*/8, [](const Tensor& out, const Tensor& y) {
//     return cross_entropy(out, y);
//   });
//   opt.zero_grad();
//   Tensor loss = schedule.step(x, y);  // x is read on the first stage, y on the last; loss defined there
//   opt.step();
//
// Transfers are MPI point to point on a communicator of the pipeline's own, each wait bounded by the
// group's timeout: a stage whose neighbour died or stalled raises naming the transfer and the
// micro-batch instead of hanging.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "eager/nn/layers.h"

namespace kiln::dist {

namespace detail {
class Comm;
}

// A plan that balances the stages by parameter count: contiguous runs of `modules`, every stage at
// least one module, the largest stage's parameter count as small as it can be (ties: the most even
// module counts). Raises when there are fewer modules than stages.
std::vector<int64_t> balance_by_parameters(const std::vector<std::shared_ptr<nn::Module>>& modules, int stages);

// This rank's part of the model (torch's PipelineStage): stage `stage_index` of `num_stages`, run on
// the rank of the same number; the number of stages is the world size.
class PipelineStage {
 public:
  // Collective: every rank constructs its stage at the same point (the pipeline's communicator is made here).
  PipelineStage(std::shared_ptr<nn::Module> submodule, int stage_index, int num_stages);
  int stage_index() const { return stage_; }
  int num_stages() const { return stages_; }
  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == stages_ - 1; }
  nn::Module& submodule() { return *module_; }
  std::vector<Tensor> parameters() const { return module_->parameters(); }
  // Where this stage's modules start in the model it was cut from, and the plan (empty when the
  // stage was given as a module).
  int64_t module_offset() const { return offset_; }
  const std::vector<int64_t>& balance() const { return balance_; }

 private:
  friend class PipelineSchedule;
  friend PipelineStage pipeline_stage(const std::vector<std::shared_ptr<nn::Module>>&, std::vector<int64_t>);
  std::shared_ptr<nn::Module> module_;
  int stage_, stages_;
  int64_t offset_ = 0;
  std::vector<int64_t> balance_;
  std::shared_ptr<detail::Comm> comm_;
};

// Cuts `modules` into stages by `balance` (how many modules each stage gets, in order, torchgpipe's
// balance; empty: balance_by_parameters) and returns this rank's. The plan must have one stage per rank,
// sum to the number of modules and give every stage at least one; it must be the same on every rank
// (checked: a rank with another plan raises on every rank, naming both). Collective.
PipelineStage pipeline_stage(const std::vector<std::shared_ptr<nn::Module>>& modules, std::vector<int64_t> balance = {});
PipelineStage pipeline_stage(const nn::Sequential& model, std::vector<int64_t> balance = {});

// The loss of one micro-batch from the last stage's output and the target's rows for it; a mean over
// the micro-batch, so that the scaled sum over micro-batches is the whole batch's mean.
using PipelineLoss = std::function<Tensor(const Tensor& output, const Tensor& target)>;

// Runs a training step's forwards and backwards on this rank's stage in the schedule's order. The
// caller zeroes gradients before step() and steps its optimizer after, as without a pipeline.
class PipelineSchedule {
 public:
  virtual ~PipelineSchedule();
  // One step over the whole batch: `input` is read on the first stage and `target` on the last (either
  // may be passed everywhere); both are split along dim 0 into n_microbatches equal parts, and a batch
  // that does not divide raises. Returns the batch's loss (the mean of the micro-batch losses) on the
  // last stage, an undefined tensor elsewhere. Collective over the stages.
  Tensor step(const Tensor& input = {}, const Tensor& target = {});
  int n_microbatches() const { return chunks_; }
  // The last step's unscaled loss per micro-batch (last stage only).
  const std::vector<Tensor>& losses() const { return losses_; }
  // The last step's seconds in this stage's forwards and backwards (transfers and waits excluded): beside
  // the step's wall time, the stage's share of the pipeline bubble.
  double busy_seconds() const { return busy_seconds_; }

  // One pass of the schedule: the forward or backward of one micro-batch on this stage.
  struct Action {
    bool forward;
    int microbatch;
  };
  // This stage's order of passes for one step (what distinguishes the schedules).
  virtual std::vector<Action> order() const = 0;

 protected:
  PipelineSchedule(PipelineStage& stage, int n_microbatches, PipelineLoss loss_fn);
  PipelineStage& stage_;
  int chunks_;

 private:
  struct Run;
  PipelineLoss loss_fn_;
  std::vector<Tensor> losses_;
  double busy_seconds_ = 0;
};

// GPipe: the forwards of every micro-batch, then every backward. Each stage holds the activations of
// all n_microbatches at once.
class ScheduleGPipe : public PipelineSchedule {
 public:
  ScheduleGPipe(PipelineStage& stage, int n_microbatches, PipelineLoss loss_fn = {})
      : PipelineSchedule(stage, n_microbatches, std::move(loss_fn)) {}
  std::vector<Action> order() const override;
};

// 1F1B (PipeDream-flush): stage s runs min(stages - s - 1, n) forwards to fill the pipeline, then
// alternates one forward and one backward, then drains the backwards. The same bubble as GPipe, but a
// stage holds at most stages - s micro-batches' activations instead of n.
class Schedule1F1B : public PipelineSchedule {
 public:
  Schedule1F1B(PipelineStage& stage, int n_microbatches, PipelineLoss loss_fn = {})
      : PipelineSchedule(stage, n_microbatches, std::move(loss_fn)) {}
  std::vector<Action> order() const override;
};

}  // namespace kiln::dist
