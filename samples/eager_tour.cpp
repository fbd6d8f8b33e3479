// A tour of kiln's eager API: tensors, views, broadcasting, reductions, matmul and I/O, printed the
// way PyTorch prints them.
#include <kiln/kiln.h>

#include <chrono>
#include <iostream>

using namespace kiln;

int main() {
  manual_seed(0);
  Tensor x = arange(12).reshape({3, 4}).to(DType::Float32);
  std::cout << "x = " << x << "\n";
  std::cout << "x.t() (a view, no copy) = " << x.t() << "\n";
  std::cout << "x[1] * 2 + 1 = " << x[1] * 2 + 1 << "\n";
  std::cout << "broadcast x + [10, 20, 30, 40] = " << x + tensor({10.0, 20.0, 30.0, 40.0}) << "\n";
  std::cout << "softmax(x, 1) = " << softmax(x, 1) << "\n";
  std::cout << "x.sum(1) = " << x.sum(1) << ", x.mean() = " << x.mean().item<float>() << "\n";

  Tensor w = randn({4, 2});
  std::cout << "x @ w = " << matmul(x, w) << "\n";

  try {
    matmul(x, x);
  } catch (const Error& e) {
    std::cout << "a bad call raises kiln::Error: " << e.what() << "\n";
  }

  // The caching allocator: the second round of 64 MiB tensors reuses the first round's memory.
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor big = ones({1 << 24});
    Tensor y = big * 2 + 1;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "round " << round << ": three 64 MiB tensors in " << ms << " ms (cached "
              << memory_stats().cached_bytes / (1 << 20) << " MiB)\n";
  }
  save_npy("/tmp/kiln_tour.npy", x);
  std::cout << "saved and reloaded x: " << load_npy("/tmp/kiln_tour.npy") << "\n";
  return 0;
}
