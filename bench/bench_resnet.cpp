// Issue 30's ResNet-18 as a user runs it: torchvision's installed models/resnet.py scripted by kiln
// (`ResNet(BasicBlock, [2, 2, 2, 2], num_classes=10)`, what resnet18() builds), on 32x32 images at batch 32,
// timed per training step (cross_entropy, SGD with momentum 0.9) eagerly and through CompiledTrainStep, and
// per eval forward eagerly and through compile(). bench/resnet_workloads.py times PyTorch on the same file;
// bench/compare_resnet runs both.
//
//   bench_resnet [--threads N] [--steps N] [--model resnet.py] [--profile train|eval [--trace FILE]] [--json] [--disable PASS] [--cpu-time] [--bf16]
//
// --bf16: the training step's forward and loss and the eval forward under bf16 autocast (the compiled eval
// forward traced under it, since a graph runs as recorded), as resnet_workloads.py --bf16 under torch.autocast.
//
// --profile prints kiln::Profiler's table of one compiled training step or eval forward instead of the timings;
// --trace also saves that step's Chrome trace (each op's input shapes: the per-call figures at 1 vs 2 threads).
#include <kiln/kiln.h>

#include "bench/median_ms.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

using namespace kiln;

namespace {


struct Options {
  int threads = 1;
  int steps = 20;
  std::string model = "/usr/lib/python3/dist-packages/torchvision/models/resnet.py";
  std::string profile;  // train or eval
  std::string trace;    // with --profile: the Chrome trace's path
  bool json = false;
  bool bf16 = false;
  // --disable PASS (repeatable): the JIT pipeline without it, for A/B runs of one binary
  jit::CompileOptions compile;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) fail("bench_resnet: {} needs a value", a);
      return std::string(argv[++i]);
    };
    if (a == "--threads") o.threads = std::stoi(value());
    else if (a == "--steps") o.steps = std::stoi(value());
    else if (a == "--model") o.model = value();
    else if (a == "--profile") o.profile = value();
    else if (a == "--trace") o.trace = value();
    else if (a == "--json") o.json = true;
    else if (a == "--bf16") o.bf16 = true;
    else if (a == "--disable") o.compile.pipeline.disable.push_back(value());
    else if (a == "--cpu-time") kiln::bench::cpu_time() = true;
    else fail("bench_resnet: unknown argument {}", a);
  }
  if (!o.profile.empty() && o.profile != "train" && o.profile != "eval")
    fail("bench_resnet: --profile is train or eval, got {}", o.profile);
  if (!o.trace.empty() && o.profile.empty()) fail("bench_resnet: --trace needs --profile train or eval");
  return o;
}


}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    set_num_threads(o.threads);
    constexpr int64_t kBatch = 32, kClasses = 10;
    manual_seed(0);
    ScriptFile file = script_file(o.model);
    std::shared_ptr<ScriptedModule> model =
        file.build("ResNet", {file.value("BasicBlock"), file.value("[2, 2, 2, 2]")}, {{"num_classes", file.value("10")}});
    model->train();
    optim::SGDOptions so;
    so.lr = 0.01;
    so.momentum = 0.9;
    optim::SGD opt(model->parameters(), so);
    Tensor x = randn({kBatch, 3, 32, 32}), y = randint(0, kClasses, {kBatch});
    auto loss = [&](const std::vector<Tensor>& b) {
      AutocastGuard autocast(DType::BFloat16, o.bf16);
      return cross_entropy(model->forward(b[0]), b[1]);
    };
    auto forward = [&](const std::vector<Tensor>& b) {
      AutocastGuard autocast(DType::BFloat16, o.bf16);
      return std::vector<Tensor>{model->forward(b[0])};
    };
    // the compiled eval forward: under bf16 traced, so that its graph records autocast's casts
    auto compiled_forward = [&] {
      return compile(o.bf16 ? trace_module(*model, forward, {x}) : model->method("forward"), o.compile);
    };
    CompiledTrainStep step(*model, loss, opt, o.compile);

    if (o.profile == "train") {
      for (int i = 0; i < 3; ++i) step({x, y});
      Profiler prof;
      step({x, y});
      prof.stop();
      std::printf("%s", prof.table().c_str());
      if (!o.trace.empty()) prof.save_chrome_trace(o.trace);
      return 0;
    }
    if (o.profile == "eval") {
      model->eval();
      NoGradGuard no_grad;
      Function fwd = compiled_forward();
      for (int i = 0; i < 3; ++i) fwd.call({x});
      Profiler prof;
      fwd.call({x});
      prof.stop();
      std::printf("%s", prof.table().c_str());
      if (!o.trace.empty()) prof.save_chrome_trace(o.trace);
      return 0;
    }

    double eager_step = kiln::bench::eager_step_ms(o.steps, [&] { return loss({x, y}); }, opt);
    double compiled_step = kiln::bench::median_ms(3, o.steps, [&] { step({x, y}); });
    model->eval();
    double eager_eval, compiled_eval;
    {
      NoGradGuard no_grad;
      eager_eval = kiln::bench::median_ms(2, o.steps, [&] { forward({x}); });
      Function fwd = compiled_forward();
      compiled_eval = kiln::bench::median_ms(3, o.steps, [&] { fwd.call({x}); });
    }
    if (o.json) {
      std::printf("{\"bf16\": %s, \"threads\": %d, \"eager_step\": %.3f, \"compiled_step\": %.3f, \"eager_eval\": %.3f, \"compiled_eval\": %.3f}\n",
                  o.bf16 ? "true" : "false", o.threads, eager_step, compiled_step, eager_eval, compiled_eval);
    } else {
      std::printf("kiln resnet18%s, %d thread(s), ms: training step eager %.2f compiled %.2f; eval forward eager %.2f compiled %.2f\n",
                  o.bf16 ? " bf16" : "", o.threads, eager_step, compiled_step, eager_eval, compiled_eval);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
