#include "eager/dist/fsdp.h"

#include <unordered_map>

#include "core/memory_category.h"
#include "eager/autograd/engine.h"
#include "eager/autograd/graph.h"
#include "eager/ops.h"

namespace kiln::dist {

namespace {

constexpr const char* kWho = "FullyShardedDataParallel";

}  // namespace

struct FullyShardedDataParallel::State {
  struct Group {
    std::vector<Tensor> params;   // the module's, in order; offsets[i] into the flat buffer
    std::vector<int64_t> offsets;
    int64_t numel = 0, shard = 0;  // the group's elements; per rank, padded so world shards cover them
    DType dtype = DType::Float32;
    Tensor local;                  // this rank's shard: what the optimizer steps
    std::optional<double> lr, weight_decay;
  };
  std::vector<Group> groups;
  int world = 1, me = 0;
  bool gathered = false;
  bool in_backward = false;
  int64_t reductions = 0;
  // A storage without memory: the module's parameters point at it between steps (Tensor::raw_data raises).
  std::shared_ptr<Storage> released = std::make_shared<Storage>();

  void point(const Tensor& p, const std::shared_ptr<Storage>& s, int64_t offset) {
    p.impl()->storage = s;
    p.impl()->offset = offset;
  }

  void gather() {
    in_backward = false;  // a backward that raised never reached its end
    if (gathered) return;
    NoGradGuard no_grad;
    for (Group& g : groups) {
      if (g.params.empty()) continue;
      Tensor full;
      {
        MemoryCategoryScope category(MemoryCategory::Parameter);
        full = empty({int64_t(world) * g.shard}, g.dtype);
      }
      all_gather_into_tensor(full, g.local.detach());
      for (size_t i = 0; i < g.params.size(); ++i) point(g.params[i], full.storage(), g.offsets[i]);
    }
    gathered = true;
  }

  void release() {
    for (Group& g : groups)
      for (const Tensor& p : g.params) {
        p.set_grad(Tensor());
        point(p, released, 0);
      }
    gathered = false;
  }

  // The end of a backward: each rank keeps the mean over the ranks of its shard's gradients (added to
  // what the shard holds, as .grad accumulates), then the full parameters and gradients go.
  void reduce() {
    in_backward = false;
    NoGradGuard no_grad;
    for (Group& g : groups) {
      if (g.params.empty()) continue;
      Tensor all;
      {
        MemoryCategoryScope category(MemoryCategory::Gradient);
        all = zeros({int64_t(world) * g.shard}, g.dtype);
      }
      for (size_t i = 0; i < g.params.size(); ++i)
        if (Tensor gr = g.params[i].grad(); gr.defined())
          all.slice(0, g.offsets[i], g.offsets[i] + gr.numel()).copy_(gr.reshape({-1}));
      MemoryCategoryScope category(MemoryCategory::Gradient);
      Tensor mine = empty({g.shard}, g.dtype);
      reduce_scatter_tensor(mine, all, ReduceOp::Avg);
      Tensor prev = g.local.grad();
      g.local.set_grad(prev.defined() ? prev + mine : mine);
    }
    ++reductions;
    release();
  }
};

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<nn::Module> module,
                                                   std::vector<optim::ParamGroup> groups)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  if (!module_) fail("{}: module is null", kWho);
  if (!is_initialized()) fail("{}: the process group is not initialized (call dist::init_process_group first)", kWho);
  State& st = *state_;
  st.world = get_world_size();
  st.me = get_rank();
  auto named = module_->named_parameters();
  std::unordered_map<const TensorImpl*, std::string> names;
  for (auto& [n, t] : named) names[t.impl()] = n;
  if (groups.empty()) groups.push_back({module_->parameters(), {}, {}});
  std::unordered_map<const TensorImpl*, size_t> seen;
  for (size_t k = 0; k < groups.size(); ++k)
    for (const Tensor& p : groups[k].params) {
      auto it = names.find(p.impl());
      if (it == names.end()) fail("{}: group {} holds a tensor of shape {} that is not a parameter of the module", kWho, k, shape_str(p.sizes()));
      if (!seen.emplace(p.impl(), k).second)
        fail("{}: parameter '{}' is in group {} and group {}", kWho, it->second, seen[p.impl()], k);
      if (!p.device().is_cpu() || !is_floating(p.dtype()) || !p.is_contiguous() || p.storage_offset() != 0 ||
          p.storage()->nbytes != size_t(p.numel()) * p.element_size())
        fail("{}: parameter '{}' must be a contiguous cpu floating tensor with its own storage, got {} {} on {}", kWho,
             it->second, dtype_name(p.dtype()), shape_str(p.sizes()), p.device().str());
      if (!p.requires_grad())
        fail("{}: parameter '{}' does not require grad (only trained parameters are sharded)", kWho, it->second);
      if (p.dtype() != groups[k].params.front().dtype())
        fail("{}: group {} mixes dtypes: '{}' is {}, its first parameter {}", kWho, k, it->second, dtype_name(p.dtype()),
             dtype_name(groups[k].params.front().dtype()));
    }
  for (auto& [n, t] : named)
    if (!seen.count(t.impl())) fail("{}: parameter '{}' is in no group", kWho, n);

  NoGradGuard no_grad;
  // Every rank starts from rank 0's parameters and buffers, as under DDP; the element counts are compared
  // first, so ranks with different models raise together instead of corrupting a broadcast.
  double total = 0;
  for (auto& [n, t] : named) total += double(t.numel());
  Tensor lo = full({2}, total, DType::Float64), hi;
  lo.data_ptr<double>()[1] = double(named.size());
  hi = lo.clone();
  all_reduce(lo, ReduceOp::Min);
  all_reduce(hi, ReduceOp::Max);
  if (lo.data_ptr<double>()[0] != hi.data_ptr<double>()[0] || lo.data_ptr<double>()[1] != hi.data_ptr<double>()[1])
    fail("{}: the ranks' modules differ: between {} and {} parameters, {} and {} elements", kWho,
         lo.data_ptr<double>()[1], hi.data_ptr<double>()[1], lo.data_ptr<double>()[0], hi.data_ptr<double>()[0]);
  for (auto& [n, t] : named) broadcast(t.detach(), 0);
  for (auto& [n, t] : module_->named_buffers()) broadcast(t.detach(), 0);

  for (size_t k = 0; k < groups.size(); ++k) {
    State::Group g;
    g.lr = groups[k].lr;
    g.weight_decay = groups[k].weight_decay;
    g.params = groups[k].params;
    if (!g.params.empty()) g.dtype = g.params.front().dtype();
    for (const Tensor& p : g.params) {
      g.offsets.push_back(g.numel);
      g.numel += p.numel();
    }
    g.shard = (g.numel + st.world - 1) / st.world;
    {
      MemoryCategoryScope category(MemoryCategory::Parameter);
      g.local = zeros({std::max<int64_t>(g.shard, 0)}, g.dtype);
    }
    int64_t begin = int64_t(st.me) * g.shard;
    for (size_t i = 0; i < g.params.size(); ++i) {
      int64_t lo_i = std::max(begin, g.offsets[i]), hi_i = std::min(begin + g.shard, g.offsets[i] + g.params[i].numel());
      if (lo_i < hi_i)
        g.local.slice(0, lo_i - begin, hi_i - begin).copy_(g.params[i].reshape({-1}).slice(0, lo_i - g.offsets[i], hi_i - g.offsets[i]));
    }
    g.local.requires_grad_(true);
    set_memory_category(g.local, MemoryCategory::Parameter);
    register_parameter(fmt::format("_flat_param_{}", k), g.local);
    st.groups.push_back(std::move(g));
  }
  // The first gradient of a backward queues the reduction for its end, where every gradient is in.
  std::weak_ptr<State> weak = state_;
  for (State::Group& g : st.groups)
    for (const Tensor& p : g.params)
      p.register_post_accumulate_grad_hook([weak](const Tensor&) {
        auto s = weak.lock();
        if (!s || s->in_backward) return;
        s->in_backward = true;
        queue_callback([weak] {
          if (auto s2 = weak.lock()) s2->reduce();
        });
      });
  st.release();
}

FullyShardedDataParallel::~FullyShardedDataParallel() = default;

Tensor FullyShardedDataParallel::forward(const Tensor& x) {
  gather();
  return module_->forward(x);
}

std::vector<optim::ParamGroup> FullyShardedDataParallel::shard_groups() const {
  std::vector<optim::ParamGroup> out;
  for (const State::Group& g : state_->groups) out.push_back({{g.local}, g.lr, g.weight_decay});
  return out;
}

void FullyShardedDataParallel::gather() { state_->gather(); }
void FullyShardedDataParallel::release() { state_->release(); }
bool FullyShardedDataParallel::gathered() const { return state_->gathered; }
int64_t FullyShardedDataParallel::reductions() const { return state_->reductions; }

std::map<std::string, Tensor> FullyShardedDataParallel::full_state_dict() {
  bool was = state_->gathered;
  gather();
  std::map<std::string, Tensor> out;
  {
    NoGradGuard no_grad;
    for (auto& [n, t] : module_->state_dict()) out[n] = t.detach().clone();
  }
  if (!was) release();
  return out;
}

}  // namespace kiln::dist
