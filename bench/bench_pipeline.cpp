// Peak memory of a pipeline stage under GPipe and 1F1B (eager/dist/pipeline.h), the figure in
// docs/dist.md:   mpirun -np 2 build/bench/bench_pipeline [micro_batches]
// An MLP of 8 Linear(512, 512) + ReLU pairs (16 modules, 2.1 M parameters), cut in two stages of 8
// modules, trained with SGD on batches of 1024 rows split into micro-batches (8 by default). Each
// rank reports, for a step after a warm-up one, how far the allocator's live bytes rose above what
// was live after zero_grad (peak_bytes - current_bytes: the activations held for backward, the
// gradients made in backward, the transfer buffers), and how many of the peak's bytes were
// activations (saved for backward, the input batch's 2 MiB among them on the first stage). One
// process training the whole model on the whole batch is the reference, measured on rank 0 before
// the pipeline starts.
#include <kiln/kiln.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr int64_t kWidth = 512, kBatch = 1024;

std::shared_ptr<nn::Sequential> model() {
  manual_seed(3);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 8; ++i) m->add(std::make_shared<nn::Linear>(kWidth, kWidth)), m->add(std::make_shared<nn::ReLU>());
  return m;
}

double mib(int64_t b) { return double(b) / (1 << 20); }

struct Peak {
  int64_t rise = 0, activations = 0;
  double ms = 0;
};

// The allocator's rise during one training step (after a warm-up step, so the step is a steady one),
// from what is live once the last step's gradients are dropped.
template <class F>
Peak measure(optim::Optimizer& opt, F&& fn) {
  opt.zero_grad();
  fn();
  opt.zero_grad();
  int64_t before = memory_stats().current_bytes;
  reset_peak_memory_stats();
  auto t0 = std::chrono::steady_clock::now();
  fn();
  auto t1 = std::chrono::steady_clock::now();
  MemoryStats m = memory_stats();
  return {m.peak_bytes - before, m.category_peak_bytes[size_t(MemoryCategory::Activation)],
          std::chrono::duration<double, std::milli>(t1 - t0).count()};
}

}  // namespace

int main(int argc, char** argv) {
  const int chunks = argc > 1 ? std::atoi(argv[1]) : 8;
  dist::init_process_group();
  const int rank = dist::get_rank(), world = dist::get_world_size();
  manual_seed(4);
  Tensor x = randn({kBatch, kWidth}), y = randint(0, kWidth, {kBatch});
  auto loss_fn = [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); };
  if (rank == 0) {
    auto whole = model();
    optim::SGD opt(whole->parameters(), {0.01});
    Peak p = measure(opt, [&] {
      loss_fn((*whole)(x), y).backward();
      opt.step();
    });
    std::printf("one process, whole model, batch %lld: peak rise %.1f MiB (activations at the peak %.1f MiB), %.1f ms\n",
                (long long)kBatch, mib(p.rise), mib(p.activations), p.ms);
  }
  dist::barrier();
  auto whole = model();
  dist::PipelineStage stage = dist::pipeline_stage(*whole);
  optim::SGD opt(stage.parameters(), {0.01});
  for (std::string name : {"gpipe", "1f1b"}) {
    std::unique_ptr<dist::PipelineSchedule> s;
    if (name == "gpipe") s = std::make_unique<dist::ScheduleGPipe>(stage, chunks, loss_fn);
    else s = std::make_unique<dist::Schedule1F1B>(stage, chunks, loss_fn);
    double step_ms = 0;
    Peak p = measure(opt, [&] {
      dist::barrier();  // the step's wall time from a common start
      auto t0 = std::chrono::steady_clock::now();
      s->step(x, y);
      step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      opt.step();
    });
    // Rank 0 prints every rank's figures (mpirun interleaves the ranks' output in no fixed order).
    Tensor all = zeros({world, 6}, DType::Float64);
    all.select(0, rank).copy_(tensor(std::vector<double>{double(stage.balance()[size_t(rank)]), mib(p.rise),
                                                         mib(p.activations), p.ms, s->busy_seconds() * 1e3, step_ms}));
    dist::all_reduce(all);
    // The bubble: the part of the step a stage waits. With stages of equal cost both schedules idle
    // (p - 1) / (m + p - 1) of it.
    double theory = double(world - 1) / double(chunks + world - 1);
    for (int r = 0; r < world && rank == 0; ++r)
      std::printf("%-5s %d micro-batches, stage %d (%.0f modules): peak rise %.1f MiB (activations at the peak %.1f "
                  "MiB), %.1f ms; busy %.1f of the schedule's %.1f ms, idle %.0f %% (equal stages: %.0f %%)\n",
                  name.c_str(), chunks, r, all[r][0].item<double>(), all[r][1].item<double>(),
                  all[r][2].item<double>(), all[r][3].item<double>(), all[r][4].item<double>(),
                  all[r][5].item<double>(), 100 * (1 - all[r][4].item<double>() / all[r][5].item<double>()),
                  100 * theory);
  }
  dist::destroy_process_group();
  return 0;
}
