#pragma once
// Splits a joint forward+backward graph into a forward graph and a backward graph, choosing the
// values the forward keeps for the backward by a minimum cut (AOTAutograd's min-cut
// rematerialization): cheap elementwise ops and views are recomputed in the backward when that keeps
// fewer bytes alive; matmul, conv, reductions and indexing that the forward runs anyway are never
// recomputed.
//
// Guarantee: eager autograd's own choice (the inputs each derivative formula reads) is one cut of the
// same network, so the chosen cut keeps at most eager's bytes between forward and backward.
#include <memory>
#include <string>
#include <vector>

#include "jit/joint_graph.h"

namespace kiln::jit {

struct Partition {
  std::shared_ptr<ir::Graph> forward;   // primals → forward outputs, then the saved values
  std::shared_ptr<ir::Graph> backward;  // saved values, then tangents → gradients (JointGraph::grad_of)
  size_t num_saved = 0;
  std::vector<bool> saved_is_primal;    // per saved value: a forward input (the caller holds it anyway)
  int64_t saved_bytes = 0;              // saved activations, primals excluded
  int64_t eager_saved_bytes = 0;        // what eager autograd saves on the same graph, primals excluded
  int64_t recomputed_nodes = 0;         // forward ops the backward runs again
};

// recompute_late: the backward runs each recomputation just before its first reader, not at its start
// (for a forward input whose memory is filled on demand, eager/on_demand.h: the backward's run gathers an
// FSDP unit at its first read of it, which would otherwise be the start for every unit whose layer norm
// it recomputes). Off, the recomputations stay together at the top, where fusion merges them into fewer kernels.
Partition partition_min_cut(const JointGraph& j, bool recompute_late = false);

}  // namespace kiln::jit
