// The GPT of issue 30 as a user runs it: samples/gpt.py (nanoGPT's model.py in its manner) scripted by
// kiln, at nanoGPT's CPU settings (4 layers, 4 heads, 128 wide, context 64, batch 12, vocab 65, dropout 0,
// AdamW), timed per training step eagerly and through CompiledTrainStep, and per eval forward eagerly and
// through compile(). bench/gpt_workloads.py times PyTorch on the same file; bench/compare_gpt runs both.
//
//   bench_gpt [--threads N] [--steps N] [--model FILE.py] [--profile|--profile-eval [--trace OUT.json]] [--json] [--disable PASS] [--cpu-time] [--first-only [--warm-up eager|compiled] [--record-values]] [--attention sdpa|written] [--bf16] [--block T]
//
// --warm-up splits the first compiled step's cost: before it, a throwaway model of the same file takes one
// eager step (the process's one-time start-up: libraries, thread pools, the heap's first pages) or one
// compiled step (that and the JIT's own one-time costs), so what is left is the cost of compiling this model.
//
// --first-only prints the first compiled step's time and the time from main() to its end (with --json as JSON):
// what the process started in the background while the model was built (the GEMM library's set-up) shows in
// the second figure if it delayed the build.
//
// --record-values: the first compiled step records the step with its values (an eager run of it, as before
// shapes-only recording), for A/B runs of one binary.
//
// --profile prints kiln::Profiler's table of one compiled training step instead of the timings, --profile-eval
// that of one compiled eval forward.
#include <kiln/kiln.h>

#include "bench/median_ms.h"

#include <algorithm>
#include <ctime>
#include <sys/resource.h>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

using namespace kiln;

namespace {


struct Options {
  int threads = 1;
  int steps = 20;
  std::string model = KILN_SOURCE_ROOT "/samples/gpt.py";
  bool profile = false;
  bool profile_eval = false;  // --profile-eval: the table of one compiled eval forward
  bool json = false;
  // --disable PASS (repeatable): the JIT pipeline without it, for A/B runs of one binary
  jit::CompileOptions compile;
  bool first_only = false;  // stop after the first compiled step (for perf record of trace + compile)
  std::string warm_up;      // --warm-up eager|compiled: a throwaway model's step first
  bool record_values = false;  // CompiledTrainStep::record_shapes_only off
  // sdpa: the file as written (F.scaled_dot_product_attention where torch has it, as kiln does);
  // written: its other branch, softmax(masked_fill(q @ k^T * s, mask, -inf)) @ v
  std::string attention = "sdpa";
  bool bf16 = false;  // bf16 autocast for the training step and the eval forward
  int64_t block = 64;  // --block T: the sequence length (nanoGPT's CPU setting 64; longer ones where the scores matter)
  std::string trace;  // with --profile: a Chrome trace of the step
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) fail("bench_gpt: {} needs a value", a);
      return std::string(argv[++i]);
    };
    if (a == "--threads") o.threads = std::stoi(value());
    else if (a == "--steps") o.steps = std::stoi(value());
    else if (a == "--model") o.model = value();
    else if (a == "--profile") o.profile = true;
    else if (a == "--profile-eval") o.profile_eval = true;
    else if (a == "--trace") o.trace = value();
    else if (a == "--json") o.json = true;
    else if (a == "--disable") o.compile.pipeline.disable.push_back(value());
    else if (a == "--cpu-time") kiln::bench::cpu_time() = true;
    else if (a == "--first-only") o.first_only = true;
    else if (a == "--warm-up") o.warm_up = value();
    else if (a == "--record-values") o.record_values = true;
    else if (a == "--attention") o.attention = value();
    else if (a == "--bf16") o.bf16 = true;
    else if (a == "--block") o.block = std::stoll(value());
    else fail("bench_gpt: unknown argument {}", a);
  }
  return o;
}


std::vector<optim::ParamGroup> parameter_groups(nn::Module& model, double weight_decay) {
  optim::ParamGroup decay{{}, std::nullopt, weight_decay}, no_decay{{}, std::nullopt, 0.0};
  for (auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

// The model file with nanoGPT's flash switch off, so its spelled-out attention runs (the same one-line
// rewrite as bench/gpt_workloads.py --attention written).
std::string written_attention(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("bench_gpt: cannot read {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string src = ss.str();
  const std::string from = "self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')";
  size_t at = src.find(from);
  if (at == std::string::npos) fail("bench_gpt: {} has no line '{}' to switch the attention with", path, from);
  return src.replace(at, from.size(), "self.flash = False");
}

}  // namespace

int main(int argc, char** argv) {
  timespec main_start;  // the first step also from here: work started in the background while the model is built
  clock_gettime(CLOCK_MONOTONIC, &main_start);  // (the GEMM library's set-up) is not hidden outside the timing
  try {
    Options o = parse(argc, argv);
    set_num_threads(o.threads);
    constexpr int64_t kBatch = 12, kVocab = 65;
    const int64_t kBlock = o.block;
    manual_seed(1337);
    if (o.attention != "sdpa" && o.attention != "written")
      fail("bench_gpt: --attention is sdpa or written, got {}", o.attention);
    if (!o.warm_up.empty() && o.warm_up != "eager" && o.warm_up != "compiled")
      fail("bench_gpt: --warm-up is eager or compiled, got {}", o.warm_up);
    ScriptFile file = o.attention == "sdpa" ? script_file(o.model) : script_source(written_attention(o.model), o.model);
    ScriptValue config = file.value(fmt::format(
        "GPTConfig(block_size={}, vocab_size={}, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False)", kBlock,
        kVocab));
    auto loss_of = [&](ScriptedModule& m) {
      return [&m, bf16 = o.bf16](const std::vector<Tensor>& b) {
        AutocastGuard autocast(DType::BFloat16, bf16);
        return m.call({b[0], b[1]}).at(0).elements().at(1).to_tensor();
      };
    };
    if (!o.warm_up.empty()) {
      RngState seeded = get_rng_state();  // the timed model is the same with or without a warm-up
      std::shared_ptr<ScriptedModule> m = file.build("GPT", {config});
      optim::AdamW opt(parameter_groups(*m, 0.1), {1e-3, 0.9, 0.99, 1e-8, 0.1});
      Tensor x = randint(0, kVocab, {kBatch, kBlock}), y = randint(0, kVocab, {kBatch, kBlock});
      if (o.warm_up == "compiled") {
        CompiledTrainStep step(*m, loss_of(*m), opt, o.compile);
        step.record_shapes_only = !o.record_values;
        step({x, y});
      } else {
        Tensor l = loss_of(*m)({x, y});
        opt.zero_grad();
        l.backward();
        opt.step();
      }
      set_rng_state(seeded);
    }
    std::shared_ptr<ScriptedModule> model = file.build("GPT", {config});
    optim::AdamW opt(parameter_groups(*model, 0.1), {1e-3, 0.9, 0.99, 1e-8, 0.1});
    Tensor x = randint(0, kVocab, {kBatch, kBlock}), y = randint(0, kVocab, {kBatch, kBlock});
    auto loss = loss_of(*model);
    CompiledTrainStep step(*model, loss, opt, o.compile);
    step.record_shapes_only = !o.record_values;

    // the eval forward as the timings below run it: bf16 traced under autocast (its casts recorded)
    auto eval_forward = [&](const std::vector<Tensor>& b) {
      AutocastGuard autocast(DType::BFloat16, o.bf16);
      std::vector<IValue> out = model->call({b[0], b[1]}).at(0).elements();
      return std::vector<Tensor>{out.at(0).to_tensor(), out.at(1).to_tensor()};
    };
    auto compiled_eval_forward = [&] {
      return compile(o.bf16 ? trace_module(*model, eval_forward, {x, y}) : model->method("forward"), o.compile);
    };
    if (o.profile_eval) {
      model->eval();
      NoGradGuard no_grad;
      Function fwd = compiled_eval_forward();
      for (int i = 0; i < 3; ++i) fwd.call({x, y});
      Profiler prof;
      fwd.call({x, y});
      prof.stop();
      std::printf("%s", prof.table().c_str());
      if (!o.trace.empty()) prof.save_chrome_trace(o.trace);
      return 0;
    }
    if (o.profile) {
      for (int i = 0; i < 3; ++i) step({x, y});
      Profiler prof;
      step({x, y});
      prof.stop();
      std::printf("%s", prof.table().c_str());
      if (!o.trace.empty()) prof.save_chrome_trace(o.trace);
      return 0;
    }

    // the first compiled step of a fresh process: trace, optimise, compile and run (wall time; with
    // --cpu-time also CPU time, which a loaded machine inflates far less: the process's, all threads, and
    // the calling thread's, which at 1 thread runs every kernel; the process's also counts OpenBLAS's
    // idle workers, which spin in sched_yield for ~0.1 s after the library loads)
    timespec t0, t1, c0, c1, h0, h1;
    rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &h0);
    step({x, y});
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &h1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_SELF, &r1);
    double first_ms = double(t1.tv_sec - t0.tv_sec) * 1e3 + double(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    double first_cpu_ms = double(c1.tv_sec - c0.tv_sec) * 1e3 + double(c1.tv_nsec - c0.tv_nsec) * 1e-6;
    double first_thread_ms = double(h1.tv_sec - h0.tv_sec) * 1e3 + double(h1.tv_nsec - h0.tv_nsec) * 1e-6;
    double since_main_ms = double(t1.tv_sec - main_start.tv_sec) * 1e3 + double(t1.tv_nsec - main_start.tv_nsec) * 1e-6;
    if (o.first_only) {
      if (o.json)
        std::printf("{\"bf16\": %s, \"threads\": %d, \"first_compiled_step_ms\": %.1f, \"since_main_ms\": %.1f}\n",
                    o.bf16 ? "true" : "false", o.threads, first_ms, since_main_ms);
      else if (kiln::bench::cpu_time())
        std::printf("first compiled step (trace + compile + run): %.1f ms (CPU time %.1f ms, this thread %.1f ms, %ld "
                    "minor page faults, %ld major, recorded %s; main() to its end %.1f ms)\n",
                    first_ms, first_cpu_ms, first_thread_ms, r1.ru_minflt - r0.ru_minflt, r1.ru_majflt - r0.ru_majflt,
                    step.value_recordings() ? "with values" : "from shapes", since_main_ms);
      else
        std::printf("first compiled step (trace + compile + run): %.1f ms (main() to its end %.1f ms)\n", first_ms,
                    since_main_ms);
      return 0;
    }

    double eager_step = kiln::bench::eager_step_ms(o.steps, [&] { return loss({x, y}); }, opt);
    double compiled_step = kiln::bench::median_ms(3, o.steps, [&] { step({x, y}); });
    model->eval();
    double eager_eval, compiled_eval;
    {
      NoGradGuard no_grad;
      eager_eval = kiln::bench::median_ms(2, o.steps, [&] { eval_forward({x, y}); });
      // bf16: a graph runs as recorded, so the compiled forward is traced under autocast (its casts recorded);
      // float32: the scripted method itself
      Function fwd = compiled_eval_forward();
      compiled_eval = kiln::bench::median_ms(3, o.steps, [&] { fwd.call({x, y}); });
    }
    // sampling through the file's own generate at batch 1: 100 tokens after a one-token prompt, top-k 10
    double gen_ms, compiled_gen_ms;
    {
      NoGradGuard no_grad;
      Tensor prompt = zeros({1, 1}, DType::Int64);
      auto generate = [&] { model->call({prompt, IValue(int64_t(100)), IValue(1.0), IValue(int64_t(10))}, "generate"); };
      gen_ms = kiln::bench::median_ms(1, std::max(3, o.steps / 5), generate);
      // compiled once: the method's graph as the calls above typed it, its loop over the growing context inside
      Function gen = compile(model->method("generate"));
      compiled_gen_ms = kiln::bench::median_ms(1, std::max(3, o.steps / 5), [&] {
        gen.call({prompt, IValue(int64_t(100)), IValue(1.0), IValue(int64_t(10))});
      });
    }
    double tokens_per_s = 100.0 / gen_ms * 1e3, compiled_tokens_per_s = 100.0 / compiled_gen_ms * 1e3;
    if (o.json) {
      std::printf("{\"bf16\": %s, \"attention\": \"%s\", \"threads\": %d, \"eager_step\": %.3f, \"compiled_step\": %.3f, \"eager_eval\": %.3f, "
                  "\"compiled_eval\": %.3f, \"first_compiled_step_ms\": %.1f, \"generate_tokens_per_s\": %.1f, "
                  "\"compiled_generate_tokens_per_s\": %.1f}\n",
                  o.bf16 ? "true" : "false", o.attention.c_str(), o.threads, eager_step, compiled_step, eager_eval,
                  compiled_eval, first_ms, tokens_per_s, compiled_tokens_per_s);
    } else {
      std::printf("kiln%s, %s attention, %d thread(s), ms: training step eager %.2f compiled %.2f; eval forward eager %.2f compiled %.2f; "
                  "first compiled step (trace + compile + run) %.1f; generate %.0f tokens/s (compiled %.0f)\n",
                  o.bf16 ? " bf16" : "", o.attention.c_str(), o.threads, eager_step, compiled_step, eager_eval, compiled_eval,
                  first_ms, tokens_per_s, compiled_tokens_per_s);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
