// Forward + backward of one LSTM layer (64 -> 128, T=32, batch 16) on one thread, eager, and a training step of
// the word language model (Embedding 2000x256, LSTM 256->256 x2, Linear 256->2000, seq 35, batch 20, SGD, zero
// initial state, no dropout) eager and as a compiled step; bench/lstm_torch.py times the same in PyTorch. Prints ms per iteration of the process's CPU time (one thread:
// its compute time, less disturbed than wall time on a shared machine), the best of 7 runs of 10.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

template <class F>
double best_ms(F&& f, int reps = 7, int iters = 10) {
  f();  // warm-up: allocator cache, BLAS start-up
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    std::clock_t t0 = std::clock();
    for (int i = 0; i < iters; ++i) f();
    ms.push_back(1000.0 * double(std::clock() - t0) / CLOCKS_PER_SEC / iters);
  }
  return *std::min_element(ms.begin(), ms.end());
}

}  // namespace

int main() {
  set_num_threads(1);
  manual_seed(0);
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
  std::printf("kiln LSTM(64->128, T=32, N=16), 1 thread: forward %.3f ms, forward+backward %.3f ms\n", fwd, fb);

  nn::Sequential lm({std::make_shared<nn::Embedding>(2000, 256), std::make_shared<nn::LSTM>(256, 256, 2),
                     std::make_shared<nn::Linear>(256, 2000)});
  Tensor tokens = randint(0, 2000, {35, 20}), target = randint(0, 2000, {35 * 20});
  optim::SGD opt(lm.parameters(), {0.1});
  auto loss = [&](const Tensors& b) { return cross_entropy(flatten(lm(b[0]), 0, 1), b[1]); };
  double eager = best_ms([&] {
    opt.zero_grad();
    loss({tokens, target}).backward();
    opt.step();
  }, 5, 3);
  CompiledTrainStep step(lm, loss, opt);
  double compiled = best_ms([&] { step({tokens, target}); }, 5, 3);
  std::printf("kiln word LM training step, 1 thread: eager %.2f ms, compiled %.2f ms\n", eager, compiled);
  return 0;
}
