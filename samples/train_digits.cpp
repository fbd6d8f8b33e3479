// Trains an MLP and a small CNN on the 8x8 handwritten digits that python3-sklearn ships
// (converted to .npy by .ci/setup.sh), with kiln's eager autograd, nn and optim.
//   train_digits [mlp|cnn|both] [data_dir] [--compile] [--profile] [--bf16]
// --compile trains each model a second time from the same initial weights with the whole step
// compiled (CompiledTrainStep: compiled forward and backward, fused Adam) and prints both ms/step.
// --profile instead runs one eager step (after one to warm up) under kiln::Profiler and prints its table:
// ops, modules, FLOPs and memory by category.
// --bf16 trains each model again from the same initial weights with forward and loss under bf16
// autocast (AutocastGuard: matmul/conv in bf16, losses in float32, float32 master weights), and with
// --compile also as a compiled step traced under autocast; every run's accuracy and ms/step are printed;
// with --profile, the profiled step runs under bf16 autocast.
//
// Data-parallel: started by mpirun (`mpirun -np 2 train_digits mlp`), each rank trains on its share of
// every epoch (DistributedSampler) with the model wrapped in DistributedDataParallel; the global batch
// stays 32 (32 / ranks per rank), so the run follows the single-process one. Rank 0 prints.
#include <kiln/kiln.h>

#include "digits_models.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
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

double accuracy(nn::Module& model, const Tensor& x, const Tensor& y, bool bf16) {
  NoGradGuard ng;
  AutocastGuard autocast(DType::BFloat16, bf16);
  model.eval();
  Tensor pred = argmax(model(x), 1);
  model.train();
  return sum(pred == y).item<double>() / double(y.numel());
}

struct Result {
  double accuracy = 0, ms_per_step = 0;
};

// The ranks when started by mpirun; one process otherwise.
struct Ranks {
  bool distributed = false;
  int rank = 0, world = 1;
};
Ranks ranks;
bool use_bf16 = false;  // the run's forward and loss under bf16 autocast

// This epoch's sample order: a seeded permutation, or this rank's share of one.
Tensor epoch_order(int64_t n, int epoch) {
  if (!ranks.distributed) return random_permutation(n);
  dist::DistributedSampler sampler(n);
  sampler.set_epoch(epoch);
  return sampler.index();
}

// One progress line per epoch: loss, test accuracy, ms per optimizer step.
Result train(const std::string& tag, nn::Module& model, const Split& d, int epochs, double lr, int64_t batch,
             bool compiled) {
  if (ranks.distributed) batch /= ranks.world;  // the same global batch
  optim::Adam opt(model.parameters(), {lr});
  // The autocast scope opens inside the loss function, so the trace records its casts (docs/autocast.md).
  auto loss_fn = [&](const Tensors& b) {
    AutocastGuard autocast(DType::BFloat16, use_bf16);
    return cross_entropy(model(b[0]), b[1]);
  };
  CompiledTrainStep step(model, loss_fn, opt);
  optim::CosineAnnealingLR sched(opt, epochs);
  Tensor perm0 = epoch_order(d.x_train.size(0), 0);
  int64_t n = perm0.size(0);
  Result r;
  double total_ms = 0;
  int64_t total_steps = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    Tensor perm = epoch == 1 ? perm0 : epoch_order(d.x_train.size(0), epoch - 1);
    double loss_sum = 0;
    int steps = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s + batch <= n; s += batch) {
      Tensor idx = perm.slice(0, s, s + batch);
      Tensor xb = index_select(d.x_train, 0, idx), yb = index_select(d.y_train, 0, idx);
      Tensor loss;
      if (compiled) {
        loss = step({xb, yb});
      } else {
        loss = loss_fn({xb, yb});
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
      loss_sum += loss.item<double>();
      ++steps;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (epoch > 1) total_ms += ms, total_steps += steps;  // epoch 1 pays the compile
    sched.step();
    r.accuracy = accuracy(model, d.x_test, d.y_test, use_bf16);
    if (ranks.rank == 0)
      std::printf("%s epoch %2d  loss %.4f  test accuracy %.2f%%  %.3f ms/step\n", tag.c_str(), epoch, loss_sum / steps,
                r.accuracy * 100, ms / steps);
  }
  r.ms_per_step = total_ms / double(total_steps);
  return r;
}

// Eager, then (with --compile) compiled, (with --bf16) eager under bf16 autocast, and with both the
// compiled step traced under autocast: each from the same initial weights; ms/step side by side.
bool run(const std::string& tag, const std::function<std::shared_ptr<nn::Module>()>& make, const Split& d, int epochs,
         bool compile_too, bool bf16_too) {
  // Distributed, the model is wrapped: rank 0's initial weights reach every rank, gradients are averaged.
  auto wrap = [](std::shared_ptr<nn::Module> m) -> std::shared_ptr<nn::Module> {
    return ranks.distributed ? std::make_shared<dist::DistributedDataParallel>(m) : m;
  };
  auto fresh = [&](const std::string& name, bool compiled, bool bf16) {
    manual_seed(1);
    auto model = wrap(make());
    use_bf16 = bf16;
    Result r = train(name, *model, d, epochs, 3e-3, 32, compiled);
    use_bf16 = false;
    return r;
  };
  Result e = fresh(tag, false, false);
  bool ok = e.accuracy >= 0.95;
  auto compare = [&](const char* what, const Result& r) {
    if (ranks.rank == 0)
      std::printf("%s: eager %.3f ms/step, %s %.3f ms/step (%.2fx), test accuracy %.2f%% / %.2f%%\n", tag.c_str(),
                  e.ms_per_step, what, r.ms_per_step, e.ms_per_step / r.ms_per_step, e.accuracy * 100,
                  r.accuracy * 100);
    ok = ok && r.accuracy >= 0.95;
  };
  if (compile_too) compare("compiled", fresh(tag + " compiled", true, false));
  if (bf16_too) compare("bf16 autocast", fresh(tag + " bf16", false, true));
  if (compile_too && bf16_too) compare("compiled bf16 autocast", fresh(tag + " compiled bf16", true, true));
  return ok;
}

// One eager training step on the first batch, profiled (the step before it warms the caches up and
// creates Adam's state, as in the steady state of training).
void profile_step(const std::string& tag, nn::Module& model, const Split& d) {
  optim::Adam opt(model.parameters(), {3e-3});
  // Copies: a saved slice would keep (and charge as an activation) the whole data set's storage.
  Tensor xb = d.x_train.slice(0, 0, 32).clone(), yb = d.y_train.slice(0, 0, 32).clone();
  auto step = [&] {
    Tensor loss;
    {
      AutocastGuard autocast(DType::BFloat16, use_bf16);
      loss = cross_entropy(model(xb), yb);
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  step();
  Profiler prof = profile(step);
  std::printf("%s: one training step (batch 32)\n%s\n", tag.c_str(), prof.table().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  bool compile_too = false, profile_only = false, bf16_too = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--compile") compile_too = true;
    else if (std::string(argv[i]) == "--profile") profile_only = true;
    else if (std::string(argv[i]) == "--bf16") bf16_too = true;
    else args.push_back(argv[i]);
  }
  std::string which = args.size() > 0 ? args[0] : "both";
  std::string dir = args.size() > 1 ? args[1] : "samples/data";
  if (dist::launcher_world_size() > 1) {
    dist::init_process_group();
    ranks = {true, dist::get_rank(), dist::get_world_size()};
  }
  manual_seed(0);
  Tensor x = load_npy(dir + "/digits_x.npy"), y = load_npy(dir + "/digits_y.npy");
  int64_t n = x.size(0), n_train = n * 5 / 6;
  Split d{x.slice(0, 0, n_train), y.slice(0, 0, n_train), x.slice(0, n_train, n), y.slice(0, n_train, n)};
  if (ranks.rank == 0)
    std::printf("digits: %lld train, %lld test, %lld features%s\n", (long long)n_train, (long long)(n - n_train),
                (long long)x.size(1), ranks.distributed ? fmt::format(", {} ranks", ranks.world).c_str() : "");
  if (bf16_too && ranks.rank == 0) std::printf("bf16 autocast on this CPU: %s\n", autocast_cpu_info().c_str());
  if (profile_only) {
    use_bf16 = bf16_too;  // --profile --bf16: the step under bf16 autocast
    manual_seed(1);
    if (which == "mlp" || which == "both") profile_step("mlp", *kiln::samples::digits_mlp(), d);
    Split img{d.x_train.reshape({-1, 1, 8, 8}), d.y_train, d.x_test.reshape({-1, 1, 8, 8}), d.y_test};
    if (which == "cnn" || which == "both") profile_step("cnn", *kiln::samples::digits_cnn(), img);
    return 0;
  }
  bool ok = true;
  if (which == "mlp" || which == "both") {
    ok = run("mlp", [] { return kiln::samples::digits_mlp(); }, d, 20, compile_too, bf16_too) && ok;
  }
  if (which == "cnn" || which == "both") {
    Split img{d.x_train.reshape({-1, 1, 8, 8}), d.y_train, d.x_test.reshape({-1, 1, 8, 8}), d.y_test};
    ok = run("cnn", kiln::samples::digits_cnn, img, 15, compile_too, bf16_too) && ok;
  }
  if (ranks.distributed) dist::destroy_process_group();
  return ok ? 0 : 1;
}
