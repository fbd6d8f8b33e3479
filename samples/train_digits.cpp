// Trains an MLP and a small CNN on the 8x8 handwritten digits that python3-sklearn ships
// (converted to .npy by .ci/setup.sh), with kiln's eager autograd, nn and optim.
//   train_digits [mlp|cnn|both] [data_dir]
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace kiln;

namespace {

// A random permutation of 0..n-1 (int64), from kiln's seeded generator.
Tensor random_permutation(int64_t n) {
  Tensor r = rand({n}, DType::Float64);
  const double* p = r.data_ptr<double>();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = i;
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return p[a] < p[b]; });
  return tensor(idx, {}, DType::Int64);
}

struct Split {
  Tensor x_train, y_train, x_test, y_test;
};

double accuracy(nn::Module& model, const Tensor& x, const Tensor& y) {
  NoGradGuard ng;
  model.eval();
  Tensor pred = argmax(model(x), 1);
  model.train();
  return sum(pred == y).item<double>() / double(y.numel());
}

// One progress line per epoch: loss, test accuracy, ms per optimizer step.
double train(const char* tag, nn::Module& model, const Split& d, int epochs, double lr, int64_t batch) {
  optim::Adam opt(model.parameters(), {lr});
  optim::CosineAnnealingLR sched(opt, epochs);
  int64_t n = d.x_train.size(0);
  double acc = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    Tensor perm = random_permutation(n);
    double loss_sum = 0;
    int steps = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s + batch <= n; s += batch) {
      Tensor idx = perm.slice(0, s, s + batch);
      Tensor xb = index_select(d.x_train, 0, idx), yb = index_select(d.y_train, 0, idx);
      Tensor loss = cross_entropy(model(xb), yb);
      opt.zero_grad();
      loss.backward();
      opt.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    sched.step();
    acc = accuracy(model, d.x_test, d.y_test);
    std::printf("%s epoch %2d  loss %.4f  test accuracy %.2f%%  %.3f ms/step\n", tag, epoch, loss_sum / steps,
                acc * 100, ms);
  }
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = argc > 1 ? argv[1] : "both";
  std::string dir = argc > 2 ? argv[2] : "samples/data";
  manual_seed(0);
  Tensor x = load_npy(dir + "/digits_x.npy"), y = load_npy(dir + "/digits_y.npy");
  int64_t n = x.size(0), n_train = n * 5 / 6;
  Split d{x.slice(0, 0, n_train), y.slice(0, 0, n_train), x.slice(0, n_train, n), y.slice(0, n_train, n)};
  std::printf("digits: %lld train, %lld test, %lld features\n", (long long)n_train, (long long)(n - n_train),
              (long long)x.size(1));
  bool ok = true;
  if (which == "mlp" || which == "both") {
    auto mlp = nn::Sequential({std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(128, 10)});
    ok = train("mlp", mlp, d, 20, 3e-3, 32) >= 0.95 && ok;
  }
  if (which == "cnn" || which == "both") {
    Split img{d.x_train.reshape({-1, 1, 8, 8}), d.y_train, d.x_test.reshape({-1, 1, 8, 8}), d.y_test};
    auto cnn = nn::Sequential({std::make_shared<nn::Conv2d>(1, 16, Shape{3, 3}, Shape{1, 1}, Shape{1, 1}),
                               std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(Shape{2, 2}),
                               std::make_shared<nn::Conv2d>(16, 32, Shape{3, 3}, Shape{1, 1}, Shape{1, 1}),
                               std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(Shape{2, 2}),
                               std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(32 * 2 * 2, 10)});
    ok = train("cnn", cnn, img, 15, 3e-3, 32) >= 0.95 && ok;
  }
  return ok ? 0 : 1;
}
