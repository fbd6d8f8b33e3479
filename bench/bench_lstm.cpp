// Forward + backward of one LSTM layer (64 -> 128, T=32, batch 16) on one thread, eager;
// bench/lstm_torch.py times the same in PyTorch. Prints ms per iteration of the process's CPU time (one thread:
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
  return 0;
}
