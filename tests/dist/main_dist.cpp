// The doctest main of kiln_dist_tests, run by every rank under mpirun (tests/dist/run_dist.sh): the
// process group spans the test run, each case's collectives are matched across ranks because every
// rank runs the same cases in the same order, and the job fails if any rank's checks failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cstdio>

int main(int argc, char** argv) {
  using namespace kiln;
  // A short timeout: a case whose ranks disagree fails in seconds instead of hanging the suite. The nccl
  // backend wherever it can run: cpu tensors still go through mpi under it, so every case runs the same.
  dist::init_process_group(dist::is_nccl_available() ? "nccl" : "mpi", std::chrono::seconds(30));
  if (dist::get_rank() == 0) std::printf("kiln_dist_tests: backend %s\n", dist::get_backend().c_str());
  doctest::Context ctx(argc, argv);
  if (dist::get_rank() != 0) ctx.setOption("minimal", true);  // one full report, every rank's failures
  int rc = ctx.run();
  Tensor failed = full({1}, double(rc != 0), DType::Int64);
  dist::all_reduce(failed, dist::ReduceOp::Max);
  if (dist::get_rank() == 0 && failed.item<int64_t>() != 0 && rc == 0)
    std::printf("kiln_dist_tests: a check failed on another rank\n");
  dist::destroy_process_group();
  return failed.item<int64_t>() != 0 ? 1 : 0;
}
