#include "eager/dist/fsdp.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/allocator.h"
#include "core/memory_category.h"
#include "core/storage.h"
#include "eager/autograd/engine.h"
#include "eager/autograd/graph.h"
#include "eager/on_demand.h"
#include "eager/ops.h"

namespace kiln::dist {

namespace {

constexpr const char* kWho = "FullyShardedDataParallel";

}  // namespace

// A unit's memory is filled on demand (eager/on_demand.h): graph executors acquire it before the first
// step reading it and release it after the last, as the hooks below do around a submodule's forward.
struct FullyShardedDataParallel::State : OnDemandOwner {
  struct Group {
    std::vector<Tensor> params;   // the unit's, in order; offsets[i] into the flat buffer
    std::vector<int64_t> offsets;
    int64_t numel = 0, shard = 0;  // the group's elements; per rank, padded so world shards cover them
    DType dtype = DType::Float32;
    Tensor local;                  // this rank's shard: what the optimizer steps
    Tensor full;                   // world shards; the params are views of it; no memory while released
    uint64_t gathered_from = ~uint64_t(0);  // the shard's version when last gathered
  };
  struct Unit {
    std::string name;     // "" for the root
    std::vector<Group> groups;  // one per optimizer group
    bool gathered = false;
    size_t params = 0, ready = 0;  // its parameters; those whose gradient came in this backward
  };
  std::vector<Unit> units;  // the root first
  std::vector<std::optional<double>> lr, weight_decay;  // per optimizer group
  int world = 1, me = 0;
  bool in_backward = false;
  int64_t reductions = 0;
  std::weak_ptr<State> self;

  static void free_memory(const Tensor& t) {
    Storage& s = *t.storage();
    if (!s.data) return;
    cpu_allocator::release(s.data, s.nbytes, s.charged);
    s.data = nullptr;
  }

  void gather(Unit& u) {
    if (u.gathered) return;
    NoGradGuard no_grad;
    for (Group& g : u.groups) {
      if (g.params.empty()) continue;
      Storage& s = *g.full.storage();
      s.data = cpu_allocator::allocate(s.nbytes, s.charged);
      // Refilling with the values forward saved views of (the shard unchanged since the last gather, as
      // in backward) is not a write autograd must catch, so the version counter is kept, as torch's FSDP
      // keeps it; after the optimizer changed the shard it moves, so caches keyed on it (oneDNN's blocked
      // conv weights) see new values.
      uint64_t version = s.version.load(), shard_version = g.local.storage()->version.load();
      all_gather_into_tensor(g.full, g.local.detach());
      if (shard_version == g.gathered_from) s.version.store(version);
      g.gathered_from = shard_version;
    }
    u.gathered = true;
  }

  // The unit's full parameters alone: a graph's last read of them may come in the middle of a backward that
  // is still bringing their gradients.
  void free_parameters(Unit& u) {
    for (Group& g : u.groups)
      if (g.full.defined()) free_memory(g.full);
    u.gathered = false;
  }

  void release(Unit& u) {
    for (Group& g : u.groups)
      for (const Tensor& p : g.params) p.set_grad(Tensor());
    free_parameters(u);
    u.ready = 0;
  }

  void gather_all() {
    in_backward = false;  // a backward that raised never reached its end
    for (Unit& u : units) gather(u);
  }

  void release_all() {
    for (Unit& u : units) release(u);
  }

  // Backward reaches unit u through y: gather the unit again before y's gradient goes on.
  void gather_on_backward(size_t u, const Tensor& y) {
    if (!y.defined() || !y.requires_grad() || !GradMode::enabled()) return;
    y.register_hook([weak = self, u](const Tensor&) {
      if (auto s = weak.lock()) s->gather(s->units[u]);
      return Tensor();
    });
  }

  // The root is gathered for the whole step (as forward() gathers it): a graph frees only the units.
  void acquire(size_t u) override { gather(units[u]); }
  void used(size_t u, const std::vector<Tensor>& outputs, bool last) override {
    if (u == 0) return;
    for (const Tensor& y : outputs)
      if (!y.is_leaf()) gather_on_backward(u, y);
    if (last) free_parameters(units[u]);
  }

  // Registers (or, with a null owner, forgets) the units' buffers as filled on demand.
  void set_units_on_demand(const std::weak_ptr<OnDemandOwner>& owner) {
    for (size_t u = 0; u < units.size(); ++u)
      for (const Group& g : units[u].groups)
        if (g.full.defined()) set_on_demand(g.full.storage().get(), owner, u);
  }

  // Each rank keeps the mean over the ranks of its shard of the unit's gradients (added to what the shard
  // holds, as .grad accumulates); then the unit's full parameters and gradients go.
  void reduce(Unit& u) {
    NoGradGuard no_grad;
    for (Group& g : u.groups) {
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
    release(u);
  }

  static bool has_gradients(const Unit& u) {
    for (const Group& g : u.groups)
      for (const Tensor& p : g.params)
        if (p.grad().defined()) return true;
    return false;
  }

  // The end of a backward: every unit still holding gradients (the root; a unit some of whose parameters
  // had none; one whose parameter took a gradient again after it was reduced) is reduced, in the units'
  // order so the ranks' collectives match, and everything is freed.
  void finish_backward() {
    in_backward = false;
    for (Unit& u : units)
      if (has_gradients(u)) reduce(u);
    ++reductions;
    release_all();
  }
};

namespace {

// Every submodule under its qualified name ("layers.0.fc1").
void submodules(nn::Module& m, const std::string& prefix, std::map<std::string, nn::Module*>& out) {
  for (auto& [n, c] : m.named_children()) {
    std::string q = prefix.empty() ? n : prefix + "." + n;
    out.emplace(q, c.get());
    submodules(*c, q, out);
  }
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<nn::Module> module,
                                                   std::vector<optim::ParamGroup> groups, FsdpOptions options)
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

  // Each parameter's unit: the innermost named submodule holding it, else the root (0).
  std::map<std::string, nn::Module*> subs;
  submodules(*module_, "", subs);
  std::vector<std::pair<std::string, nn::Module*>> unit_modules;
  for (const std::string& u : options.units) {
    auto it = subs.find(u);
    if (it == subs.end()) {
      std::string known;
      for (auto& [n, m] : subs) known += (known.empty() ? "" : ", ") + n;
      fail("{}: unit '{}' is not a submodule of the module (its submodules: {})", kWho, u, known);
    }
    for (auto& [n, m] : unit_modules)
      if (n == u) fail("{}: unit '{}' is named twice", kWho, u);
    unit_modules.emplace_back(u, it->second);
  }
  std::unordered_map<const TensorImpl*, size_t> unit_of;
  std::vector<size_t> by_depth(unit_modules.size());
  for (size_t i = 0; i < by_depth.size(); ++i) by_depth[i] = i;
  auto depth = [&](size_t i) { return std::count(unit_modules[i].first.begin(), unit_modules[i].first.end(), '.'); };
  std::stable_sort(by_depth.begin(), by_depth.end(), [&](size_t a, size_t b) { return depth(a) < depth(b); });
  for (size_t i : by_depth)
    for (const Tensor& p : unit_modules[i].second->parameters()) unit_of[p.impl()] = i + 1;

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

  st.units.resize(unit_modules.size() + 1);
  for (size_t i = 0; i < unit_modules.size(); ++i) st.units[i + 1].name = unit_modules[i].first;
  for (const optim::ParamGroup& pg : groups) {
    st.lr.push_back(pg.lr);
    st.weight_decay.push_back(pg.weight_decay);
  }
  for (size_t u = 0; u < st.units.size(); ++u) {
    State::Unit& unit = st.units[u];
    for (size_t k = 0; k < groups.size(); ++k) {
      State::Group g;
      for (const Tensor& p : groups[k].params) {
        auto it = unit_of.find(p.impl());
        if ((it == unit_of.end() ? 0 : it->second) == u) g.params.push_back(p);
      }
      unit.params += g.params.size();
      if (!g.params.empty()) g.dtype = g.params.front().dtype();
      for (const Tensor& p : g.params) {
        g.offsets.push_back(g.numel);
        g.numel += p.numel();
      }
      g.shard = (g.numel + st.world - 1) / st.world;
      {
        MemoryCategoryScope category(MemoryCategory::Parameter);
        g.local = zeros({g.shard}, g.dtype);
        if (!g.params.empty()) g.full = empty({int64_t(st.world) * g.shard}, g.dtype);
      }
      int64_t begin = int64_t(st.me) * g.shard;
      for (size_t i = 0; i < g.params.size(); ++i) {
        const Tensor& p = g.params[i];
        int64_t lo_i = std::max(begin, g.offsets[i]), hi_i = std::min(begin + g.shard, g.offsets[i] + p.numel());
        if (lo_i < hi_i)
          g.local.slice(0, lo_i - begin, hi_i - begin).copy_(p.reshape({-1}).slice(0, lo_i - g.offsets[i], hi_i - g.offsets[i]));
        // the parameter becomes a view of the flat buffer, for good: gathering and freeing fill and empty
        // the buffer's memory, which every view (those saved for backward too) shares
        p.impl()->storage = g.full.storage();
        p.impl()->offset = g.offsets[i];
      }
      g.local.requires_grad_(true);
      set_memory_category(g.local, MemoryCategory::Parameter);
      if (u == 0) register_parameter(fmt::format("_flat_param_{}", k), g.local);
      else if (!g.params.empty()) register_parameter(fmt::format("_flat_param_{}_unit{}", k, u), g.local);
      unit.groups.push_back(std::move(g));
    }
  }
  std::weak_ptr<State> weak = state_;
  for (size_t u = 0; u < st.units.size(); ++u) {
    // A gradient queues the reduction of everything left for the end of the backward; a unit's last
    // parameter gradient reduces that unit at once (not the root's: its parameters may still be read).
    for (State::Group& g : st.units[u].groups)
      for (const Tensor& p : g.params)
        p.register_post_accumulate_grad_hook([weak, u](const Tensor&) {
          auto s = weak.lock();
          if (!s) return;
          if (!s->in_backward) {
            s->in_backward = true;
            queue_callback([weak] {
              if (auto s2 = weak.lock()) s2->finish_backward();
            });
          }
          State::Unit& unit = s->units[u];
          if (u != 0 && ++unit.ready == unit.params) s->reduce(unit);
        });
    if (u == 0) continue;
    nn::Module* m = unit_modules[u - 1].second;
    m->register_forward_pre_hook([weak, u](nn::Module&, const Tensor&) {
      if (auto s = weak.lock()) s->gather(s->units[u]);
    });
    m->register_forward_hook([weak, u](nn::Module&, const Tensor&, const Tensor& y) {
      auto s = weak.lock();
      if (!s) return Tensor();
      s->release(s->units[u]);
      s->gather_on_backward(u, y);
      return Tensor();
    });
  }
  st.self = state_;
  st.set_units_on_demand(std::weak_ptr<OnDemandOwner>(std::static_pointer_cast<OnDemandOwner>(state_)));
  st.release_all();
}

FullyShardedDataParallel::~FullyShardedDataParallel() { state_->set_units_on_demand({}); }

Tensor FullyShardedDataParallel::forward(const Tensor& x) {
  state_->in_backward = false;
  state_->gather(state_->units[0]);
  return module_->forward(x);
}

std::vector<optim::ParamGroup> FullyShardedDataParallel::shard_groups() const {
  std::vector<optim::ParamGroup> out;
  for (size_t k = 0; k < state_->lr.size(); ++k) {
    optim::ParamGroup pg{{}, state_->lr[k], state_->weight_decay[k]};
    for (const State::Unit& u : state_->units)
      if (!u.groups[k].params.empty() || &u == &state_->units[0]) pg.params.push_back(u.groups[k].local);
    out.push_back(std::move(pg));
  }
  return out;
}

void FullyShardedDataParallel::gather() { state_->gather_all(); }
void FullyShardedDataParallel::release() { state_->release_all(); }
bool FullyShardedDataParallel::gathered() const { return state_->units[0].gathered; }
int64_t FullyShardedDataParallel::reductions() const { return state_->reductions; }

int64_t FullyShardedDataParallel::gathered_bytes() const {
  int64_t n = 0;
  for (const State::Unit& u : state_->units)
    for (const State::Group& g : u.groups)
      if (g.full.defined() && g.full.storage()->data) n += int64_t(g.full.storage()->nbytes);
  return n;
}

std::map<std::string, Tensor> FullyShardedDataParallel::full_state_dict() {
  std::vector<bool> was;
  for (const State::Unit& u : state_->units) was.push_back(u.gathered);
  gather();
  std::map<std::string, Tensor> out;
  {
    NoGradGuard no_grad;
    for (auto& [n, t] : module_->state_dict()) out[n] = t.detach().clone();
  }
  for (size_t u = 0; u < was.size(); ++u)
    if (!was[u]) state_->release(state_->units[u]);
  return out;
}

}  // namespace kiln::dist
