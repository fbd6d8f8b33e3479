#include "jit/tensor_parallel_module.h"

#include <algorithm>

#include "backends/interp/interop_scheduler.h"
#include "backends/interp/interpreter.h"
#include "eager/autograd/graph.h"
#include "eager/dist/dist.h"
#include "eager/dist/tensor_parallel.h"

namespace kiln::jit {

namespace {

// Runs the pass's markers as Megatron's regions; every other node is the interpreter's.
struct Collectives : interp::NodeRunner {
  bool run(const ir::Node& n, const std::vector<IValue>& in, std::vector<IValue>& out) override {
    if (!n.is_op(OpId::Clone) || !n.attrs().has("tensor_parallel")) return false;
    const Tensor x = in.at(0).to_tensor();
    out.emplace_back(n.attrs().s("tensor_parallel") == "copy" ? dist::copy_to_tensor_parallel_region(x)
                                                              : dist::reduce_from_tensor_parallel_region(x));
    return true;
  }
};

}  // namespace

TensorParallelModule::TensorParallelModule(const Function& traced, const TensorParallelPlan& plan)
    : tp_(shard_for_tensor_parallel(traced, plan, dist::get_world_size())) {
  const int64_t rank = dist::get_rank(), world = dist::get_world_size();
  const std::vector<Tensor>& bound = traced.binding().bound;
  for (size_t k = 0; k < bound.size(); ++k) {
    Tensor part = shard_part(bound[k], tp_.shards[k], rank, world);
    std::string name = tp_.shards[k].name;
    std::replace(name.begin(), name.end(), '.', '_');
    local_.push_back(bound[k].requires_grad() ? register_parameter(name, part) : register_buffer(name, part));
  }
  plan_ = std::make_unique<interp::Plan>(*tp_.graph);
}

TensorParallelModule::~TensorParallelModule() = default;

std::vector<Tensor> TensorParallelModule::operator()(const std::vector<Tensor>& inputs) {
  const size_t callers = tp_.graph->inputs().size() - local_.size();
  if (inputs.size() != callers) fail("tensor parallel: the traced forward takes {} inputs, got {}", callers, inputs.size());
  std::vector<IValue> in(inputs.begin(), inputs.end());
  in.insert(in.end(), local_.begin(), local_.end());
  // The collectives must run in the same order on every rank: one node at a time
  struct Sequential {
    int saved = get_num_interop_threads();
    Sequential() { if (saved > 1) set_num_interop_threads(1); }
    ~Sequential() { if (saved > 1) set_num_interop_threads(saved); }
  } sequential;
  Collectives collectives;
  std::vector<Tensor> out;
  for (const IValue& v : interp::run(*plan_, std::move(in), &collectives)) out.push_back(v.to_tensor());
  return out;
}

Tensor TensorParallelModule::forward(const Tensor& x) {
  std::vector<Tensor> out = (*this)({x});
  if (out.size() != 1) fail("tensor parallel: forward(x) of a traced function returning {} tensors; call it with a list", out.size());
  return out[0];
}

std::vector<std::pair<std::string, Tensor>> TensorParallelModule::local_state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < local_.size(); ++k) out.emplace_back(tp_.shards[k].name, local_[k]);
  return out;
}

std::vector<std::pair<std::string, Tensor>> TensorParallelModule::full_state() const {
  NoGradGuard no_grad;
  const int64_t rank = dist::get_rank(), world = dist::get_world_size();
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < local_.size(); ++k) {
    Tensor whole = placed_part(local_[k], tp_.shards[k], rank, world);
    if (tp_.shards[k].dim >= 0) dist::all_reduce(whole, dist::ReduceOp::Sum);
    out.emplace_back(tp_.shards[k].name, whole);
  }
  return out;
}

}  // namespace kiln::jit
