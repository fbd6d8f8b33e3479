// DistributedSampler: torch's index arithmetic (see sampler.h).
#include "eager/dist/sampler.h"

#include <random>

#include "eager/dist/dist.h"
#include "eager/ops.h"

namespace kiln::dist {

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions o)
    : dataset_size_(dataset_size), options_(o) {
  num_replicas_ = o.num_replicas ? *o.num_replicas : get_world_size();
  rank_ = o.rank ? *o.rank : get_rank();
  if (num_replicas_ <= 0) fail("distributed_sampler: num_replicas must be positive, got {}", num_replicas_);
  if (rank_ < 0 || rank_ >= num_replicas_)
    fail("distributed_sampler: invalid rank {}, rank should be in the interval [0, {}]", rank_, num_replicas_ - 1);
  if (dataset_size < 0) fail("distributed_sampler: dataset size must not be negative, got {}", dataset_size);
  if (o.drop_last && dataset_size % num_replicas_ != 0)
    num_samples_ = (dataset_size - num_replicas_ + num_replicas_ - 1) / num_replicas_;  // ceil((n - r) / r)
  else
    num_samples_ = (dataset_size + num_replicas_ - 1) / num_replicas_;
  if (num_samples_ < 0) num_samples_ = 0;
  total_size_ = num_samples_ * num_replicas_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(dataset_size_));
  for (int64_t i = 0; i < dataset_size_; ++i) all[size_t(i)] = i;
  if (options_.shuffle) {
    // Fisher-Yates on mt19937_64, whose output the standard fixes, so every rank (and every build)
    // draws the same permutation; std::shuffle's draws are implementation-defined.
    std::mt19937_64 gen(options_.seed + uint64_t(epoch_));
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      uint64_t bound = uint64_t(i) + 1, limit = UINT64_MAX - UINT64_MAX % bound, r;
      do r = gen(); while (r >= limit);  // rejection keeps every j equally likely
      std::swap(all[size_t(i)], all[size_t(r % bound)]);
    }
  }
  if (total_size_ > dataset_size_) {
    // Padding repeats the permutation from its start (several times over when it is very short).
    for (int64_t k = dataset_size_; k < total_size_; ++k) all.push_back(all[size_t(k % dataset_size_)]);
  } else {
    all.resize(size_t(total_size_));
  }
  std::vector<int64_t> mine;
  mine.reserve(size_t(num_samples_));
  for (int64_t k = rank_; k < total_size_; k += num_replicas_) mine.push_back(all[size_t(k)]);
  return mine;
}

Tensor DistributedSampler::index() const { return tensor(indices(), {}, DType::Int64); }

}  // namespace kiln::dist
