// Memory per rank with the optimizer state sharded (ZeroRedundancyOptimizer, eager/dist/zero.h), or everything
// (FullyShardedDataParallel, eager/dist/fsdp.h), the figure in docs/dist.md:
//   mpirun -np 2 build/bench/bench_zero [--shard-gradients | --fsdp | --fsdp-units | --pipeline gpipe|1f1b | --tensor-parallel]
//   [--compiled] (with --fsdp or --fsdp-units: each step a CompiledTrainStep, its forward and backward compiled graphs)
//   (and -np 1 for one process)
// The GPT of samples/gpt.py at nanoGPT's CPU settings (4 layers, 4 heads, width 128, context 64, batch 12,
// vocab 65), AdamW with weight decay on matrices; each rank trains on its 12 / world rows under
// DistributedDataParallel (--shard-gradients: without it, each rank keeping only its own parameters' gradients;
// --fsdp: parameters, gradients and state sharded, gathered for the step; --fsdp-units: the same with each block
// a unit, which the scripted forward's graph gathers before its first read and frees after its last; --pipeline: no data parallelism, the
// forward traced and cut into one stage per rank by jit::GraphPipeline, the batch in 4 micro-batches of 3 rows,
// each rank holding its stage's parameters and their state once the model and its trace are dropped;
// --tensor-parallel: no data parallelism, the traced step split by jit::TensorParallelModule's plan over every
// block's c_attn, attn.c_proj, c_fc and mlp.c_proj, each rank on the whole batch with its part of those Linears).
// Reported per rank after 3 steps: parameters, gradients and optimizer state as the allocator's categories count
// them, and the step's peak (and the parameters' bytes then).
#include <kiln/kiln.h>

#include <cstdio>
#include <functional>
#include <string>

#include "eager/dist/fsdp.h"
#include "eager/dist/zero.h"
#include "jit/graph_pipeline.h"
#include "jit/tensor_parallel_module.h"

using namespace kiln;

namespace {

std::vector<optim::ParamGroup> decay_groups(const std::vector<Tensor>& params) {
  std::vector<optim::ParamGroup> groups(2);
  for (auto& p : params) groups[p.dim() >= 2 ? 0 : 1].params.push_back(p);
  groups[0].weight_decay = 0.1;
  groups[1].weight_decay = 0.0;
  return groups;
}
const optim::AdamOptions kAdamW{1e-3, 0.9, 0.99, 1e-8, 0.1};

// Each rank's line in rank order.
void report(const std::string& scheme, int64_t peak) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  MemoryStats m = memory_stats();
  auto mib = [&](MemoryCategory c) { return double(m.category_bytes[size_t(c)]) / (1 << 20); };
  double peak_params = double(m.category_peak_bytes[size_t(MemoryCategory::Parameter)]) / (1 << 20);
  for (int r = 0; r < world; ++r) {
    if (r == rank)
      std::printf("rank %d of %d%s: parameters %.2f MiB, gradients %.2f MiB, temporary (DDP's gradient buckets "
                  "among them) %.2f MiB, optimizer state %.2f MiB, step peak above the step's start %.2f MiB (parameters "
                  "then %.2f MiB)\n",
                  rank, world, scheme.c_str(), mib(MemoryCategory::Parameter), mib(MemoryCategory::Gradient),
                  mib(MemoryCategory::Temporary), mib(MemoryCategory::OptimizerState), double(peak) / (1 << 20),
                  peak_params);
    std::fflush(stdout);
    dist::barrier();
  }
}

// Three steps; the last one's peak above its start.
int64_t three_steps(const std::function<void()>& step) {
  int64_t peak = 0;
  for (int s = 0; s < 3; ++s) {
    int64_t before = memory_stats().current_bytes;
    reset_peak_memory_stats();
    step();
    peak = memory_stats().peak_bytes - before;
  }
  return peak;
}

// Three steps of forward and backward, then the optimizer.
int64_t three_steps(optim::Optimizer& opt, const std::function<void()>& forward_backward) {
  return three_steps([&] {
    opt.zero_grad();
    forward_backward();
    opt.step();
  });
}

// The GPT cut into one stage per rank from its traced forward (the logits of every position), trained on the
// whole batch of 12 rows in 4 micro-batches.
int pipeline_run(std::shared_ptr<ScriptedModule> net, const std::string& schedule) {
  constexpr int64_t kChunks = 4;
  Tensor x = randint(0, 65, {12, 64}), y = randint(0, 65, {12, 64});
  std::unique_ptr<jit::GraphPipeline> pipe;
  {
    auto logits = [&](const Tensor& a) { return net->call({a, zeros(a.sizes(), DType::Int64)}).at(0).elements().at(0).to_tensor(); };
    Function fwd = trace_module(*net, [&](const Tensors& in) { return Tensors{logits(in[0])}; }, {x.slice(0, 0, 12 / kChunks)});
    pipe = std::make_unique<jit::GraphPipeline>(fwd);
  }
  net.reset();  // the rank keeps its stage's parameters only
  auto loss = [](const Tensor& out, const Tensor& t) { return cross_entropy(out.reshape({-1, out.size(-1)}), t.reshape({-1})); };
  std::unique_ptr<dist::PipelineSchedule> sched;
  if (schedule == "gpipe") sched = std::make_unique<dist::ScheduleGPipe>(pipe->stage(), kChunks, loss);
  else if (schedule == "1f1b") sched = std::make_unique<dist::Schedule1F1B>(pipe->stage(), kChunks, loss);
  else fail("bench_zero: --pipeline takes gpipe or 1f1b, got '{}'", schedule);
  optim::AdamW opt(decay_groups(pipe->parameters()), kAdamW);
  int64_t peak = three_steps(opt, [&] {
    sched->step(x, y);
    pipe->sync_shared_gradients();
  });
  report(", " + schedule + " pipeline stage " + std::to_string(dist::get_rank()), peak);
  dist::destroy_process_group();
  return 0;
}

// The GPT's traced loss split by the Megatron plan, the whole batch on every rank.
int tensor_parallel_run(std::shared_ptr<ScriptedModule> net) {
  using jit::ParallelStyle;
  Tensor x = randint(0, 65, {12, 64}), y = randint(0, 65, {12, 64});
  std::unique_ptr<jit::TensorParallelModule> tp;
  {
    auto loss = [&](const Tensors& in) { return Tensors{net->call({in[0], in[1]}).at(0).elements().at(1).to_tensor()}; };
    Function fwd = trace_module(*net, loss, {x, y}, {.quiet = true});
    tp = std::make_unique<jit::TensorParallelModule>(fwd, jit::TensorParallelPlan{
        {"transformer.h.*.attn.c_attn", ParallelStyle::Colwise}, {"transformer.h.*.attn.c_proj", ParallelStyle::Rowwise},
        {"transformer.h.*.mlp.c_fc", ParallelStyle::Colwise}, {"transformer.h.*.mlp.c_proj", ParallelStyle::Rowwise}});
  }
  net.reset();  // the rank keeps its parts of the split Linears and the rest whole
  optim::AdamW opt(decay_groups(tp->parameters()), kAdamW);
  int64_t peak = three_steps(opt, [&] { (*tp)({x, y}).at(0).backward(); });
  report(", tensor parallel", peak);
  dist::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string samples = "samples";
    bool shard_gradients = false, fully = false, units = false, tensor_parallel = false, compiled = false;
    std::string pipeline;  // "gpipe" or "1f1b"
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--shard-gradients") shard_gradients = true;
      else if (a == "--fsdp") fully = true;
      else if (a == "--fsdp-units") fully = units = true;
      else if (a == "--tensor-parallel") tensor_parallel = true;
      else if (a == "--compiled") compiled = true;
      else if (a == "--pipeline" && i + 1 < argc) pipeline = argv[++i];
      else samples = a;
    }
    dist::init_process_group();
    const int world = dist::get_world_size();
    manual_seed(1337);
    ScriptFile file = script_file(samples + "/gpt.py");
    auto net = file.build("GPT", {file.value("GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, "
                                             "dropout=0.0, bias=False)")});
    if (!pipeline.empty()) return pipeline_run(std::move(net), pipeline);
    if (tensor_parallel) return tensor_parallel_run(std::move(net));
    std::shared_ptr<dist::DistributedDataParallel> ddp;
    if (!shard_gradients && !fully) ddp = std::make_shared<dist::DistributedDataParallel>(net);
    std::vector<optim::ParamGroup> groups = decay_groups(net->parameters());
    const optim::AdamOptions& adamw = kAdamW;
    std::shared_ptr<dist::FullyShardedDataParallel> fsdp;
    std::unique_ptr<optim::Optimizer> opt;
    if (fully) {
      dist::FsdpOptions o;
      for (int i = 0; units && i < 4; ++i) o.units.push_back("transformer.h." + std::to_string(i));
      fsdp = std::make_shared<dist::FullyShardedDataParallel>(net, groups, o);
      opt = std::make_unique<optim::AdamW>(fsdp->shard_groups(), adamw);
    } else {
      opt = dist::zero_redundancy_optimizer<optim::AdamW>(groups, adamw, {shard_gradients});
    }
    int64_t rows = 12 / world;
    Tensor x = randint(0, 65, {rows, 64}), y = randint(0, 65, {rows, 64});
    auto loss = [&](const Tensor& a, const Tensor& b) { return net->call({a, b}).at(0).elements().at(1).to_tensor(); };
    int64_t peak = 0;
    if (compiled) {
      if (!fsdp) fail("bench_zero: --compiled goes with --fsdp or --fsdp-units");
      CompiledTrainStep step(*net, [&](const std::vector<Tensor>& b) { return loss(b[0], b[1]); }, *opt);
      peak = three_steps([&] {
        if (!units) fsdp->gather();  // units: the compiled graphs gather what they read
        step({x, y});
      });
    } else {
      peak = three_steps(*opt, [&] {
        if (fsdp && !units) fsdp->gather();
        loss(x, y).backward();
      });
    }
    std::string scheme = units ? ", fully sharded, a unit per block" : fully ? ", fully sharded" : shard_gradients ? ", gradients sharded" : "";
    report(scheme + (compiled ? ", compiled step" : ""), peak);
    dist::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_zero: %s\n", e.what());
    return 1;
  }
}
