// kiln::dist under mpirun: the data-parallel MLP step and the all-reduce against MPI's own loop.
//   mpirun -np N bench_dist mlp        # ms per step of the digits MLP (eager and compiled), N ranks
//   mpirun -np 2 bench_dist allreduce  # kiln::dist::all_reduce vs MPI_Allreduce (osu_allreduce style)
//   mpirun -np G bench_dist nccl       # all_reduce of cuda tensors through NCCL, bus bandwidth (one gpu per
//                                      # rank; skipped, saying why, where the nccl backend cannot run)
// bench/dist_scaling.sh runs both at -np 1 and 2 and prints the scaling efficiency (bench/RESULTS.md).
// Not a Google Benchmark suite: every rank must run the same loop the same number of times, so the
// iteration counts are fixed here, and a step's time is the slowest rank's (a barrier around it).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "samples/digits_models.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per iteration of fn, the slowest rank's, best of `reps` runs of `iters` iterations.
template <class F>
double time_per_iter(int iters, int reps, F&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    dist::barrier();
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) fn();
    double mine = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    Tensor t = full({1}, mine, DType::Float64);
    dist::all_reduce(t, dist::ReduceOp::Max);
    best = std::min(best, t.item<double>());
  }
  return best;
}

// The digits MLP's training step on `local` samples per rank: eager or CompiledTrainStep, wrapped in
// DistributedDataParallel when `ddp`. Returns ms per step.
double mlp_step_ms(int64_t local, bool compiled, bool ddp) {
  manual_seed(1);
  auto mlp = kiln::samples::digits_mlp();
  std::shared_ptr<nn::Module> model = mlp;
  if (ddp) model = std::make_shared<dist::DistributedDataParallel>(mlp);
  optim::Adam opt(model->parameters(), {1e-3});
  auto loss_of = [&](const Tensors& b) { return cross_entropy((*model)(b[0]), b[1]); };
  CompiledTrainStep step(*model, loss_of, opt);
  manual_seed(2 + uint64_t(dist::get_rank()));
  Tensors batch{randn({local, 64}), randint(0, 10, {local})};
  auto one = [&] {
    if (compiled) {
      step(batch);
    } else {
      Tensor loss = loss_of(batch);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  };
  for (int i = 0; i < 30; ++i) one();  // warm up (and compile)
  return 1e3 * time_per_iter(300, 5, one);
}

void bench_mlp() {
  int w = dist::get_world_size();
  if (dist::get_rank() == 0)
    std::printf("== digits MLP (64-128-10) training step, %d rank(s), 1 thread each; ms per step (slowest rank) ==\n"
                "%-9s %-6s %-10s %-10s %-12s\n",
                w, "mode", "ddp", "per rank", "ms/step", "samples/s");
  for (bool compiled : {false, true})
    for (int64_t global : {64, 256}) {
      int64_t local = global / w;
      for (bool ddp : {false, true}) {
        if (!ddp && w > 1) continue;  // without DDP the ranks would not train one model
        double ms = mlp_step_ms(local, compiled, ddp);
        if (dist::get_rank() == 0)
          std::printf("%-9s %-6s %-10lld %-10.4f %-12.0f  (global batch %lld)\n", compiled ? "compiled" : "eager",
                      ddp ? "yes" : "no", (long long)local, ms, double(global) / ms * 1e3, (long long)global);
      }
    }
}

void bench_allreduce() {
  int w = dist::get_world_size();
  if (dist::get_rank() == 0)
    std::printf("== all-reduce (sum) of float32, %d ranks: kiln::dist::all_reduce vs MPI_Allreduce in the same "
                "loop (osu_allreduce style: warm-up, then the mean over iterations of the slowest rank) ==\n"
                "%-10s %-10s %-10s %-14s %-10s %-16s\n",
                w, "bytes", "kiln us", "mpi us", "mpi Iall+Wait", "kiln/mpi", "kiln busbw GB/s");
  for (int64_t n = 1; n <= (int64_t(1) << 22); n *= 4) {
    Tensor t = ones({n});
    std::vector<float> raw(size_t(n), 1.0f);
    int iters = n <= 4096 ? 2000 : n <= (1 << 18) ? 200 : 20;
    double kiln_s = time_per_iter(iters, 3, [&] { dist::all_reduce(t); });
    double mpi_s = time_per_iter(iters, 3, [&] {
      MPI_Allreduce(MPI_IN_PLACE, raw.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    // What kiln wraps: the nonblocking all-reduce (Open MPI's libnbc schedule), waited for at once.
    double nb_s = time_per_iter(iters, 3, [&] {
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, raw.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    });
    double bytes = double(n) * 4;
    // NCCL's "bus bandwidth": what each rank's link carries in a ring all-reduce, 2 (w - 1) / w of the data.
    double busbw = bytes * 2 * (w - 1) / w / kiln_s / 1e9;
    if (dist::get_rank() == 0)
      std::printf("%-10.0f %-10.2f %-10.2f %-14.2f %-10.2f %-16.3f\n", bytes, kiln_s * 1e6, mpi_s * 1e6, nb_s * 1e6,
                  kiln_s / mpi_s, busbw);
  }
}

// nccl-tests' all_reduce_perf in kiln: the time of a synchronous dist::all_reduce of a cuda tensor (queue,
// then poll its event), which includes kiln's host side; busbw as there.
void bench_nccl_allreduce() {
  int w = dist::get_world_size();
  Device dev = dist::nccl_device();
  if (dist::get_rank() == 0)
    std::printf("== nccl all-reduce (sum) of float32 cuda tensors, %d rank(s), one gpu each: synchronous "
                "kiln::dist::all_reduce, the slowest rank's mean ==\n%-12s %-10s %-12s %-12s\n",
                w, "bytes", "us", "algbw GB/s", "busbw GB/s");
  for (int64_t n = 1024; n <= (int64_t(1) << 28); n *= 8) {
    Tensor t = ones({n}).to(dev);
    int iters = n <= (1 << 16) ? 500 : n <= (1 << 22) ? 100 : 20;
    for (int i = 0; i < 5; ++i) dist::all_reduce(t);
    double s = time_per_iter(iters, 3, [&] { dist::all_reduce(t); });
    double bytes = double(n) * 4;
    if (dist::get_rank() == 0)
      std::printf("%-12.0f %-10.2f %-12.3f %-12.3f\n", bytes, s * 1e6, bytes / s / 1e9,
                  bytes * 2 * (w - 1) / std::max(w, 1) / s / 1e9);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "all";
  bool nccl = what == "nccl" || what == "all";
  if (what == "nccl" && !dist::is_nccl_available()) {
    // Every rank sees the same machine: all skip alike, without joining a group.
    std::printf("bench_dist nccl: skipped: %s\n", dist::nccl_unavailable_reason().c_str());
    return 0;
  }
  dist::init_process_group(nccl && dist::is_nccl_available() ? "nccl" : "mpi");
  if (what == "mlp" || what == "all") bench_mlp();
  if (what == "allreduce" || what == "all") bench_allreduce();
  if (nccl) {
    if (dist::get_backend() == "nccl")
      bench_nccl_allreduce();
    else if (dist::get_rank() == 0)
      std::printf("== nccl all-reduce: skipped: %s ==\n", dist::nccl_unavailable_reason().c_str());
  }
  dist::destroy_process_group();
  return 0;
}
