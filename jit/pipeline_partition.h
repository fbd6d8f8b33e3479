#pragma once
// Cuts a captured forward graph into pipeline stages (issue "model and pipeline parallelism"): contiguous
// runs of its top-level nodes, chosen so the stages cost about the same (the profiler's FLOPs of each node,
// from the graph's shapes) and, among plans within `slack` of the best balance, the fewest bytes cross the
// cuts. A value crosses a cut when a node before it defines it and a node after it reads it; the caller's
// inputs cross like values, while bound parameters (each stage holds those it reads) and constants (copied
// into every stage that reads them) never do.
//
//   PipelinePartition p = partition_for_pipeline(traced.graph(), 2);
//   // p.starts = {0, 131}: stage 1 begins at the 131st node; p.cut_bytes[0]: what it receives
//
// split_for_pipeline() then makes one graph per stage: its inputs are the values crossing the cut before it
// (stage 0: the caller's inputs), then the parameters it reads; its outputs are the values crossing the cut
// after it, in the order the next stage takes them (a value that only passes through is an input returned),
// or, on the last stage, the function's outputs.
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/interp/function.h"

namespace kiln::jit {

struct PipelinePartition {
  std::vector<size_t> starts;       // the top-level node index where each stage begins; starts[0] == 0
  std::vector<int64_t> stage_flops; // per stage
  std::vector<int64_t> cut_bytes;   // per cut (stages - 1): the bytes of the values crossing it
  int64_t max_flops() const;
  int64_t total_cut_bytes() const;
};

struct PipelinePartitionOptions {
  // Plans whose largest stage costs at most (1 + slack) times the best balance's are equally good; among
  // them the fewest crossing bytes win (ties: the better balance).
  double slack = 0.1;
  // How many trailing graph inputs are bound parameters (Function::Binding::bound); the rest are the
  // caller's. -1: the function's binding says.
  int64_t num_bound = -1;
};

PipelinePartition partition_for_pipeline(const Function& fn, int stages, PipelinePartitionOptions options = {});
// The same facts for a plan given by its starts (checked: increasing, each stage at least one node).
PipelinePartition evaluate_pipeline_plan(const Function& fn, std::vector<size_t> starts, int64_t num_bound = -1);

struct StageGraph {
  std::shared_ptr<ir::Graph> graph;
  size_t num_received = 0;      // leading inputs: what the previous stage sends (stage 0: the caller's inputs)
  std::vector<size_t> params;   // then the bound parameters it reads (indices into Binding::bound)
  // The graph's trailing outputs: new values of bound tensors the forward writes in place (batch norm's
  // running statistics), one per entry, written back by the stage that computes them; never sent.
  std::vector<size_t> writebacks;  // indices into Binding::bound
};
std::vector<StageGraph> split_for_pipeline(const Function& fn, const PipelinePartition& plan);

}  // namespace kiln::jit
