#pragma once
// DistributedSampler (torch.utils.data.distributed.DistributedSampler): which samples of a data set
// of `dataset_size` this rank trains on in an epoch. Every rank draws the same permutation (seeded
// with seed + epoch) and takes every num_replicas-th index from its rank on, so the ranks' parts are
// disjoint and together cover the set. Without drop_last the permutation is padded with its own first
// indices to a multiple of num_replicas (each rank gets the same count); with drop_last the tail is
// dropped instead. Same semantics as torch; the permutation itself is kiln's (std::mt19937_64).
//
//   dist::DistributedSampler sampler(x.size(0));
//   for (int epoch = 0; epoch < n; ++epoch) {
//     sampler.set_epoch(epoch);                   // a new shuffle each epoch, the same on every rank
//     Tensor mine = sampler.index();              // int64 indices for index_select
//   }
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln::dist {

struct DistributedSamplerOptions {
  std::optional<int> num_replicas;  // default: get_world_size()
  std::optional<int> rank;          // default: get_rank()
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  explicit DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options = {});
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  std::vector<int64_t> indices() const;  // this rank's, in the order to visit them
  Tensor index() const;                  // the same as an int64 tensor
  int64_t size() const { return num_samples_; }  // torch's len(sampler)
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }

 private:
  int64_t dataset_size_, num_samples_, total_size_;
  int num_replicas_, rank_;
  DistributedSamplerOptions options_;
  int64_t epoch_ = 0;
};

}  // namespace kiln::dist
