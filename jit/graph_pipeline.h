#pragma once
// Pipeline parallelism from a captured graph: a model's forward, traced with its parameters bound
// (trace_module), cut into one stage per rank by partition_for_pipeline (balanced FLOPs, fewest bytes
// across the cuts) or by a plan the caller gives, each rank running its stage on the interpreter with
// autograd under the GPipe or 1F1B schedule of eager/dist/pipeline.h.
//
//   Function fwd = trace_module(*model, [&](const Tensors& in) { return Tensors{logits_of(in[0])}; }, {x_micro});
//   jit::GraphPipeline pipe(fwd);                           // collective: stage i on rank i
//   optim::AdamW opt(pipe.parameters(), {1e-3});
//   dist::Schedule1F1B schedule(pipe.stage(), chunks, loss_fn);
//   opt.zero_grad(); schedule.step(x, y); pipe.sync_shared_gradients(); opt.step();
//
// Trace with one micro-batch's shapes (the graph is specialised to them) and one caller input, the batch
// the first stage reads. Several values may cross a cut (a residual stream beside a branch): they travel
// flattened into one tensor, so they must share a floating dtype. A parameter read by several stages (an
// embedding tied to the output layer) is held by each: sync_shared_gradients() sums its gradient over them
// before the optimizer step, so the copies stay equal.
#include <memory>
#include <vector>

#include "backends/interp/function.h"
#include "eager/dist/pipeline.h"
#include "jit/pipeline_partition.h"

namespace kiln::jit {

class GraphPipeline {
 public:
  GraphPipeline(const Function& forward, PipelinePartitionOptions options = {});
  GraphPipeline(const Function& forward, std::vector<size_t> starts);  // the plan given by its stage starts

  dist::PipelineStage& stage() { return *stage_; }
  const PipelinePartition& plan() const { return plan_; }
  // This rank's parameters (those its stage reads), for its optimizer.
  std::vector<Tensor> parameters() const;
  // Sums the gradient of every parameter read by several stages over the ranks holding it. Collective.
  void sync_shared_gradients();
  size_t num_shared() const { return shared_.size(); }  // parameters read by several stages

 private:
  void build(const Function& forward);
  PipelinePartition plan_;
  std::unique_ptr<dist::PipelineStage> stage_;
  // A bound parameter read by more than one stage: this rank's copy where its stage reads it, else only
  // its shape and dtype (the rank adds zeros to the sum). The pipeline keeps no other parameter, so once
  // the caller drops the model and the trace, a rank holds only its stage's parameters.
  struct Shared {
    Tensor mine;
    Shape shape;
    DType dtype;
  };
  std::vector<Shared> shared_;
};

}  // namespace kiln::jit
