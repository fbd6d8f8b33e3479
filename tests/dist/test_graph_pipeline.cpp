// jit::GraphPipeline under mpirun: a traced forward cut by partition_for_pipeline into one stage per rank,
// trained with GPipe and 1F1B, equal to one process training the whole model (an MLP, and samples/gpt.py
// with its embedding tied to the output layer across the stages).
#include "../support.h"

#include <fmt/ranges.h>

#include "eager/dist/dist.h"
#include "jit/graph_pipeline.h"
#include "script_frontend/script.h"

using namespace kiln;
using kiln::test::check_error;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

struct Model {
  std::shared_ptr<nn::Module> net;
  std::function<Tensor(const Tensor&)> out;  // the output the loss reads
  std::function<Tensor(const Tensor&, const Tensor&)> loss;
  std::function<std::pair<Tensor, Tensor>(int)> batch;  // step s's batch
};

Model mlp() {
  manual_seed(21);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(32, 48), std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(48, 48),
      std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(48, 10)});
  manual_seed(5);
  Tensor x = randn({160, 32}), y = randint(0, 10, {160});
  return {net, [net](const Tensor& a) { return net->forward(a); },
          [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); },
          [x, y](int s) { return std::pair{x.slice(0, (s % 5) * 32, (s % 5) * 32 + 32), y.slice(0, (s % 5) * 32, (s % 5) * 32 + 32)}; }};
}

// Batch norm in training mode: the traced forward writes the running statistics (and the count) back, each
// stage those of its own layers, once per micro-batch.
Model batch_norm_mlp() {
  manual_seed(23);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(12, 24), std::make_shared<nn::BatchNorm1d>(24), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(24, 24), std::make_shared<nn::BatchNorm1d>(24), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(24, 6)});
  manual_seed(6);
  Tensor x = randn({160, 12}) * 2.0 + 0.5, y = randint(0, 6, {160});
  return {net, [net](const Tensor& a) { return net->forward(a); },
          [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); },
          [x, y](int s) { return std::pair{x.slice(0, (s % 5) * 32, (s % 5) * 32 + 32), y.slice(0, (s % 5) * 32, (s % 5) * 32 + 32)}; }};
}

Model gpt() {
  manual_seed(7);
  ScriptFile file = script_file(KILN_SAMPLES_DIR "/gpt.py");
  std::shared_ptr<ScriptedModule> net = file.build(
      "GPT", {file.value("GPTConfig(block_size=8, vocab_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.0, bias=True)")});
  manual_seed(9);
  Tensor x = randint(0, 16, {40, 8}), y = randint(0, 16, {40, 8});
  // the logits of every position: the file's forward with targets (its loss is left out of the graph)
  return {net,
          [net](const Tensor& a) { return net->call({a, zeros(a.sizes(), DType::Int64)}).at(0).elements().at(0).to_tensor(); },
          [](const Tensor& out, const Tensor& t) { return cross_entropy(out.reshape({-1, out.size(-1)}), t.reshape({-1})); },
          [x, y](int s) { return std::pair{x.slice(0, (s % 5) * 8, (s % 5) * 8 + 8), y.slice(0, (s % 5) * 8, (s % 5) * 8 + 8)}; }};
}

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;  // every parameter of the model (the pipeline: broadcast from a rank holding it)
  std::string plan;            // the pipeline's cuts
};

Run train(Model m, const std::string& schedule, int chunks, int steps) {
  Run r;
  auto params = m.net->parameters();
  std::unique_ptr<jit::GraphPipeline> pipe;
  std::unique_ptr<dist::PipelineSchedule> sched;
  if (!schedule.empty()) {
    Tensor sample = m.batch(0).first.slice(0, 0, m.batch(0).first.size(0) / chunks);
    // tracing runs the forward, which moves batch norm's statistics once (as torch.jit.trace does): undone,
    // so that the pipeline starts where the reference does
    std::vector<Tensor> before;
    for (const auto& [name, b] : m.net->named_buffers()) before.push_back(b.clone());
    Function fwd = trace_module(*m.net, [&](const Tensors& in) { return Tensors{m.out(in[0])}; }, {sample});
    size_t at = 0;
    for (auto [name, b] : m.net->named_buffers()) b.copy_(before[at++]);
    pipe = std::make_unique<jit::GraphPipeline>(fwd);
    const jit::PipelinePartition& p = pipe->plan();
    r.plan = fmt::format("stages start at nodes {}, {} bytes cross, stage FLOPs {}, {} parameter(s) shared",
                         fmt::join(p.starts, ", "), fmt::join(p.cut_bytes, ", "), fmt::join(p.stage_flops, ", "),
                         pipe->num_shared());
    if (schedule == "gpipe") sched = std::make_unique<dist::ScheduleGPipe>(pipe->stage(), chunks, m.loss);
    else sched = std::make_unique<dist::Schedule1F1B>(pipe->stage(), chunks, m.loss);
  }
  optim::AdamW opt(pipe ? pipe->parameters() : params, {1e-3, 0.9, 0.99, 1e-8, 0.01});
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = m.batch(s);
    opt.zero_grad();
    Tensor loss;
    if (sched) {
      loss = sched->step(x, y);
      pipe->sync_shared_gradients();
      Tensor t = loss.defined() ? loss.detach().reshape({1}).clone() : zeros({1});
      dist::broadcast(t, world() - 1);
      loss = t;
    } else if (chunks > 1) {
      // micro-batches one after another, as a pipeline runs them (batch norm's statistics per micro-batch)
      const int64_t rows = x.size(0) / chunks;
      double total = 0;
      for (int c = 0; c < chunks; ++c) {
        Tensor l = m.loss(m.out(x.slice(0, c * rows, (c + 1) * rows)), y.slice(0, c * rows, (c + 1) * rows));
        (l / double(chunks)).backward();
        total += l.item<double>() / chunks;
      }
      loss = full({1}, total);
    } else {
      loss = m.loss(m.out(x), y);
      loss.backward();
    }
    opt.step();
    r.losses.push_back(loss.item<double>());
  }
  // Each parameter from a rank that trains it: the lowest one whose stage reads it
  std::vector<Tensor> mine = pipe ? pipe->stage().submodule().parameters() : params;
  if (pipe)
    for (const auto& [name, b] : pipe->stage().submodule().named_buffers()) mine.push_back(b);
  std::vector<Tensor> state = params;
  for (const auto& [name, b] : m.net->named_buffers()) state.push_back(b);  // batch norm's running statistics
  for (const Tensor& p : state) {
    bool have = std::any_of(mine.begin(), mine.end(), [&](const Tensor& q) { return q.is_same(p); });
    Tensor who = full({1}, have ? double(rank()) : double(world()));
    dist::all_reduce(who, dist::ReduceOp::Min);
    Tensor v = p.detach().to(DType::Float64).clone();  // num_batches_tracked too
    if (pipe) dist::broadcast(v, int(who.item<double>()));
    r.params.push_back(v);
  }
  return r;
}

// The largest differences of the losses and of the final state (parameters, and buffers where the model has them)
std::pair<double, double> differences(const Run& ref, const Run& got) {
  double loss = 0, state = 0;
  for (size_t s = 0; s < ref.losses.size(); ++s) loss = std::max(loss, std::abs(got.losses[s] - ref.losses[s]));
  REQUIRE(got.params.size() == ref.params.size());
  for (size_t i = 0; i < ref.params.size(); ++i) state = std::max(state, amax((got.params[i] - ref.params[i]).abs()).item<double>());
  return {loss, state};
}

}  // namespace

TEST_CASE("graph pipeline: a traced MLP and GPT cut by the partitioner train as one process, GPipe and 1F1B") {
  for (auto make : {mlp, gpt}) {
    Run ref = train(make(), "", 1, 20);
    for (std::string schedule : {"gpipe", "1f1b"}) {
      CAPTURE(schedule);
      Run got = train(make(), schedule, 4, 20);
      auto [loss, params] = differences(ref, got);
      if (rank() == 0)
        MESSAGE(schedule << ", 4 micro-batches, 20 AdamW steps vs one process: losses within " << loss
                         << ", parameters within " << params << "; " << got.plan);
      CHECK(loss <= 1e-5);
      CHECK(params <= 1e-5);
    }
  }
}

TEST_CASE("graph pipeline: batch norm's running statistics are written back by the stage that holds them, per micro-batch") {
  Run ref = train(batch_norm_mlp(), "", 4, 12);
  for (std::string schedule : {"gpipe", "1f1b"}) {
    CAPTURE(schedule);
    Run got = train(batch_norm_mlp(), schedule, 4, 12);
    auto [loss, state] = differences(ref, got);
    if (rank() == 0) MESSAGE(schedule << ": losses within " << loss << ", parameters and running statistics within " << state << "; " << got.plan);
    CHECK(loss <= 1e-5);
    CHECK(state <= 1e-5);
  }
  // the running statistics moved (12 steps of 4 micro-batches: num_batches_tracked 48)
  CHECK(ref.params.back().item<double>() == 48.0);
}

TEST_CASE("graph pipeline: the plan is one stage per rank; a given plan is checked") {
  Model m = mlp();
  Tensor sample = m.batch(0).first;
  Function fwd = trace_module(*m.net, [&](const Tensors& in) { return Tensors{m.out(in[0])}; }, {sample});
  check_error([&] { jit::GraphPipeline bad(fwd, std::vector<size_t>(size_t(world()) + 1, 0)); }, "stages for");
  jit::GraphPipeline pipe(fwd);
  CHECK(pipe.plan().starts.size() == size_t(world()));
  CHECK(pipe.stage().stage_index() == rank());
}

TEST_CASE("graph pipeline: once the model and its trace are dropped, a rank holds only its stage's parameters") {
  const int64_t before = memory_stats().category_bytes[size_t(MemoryCategory::Parameter)];
  int64_t whole = 0, stage = 0;
  std::unique_ptr<jit::GraphPipeline> pipe;
  {
    Model m = gpt();
    for (const Tensor& p : m.net->parameters()) whole += p.numel() * int64_t(p.element_size());
    Tensor sample = m.batch(0).first.slice(0, 0, 2);
    Function fwd = trace_module(*m.net, [&](const Tensors& in) { return Tensors{m.out(in[0])}; }, {sample});
    pipe = std::make_unique<jit::GraphPipeline>(fwd);
  }
  for (const Tensor& p : pipe->parameters()) stage += p.numel() * int64_t(p.element_size());
  const int64_t held = memory_stats().category_bytes[size_t(MemoryCategory::Parameter)] - before;
  if (rank() == 0) MESSAGE("parameters: the whole GPT " << whole << " bytes, rank 0's stage " << stage << ", held " << held);
  CHECK(held == stage);
  CHECK(stage < whole * 3 / 4);  // two stages of one layer each, the tied embedding in both
  // the shared embedding's gradients still sum over the stages with the rest of the model gone
  pipe->sync_shared_gradients();
}
