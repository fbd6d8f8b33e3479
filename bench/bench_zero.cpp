// Memory per rank with the optimizer state sharded (ZeroRedundancyOptimizer, eager/dist/zero.h), or everything
// (FullyShardedDataParallel, eager/dist/fsdp.h), the figure in docs/dist.md:
//   mpirun -np 2 build/bench/bench_zero [--shard-gradients | --fsdp]   (and -np 1 for one process)
// The GPT of samples/gpt.py at nanoGPT's CPU settings (4 layers, 4 heads, width 128, context 64, batch 12,
// vocab 65), AdamW with weight decay on matrices; each rank trains on its 12 / world rows under
// DistributedDataParallel (--shard-gradients: without it, each rank keeping only its own parameters' gradients;
// --fsdp: parameters, gradients and state sharded, gathered for the step).
// Reported per rank after 3 steps: parameters, gradients and optimizer state as the allocator's categories count
// them, and the step's peak.
#include <kiln/kiln.h>

#include <cstdio>
#include <string>

#include "eager/dist/fsdp.h"
#include "eager/dist/zero.h"

using namespace kiln;

int main(int argc, char** argv) {
  try {
    std::string samples = "samples";
    bool shard_gradients = false, fully = false;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--shard-gradients") shard_gradients = true;
      else if (a == "--fsdp") fully = true;
      else samples = a;
    }
    dist::init_process_group();
    int rank = dist::get_rank(), world = dist::get_world_size();
    manual_seed(1337);
    ScriptFile file = script_file(samples + "/gpt.py");
    auto net = file.build("GPT", {file.value("GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, "
                                             "dropout=0.0, bias=False)")});
    std::shared_ptr<dist::DistributedDataParallel> ddp;
    if (!shard_gradients && !fully) ddp = std::make_shared<dist::DistributedDataParallel>(net);
    std::vector<optim::ParamGroup> groups(2);
    for (auto& p : net->parameters()) groups[p.dim() >= 2 ? 0 : 1].params.push_back(p);
    groups[0].weight_decay = 0.1;
    groups[1].weight_decay = 0.0;
    optim::AdamOptions adamw{1e-3, 0.9, 0.99, 1e-8, 0.1};
    std::shared_ptr<dist::FullyShardedDataParallel> fsdp;
    std::unique_ptr<optim::Optimizer> opt;
    if (fully) {
      fsdp = std::make_shared<dist::FullyShardedDataParallel>(net, groups);
      opt = std::make_unique<optim::AdamW>(fsdp->shard_groups(), adamw);
    } else {
      opt = dist::zero_redundancy_optimizer<optim::AdamW>(groups, adamw, {shard_gradients});
    }
    int64_t rows = 12 / world;
    Tensor x = randint(0, 65, {rows, 64}), y = randint(0, 65, {rows, 64});
    int64_t peak = 0;
    for (int s = 0; s < 3; ++s) {
      opt->zero_grad();
      int64_t before = memory_stats().current_bytes;
      reset_peak_memory_stats();
      if (fsdp) fsdp->gather();
      Tensor loss = net->call({x, y}).at(0).elements().at(1).to_tensor();
      loss.backward();
      opt->step();
      peak = memory_stats().peak_bytes - before;
    }
    MemoryStats m = memory_stats();
    auto mib = [&](MemoryCategory c) { return double(m.category_bytes[size_t(c)]) / (1 << 20); };
    for (int r = 0; r < world; ++r) {
      if (r == rank)
        std::printf("rank %d of %d%s: parameters %.2f MiB, gradients %.2f MiB, temporary (DDP's gradient buckets "
                    "among them) %.2f MiB, optimizer state %.2f MiB, step peak above the step's start %.2f MiB\n",
                    rank, world, fully ? ", fully sharded" : shard_gradients ? ", gradients sharded" : "",
                    mib(MemoryCategory::Parameter),
                    mib(MemoryCategory::Gradient), mib(MemoryCategory::Temporary),
                    mib(MemoryCategory::OptimizerState), double(peak) / (1 << 20));
      std::fflush(stdout);
      dist::barrier();
    }
    dist::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_zero: %s\n", e.what());
    return 1;
  }
}
