#include "eager/dist/zero.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "eager/autograd/graph.h"
#include "eager/dist/zero_buckets.h"
#include "eager/ops.h"

namespace kiln::dist {

namespace {

constexpr const char* kWho = "ZeroRedundancyOptimizer";

// A state entry's value crosses the ranks as tensors: this header, the key's bytes, then the value itself.
enum class Kind : int64_t { Tensor, Int, Double };
constexpr int kMaxDims = 8;
constexpr int64_t kHeader = 5 + kMaxDims;  // param, key bytes, kind, dtype, ndim, sizes...

Tensor broadcast_header(const std::vector<int64_t>& values, int src) {
  Tensor h = zeros({kHeader}, DType::Int64);
  if (get_rank() == src) std::copy(values.begin(), values.end(), h.data_ptr<int64_t>());
  broadcast(h, src);
  return h;
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<optim::ParamGroup> groups, double lr, double weight_decay,
                                                 const Factory& make, Options options)
    : Optimizer(std::move(groups), lr, weight_decay), options_(options) {
  if (!is_initialized()) fail("{}: the process group is not initialized (call dist::init_process_group first)", kWho);
  int world = get_world_size(), me = get_rank();
  // torch's partition: per group, largest first, to the rank owning the fewest elements so far
  owner_.assign(params_.size(), 0);
  std::vector<int64_t> load(size_t(world), 0);
  for (const Group& g : groups_) {
    std::vector<size_t> order(g.end - g.begin);
    std::iota(order.begin(), order.end(), g.begin);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return params_[a].numel() > params_[b].numel(); });
    for (size_t i : order) {
      int r = int(std::min_element(load.begin(), load.end()) - load.begin());
      owner_[i] = r;
      load[size_t(r)] += params_[i].numel();
    }
  }
  // The local optimizer keeps the groups (empty ones too), so group k is group k on every rank.
  std::vector<optim::ParamGroup> local;
  local_index_.assign(params_.size(), 0);
  size_t n = 0;
  for (const Group& g : groups_) {
    optim::ParamGroup lg{{}, g.lr, g.weight_decay};
    for (size_t i = g.begin; i < g.end; ++i)
      if (owner_[i] == me) {
        lg.params.push_back(params_[i]);
        local_index_[i] = n++;
        owned_.push_back(i);
      }
    local.push_back(std::move(lg));
  }
  if (options_.shard_gradients) {
    // Owner blocks of one size: block r of a flat buffer holds rank r's parameters in order.
    std::vector<int64_t> fill(size_t(world), 0);
    block_offset_.assign(params_.size(), 0);
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor& p = params_[i];
      if (p.dtype() != params_[0].dtype() || !is_floating(p.dtype()) || !p.device().is_cpu())
        fail("{}: shard_gradients takes cpu parameters of one floating dtype; parameter {} is {} on {}, parameter 0 {}",
             kWho, i, dtype_name(p.dtype()), p.device().str(), dtype_name(params_[0].dtype()));
      block_offset_[i] = fill[size_t(owner_[i])];
      fill[size_t(owner_[i])] += p.numel();
    }
    block_ = *std::max_element(fill.begin(), fill.end());
    NoGradGuard no_grad;
    for (const Tensor& p : params_) broadcast(p.detach(), 0);  // every rank starts from rank 0's, as under DDP
    if (options_.reduce_in_backward) buckets_ = detail::ShardedGradBuckets::attach(params_, owner_, options_.bucket_cap_mb);
  } else if (options_.reduce_in_backward) {
    fail("{}: reduce_in_backward reduces sharded gradients: it needs shard_gradients = true", kWho);
  }
  local_ = make(std::move(local));
  if (!local_ || local_->param_groups().size() != groups_.size())
    fail("{}: the optimizer factory must build one optimizer over the {} groups it is given", kWho, groups_.size());
}

void ZeroRedundancyOptimizer::step() {
  // lr schedules and set_lr() act on this optimizer's groups: the local one follows them
  auto& lg = local_->param_groups();
  for (size_t k = 0; k < groups_.size(); ++k) {
    lg[k].lr = groups_[k].lr;
    lg[k].weight_decay = groups_[k].weight_decay;
  }
  if (options_.shard_gradients) return step_sharded();
  local_->step();
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) broadcast(params_[i].detach(), owner_[i]);
  consolidated_.reset();
}

void ZeroRedundancyOptimizer::step_sharded() {
  int world = get_world_size(), me = get_rank();
  DType dt = params_[0].dtype();
  auto at = [&](Tensor& flat, size_t i) {  // parameter i's place in a flat buffer of world blocks
    int64_t o = int64_t(owner_[i]) * block_ + block_offset_[i];
    return flat.slice(0, o, o + params_[i].numel()).view(params_[i].sizes());
  };
  if (buckets_) {
    buckets_->stepped();  // backward left each rank its own parameters' mean gradients
  } else {
    NoGradGuard no_grad;
    // Every rank's gradients in owner blocks; one reduce-scatter leaves each rank the mean of its own block.
    Tensor all = zeros({int64_t(world) * block_}, dt);
    for (size_t i = 0; i < params_.size(); ++i)
      if (Tensor g = params_[i].grad(); g.defined()) at(all, i).copy_(g);
    Tensor mine = empty({block_}, dt);
    reduce_scatter_tensor(mine, all, ReduceOp::Avg);
    MemoryCategoryScope category(MemoryCategory::Gradient);
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owner_[i] == me) {
        params_[i].set_grad(mine.slice(0, block_offset_[i], block_offset_[i] + params_[i].numel()).view(params_[i].sizes()).clone());
      } else {
        params_[i].set_grad(Tensor());
      }
    }
  }
  local_->step();
  NoGradGuard no_grad;
  Tensor mine = zeros({block_}, dt), all = empty({int64_t(world) * block_}, dt);
  for (size_t i = 0; i < params_.size(); ++i)
    if (owner_[i] == me) mine.slice(0, block_offset_[i], block_offset_[i] + params_[i].numel()).copy_(params_[i].detach().reshape({-1}));
  all_gather_into_tensor(all, mine);
  for (size_t i = 0; i < params_.size(); ++i)
    if (owner_[i] != me) params_[i].detach().copy_(at(all, i));
  consolidated_.reset();
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  int world = get_world_size(), me = get_rank();
  if (to < 0 || to >= world) fail("{}.consolidate_state_dict: rank {} is not in a group of {}", kWho, to, world);
  IValue mine = local_->state_dict();
  std::vector<std::pair<IValue, IValue>> state;  // by global index, kept on `to`
  std::vector<std::vector<std::pair<IValue, IValue>>> per_param(params_.size());
  for (int r = 0; r < world; ++r) {
    // rank r sends each (parameter, key, value) of its state, then a header with parameter -1
    std::vector<std::pair<size_t, std::pair<std::string, IValue>>> entries;
    if (r == me)
      for (const auto& [k, v] : mine.find("state")->items()) {
        size_t global = owned_.at(size_t(k.to_int()));
        for (const auto& [key, value] : v.items()) entries.push_back({global, {key.to_string(), value}});
      }
    for (size_t e = 0;; ++e) {
      std::vector<int64_t> head(kHeader, 0);
      head[0] = -1;
      if (r == me && e < entries.size()) {
        const auto& [global, kv] = entries[e];
        const IValue& v = kv.second;
        head[0] = int64_t(global);
        head[1] = int64_t(kv.first.size());
        head[2] = int64_t(v.is_tensor() ? Kind::Tensor : v.is_double() ? Kind::Double : Kind::Int);
        if (v.is_tensor()) {
          const Tensor& t = v.to_tensor();
          if (t.dim() > kMaxDims) fail("{}.consolidate_state_dict: a state tensor of rank {} (at most {})", kWho, t.dim(), kMaxDims);
          head[3] = int64_t(t.dtype());
          head[4] = t.dim();
          for (int64_t d = 0; d < t.dim(); ++d) head[size_t(5 + d)] = t.size(d);
        }
      }
      Tensor h = broadcast_header(head, r);
      const int64_t* hp = h.data_ptr<int64_t>();
      if (hp[0] < 0) break;
      Tensor key = zeros({hp[1]}, DType::Int64);
      if (r == me)
        for (int64_t c = 0; c < hp[1]; ++c) key.data_ptr<int64_t>()[c] = (unsigned char)entries[e].second.first[size_t(c)];
      broadcast(key, r);
      std::string name;
      for (int64_t c = 0; c < hp[1]; ++c) name.push_back(char(key.data_ptr<int64_t>()[c]));
      IValue value;
      switch (Kind(hp[2])) {
        case Kind::Tensor: {
          Shape shape(hp + 5, hp + 5 + hp[4]);
          Tensor t = r == me ? entries[e].second.second.to_tensor().detach().cpu().contiguous().clone()
                             : empty(shape, DType(hp[3]));
          broadcast(t, r);
          value = IValue(t);
          break;
        }
        case Kind::Int:
        case Kind::Double: {
          Tensor t = zeros({1}, DType::Float64);
          if (r == me) t.data_ptr<double>()[0] = entries[e].second.second.to_double();
          broadcast(t, r);
          double x = t.data_ptr<double>()[0];
          value = Kind(hp[2]) == Kind::Int ? IValue(int64_t(x)) : IValue(x);
          break;
        }
      }
      if (me == to) per_param[size_t(hp[0])].push_back({IValue(name), value});
    }
  }
  consolidated_.reset();
  consolidated_to_ = to;
  if (me != to) return;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!per_param[i].empty()) state.push_back({IValue(int64_t(i)), IValue::dict(std::move(per_param[i]))});
  // Each group's hyperparameters are the local optimizer's (the same kind and options everywhere), with
  // every rank's parameters numbered as one optimizer numbers them.
  std::vector<IValue> groups;
  const auto& local_groups = mine.find("param_groups")->elements();
  for (size_t k = 0; k < groups_.size(); ++k) {
    std::vector<std::pair<IValue, IValue>> items;
    for (const auto& [key, v] : local_groups[k].items()) {
      if (key.to_string() == "params") {
        std::vector<IValue> idx;
        for (size_t i = groups_[k].begin; i < groups_[k].end; ++i) idx.emplace_back(int64_t(i));
        items.push_back({key, IValue::list(std::move(idx))});
      } else {
        items.push_back({key, v});
      }
    }
    groups.push_back(IValue::dict(std::move(items)));
  }
  consolidated_ = IValue::dict({{"state", IValue::dict(std::move(state))}, {"param_groups", IValue::list(std::move(groups))}});
}

IValue ZeroRedundancyOptimizer::state_dict() const {
  if (!consolidated_) {
    if (consolidated_to_ >= 0 && consolidated_to_ != get_rank())
      fail("{}.state_dict: the state was consolidated to rank {}, this is rank {}", kWho, consolidated_to_, get_rank());
    fail("{}.state_dict: call consolidate_state_dict(to) on every rank first, then state_dict() on rank to "
         "(the state is sharded, and a step since the last consolidation changed it)", kWho);
  }
  return *consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const IValue& state) {
  // The whole optimizer's state: the groups' lr and weight_decay here, each rank's part to its optimizer
  std::vector<std::pair<IValue, IValue>> mine;
  load_groups(state, kWho, [&](size_t i, const IValue& entry) {
    if (owner_[i] == get_rank()) mine.push_back({IValue(int64_t(local_index_[i])), entry});
  });
  int me = get_rank();
  std::vector<IValue> groups;
  const auto& saved = state.find("param_groups")->elements();
  for (size_t k = 0; k < groups_.size(); ++k) {
    std::vector<std::pair<IValue, IValue>> items;
    for (const auto& [key, v] : saved[k].items()) {
      if (key.is_string() && key.to_string() == "params") {
        std::vector<IValue> idx;
        for (size_t i = groups_[k].begin; i < groups_[k].end; ++i)
          if (owner_[i] == me) idx.emplace_back(int64_t(local_index_[i]));
        items.push_back({key, IValue::list(std::move(idx))});
      } else {
        items.push_back({key, v});
      }
    }
    groups.push_back(IValue::dict(std::move(items)));
  }
  local_->load_state_dict(IValue::dict({{"state", IValue::dict(std::move(mine))}, {"param_groups", IValue::list(std::move(groups))}}));
  consolidated_.reset();
}

}  // namespace kiln::dist
