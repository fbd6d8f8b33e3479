// Soak test of compiled training: many CompiledTrainStep steps, checking that nothing grows.
//   soak_train [--steps N] [--model cnn|gpt|all]      (defaults: 20000 steps, all)
// Two models, each trained for N steps:
//   cnn: the digits CNN (samples/digits_models.h) with Adam on the 8x8 digits (samples/data/digits_*.npy,
//        made by .ci/setup.sh; random images and labels of the same shape where the files are missing),
//        batches of 32 taken in turn; one batch shape, so one cache entry.
//   gpt: a small GPT built from kiln's nn modules (token and position Embedding; 2 blocks of LayerNorm ->
//        causal self-attention -> LayerNorm -> GELU MLP, with residuals; final LayerNorm and lm head) with
//        AdamW on random tokens; the batch size and sequence length cycle (T over {16, 24, 32}, B over
//        {4, 6}), so CompiledTrainStep traces and compiles one entry per (B, T) and switches between them.
// Every N/10 steps it prints resident memory (VmRSS), the caching allocator's cached bytes, the step's
// cache entries and traces, the entries of the compiled functions' own signature caches, and the time per
// step since the previous checkpoint. It exits non-zero when, at the last step, VmRSS or the cached bytes
// are more than 2 % away from their values at step N/10 (the warm-up checkpoint), or when the entry
// counts change after the warm-up checkpoint (by then every shape of the loop has been seen).
#include <kiln/kiln.h>

#include "samples/digits_models.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr double kTolerance = 0.02;

int64_t vm_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;  // "VmRSS:  1234 kB"
  return -1;
}

// CPU time of the whole process (every thread), for reading the wall times on a shared machine.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---------------------------------------------------------------- the GPT

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(int64_t d, int64_t heads) : d_(d), heads_(heads) {
    qkv_ = register_module("qkv", std::make_shared<nn::Linear>(d, 3 * d));
    proj_ = register_module("proj", std::make_shared<nn::Linear>(d, d));
  }
  Tensor forward(const Tensor& x) override {
    int64_t B = x.size(0), T = x.size(1), hd = d_ / heads_;
    Tensors qkv = chunk((*qkv_)(x), 3, 2);  // [B,T,d] each
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, heads_, hd}).transpose(1, 2); };  // [B,H,T,hd]
    Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    Tensor att = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(hd)));  // [B,H,T,T]
    Tensor pos = arange(0, T, 1, DType::Int64);
    Tensor causal = pos.unsqueeze(1) >= pos.unsqueeze(0);  // [T,T] bool: key position <= query position
    att = softmax(where(causal, att, -std::numeric_limits<double>::infinity()), -1);
    Tensor y = matmul(att, v).transpose(1, 2).reshape({B, T, d_});
    return (*proj_)(y);
  }
  std::string name() const override { return "CausalSelfAttention"; }

 private:
  int64_t d_, heads_;
  std::shared_ptr<nn::Linear> qkv_, proj_;
};

class Block : public nn::Module {
 public:
  Block(int64_t d, int64_t heads) {
    ln1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(Shape{d}));
    attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(d, heads));
    ln2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(Shape{d}));
    mlp_ = register_module("mlp", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                                      std::make_shared<nn::Linear>(d, 4 * d), std::make_shared<nn::GELU>(),
                                      std::make_shared<nn::Linear>(4 * d, d)}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x + (*attn_)((*ln1_)(x));
    return h + (*mlp_)((*ln2_)(h));
  }
  std::string name() const override { return "Block"; }

 private:
  std::shared_ptr<nn::LayerNorm> ln1_, ln2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<nn::Sequential> mlp_;
};

struct GptConfig {
  int64_t vocab = 64, max_t = 32, d = 32, heads = 2, layers = 2;
};

class Gpt : public nn::Module {
 public:
  explicit Gpt(const GptConfig& c) {
    wte_ = register_module("wte", std::make_shared<nn::Embedding>(c.vocab, c.d));
    wpe_ = register_module("wpe", std::make_shared<nn::Embedding>(c.max_t, c.d));
    for (int64_t i = 0; i < c.layers; ++i)
      blocks_.push_back(register_module("h" + std::to_string(i), std::make_shared<Block>(c.d, c.heads)));
    ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{c.d}));
    head_ = register_module("lm_head", std::make_shared<nn::Linear>(c.d, c.vocab, false));
  }
  // tokens [B,T] int64 -> logits [B,T,vocab]
  Tensor forward(const Tensor& tokens) override {
    int64_t T = tokens.size(1);
    Tensor x = (*wte_)(tokens) + (*wpe_)(arange(0, T, 1, DType::Int64));
    for (auto& b : blocks_) x = (*b)(x);
    return (*head_)((*ln_f_)(x));
  }
  std::string name() const override { return "Gpt"; }

 private:
  std::shared_ptr<nn::Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  std::shared_ptr<nn::Linear> head_;
};

// ---------------------------------------------------------------- the soak loop

struct Checkpoint {
  int64_t step;
  int64_t rss, cached;
  size_t entries;
  int64_t traces, fn_entries;
  double ms_per_step, cpu_ms_per_step;
};

std::string mib(int64_t b) { return fmt::format("{:.2f} MiB", double(b) / (1024.0 * 1024.0)); }

// Runs `steps` steps of `one_step(i)`; `step` is the CompiledTrainStep, `fn_key(i)` names the batch
// signature of step i (for counting the compiled functions' own cache entries). Returns false on a failed check.
template <class StepFn, class KeyFn>
bool soak(const std::string& tag, int64_t steps, CompiledTrainStep& step, StepFn one_step, KeyFn fn_key,
          size_t expected_entries) {
  int64_t every = std::max<int64_t>(1, steps / 10);
  std::vector<Checkpoint> cps;
  // Signature-cache entries (misses: each compiled an entry) of the compiled function serving each batch
  // signature, as last seen after a step with that signature.
  std::map<std::string, int64_t> fn_misses;
  auto t0 = std::chrono::steady_clock::now();
  auto t_last = t0;
  double cpu0 = cpu_seconds(), cpu_last = cpu0;
  double last_loss = 0;
  std::printf("%s: %lld steps, checkpoint every %lld (warm-up checkpoint: step %lld); load %s\n", tag.c_str(),
              (long long)steps, (long long)every, (long long)every, loadavg().c_str());
  std::printf("%s: %7s %12s %12s %8s %7s %10s %10s %10s %9s\n", tag.c_str(), "step", "VmRSS", "cached", "entries",
              "traces", "fn_entries", "ms/step", "cpu_ms", "loss");
  std::fflush(stdout);
  for (int64_t i = 0; i < steps; ++i) {
    Tensor loss = one_step(i);
    fn_misses[fn_key(i)] = compile_stats(step.function()).misses;
    if ((i + 1) % every == 0 || i + 1 == steps) {
      last_loss = loss.item<double>();
      auto now = std::chrono::steady_clock::now();
      int64_t since = cps.empty() ? i + 1 : i + 1 - cps.back().step;
      double ms = std::chrono::duration<double, std::milli>(now - t_last).count() / double(since);
      t_last = now;
      double cpu = cpu_seconds(), cpu_ms = (cpu - cpu_last) * 1e3 / double(since);
      cpu_last = cpu;
      int64_t fn_entries = 0;
      for (auto& [k, m] : fn_misses) fn_entries += m;
      Checkpoint c{i + 1, vm_rss_bytes(), memory_stats().cached_bytes, step.entries(), step.traces(), fn_entries, ms, cpu_ms};
      cps.push_back(c);
      std::printf("%s: %7lld %12s %12s %8zu %7lld %10lld %10.3f %10.3f %9.4f\n", tag.c_str(), (long long)c.step,
                  mib(c.rss).c_str(), mib(c.cached).c_str(), c.entries, (long long)c.traces, (long long)c.fn_entries,
                  c.ms_per_step, c.cpu_ms_per_step, last_loss);
      std::fflush(stdout);
    }
  }
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total_cpu_s = cpu_seconds() - cpu0;
  const Checkpoint& warm = cps.front();
  const Checkpoint& last = cps.back();
  std::vector<std::string> failures;
  auto rel = [](int64_t now, int64_t then) { return then ? double(now - then) / double(then) : (now ? 1.0 : 0.0); };
  double rss_change = rel(last.rss, warm.rss), cached_change = rel(last.cached, warm.cached);
  if (std::abs(rss_change) > kTolerance)
    failures.push_back(fmt::format("VmRSS {} at step {} is {:+.2f} % from {} at step {} (limit 2 %)", mib(last.rss),
                                   last.step, rss_change * 100, mib(warm.rss), warm.step));
  if (std::abs(cached_change) > kTolerance)
    failures.push_back(fmt::format("cached bytes {} at step {} is {:+.2f} % from {} at step {} (limit 2 %)",
                                   last.cached, last.step, cached_change * 100, warm.cached, warm.step));
  for (const Checkpoint& c : cps) {
    if (c.entries != warm.entries || c.traces != warm.traces || c.fn_entries != warm.fn_entries)
      failures.push_back(fmt::format("cache grew after every shape was seen: at step {} entries {} traces {} "
                                     "fn_entries {}, at step {} entries {} traces {} fn_entries {}",
                                     c.step, c.entries, c.traces, c.fn_entries, warm.step, warm.entries, warm.traces,
                                     warm.fn_entries));
  }
  if (last.entries != expected_entries)
    failures.push_back(fmt::format("{} cache entries, expected {} (one per batch shape)", last.entries, expected_entries));
  if (!std::isfinite(last_loss)) failures.push_back(fmt::format("the loss is {}", last_loss));
  if (step.running_eagerly()) failures.push_back("the step fell back to eager execution");
  for (const std::string& f : failures) std::fprintf(stderr, "soak: FAIL %s: %s\n", tag.c_str(), f.c_str());
  std::printf("%s: %lld steps in %.1f s, %.1f s CPU (%.3f ms/step overall); VmRSS %s -> %s (%+.2f %%), cached %s -> %s "
              "(%+.2f %%), entries %zu, traces %lld, fn_entries %lld; load %s\n",
              tag.c_str(), (long long)steps, total_s, total_cpu_s, total_s * 1e3 / double(steps), mib(warm.rss).c_str(),
              mib(last.rss).c_str(), rss_change * 100, mib(warm.cached).c_str(), mib(last.cached).c_str(),
              cached_change * 100, last.entries, (long long)last.traces, (long long)last.fn_entries,
              loadavg().c_str());
  std::fflush(stdout);
  return failures.empty();
}

std::string data_dir() {
#ifdef KILN_SOAK_DATA_DIR
  return KILN_SOAK_DATA_DIR;
#else
  return "samples/data";
#endif
}

bool soak_cnn(int64_t steps, std::string& summary) {
  manual_seed(0);
  Tensor x, y;
  std::string source;
  try {
    x = load_npy(data_dir() + "/digits_x.npy").to(DType::Float32).reshape({-1, 1, 8, 8});
    y = load_npy(data_dir() + "/digits_y.npy").to(DType::Int64);
    source = "digits data from " + data_dir();
  } catch (const Error& e) {
    // The digits' shape (1797 images of 8x8, 10 classes) where .ci/setup.sh has not made the files.
    x = rand({1797, 1, 8, 8});
    y = randint(0, 10, {1797});
    source = "random data of the digits' shape (" + data_dir() + "/digits_x.npy not readable)";
  }
  std::printf("cnn: %s: x %s, y %s\n", source.c_str(), shape_str(x.sizes()).c_str(), shape_str(y.sizes()).c_str());
  auto model = samples::digits_cnn();
  optim::Adam opt(model->parameters(), {1e-3});
  CompiledTrainStep step(*model, [&](const Tensors& b) { return cross_entropy((*model)(b[0]), b[1]); }, opt);
  const int64_t batch = 32, nb = x.size(0) / batch;
  bool ok = soak(
      "cnn", steps, step,
      [&](int64_t i) {
        int64_t s = (i % nb) * batch;
        return step({x.slice(0, s, s + batch), y.slice(0, s, s + batch)});
      },
      [](int64_t) { return std::string("32"); }, 1);
  summary += fmt::format(" cnn[{} steps, {} entries]", steps, step.entries());
  return ok;
}

bool soak_gpt(int64_t steps, std::string& summary) {
  manual_seed(0);
  GptConfig cfg;
  Gpt model(cfg);
  optim::AdamW opt(model.parameters(), {3e-3, 0.9, 0.95, 1e-8, 0.01});
  CompiledTrainStep step(model, [&](const Tensors& b) {
    Tensor logits = model(b[0]);
    int64_t n = b[0].numel();
    return cross_entropy(logits.reshape({n, cfg.vocab}), b[1].reshape({n}));
  }, opt);
  const int64_t Ts[] = {16, 24, 32}, Bs[] = {4, 6};
  // The (B, T) of step i: a cycle of 6; the first 6 steps see every shape. CompiledTrainStep keys its
  // entries on exact shapes (no symbolic dims), so this is 6 traces and compiles, then switching between
  // them. Steps N/10 and N end on the same shape when 9N/10 is a multiple of 6 (N = 2,000, 20,000).
  auto shape_of = [&](int64_t i) { return std::pair<int64_t, int64_t>{Bs[(i / 3) % 2], Ts[i % 3]}; };
  std::printf("gpt: vocab %lld, d %lld, heads %lld, layers %lld, %lld parameters; random tokens, (B,T) cycling "
              "over B {4,6} x T {16,24,32}\n",
              (long long)cfg.vocab, (long long)cfg.d, (long long)cfg.heads, (long long)cfg.layers, [&] {
                long long n = 0;
                for (auto& p : model.parameters()) n += p.numel();
                return n;
              }());
  bool ok = soak(
      "gpt", steps, step,
      [&](int64_t i) {
        auto [B, T] = shape_of(i);
        Tensor seq = randint(0, cfg.vocab, {B, T + 1});
        return step({seq.slice(1, 0, T).contiguous(), seq.slice(1, 1, T + 1).contiguous()});
      },
      [&](int64_t i) {
        auto [B, T] = shape_of(i);
        return fmt::format("{}x{}", B, T);
      },
      6);
  summary += fmt::format(" gpt[{} steps, {} entries]", steps, step.entries());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 20000;
  std::string which = "all";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoll(argv[++i]);
    } else if (a == "--model" && i + 1 < argc) {
      which = argv[++i];
    } else {
      std::fprintf(stderr, "usage: soak_train [--steps N] [--model cnn|gpt|all]\n");
      return 2;
    }
  }
  if (steps < 10 || (which != "cnn" && which != "gpt" && which != "all")) {
    std::fprintf(stderr, "soak_train: --steps must be at least 10 and --model one of cnn, gpt, all\n");
    return 2;
  }
  std::printf("soak_train: %lld steps, model %s, %d threads; load %s\n", (long long)steps, which.c_str(),
              get_num_threads(), loadavg().c_str());
  std::string summary;
  bool ok = true;
  try {
    if (which == "cnn" || which == "all") ok = soak_cnn(steps, summary) && ok;
    if (which == "gpt" || which == "all") ok = soak_gpt(steps, summary) && ok;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak: FAIL: %s\n", e.what());
    return 1;
  }
  if (!ok) {
    std::printf("soak: FAIL%s (see the messages above)\n", summary.c_str());
    return 1;
  }
  std::printf("soak: PASS%s; VmRSS, cached bytes within 2 %% of the warm-up checkpoint, cache entries constant\n",
              summary.c_str());
  return 0;
}
