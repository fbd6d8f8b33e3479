// A rank that fails mid-training, for run_dist.sh: `dist_fail die` kills rank 1 (SIGKILL) at step 3,
// `dist_fail stall` puts it to sleep there. The other ranks are waiting on a gradient all-reduce
// at that point; the job must end with an error in bounded time instead of hanging: mpirun tears it
// down when a rank dies, and the all-reduce's own timeout (3 s here) catches a rank that stalls.
// `pipe_die` and `pipe_stall` do the same to the last stage of a 2-stage 1F1B pipeline, where rank 0
// is then waiting for the gradient of its first micro-batch.
#include <kiln/kiln.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "samples/digits_models.h"

using namespace kiln;

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  bool pipe = mode.rfind("pipe_", 0) == 0;
  if (pipe) mode = mode.substr(5);
  if (mode != "die" && mode != "stall") {
    std::fprintf(stderr, "usage: dist_fail die|stall|pipe_die|pipe_stall\n");
    return 2;
  }
  dist::init_process_group("mpi", std::chrono::seconds(3));
  int rank = dist::get_rank();
  try {
    manual_seed(1);
    auto mlp = kiln::samples::digits_mlp();
    if (pipe) {
      dist::PipelineStage stage = dist::pipeline_stage(*mlp, {2, 1});
      optim::SGD opt(stage.parameters(), {0.1});
      dist::Schedule1F1B schedule(stage, 4, [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
      Tensor x = randn({16, 64}), y = randint(0, 10, {16});
      for (int step = 0; step < 20; ++step) {
        if (rank == 1 && step == 3) {
          if (mode == "die") std::raise(SIGKILL);
          std::this_thread::sleep_for(std::chrono::minutes(10));
        }
        opt.zero_grad();
        schedule.step(x, y);
        opt.step();
      }
      std::printf("rank %d: trained 20 steps\n", rank);
      dist::destroy_process_group();
      return 0;
    }
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
