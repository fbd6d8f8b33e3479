// Forward + backward of one LSTM layer (64 -> 128, T=32, batch 16) on one thread, eager, and a training step of
// the word language model as a user runs it: tests/script/models/word_lm.py (word_language_model's RNNModel)
// scripted, LSTM, emsize 256, nhid 256, 2 layers, vocab 2000, seq 35, batch 20, dropout 0, SGD lr 0.1, each step
// from init_hidden's zero state, no clipping; eager, as a CompiledTrainStep, and as compile(forward) with the
// loss and the update eager. bench/lstm_torch.py times the same file in PyTorch. Prints ms per
// iteration, the best of 7 runs of 10: at one thread the process's CPU time (its compute time, less disturbed than wall
// time on a shared machine), at more threads wall time (CPU time would add the threads up).
// Usage: bench_lstm [--threads N] [--lm-only] [--profile] [--disable PASS]  (--profile: kiln::Profiler's table of one
// compiled LM step; with KILN_BENCH_TRACE=OUT.json also its chrome trace; --disable: a JIT pass left out, for an A/B)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sys/resource.h>
#include <string>
#include <vector>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

int g_threads = 1;

double now_ms() {
  if (g_threads == 1) return 1000.0 * double(std::clock()) / CLOCKS_PER_SEC;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double best_ms(F&& f, int reps = 7, int iters = 10) {
  f();  // warm-up: allocator cache, BLAS start-up
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_ms();
    for (int i = 0; i < iters; ++i) f();
    ms.push_back((now_ms() - t0) / iters);
  }
  return *std::min_element(ms.begin(), ms.end());
}

void bench_layer() {
  nn::LSTM lstm(64, 128);
  Tensor x = randn({32, 16, 64});
  double fwd = best_ms([&] {
    NoGradGuard g;
    lstm.forward(x);
  });
  double fb = best_ms([&] {
    lstm.zero_grad();
    Tensor xi = x.detach().requires_grad_();
    sum(lstm.forward(xi)).backward();
  });
  std::printf("kiln LSTM(64->128, T=32, N=16), %d thread(s): forward %.3f ms, forward+backward %.3f ms\n", g_threads,
              fwd, fb);
}

int run(int argc, char** argv) {
  bool lm_only = false, profile = false;
  jit::CompileOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) g_threads = std::atoi(argv[++i]);
    else if (a == "--lm-only") lm_only = true;
    else if (a == "--profile") profile = true;
    else if (a == "--disable" && i + 1 < argc) options.pipeline.disable.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_lstm [--threads N] [--lm-only] [--profile] [--disable PASS]\n");
      return 2;
    }
  }
  set_num_threads(g_threads);
  manual_seed(0);
  if (!lm_only && !profile) bench_layer();

  // The model file scripted as written (word_language_model's RNNModel), trained as its train() does: each batch
  // from init_hidden's zero state, NLLLoss on the log-probabilities
  ScriptFile file = script_file(KILN_SOURCE_ROOT "/tests/script/models/word_lm.py");
  std::shared_ptr<ScriptedModule> lm =
      file.module("RNNModel", {std::string("LSTM"), int64_t(2000), int64_t(256), int64_t(256), int64_t(2), 0.0});
  Tensor tokens = randint(0, 2000, {35, 20}), target = randint(0, 2000, {35 * 20});
  optim::SGD opt(lm->parameters(), {0.1});
  auto hidden = [&] { return lm->call({int64_t(20)}, "init_hidden").at(0); };
  auto nll = [](const std::vector<IValue>& out, const Tensor& y) {
    return nll_loss(out.at(0).elements().at(0).to_tensor(), y);
  };
  auto loss = [&](const Tensors& b) { return nll(lm->call({b[0], hidden()}), b[1]); };
  if (profile) {
    CompiledTrainStep step(*lm, loss, opt, options);
    for (int i = 0; i < 3; ++i) step({tokens, target});
    Profiler prof;
    step({tokens, target});
    prof.stop();
    std::printf("%s", prof.table().c_str());
    if (const char* path = std::getenv("KILN_BENCH_TRACE")) prof.save_chrome_trace(path);
    return 0;
  }
  double eager = best_ms([&] {
    opt.zero_grad();
    loss({tokens, target}).backward();
    opt.step();
  }, 5, 3);
  CompiledTrainStep step(*lm, loss, opt, options);
  double compiled = best_ms([&] { step({tokens, target}); }, 5, 3);
  // fresh pages a steady step touches (each costs a kernel fault and a zeroing: ~10 us per 4 KiB page)
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  for (int i = 0; i < 10; ++i) step({tokens, target});
  getrusage(RUSAGE_SELF, &after);
  // compile(forward) with its parameters requiring grad: one compiled forward and backward, the loss and the
  // optimizer eager
  Function forward = compile(lm->method(), options);
  double compiled_forward = best_ms([&] {
    opt.zero_grad();
    nll(forward.call({tokens, hidden()}), target).backward();
    opt.step();
  }, 5, 3);
  std::printf("kiln word LM training step (scripted word_lm.py), %d thread(s): eager %.2f ms, compiled %.2f ms (%.0f page "
              "faults per compiled step), compile(forward) %.2f ms\n",
              g_threads, eager, compiled, double(after.ru_minflt - before.ru_minflt) / 10, compiled_forward);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
