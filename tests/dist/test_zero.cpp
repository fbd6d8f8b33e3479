// ZeroRedundancyOptimizer and FullyShardedDataParallel under mpirun: the optimizer state (then the gradients,
// then the parameters) sharded over the ranks, training equal to one process with the whole optimizer (the
// digits MLP and samples/gpt.py), each rank holding only its share, and the whole optimizer state gathered in
// torch's layout and loaded back.
#include "../support.h"

#include <array>

#include "eager/dist/ddp.h"
#include "eager/dist/fsdp.h"
#include "eager/dist/zero.h"
#include "eager/on_demand.h"
#include "jit/train_step.h"
#include "samples/digits_models.h"
#include "script_frontend/script.h"

using namespace kiln;
using kiln::test::check_error;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, amax((a[i] - b[i]).abs()).item<double>());
  return m;
}

struct Model {
  std::shared_ptr<nn::Module> net;
  std::function<Tensor(const Tensor&, const Tensor&)> loss;  // on this rank's rows
  Tensor x, y;                                              // every rank's rows, for one step
};

Model mlp() {
  manual_seed(11);
  Tensor x = randn({64, 64}), y = randint(0, 10, {64});
  manual_seed(1);
  auto net = kiln::samples::digits_mlp();
  return {net, [net](const Tensor& a, const Tensor& b) { return cross_entropy((*net)(a), b); }, x, y};
}

Model gpt_layers(int n_layer, int n_embd) {
  manual_seed(7);
  ScriptFile file = script_file(KILN_SAMPLES_DIR "/gpt.py");
  auto net = file.build("GPT", {file.value(fmt::format("GPTConfig(block_size=8, vocab_size=16, n_layer={}, n_head=2, "
                                                       "n_embd={}, dropout=0.0, bias=True)", n_layer, n_embd))});
  Tensor x = randint(0, 16, {4, 8}), y = randint(0, 16, {4, 8});
  return {net, [net](const Tensor& a, const Tensor& b) { return net->call({a, b}).at(0).elements().at(1).to_tensor(); }, x, y};
}

Model gpt() { return gpt_layers(1, 16); }

struct Run {
  std::vector<Tensor> params;
  std::vector<double> losses;
  IValue state;  // the optimizer's state_dict (ZeRO: consolidated on this rank)
};

// steps AdamW steps, weight decay on matrices only; sharded: DDP over the ranks' rows and ZeRO's optimizer,
// or FullyShardedDataParallel over them (its state is the shards', not compared)
enum class Mode { Whole, WholeCompiled, ShardState, ShardGradients, FullyShard, FullyShardCompiled, ReduceInBackward, ReduceInBackwardCompiled };

// A stack of Linear layers whose parameters outweigh the activations, for FSDP's units.
Model deep_mlp() {
  manual_seed(12);
  Tensor x = randn({16, 96}), y = randint(0, 10, {16});
  manual_seed(2);
  std::vector<std::shared_ptr<nn::Module>> layers;
  for (int i = 0; i < 5; ++i) {
    layers.push_back(std::make_shared<nn::Linear>(96, 96));
    layers.push_back(std::make_shared<nn::ReLU>());
  }
  layers.push_back(std::make_shared<nn::Linear>(96, 10));
  auto net = std::make_shared<nn::Sequential>(layers);
  return {net, [net](const Tensor& a, const Tensor& b) { return cross_entropy((*net)(a), b); }, x, y};
}

// A GPT block's parameter bytes and the whole model's, as FSDP pads them to a multiple of the ranks.
std::pair<int64_t, int64_t> block_and_total_bytes(const Model& m) {
  int64_t unit = 0, total = 0;
  for (auto& [n, p] : m.net->named_parameters()) {
    total += p.numel();
    if (n.rfind("transformer.h.0.", 0) == 0) unit += p.numel();
  }
  auto pad = [](int64_t n) { return (n + world() - 1) / world() * world() * 4; };
  return {pad(unit), pad(total)};
}

// Forwards to FSDP's own owner of a unit's memory (eager/on_demand.h) and notes what the rank holds
// gathered after each acquire: the most a graph's run holds at once.
struct WatchGathers : OnDemandOwner {
  std::shared_ptr<OnDemandOwner> fsdp_owner;
  std::function<void()> acquired;
  void acquire(size_t key) override {
    fsdp_owner->acquire(key);
    acquired();
  }
  void used(size_t key, const std::vector<Tensor>& outputs, bool last) override { fsdp_owner->used(key, outputs, last); }
};

Run train(Model m, Mode mode, int steps, const dist::FsdpOptions& fsdp_options = {}) {
  bool sharded = mode != Mode::Whole && mode != Mode::WholeCompiled;
  auto names = m.net->named_parameters();
  std::shared_ptr<dist::FullyShardedDataParallel> fsdp;
  std::vector<optim::ParamGroup> groups(2);
  for (auto& p : m.net->parameters()) groups[p.dim() >= 2 ? 0 : 1].params.push_back(p);
  groups[0].weight_decay = 0.1;
  groups[1].weight_decay = 0.0;
  optim::AdamOptions o{1e-3, 0.9, 0.99, 1e-8, 0.0};
  std::unique_ptr<optim::Optimizer> opt;
  std::shared_ptr<nn::Module> ddp;
  Tensor x = m.x, y = m.y;
  if (sharded) {
    if (mode == Mode::ShardState) ddp = std::make_shared<dist::DistributedDataParallel>(m.net);
    if (mode == Mode::FullyShard || mode == Mode::FullyShardCompiled) {
      fsdp = std::make_shared<dist::FullyShardedDataParallel>(m.net, groups, fsdp_options);
      opt = std::make_unique<optim::AdamW>(fsdp->shard_groups(), o);
    } else if (mode == Mode::ReduceInBackward || mode == Mode::ReduceInBackwardCompiled) {
      // buckets of ~4 KiB: several, each reduced as backward fills it
      opt = dist::zero_redundancy_optimizer<optim::AdamW>(groups, o, {.shard_gradients = true, .reduce_in_backward = true, .bucket_cap_mb = 0.004});
    } else {
      opt = dist::zero_redundancy_optimizer<optim::AdamW>(groups, o, {mode == Mode::ShardGradients});
    }
    int64_t part = x.size(0) / world();
    x = x.slice(0, rank() * part, (rank() + 1) * part);
    y = y.slice(0, rank() * part, (rank() + 1) * part);
  } else {
    opt = std::make_unique<optim::AdamW>(groups, o);
  }
  // compiled: the inner module's step, its optimizer the shards'; FSDP gathers before each step (with units, the
  // compiled graphs gather each unit as they read it), and the compiled backward's gradients reach the same
  // accumulators, whose hooks reduce them into the shards
  std::optional<CompiledTrainStep> compiled;
  if (mode == Mode::WholeCompiled || mode == Mode::FullyShardCompiled || mode == Mode::ReduceInBackwardCompiled)
    compiled.emplace(*m.net, [&m](const std::vector<Tensor>& b) { return m.loss(b[0], b[1]); }, *opt);
  Run r;
  for (int s = 0; s < steps; ++s) {
    opt->set_lr(1e-3 * (1.0 - 0.02 * s));  // a schedule: the shards must follow the wrapper's lr
    if (compiled) {
      if (fsdp && fsdp_options.units.empty()) fsdp->gather();  // units: the compiled graphs gather what they read
      Tensor l = (*compiled)({x, y});
      if (fsdp) CHECK_FALSE(fsdp->gathered());
      dist::all_reduce(l, dist::ReduceOp::Avg);
      r.losses.push_back(l.item<double>());
      continue;
    }
    // the model is called directly (a scripted GPT's call), not through the wrapper; units gather themselves
    if (fsdp && fsdp_options.units.empty()) fsdp->gather();
    Tensor loss = m.loss(x, y);
    opt->zero_grad();
    loss.backward();
    auto* z = dynamic_cast<dist::ZeroRedundancyOptimizer*>(opt.get());
    if (mode == Mode::ReduceInBackward)  // backward itself left a rank only its own parameters' gradients
      for (size_t i = 0; i < z->params().size(); ++i) CHECK(z->params()[i].grad().defined() == (z->owner(i) == rank()));
    opt->step();
    if (mode == Mode::ShardGradients || mode == Mode::ReduceInBackward)  // a rank keeps only its own parameters' gradients
      for (size_t i = 0; i < z->params().size(); ++i) CHECK(z->params()[i].grad().defined() == (z->owner(i) == rank()));
    if (fsdp) CHECK_FALSE(fsdp->gathered());  // backward's end reduced the gradients and freed the parameters
    Tensor l = loss.detach().clone();
    if (sharded) dist::all_reduce(l, dist::ReduceOp::Avg);
    r.losses.push_back(l.item<double>());
  }
  if (compiled) CHECK(compile_stats(compiled->function()).eager_calls == 0);
  if (fsdp) {
    auto whole = fsdp->full_state_dict();
    for (auto& [n, p] : names) r.params.push_back(whole.at(n));
    return r;
  }
  for (auto& p : m.net->parameters()) r.params.push_back(p.detach().clone());
  if (auto* z = dynamic_cast<dist::ZeroRedundancyOptimizer*>(opt.get())) {
    for (int to = 0; to < world(); ++to) {
      z->consolidate_state_dict(to);
      if (to == rank()) r.state = z->state_dict();
    }
  } else {
    r.state = opt->state_dict();
  }
  return r;
}

// The largest difference between two optimizer state_dicts' tensors; raises where their layout differs.
double state_diff(const IValue& a, const IValue& b) {
  const auto& sa = a.find("state")->items();
  const auto& sb = b.find("state")->items();
  REQUIRE(sa.size() == sb.size());
  double m = 0;
  for (size_t i = 0; i < sa.size(); ++i) {
    CHECK(sa[i].first.to_int() == sb[i].first.to_int());
    for (const auto& [key, v] : sa[i].second.items()) {
      const IValue* w = sb[i].second.find(key.to_string());
      REQUIRE(w);
      if (v.is_tensor()) m = std::max(m, amax((v.to_tensor() - w->to_tensor()).abs()).item<double>());
      else CHECK(v.to_double() == w->to_double());
    }
  }
  CHECK(a.find("param_groups")->repr() == b.find("param_groups")->repr());
  return m;
}

}  // namespace

TEST_CASE("zero: 20 AdamW steps with the state (and the gradients) sharded equal one process with the whole optimizer (MLP and GPT)") {
  for (auto make : {mlp, gpt})
    for (Mode mode : {Mode::ShardState, Mode::ShardGradients, Mode::FullyShard, Mode::FullyShardCompiled,
                      Mode::ReduceInBackward, Mode::ReduceInBackwardCompiled}) {
      CAPTURE(int(mode));
      Run ref = train(make(), Mode::Whole, 20);
      Run got = train(make(), mode, 20);
      double loss = 0;
      for (size_t s = 0; s < ref.losses.size(); ++s) loss = std::max(loss, std::abs(got.losses[s] - ref.losses[s]));
      double params = max_abs_diff(got.params, ref.params);
      bool fsdp = mode == Mode::FullyShard || mode == Mode::FullyShardCompiled;
      double state = fsdp ? 0.0 : state_diff(got.state, ref.state);
      const char* what[] = {"", "", "state sharded", "state and gradients sharded", "fully sharded (FSDP)",
                            "fully sharded, compiled step", "gradients reduced in backward, bucket by bucket",
                            "gradients reduced in the compiled backward"};
      if (rank() == 0)
        MESSAGE(std::string(what[int(mode)]) << " vs one process: losses within " << loss << ", parameters " << params << ", state " << state);
      CHECK(loss <= 1e-5);
      CHECK(params <= 1e-5);
      CHECK(state <= 1e-5);
    }
}

TEST_CASE("fsdp: units gathered one at a time train as one process does, in a fraction of the memory") {
  // every Linear a unit: a rank holds one layer's full parameters at a time, in forward and in backward
  dist::FsdpOptions units;
  for (int i = 0; i <= 10; i += 2) units.units.push_back(std::to_string(i));
  Run ref = train(deep_mlp(), Mode::Whole, 20);
  Run got = train(deep_mlp(), Mode::FullyShard, 20, units);
  double d = max_abs_diff(got.params, ref.params);
  if (rank() == 0) MESSAGE("fsdp with 6 units vs one process, 20 AdamW steps: parameters within " << d);
  CHECK(d <= 1e-5);
  for (size_t i = 0; i < ref.losses.size(); ++i) CHECK(std::abs(got.losses[i] - ref.losses[i]) <= 1e-5);

  // the step's peak: what the rank holds gathered, seen from hooks that run after FSDP's own
  auto step_peak = [&](const dist::FsdpOptions& o, int64_t& most_gathered) {
    Model m = deep_mlp();
    auto fsdp = std::make_shared<dist::FullyShardedDataParallel>(m.net, std::vector<optim::ParamGroup>{}, o);
    optim::AdamW opt(fsdp->shard_groups(), optim::AdamOptions{});
    most_gathered = 0;
    auto seen = [fsdp, &most_gathered] { most_gathered = std::max(most_gathered, fsdp->gathered_bytes()); };
    for (auto& [n, c] : m.net->named_children()) {
      c->register_forward_pre_hook([seen](nn::Module&, const Tensor&) { seen(); });
      c->register_forward_hook([seen](nn::Module&, const Tensor&, const Tensor& y) {
        if (y.requires_grad()) y.register_hook([seen](const Tensor&) {
            seen();
            return Tensor();
          });
        return Tensor();
      });
    }
    int64_t part = m.x.size(0) / world();
    Tensor x = m.x.slice(0, rank() * part, (rank() + 1) * part), y = m.y.slice(0, rank() * part, (rank() + 1) * part);
    int64_t before = memory_stats().current_bytes;
    reset_peak_memory_stats();
    Tensor loss = cross_entropy((*fsdp)(x), y);
    loss.backward();
    int64_t peak = memory_stats().peak_bytes - before;  // forward and backward (the optimizer's state aside)
    opt.step();
    CHECK(fsdp->gathered_bytes() == 0);
    CHECK(fsdp->reductions() == 1);
    return peak;
  };
  int64_t gathered_whole = 0, gathered_units = 0;
  int64_t whole = step_peak({}, gathered_whole);
  int64_t per_unit = step_peak(units, gathered_units);
  int64_t layer = (96 * 96 + 96 + world() - 1) / world() * world() * 4;  // a 96x96 Linear's padded buffer
  if (rank() == 0)
    MESSAGE("fsdp forward + backward peak above its start, one unit: " << whole << " bytes (" << gathered_whole
                                                          << " gathered at most); 6 units: " << per_unit << " ("
                                                          << gathered_units << ")");
  // at most two layers: backward reaches a layer's output before the gradients of the layer after it are
  // all accumulated (and that layer reduced and freed)
  CHECK(gathered_units <= 2 * layer);
  CHECK(gathered_whole >= 5 * layer);
  CHECK(per_unit < whole / 2);
}

TEST_CASE("fsdp: a scripted GPT's graph gathers its blocks one at a time, and trains as one process does") {
  // the units are submodules of the scripted module; its forward is one graph, which gathers a block just
  // before the first step reading its parameters and frees it after the last (eager/on_demand.h)
  dist::FsdpOptions units;
  for (int i = 0; i < 4; ++i) units.units.push_back(fmt::format("transformer.h.{}", i));
  auto gpt4 = [] { return gpt_layers(4, 16); };
  for (Mode mode : {Mode::FullyShard, Mode::FullyShardCompiled}) {
    CAPTURE(int(mode));
    // against one process running the same code: eager, or compiled (its kernels round otherwise)
    Run ref = train(gpt4(), mode == Mode::FullyShard ? Mode::Whole : Mode::WholeCompiled, 20);
    Run got = train(gpt4(), mode, 20, units);
    double loss = 0;
    for (size_t s = 0; s < ref.losses.size(); ++s) loss = std::max(loss, std::abs(got.losses[s] - ref.losses[s]));
    double params = max_abs_diff(got.params, ref.params);
    if (rank() == 0)
      MESSAGE("scripted GPT, 4 units" << std::string(mode == Mode::FullyShardCompiled ? ", compiled step" : "")
                                      << " vs one process, 20 AdamW steps: losses within " << loss << ", parameters " << params);
    CHECK(loss <= 1e-5);
    CHECK(params <= 1e-5);
  }

  // the forward's peak: parameter bytes (the shards aside) when the rank's bytes peaked, for a model whose
  // parameters outweigh its activations
  int64_t unit = 0, total = 0;
  auto forward_peak = [&](const dist::FsdpOptions& o) {
    Model m = gpt4();
    std::tie(unit, total) = block_and_total_bytes(m);
    auto fsdp = std::make_shared<dist::FullyShardedDataParallel>(m.net, std::vector<optim::ParamGroup>{}, o);
    int64_t part = m.x.size(0) / world();
    Tensor x = m.x.slice(0, rank() * part, (rank() + 1) * part), y = m.y.slice(0, rank() * part, (rank() + 1) * part);
    int64_t shards = memory_stats().category_bytes[size_t(MemoryCategory::Parameter)];
    if (o.units.empty()) fsdp->gather();  // one unit: gathered whole, as before graphs gathered units
    reset_peak_memory_stats();
    Tensor loss = m.loss(x, y);
    int64_t peak = memory_stats().category_peak_bytes[size_t(MemoryCategory::Parameter)] - shards;
    CHECK(fsdp->gathered_bytes() == (o.units.empty() ? total : total - 4 * unit));  // the root stays for backward
    loss.backward();
    CHECK(fsdp->gathered_bytes() == 0);
    CHECK(fsdp->reductions() == 1);
    return peak;
  };
  int64_t whole = forward_peak({});
  int64_t per_unit = forward_peak(units);
  int64_t root = total - 4 * unit;
  if (rank() == 0)
    MESSAGE("scripted GPT forward, parameter bytes gathered at the peak: all " << whole << ", 4 units " << per_unit
                                                                              << " (a block " << unit << ", the root " << root << ")");
  // the allocator rounds each buffer up a little: one block and the root, never two blocks
  CHECK(whole >= total);
  CHECK(per_unit >= root + unit);
  CHECK(per_unit < root + 2 * unit);
  CHECK(per_unit < whole / 2);

  Model m = gpt4();
  check_error([&] { dist::FullyShardedDataParallel(m.net, {}, {{"transformer.h.0", "transformer.h.4"}}); },
              "FullyShardedDataParallel: unit 'transformer.h.4' is not a submodule of the module (its submodules: lm_head, transformer,");
}

TEST_CASE("fsdp: a scripted GPT's compiled backward gathers its blocks one at a time, as its forward does") {
  // the backward graph recomputes each block's layer norms from their saved statistics; run at its top, as
  // they were, those reads gathered every block at the backward's start (min_cut_partition.h's recompute_late)
  dist::FsdpOptions units;
  for (int i = 0; i < 4; ++i) units.units.push_back(fmt::format("transformer.h.{}", i));
  Model m = gpt_layers(4, 16);
  auto [unit, total] = block_and_total_bytes(m);
  int64_t root = total - 4 * unit;
  auto fsdp = std::make_shared<dist::FullyShardedDataParallel>(m.net, std::vector<optim::ParamGroup>{}, units);
  optim::AdamW opt(fsdp->shard_groups(), optim::AdamOptions{});
  auto watch = std::make_shared<WatchGathers>();
  int64_t most = 0;
  watch->acquired = [&] { most = std::max(most, fsdp->gathered_bytes()); };
  std::vector<std::pair<const Storage*, size_t>> watched;
  for (const Tensor& p : m.net->parameters()) {
    std::optional<OnDemand> d = on_demand(p.storage().get());
    REQUIRE(d);
    if (d->owner == watch) continue;  // a unit's parameters share its buffer's storage
    watch->fsdp_owner = d->owner;
    set_on_demand(p.storage().get(), watch, d->key);
    watched.emplace_back(p.storage().get(), d->key);
  }
  int64_t part = m.x.size(0) / world();
  Tensor x = m.x.slice(0, rank() * part, (rank() + 1) * part), y = m.y.slice(0, rank() * part, (rank() + 1) * part);
  CompiledTrainStep step(*m.net, [&m](const std::vector<Tensor>& b) { return m.loss(b[0], b[1]); }, opt);
  step({x, y});  // records and compiles the step
  // then its compiled forward, and its compiled backward measured alone
  int64_t shards = memory_stats().category_bytes[size_t(MemoryCategory::Parameter)];
  most = 0;
  Tensor loss = step.function()({x, y}).at(0);
  int64_t most_forward = most;
  opt.zero_grad();
  most = 0;
  reset_peak_memory_stats();
  loss.backward();
  int64_t at_peak = memory_stats().category_peak_bytes[size_t(MemoryCategory::Parameter)] - shards;
  CHECK(fsdp->gathered_bytes() == 0);
  CHECK(fsdp->reductions() == 2);
  opt.step();
  if (rank() == 0)
    MESSAGE("scripted GPT's compiled step, 4 units: parameter bytes gathered at most in its forward " << most_forward << ", in its backward "
            << most << " (at the backward's peak " << at_peak << "); a block " << unit << ", the root " << root << ", all " << total);
  for (int64_t seen : {most_forward, most}) {
    CHECK(seen >= root + unit);
    CHECK(seen < root + 2 * unit);  // the allocator rounds each buffer up a little: one block and the root
    CHECK(seen < total / 2);
  }
  CHECK(at_peak <= root + 2 * unit);
  CHECK(at_peak < total / 2);
  for (auto [s, key] : watched) set_on_demand(s, watch->fsdp_owner, key);
}

TEST_CASE("zero: gradients reduced bucket by bucket during backward lower the step's peak, and the misuses raise") {
  // sixteen 64x64 layers: the gradients (262 kB) outweigh the activations of 8 rows; a bucket a layer
  auto stack = [] {
    manual_seed(3);
    std::vector<std::shared_ptr<nn::Module>> layers;
    for (int i = 0; i < 16; ++i) layers.push_back(std::make_shared<nn::Linear>(64, 64, false));
    return std::make_shared<nn::Sequential>(layers);
  };
  const int64_t layer = 64 * 64 * 4, grads = 16 * layer;
  manual_seed(13);
  Tensor x = randn({8, 64}), y = randint(0, 64, {8});
  // forward + backward peak above the step's start (the second step: the first defers its reductions to its end)
  auto step_peak = [&](dist::ZeroRedundancyOptions zo, int64_t& own) {
    auto net = stack();
    auto opt = dist::zero_redundancy_optimizer<optim::AdamW>(net->parameters(), optim::AdamOptions{}, zo);
    own = 0;
    for (size_t i = 0; i < opt->params().size(); ++i)
      if (opt->owner(i) == rank()) own += opt->params()[i].numel() * 4;
    int64_t peak = 0;
    for (int s = 0; s < 2; ++s) {
      opt->zero_grad();
      int64_t before = memory_stats().current_bytes;
      reset_peak_memory_stats();
      cross_entropy((*net)(x), y).backward();
      peak = memory_stats().peak_bytes - before;
      opt->step();
    }
    return peak;
  };
  int64_t own = 0;
  int64_t in_step = step_peak({.shard_gradients = true}, own);
  int64_t in_backward = step_peak({.shard_gradients = true, .reduce_in_backward = true, .bucket_cap_mb = layer / 1048576.0}, own);
  if (rank() == 0)
    MESSAGE("zero-2 forward + backward peak above its start: gradients reduced in step() " << in_step << " bytes, in backward "
            << in_backward << " (the model's gradients " << grads << ", this rank's own " << own << ")");
  CHECK(in_step >= grads);
  // never the whole gradients: the others' are given up but for the buckets in flight and the one being made
  // (at most two buckets reducing, one filling, the gradient being made; more in flight when a peer lags)
  CHECK(in_backward <= own + 6 * layer + 16384);
  CHECK(in_backward < in_step);

  Model m = deep_mlp();
  check_error([&] { dist::zero_redundancy_optimizer<optim::AdamW>(m.net->parameters(), optim::AdamOptions{}, {.reduce_in_backward = true}); },
              "ZeroRedundancyOptimizer: reduce_in_backward reduces sharded gradients: it needs shard_gradients = true");
  check_error([&] {
    dist::zero_redundancy_optimizer<optim::AdamW>(m.net->parameters(), optim::AdamOptions{},
                                                  {.shard_gradients = true, .reduce_in_backward = true, .bucket_cap_mb = 0});
  }, "ZeroRedundancyOptimizer: bucket_cap_mb must be positive, got 0");
  auto opt = dist::zero_redundancy_optimizer<optim::AdamW>(m.net->parameters(), optim::AdamOptions{},
                                                           {.shard_gradients = true, .reduce_in_backward = true});
  int64_t part = m.x.size(0) / world();
  Tensor xs = m.x.slice(0, rank() * part, (rank() + 1) * part), ys = m.y.slice(0, rank() * part, (rank() + 1) * part);
  cross_entropy((*m.net)(xs), ys).backward();
  check_error([&] { cross_entropy((*m.net)(xs), ys).backward(); },
              "ZeroRedundancyOptimizer: a second backward before step() with reduce_in_backward");
  opt->step();
}

TEST_CASE("fsdp: a unit that is not a submodule is refused, naming the submodules") {
  Model m = deep_mlp();
  check_error([&] { dist::FullyShardedDataParallel(m.net, {}, {{"0", "layers.3"}}); },
              "unit 'layers.3' is not a submodule of the module (its submodules: 0, 1, 10, 2,");
  check_error([&] { dist::FullyShardedDataParallel(m.net, {}, {{"0", "0"}}); }, "unit '0' is named twice");
}

TEST_CASE("zero: each rank keeps the state of the parameters it owns, and only that") {
  Model m = mlp();
  auto params = m.net->parameters();
  auto opt = dist::zero_redundancy_optimizer<optim::Adam>(params, optim::AdamOptions{});
  int64_t owned = 0, total = 0;
  std::vector<int64_t> per_rank(size_t(world()), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    per_rank[size_t(opt->owner(i))] += params[i].numel();
    total += params[i].numel();
    if (opt->owner(i) == rank()) owned += params[i].numel();
  }
  CHECK(opt->local_optimizer().params().size() < params.size());
  // torch's greedy partition: the largest matrix alone on one rank, the rest on the other
  CHECK(*std::max_element(per_rank.begin(), per_rank.end()) <= params[0].numel() + 64);
  int64_t before = memory_stats().category_bytes[size_t(MemoryCategory::OptimizerState)];
  for (auto& p : params) p.set_grad(ones_like(p));
  opt->step();
  int64_t state = memory_stats().category_bytes[size_t(MemoryCategory::OptimizerState)] - before;
  if (rank() == 0) MESSAGE("rank 0 owns " << owned << " of " << total << " elements; its Adam state " << state << " bytes");
  // exp_avg and exp_avg_sq of its own parameters only (each block rounded up to the allocator's 64 bytes)
  int64_t mine = int64_t(opt->local_optimizer().params().size());
  CHECK(state >= owned * 2 * int64_t(sizeof(float)));
  CHECK(state <= owned * 2 * int64_t(sizeof(float)) + mine * 2 * 64);
  check_error([&] { opt->state_dict(); }, "consolidate_state_dict");
  opt->consolidate_state_dict(0);
  if (rank() != 0) check_error([&] { opt->state_dict(); }, "consolidated to rank 0");
  check_error([&] { opt->consolidate_state_dict(world()); }, "is not in a group of");
}

TEST_CASE("zero: a whole optimizer's state_dict loads into the shards, and training goes on as the whole one") {
  Run first = train(mlp(), Mode::Whole, 3);
  // both sides continue from the same weights and state
  auto cont = [&](bool sharded) {
    Model m = mlp();
    auto params = m.net->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(first.params[i]);
    std::unique_ptr<optim::Optimizer> opt;
    std::vector<optim::ParamGroup> groups(2);
    for (auto& p : params) groups[p.dim() >= 2 ? 0 : 1].params.push_back(p);
    optim::AdamOptions o{3e-3, 0.9, 0.99, 1e-8, 0.0};
    if (sharded) opt = dist::zero_redundancy_optimizer<optim::AdamW>(groups, o);
    else opt = std::make_unique<optim::AdamW>(groups, o);
    opt->load_state_dict(first.state);
    for (int s = 0; s < 3; ++s) {
      Tensor loss = m.loss(m.x, m.y);
      opt->zero_grad();
      loss.backward();
      if (sharded) for (auto& p : params) dist::all_reduce(p.grad(), dist::ReduceOp::Avg);  // every rank the same batch
      opt->step();
    }
    std::vector<Tensor> out;
    for (auto& p : params) out.push_back(p.detach().clone());
    return out;
  };
  double d = max_abs_diff(cont(true), cont(false));
  if (rank() == 0) MESSAGE("loaded zero vs loaded whole optimizer, 3 more steps: parameters within " << d);
  CHECK(d <= 1e-6);
}

TEST_CASE("fsdp: between steps a rank holds its shard of the parameters, gradients and optimizer state") {
  Model m = mlp();
  auto stats = [] {
    auto b = memory_stats().category_bytes;
    return std::array<int64_t, 3>{b[size_t(MemoryCategory::Parameter)], b[size_t(MemoryCategory::Gradient)],
                                  b[size_t(MemoryCategory::OptimizerState)]};
  };
  int64_t total = 0;
  for (auto& p : m.net->parameters()) total += p.numel();
  auto before = stats();
  auto fsdp = std::make_shared<dist::FullyShardedDataParallel>(m.net);
  optim::AdamW opt(fsdp->shard_groups(), optim::AdamOptions{});
  int64_t part = m.x.size(0) / world();
  Tensor x = m.x.slice(0, rank() * part, (rank() + 1) * part), y = m.y.slice(0, rank() * part, (rank() + 1) * part);
  Tensor loss = cross_entropy((*fsdp)(x), y);
  CHECK(fsdp->gathered());
  loss.backward();
  opt.step();
  auto after = stats();
  int64_t shard = (total + world() - 1) / world() * int64_t(sizeof(float));
  if (rank() == 0)
    MESSAGE("fsdp rank 0 of " << world() << ": " << total * 4 << " parameter bytes in all; at rest parameters "
                              << after[0] - before[0] << ", gradients " << after[1] - before[1] << ", AdamW state "
                              << after[2] - before[2] << " bytes");
  // the module's own parameters released, the shard (and its gradient, exp_avg, exp_avg_sq) kept: each
  // within the allocator's rounding (to 4 KiB pages at this size) of total / world
  int64_t page = 4096;
  CHECK(after[0] - before[0] <= shard + page - total * int64_t(sizeof(float)));
  CHECK(after[1] - before[1] <= shard + page);
  CHECK(after[2] - before[2] <= 2 * (shard + page));
  CHECK(fsdp->parameters().size() == 1);
  CHECK(fsdp->reductions() == 1);
  // gathering after the optimizer changed the shard moves the parameters' version (caches keyed on it, as
  // oneDNN's blocked conv weights, see new values); gathering the same values again keeps it
  Tensor first = m.net->parameters().front();
  fsdp->gather();
  uint64_t v1 = first.storage()->version.load();
  fsdp->release();
  fsdp->gather();
  CHECK(first.storage()->version.load() == v1);
  Tensor loss2 = cross_entropy((*fsdp)(x), y);
  loss2.backward();
  opt.step();
  fsdp->gather();
  CHECK(first.storage()->version.load() != v1);
  fsdp->release();
  // the module's parameters hold no memory between steps: reading one raises, saying why
  check_error([&] { (*m.net)(x); }, "its storage was released");
  // a group that leaves a parameter out, or holds one twice, is refused naming it
  Model m2 = mlp();
  auto ps = m2.net->named_parameters();
  check_error([&] { dist::FullyShardedDataParallel(m2.net, {{{ps[0].second}, {}, {}}}); },
              "parameter '" + ps[1].first + "' is in no group");
  check_error([&] { dist::FullyShardedDataParallel(m2.net, {{m2.net->parameters(), {}, {}}, {{ps[0].second}, {}, {}}}); },
              "is in group 0 and group 1");
}
