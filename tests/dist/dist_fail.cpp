// A rank that fails mid-training, for run_dist.sh: `dist_fail die` kills rank 1 (SIGKILL) at step 3,
// `dist_fail stall` puts it to sleep there. The other ranks are waiting on a gradient all-reduce
// at that point; the job must end with an error in bounded time instead of hanging: mpirun tears it
// down when a rank dies, and the all-reduce's own timeout (3 s here) catches a rank that stalls.
#include <kiln/kiln.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "samples/digits_models.h"

using namespace kiln;

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "die" && mode != "stall") {
    std::fprintf(stderr, "usage: dist_fail die|stall\n");
    return 2;
  }
  dist::init_process_group("mpi", std::chrono::seconds(3));
  int rank = dist::get_rank();
  try {
    manual_seed(1);
    auto mlp = kiln::samples::digits_mlp();
    auto ddp = std::make_shared<dist::DistributedDataParallel>(mlp);
    optim::SGD opt(ddp->parameters(), {0.1});
    Tensor x = randn({16, 64}), y = randint(0, 10, {16});
    for (int step = 0; step < 20; ++step) {
      if (rank == 1 && step == 3) {
        if (mode == "die") std::raise(SIGKILL);
        std::this_thread::sleep_for(std::chrono::minutes(10));
      }
      Tensor loss = cross_entropy((*ddp)(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 1;  // the group is broken: the exit handler aborts the job (MPI_Abort) instead of finalizing
  }
  std::printf("rank %d: trained 20 steps\n", rank);
  dist::destroy_process_group();
  return 0;
}
