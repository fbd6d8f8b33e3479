// The ThreadSanitizer program's kiln::dist part (docs/threads.md), run by every rank under
// `mpirun -np 2` in the TSan build (tests/tsan/meson.build has the command): MPI in a program that
// has other threads. The process group is MPI_THREAD_FUNNELED: only the thread that called
// init_process_group calls MPI, here main's; kiln's inter-op team threads and the program's own threads
// compute beside it and never call dist. Same rules as tests/tsan/test_threads.cpp: OMP_NUM_THREADS=1
// OPENBLAS_NUM_THREADS=1 (main refuses otherwise), and worker threads record, the test checks after join().
#define DOCTEST_CONFIG_IMPLEMENT
#include "../support.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
using IntraThreads = kiln::test::NumThreads;
using InteropThreads = kiln::test::NumInteropThreads;
using kiln::test::same_bits;

namespace {

int rank() { return dist::get_rank(); }

// Every rank holds the same values: the max and the min over ranks both equal this rank's.
void check_same_on_every_rank(const Tensor& t) {
  Tensor hi = t.detach().clone(), lo = t.detach().clone();
  dist::all_reduce(hi, dist::ReduceOp::Max);
  dist::all_reduce(lo, dist::ReduceOp::Min);
  CHECK(same_bits(hi, t.detach()));
  CHECK(same_bits(lo, t.detach()));
}

// Two independent towers, so a compiled call of it runs both at once at 2 inter-op threads.
std::shared_ptr<nn::Module> two_towers(uint64_t seed) {
  manual_seed(seed);
  auto tower = [] {
    auto s = std::make_shared<nn::Sequential>();
    s->add(std::make_shared<nn::Linear>(16, 32)).add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::Linear>(32, 4));
    return s;
  };
  struct Towers : nn::Module {
    std::shared_ptr<nn::Module> a, b;
    Towers(std::shared_ptr<nn::Module> x, std::shared_ptr<nn::Module> y) {
      a = register_module("a", std::move(x));
      b = register_module("b", std::move(y));
    }
    Tensor forward(const Tensor& x) override { return a->forward(x) + b->forward(x); }
    std::string name() const override { return "Towers"; }
  };
  return std::make_shared<Towers>(tower(), tower());
}

}  // namespace

TEST_CASE("tsan (e): DDP compiled training on the MPI thread at 2 inter-op threads while 2 threads serve a compiled function") {
  IntraThreads intra(1);
  InteropThreads interop(2);
  // What the serving threads call: a compiled function of its own (no parameters shared with training).
  auto served_model = two_towers(99);
  Tensor probe = randn({8, 16});
  Function served = compile(trace_module(*served_model, [&](const Tensors& in) { return Tensors{(*served_model)(in[0])}; }, {probe}));
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = served({probe})[0];
  }

  // Rank r starts from its own weights; DDP's broadcast makes them rank 0's, and the gradients of its
  // two buckets are averaged by MPI on this thread during each compiled backward.
  auto model = two_towers(1 + uint64_t(rank()));
  dist::DistributedDataParallelOptions o;
  o.bucket_cap_mb = 0.001;  // 1 KiB: several buckets, reduced while the backward still runs
  auto ddp = std::make_shared<dist::DistributedDataParallel>(model, o);
  optim::SGD opt(ddp->parameters(), {0.05});
  CompiledTrainStep step(*ddp, [&](const Tensors& b) { return mse_loss((*ddp)(b[0]), b[1]); }, opt);
  manual_seed(5);
  Tensor data = randn({16, 16}), target = randn({16, 4});

  constexpr int kServers = 2, kSteps = 6;
  std::atomic<bool> stop{false};
  std::vector<int> calls(kServers, 0), good(kServers, 0);
  std::vector<std::string> errors(kServers);
  std::vector<std::thread> servers;
  for (int t = 0; t < kServers; ++t)
    servers.emplace_back([&, t] {
      try {
        if (get_num_threads() != 1) throw std::runtime_error("this thread has more than one OpenMP thread");
        NoGradGuard no_grad;
        do {
          ++calls[size_t(t)];
          if (same_bits(served({probe})[0], expected)) ++good[size_t(t)];
        } while (!stop.load());
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
      }
    });
  // Each rank trains on its half of one batch of 16 rows, every step: its loss goes down.
  Tensor x = data.slice(0, 8 * rank(), 8 * rank() + 8), y = target.slice(0, 8 * rank(), 8 * rank() + 8);
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) losses.push_back(step({x, y}).item<double>());
  stop = true;
  for (std::thread& th : servers) th.join();

  for (int t = 0; t < kServers; ++t) {
    CAPTURE(t);
    CHECK_MESSAGE(errors[size_t(t)].empty(), errors[size_t(t)]);
    CHECK(calls[size_t(t)] > 0);
    CHECK(good[size_t(t)] == calls[size_t(t)]);
  }
  CHECK(ddp->reductions() == kSteps);
  CHECK(compile_stats(step.function()).eager_calls == 0);
  for (auto& p : model->parameters()) check_same_on_every_rank(p);
  CHECK(losses.back() < losses.front());
}

TEST_CASE("tsan (e): tensors computed on other threads are all-reduced by the MPI thread after join") {
  IntraThreads intra(1);
  constexpr int kThreads = 3;
  std::vector<Tensor> parts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { parts[size_t(t)] = full({5}, double(t + 1)) * double(rank() + 1); });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    dist::all_reduce(parts[size_t(t)], dist::ReduceOp::Sum);
    // sum over ranks r of (t + 1) * (r + 1)
    double w = dist::get_world_size();
    CHECK(kiln::test::values(parts[size_t(t)]) == std::vector<double>(5, (t + 1) * w * (w + 1) / 2));
  }
}

int main(int argc, char** argv) {
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    const char* v = std::getenv(var);
    if (!v || std::strcmp(v, "1") != 0) {
      std::fprintf(stderr, "kiln_tsan_dist: run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (%s is %s): see docs/threads.md\n",
                   var, v ? v : "unset");
      return 2;
    }
  }
  if (!dist::is_available()) {
    std::printf("kiln_tsan_dist: skipped: kiln was built without mpi\n");
    return 77;
  }
  // A short timeout: ranks that disagree fail in seconds instead of hanging.
  dist::init_process_group("mpi", std::chrono::seconds(60));
  doctest::Context ctx(argc, argv);
  if (dist::get_rank() != 0) ctx.setOption("minimal", true);
  int rc = ctx.run();
  Tensor failed = full({1}, double(rc != 0), DType::Int64);
  dist::all_reduce(failed, dist::ReduceOp::Max);
  bool any = failed.item<int64_t>() != 0;
  if (dist::get_rank() == 0 && any && rc == 0) std::printf("kiln_tsan_dist: a check failed on another rank\n");
  dist::destroy_process_group();
  return any ? 1 : 0;
}
