// kiln::dist in one process: DistributedSampler's split (torch's semantics) and the process-group
// API's errors before init. The collectives and DistributedDataParallel run under mpirun in
// tests/dist/ (the dist suite).
#include "support.h"

#include <algorithm>
#include <set>

#include "samples/digits_models.h"

using namespace kiln;
using kiln::test::check_error;

namespace {
std::vector<int64_t> part(int64_t n, int replicas, int rank, bool shuffle, bool drop_last, int64_t epoch = 0,
                          uint64_t seed = 0) {
  dist::DistributedSamplerOptions o;
  o.num_replicas = replicas;
  o.rank = rank;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = seed;
  dist::DistributedSampler s(n, o);
  s.set_epoch(epoch);
  auto idx = s.indices();
  CHECK(int64_t(idx.size()) == s.size());
  return idx;
}
}  // namespace

TEST_CASE("dist sampler: ranks take interleaved, disjoint parts that cover the set (torch's order without shuffle)") {
  CHECK(part(10, 3, 0, false, false) == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(part(10, 3, 1, false, false) == std::vector<int64_t>{1, 4, 7, 0});  // padded with the first indices
  CHECK(part(10, 3, 2, false, false) == std::vector<int64_t>{2, 5, 8, 1});
  CHECK(part(10, 3, 0, false, true) == std::vector<int64_t>{0, 3, 6});     // drop_last: the tail is dropped
  CHECK(part(10, 3, 2, false, true) == std::vector<int64_t>{2, 5, 8});
  CHECK(part(2, 5, 4, false, false) == std::vector<int64_t>{0});            // padding longer than the set
  CHECK(part(0, 2, 1, true, false).empty());
}

TEST_CASE("dist sampler: shuffled, every rank draws the same permutation; a new epoch or seed draws another") {
  const int64_t n = 1797;
  for (int replicas : {1, 2, 3, 4}) {
    CAPTURE(replicas);
    std::multiset<int64_t> all;
    for (int r = 0; r < replicas; ++r)
      for (int64_t i : part(n, replicas, r, true, false, 5)) all.insert(i);
    CHECK(int64_t(all.size()) == (n + replicas - 1) / replicas * replicas);
    for (int64_t i = 0; i < n; ++i) CHECK(all.count(i) >= 1);  // every sample, the padding repeats a few
  }
  auto e0 = part(n, 2, 0, true, false, 0), e1 = part(n, 2, 0, true, false, 1);
  CHECK(e0 == part(n, 2, 0, true, false, 0));  // deterministic: the same on every rank and run
  CHECK(e0 != e1);
  CHECK(e0 != part(n, 2, 0, true, false, 0, 42));
  // 1797 = 2 * 898 + 1: rank 1's last index is the padding, a repeat of the permutation's first.
  auto r1 = part(n, 2, 1, true, false, 0);
  std::set<int64_t> r0(e0.begin(), e0.end());
  for (size_t k = 0; k < r1.size(); ++k) CHECK(r0.count(r1[k]) == (k + 1 == r1.size() ? 1u : 0u));
  CHECK(r1.back() == e0.front());
  auto ix = dist::DistributedSampler(n, {2, 1}).index();
  CHECK(ix.dtype() == DType::Int64);
  CHECK(ix.numel() == 899);
}

TEST_CASE("dist sampler: bad arguments raise with the facts") {
  check_error([] { part(10, 2, 2, true, false); }, "distributed_sampler: invalid rank 2, rank should be in the interval [0, 1]");
  check_error([] { part(10, 2, -1, true, false); }, "distributed_sampler: invalid rank -1, rank should be in the interval [0, 1]");
  check_error([] { part(10, 0, 0, true, false); }, "distributed_sampler: num_replicas must be positive, got 0");
  check_error([] { part(-3, 2, 0, true, false); }, "distributed_sampler: dataset size must not be negative, got -3");
}

TEST_CASE("dist: the process-group api raises before init_process_group (and says when mpi is missing)") {
  CHECK_FALSE(dist::is_initialized());
  CHECK(dist::launcher_world_size() >= 1);
  if (dist::is_available()) {
    check_error([] { dist::get_rank(); }, "dist: default process group has not been initialized, please make sure "
                                          "to call init_process_group");
    check_error([] { dist::DistributedSampler s(10); }, "default process group has not been initialized");
    check_error([] { dist::all_reduce(ones({2})); }, "default process group has not been initialized");
    check_error([] { dist::DistributedDataParallel d(kiln::samples::digits_mlp()); },
                "default process group has not been initialized");
  } else {
    check_error([] { dist::init_process_group(); }, "init_process_group: kiln was built without mpi");
  }
  check_error([] { dist::init_process_group("gloo"); },
              "init_process_group: unknown backend 'gloo'; kiln has the backends mpi and nccl");
  // Where nccl cannot run (no mpi, driver, gpu or libnccl) the backend raises before mpi starts, saying
  // what is missing; where it can, this process must not start mpi, so only the reason is checked.
  std::string why = dist::nccl_unavailable_reason();
  CHECK(dist::is_nccl_available() == why.empty());
  if (!why.empty()) {
    CHECK(why.rfind("backend nccl needs ", 0) == 0);
    check_error([] { dist::init_process_group("nccl"); }, "init_process_group: " + why);
    CHECK_FALSE(dist::is_initialized());
    MESSAGE("init_process_group(\"nccl\") here: " << why);
  }
}
