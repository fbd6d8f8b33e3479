#pragma once
// ZeroRedundancyOptimizer's gradients reduced while backward runs (ZeRO stage 2 as DeepSpeed runs it, its
// overlap_comm and reduce_bucket_size), internal to zero.cpp. Parameters are grouped, in the order backward
// produces their gradients, into buckets of about bucket_cap_mb, each laid out owner by owner. As each gradient
// is accumulated it is copied into its bucket and the parameter's .grad dropped, so a rank never holds the whole
// model's gradients; a full bucket starts at once one reduce per owner of its segment (in bucket order on every
// rank) and frees its buffer when they complete. At the end of backward each rank waits for its segments, and the
// parameters it owns get the mean gradient, the others none.
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace kiln::dist::detail {

class ShardedGradBuckets {
 public:
  // params: one floating dtype on the CPU; owner[i]: the rank that keeps params[i]'s gradient. Registers a
  // post-accumulate hook on each parameter that requires grad.
  static std::shared_ptr<ShardedGradBuckets> attach(const std::vector<Tensor>& params, const std::vector<int>& owner,
                                                    double bucket_cap_mb);
  // Called by step(): the gradients reduced since the last step were used.
  void stepped();
  // The buckets' parameters (indices into params), in reduction order.
  std::vector<std::vector<size_t>> buckets() const;
  int64_t reductions() const;  // backwards whose gradients were reduced

  struct State;
  explicit ShardedGradBuckets(std::shared_ptr<State> s);
  ~ShardedGradBuckets();

 private:
  std::shared_ptr<State> state_;
};

}  // namespace kiln::dist::detail
