// Trains a character-level GPT from its PyTorch model file (samples/gpt.py, written as nanoGPT's
// model.py is), in C++: kiln scripts the file, builds the model from its dataclass config, and trains it
// with a compiled training step (CompiledTrainStep: forward, loss and backward compiled, fused AdamW)
// on the `fortunes` package's English text, then samples text through the file's own `generate`.
//
//   train_gpt [--steps N] [--threads N] [--bf16] [--device cpu|cuda] [--resume] [--out DIR]
//             [--model FILE.py] [--data DIR] [--eval-every N] [--eval-iters N] [--seed N] [--stop-at N]
//             [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]
//
// As nanoGPT trains shakespeare_char on a CPU: 4 layers, 4 heads, 128 wide, 64 characters of context,
// batches of 12, no dropout; AdamW (betas 0.9/0.99) with weight decay on matrices only (the parameter
// groups nanoGPT's configure_optimizers makes), learning rate warmed up then cosine-decayed.
// Writes OUT/loss.svg (train and validation loss against step) and OUT/ckpt.pt, a torch.save archive
// {model, optimizer, step, seed} that PyTorch's torch.load(weights_only=True) reads and --resume
// continues from exactly: each step's batch is drawn from a generator seeded by (seed, step).
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "loss_curve_svg.h"
#include "progress_bar.h"
#include "text_corpus.h"

using namespace kiln;

namespace {

struct Options {
  std::string model = KILN_SOURCE_DIR "/samples/gpt.py";
  std::string data = "/usr/share/games/fortunes";
  std::string out = "train_gpt_out";
  std::string device = "cpu";
  std::string prompt = "\n";
  int64_t steps = 4000, eval_every = 500, eval_iters = 20, threads = 0, tokens = 300, top_k = 20;
  int64_t warmup = 100, seed = 1337;
  int64_t stop_at = 0;  // stop after this step, as an interrupted run would (the schedule still spans steps)
  double lr = 1e-3, min_lr = 1e-4, weight_decay = 0.1, temperature = 0.8;
  bool bf16 = false, resume = false;
  // the model: nanoGPT's CPU settings
  int64_t n_layer = 4, n_head = 4, n_embd = 128, block = 64, batch = 12;
};

Options parse(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) fail("train_gpt: {} needs a value", argv[i]);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps") o.steps = std::stoll(value(i));
    else if (a == "--threads") o.threads = std::stoll(value(i));
    else if (a == "--bf16") o.bf16 = true;
    else if (a == "--device") o.device = value(i);
    else if (a == "--resume") o.resume = true;
    else if (a == "--out") o.out = value(i);
    else if (a == "--model") o.model = value(i);
    else if (a == "--data") o.data = value(i);
    else if (a == "--eval-every") o.eval_every = std::stoll(value(i));
    else if (a == "--eval-iters") o.eval_iters = std::stoll(value(i));
    else if (a == "--seed") o.seed = std::stoll(value(i));
    else if (a == "--stop-at") o.stop_at = std::stoll(value(i));
    else if (a == "--prompt") o.prompt = value(i);
    else if (a == "--tokens") o.tokens = std::stoll(value(i));
    else if (a == "--temperature") o.temperature = std::stod(value(i));
    else if (a == "--top-k") o.top_k = std::stoll(value(i));
    else if (a == "-h" || a == "--help") {
      std::printf("usage: train_gpt [--steps N] [--threads N] [--bf16] [--device cpu|cuda] [--resume] [--out DIR]\n"
                  "                 [--model FILE.py] [--data DIR] [--eval-every N] [--eval-iters N] [--seed N] [--stop-at N]\n"
                  "                 [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]\n");
      std::exit(0);
    } else fail("train_gpt: unknown option {}", a);
  }
  if (o.device != "cpu" && o.device != "cuda") fail("train_gpt: --device is cpu or cuda, got {}", o.device);
  if (o.steps < 1 || o.eval_every < 1 || o.eval_iters < 1) fail("train_gpt: --steps, --eval-every and --eval-iters must be positive");
  return o;
}

// nanoGPT's get_lr: linear warmup, then cosine decay to min_lr at the last step.
double learning_rate(const Options& o, int64_t step) {
  if (step < o.warmup) return o.lr * double(step + 1) / double(o.warmup + 1);
  double ratio = double(step - o.warmup) / double(std::max<int64_t>(o.steps - o.warmup, 1));
  double coeff = 0.5 * (1.0 + std::cos(M_PI * std::min(ratio, 1.0)));
  return o.min_lr + coeff * (o.lr - o.min_lr);
}

// The generator seeded by (seed, what, index): a step's batch is the same whether the run was resumed
// or not, and evaluations draw their own batches without moving the training stream.
void seed_for(const Options& o, int64_t what, int64_t index) {
  manual_seed(uint64_t(o.seed) * 1000003u + uint64_t(what) * 7919u + uint64_t(index));
}

struct Run {
  Options o;
  samples::TextCorpus corpus;
  std::shared_ptr<ScriptedModule> model;
  Device device = Device::cpu();

  std::pair<Tensor, Tensor> batch(const Tensor& split) {
    auto [x, y] = samples::random_batch(split, o.batch, o.block);
    if (device != Device::cpu()) return {x.to(device), y.to(device)};
    return {x, y};
  }

  Tensor loss(const Tensor& x, const Tensor& y) {
    AutocastGuard autocast(DType::BFloat16, o.bf16);
    IValue out = model->call({x, y}).at(0);  // forward's (logits, loss)
    return out.elements().at(1).to_tensor();
  }

  // nanoGPT's estimate_loss: the mean loss of eval_iters batches of each split, in eval mode.
  std::pair<double, double> evaluate(int64_t at) {
    NoGradGuard no_grad;
    model->eval();
    double means[2] = {0, 0};
    for (int s = 0; s < 2; ++s) {
      for (int64_t k = 0; k < o.eval_iters; ++k) {
        seed_for(o, 1 + s, at * o.eval_iters + k);
        auto [x, y] = batch(s == 0 ? corpus.train : corpus.val);
        means[s] += loss(x, y).to(Device::cpu()).item<double>();
      }
      means[s] /= double(o.eval_iters);
    }
    model->train();
    return {means[0], means[1]};
  }
};

// nanoGPT's configure_optimizers: every parameter of two or more dims decays, biases and norms do not.
std::vector<optim::ParamGroup> parameter_groups(nn::Module& model, double weight_decay) {
  optim::ParamGroup decay{{}, std::nullopt, weight_decay}, no_decay{{}, std::nullopt, 0.0};
  for (auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

IValue checkpoint(const Run& r, const optim::Optimizer& opt, int64_t step,
                  const std::vector<samples::Curve>& curves) {
  auto points = [](const samples::Curve& c) {
    std::vector<IValue> v;
    for (auto [x, y] : c.points) v.push_back(IValue::tuple({IValue(x), IValue(y)}));
    return IValue::list(v);
  };
  return IValue::dict({{IValue("model"), to_ivalue(r.model->state_dict())},
                       {IValue("optimizer"), opt.state_dict()},
                       {IValue("step"), IValue(step)},
                       {IValue("seed"), IValue(r.o.seed)},
                       {IValue("train_curve"), points(curves[0])},
                       {IValue("val_curve"), points(curves[1])}});
}

void restore_curve(const IValue* list, samples::Curve& c) {
  if (!list) return;
  for (const IValue& p : list->elements()) c.points.push_back({p.elements().at(0).to_double(), p.elements().at(1).to_double()});
}

const IValue& entry(const IValue& saved, const char* key, const std::string& path) {
  const IValue* v = saved.find(key);
  if (!v) fail("train_gpt: {} has no '{}' entry (not a checkpoint of train_gpt)", path, key);
  return *v;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Run r;
    r.o = parse(argc, argv);
    const Options& o = r.o;
    if (o.threads > 0) set_num_threads(int(o.threads));
    if (o.device == "cuda") r.device = Device::cuda();
    std::filesystem::create_directories(o.out);
    r.corpus = samples::load_text_corpus(o.data);
    std::printf("corpus: %s, %lld training and %lld validation characters, vocabulary %lld\n", o.data.c_str(),
                (long long)r.corpus.train.numel(), (long long)r.corpus.val.numel(), (long long)r.corpus.vocab_size());

    // The model, built from its file as PyTorch would: GPT(GPTConfig(...)).
    seed_for(o, 0, 0);
    ScriptFile file = script_file(o.model);
    ScriptValue config = file.value(fmt::format(
        "GPTConfig(block_size={}, vocab_size={}, n_layer={}, n_head={}, n_embd={}, dropout=0.0, bias=False)", o.block,
        r.corpus.vocab_size(), o.n_layer, o.n_head, o.n_embd));
    r.model = file.build("GPT", {config});
    if (r.device != Device::cpu()) r.model->to(r.device);
    int64_t n_params = 0;
    for (const Tensor& p : r.model->parameters()) n_params += p.numel();
    std::printf("model: %s, %.2fM parameters\n", o.model.c_str(), double(n_params) / 1e6);

    optim::AdamW opt(parameter_groups(*r.model, o.weight_decay), {o.lr, 0.9, 0.99, 1e-8, o.weight_decay});
    CompiledTrainStep train_step(*r.model, [&](const std::vector<Tensor>& b) { return r.loss(b[0], b[1]); }, opt);

    std::vector<samples::Curve> curves = {{"train", "#1f77b4", {}}, {"validation", "#d62728", {}}};
    const std::string ckpt = o.out + "/ckpt.pt";
    int64_t start = 0;
    if (o.resume) {
      IValue saved = torch_load(ckpt);
      r.model->load_state_dict(tensor_dict(entry(saved, "model", ckpt), ckpt + ": model"));
      opt.load_state_dict(entry(saved, "optimizer", ckpt));
      start = entry(saved, "step", ckpt).to_int();
      restore_curve(saved.find("train_curve"), curves[0]);
      restore_curve(saved.find("val_curve"), curves[1]);
      std::printf("resumed from %s at step %lld\n", ckpt.c_str(), (long long)start);
    }

    samples::ProgressBar bar(o.steps, /*every=*/50);
    int64_t tokens = 0;
    double last_val = NAN;
    for (int64_t step = start; step < o.steps; ++step) {
      opt.set_lr(learning_rate(o, step));
      seed_for(o, 0, step + 1);
      auto [x, y] = r.batch(r.corpus.train);
      double loss = train_step({x, y}).to(Device::cpu()).item<double>();
      tokens += x.numel();
      bar.update(step + 1, loss, tokens);
      if ((step + 1) % o.eval_every == 0 || step + 1 == o.steps) {
        auto [train_loss, val_loss] = r.evaluate(step + 1);
        last_val = val_loss;
        curves[0].points.push_back({double(step + 1), train_loss});
        curves[1].points.push_back({double(step + 1), val_loss});
        bar.message(fmt::format("step {}: train loss {:.4f}, val loss {:.4f}", step + 1, train_loss, val_loss));
        samples::write_loss_curve_svg(o.out + "/loss.svg", curves, "kiln: a character-level GPT on fortunes");
        torch_save(ckpt, checkpoint(r, opt, step + 1, curves));
      }
      if (step + 1 == o.stop_at) {
        torch_save(ckpt, checkpoint(r, opt, step + 1, curves));
        bar.finish();
        std::printf("stopped after step %lld; --resume continues from %s\n", (long long)o.stop_at, ckpt.c_str());
        return 0;
      }
    }
    bar.finish();
    std::printf("final validation loss %.4f; wrote %s/loss.svg and %s (%lld compiled trace%s)\n", last_val, o.out.c_str(),
                ckpt.c_str(), (long long)train_step.traces(), train_step.traces() == 1 ? "" : "s");

    // Sampling through the model file's own generate(): a loop with top-k and multinomial, compiled
    // once for every prompt length and token count (its loop over the growing context inside).
    NoGradGuard no_grad;
    r.model->eval();
    seed_for(o, 3, 0);
    std::vector<int64_t> prompt = r.corpus.encode(o.prompt);
    Tensor idx = tensor(prompt, {1, int64_t(prompt.size())}, DType::Int64);
    if (r.device != Device::cpu()) idx = idx.to(r.device);
    IValue top_k = o.top_k > 0 ? IValue(o.top_k) : IValue();
    std::vector<IValue> args = {idx, IValue(o.tokens), IValue(o.temperature), top_k};
    Function generate = compile(r.model->method("generate", args));
    Tensor out = generate.call(args).at(0).to_tensor();
    Tensor cpu = out.to(Device::cpu()).contiguous();
    std::printf("--- sample (temperature %.2f, top-k %lld) ---\n%s\n", o.temperature, (long long)o.top_k,
                r.corpus.decode(cpu.data_ptr<int64_t>(), cpu.numel()).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
