#include "jit/compiled_graph.h"

#include "core/log.h"

#include <chrono>

#include "eager/autograd/graph.h"
#include "eager/dispatch.h"
#include "eager/profiler/profile_hooks.h"
#include "jit/group_kinds.h"
#include "jit/ir_utils.h"

namespace kiln::jit {

namespace {

// The graph input v is, through views (a Linear's permuted weight); null when it is computed.
const ir::Value* viewed_input(const ir::Graph& g, const ir::Value* v) {
  while (v->node() != g.block()->param_node()) {
    const ir::Node* n = v->node();
    if (!n->is_op() || op_info(n->op()).kind != OpKind::View || n->inputs().empty()) return nullptr;
    v = n->input(0);
  }
  return v;
}

// Runs fusion groups with their compiled kernels and parameters' casts from the cache; the interpreter does
// the rest (conv2d nodes included: eager's kernel takes oneDNN's convolution where it applies).
class GroupRunner final : public interp::NodeRunner {
 public:
  // params empty: no cast is taken from the cache this run
  GroupRunner(const CompiledGraph& c, std::vector<char> params)
      : kernels_(c.kernels), casts_(params.empty() ? nullptr : c.param_casts.get()), params_(std::move(params)) {}
  bool run(const ir::Node& n, const std::vector<IValue>& in, std::vector<IValue>& out) override {
    if (casts_ && n.is_op(OpId::Cast) && cached(n)) {
      out.emplace_back(casts_->cast(n, in.at(0).to_tensor()));
      return true;
    }
    if (n.prim() != ir::Prim::FusionGroup) return false;
    auto it = kernels_.find(&n);
    if (it == kernels_.end()) return false;
    Tensors ts;
    ts.reserve(in.size());
    for (const IValue& v : in) ts.push_back(v.to_tensor());
    for (Tensor& t : it->second->run(ts)) out.emplace_back(std::move(t));
    return true;
  }

 private:
  bool cached(const ir::Node& n) const {
    auto it = casts_->casts().find(&n);
    return it != casts_->casts().end() && params_.at(it->second);
  }

  const std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>>& kernels_;
  ParamCastCache* casts_;
  std::vector<char> params_;  // per graph input: a parameter (a leaf tensor requiring grad)
};

}  // namespace

ParamCastCache::ParamCastCache(const ir::Graph& g) {
  std::unordered_map<const ir::Value*, size_t> index;
  for (size_t i = 0; i < g.inputs().size(); ++i) index[g.inputs()[i]] = i;
  for (const ir::Node* n : g.block()->nodes()) {
    if (!n->is_op(OpId::Cast) || n->inputs().size() != 1 || n->outputs().size() != 1) continue;
    const ir::Value* src = viewed_input(g, n->input(0));
    if (!src) continue;
    // The kept result is handed to every reader: only to ops and kernels, which do not write their inputs,
    // never returned to the caller, who might
    bool shared_safely = true;
    for (const ir::Use& u : n->output()->uses())
      shared_safely &= (u.user->is_op() || u.user->prim() == ir::Prim::FusionGroup) && u.user->owning_block() == g.block();
    if (shared_safely) casts_[n] = index.at(src);
  }
}

Tensor ParamCastCache::cast(const ir::Node& n, const Tensor& x) {
  const DType dt = n.attrs().dtype("dtype");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kept_.find(&n);
  if (it != kept_.end()) {
    const Entry& e = it->second;
    if (e.source.storage() == x.storage() && e.source.storage_offset() == x.storage_offset() &&
        e.source.sizes() == x.sizes() && e.source.strides() == x.strides() && e.source.dtype() == x.dtype() &&
        e.version == x.version() && e.cast.dtype() == dt)
      return e.cast;
  }
  Tensor c = dispatch1(OpId::Cast, {x}, n.attrs());
  kept_[&n] = {x, c, x.version()};
  return c;
}

size_t ParamCastCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_.size();
}

namespace {

// Per graph input: whether it is a parameter, whose casts the cache may keep. Empty, allocating nothing, for a
// graph without parameter casts (every call of a float32 graph) and with grad mode on: a kept cast would carry
// one call's autograd node into the next.
std::vector<char> parameters(const CompiledGraph& c, const std::vector<IValue>& inputs) {
  if (!c.param_casts || c.param_casts->casts().empty() || GradMode::enabled()) return {};
  std::vector<char> p(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_tensor()) {
      const Tensor& t = inputs[i].to_tensor();
      p[i] = t.defined() && t.requires_grad() && t.is_leaf();
    }
  return p;
}

}  // namespace

std::unique_ptr<ir::Graph> group_graph(const ir::Node& group) {
  auto g = std::make_unique<ir::Graph>();
  const ir::Block& body = *group.blocks().at(0);
  std::unordered_map<const ir::Value*, ir::Value*> env;
  for (ir::Value* a : body.inputs()) env[a] = g->add_input(a->type(), a->name());
  g->block()->clone_from(body, env);
  for (ir::Value* r : body.outputs()) g->register_output(env.at(r));
  return g;
}

std::vector<IValue> CompiledGraph::run(const std::vector<IValue>& inputs) const {
  ProfileScope scope(name);
  GroupRunner runner(*this, parameters(*this, inputs));
  return interp::run(*plan, inputs, &runner, caller_results);
}

std::vector<IValue> CompiledGraph::run(std::vector<IValue>&& inputs) const {
  ProfileScope scope(name);
  GroupRunner runner(*this, parameters(*this, inputs));
  return interp::run(*plan, std::move(inputs), &runner, caller_results);
}

std::shared_ptr<CompiledGraph> compile_graph(std::shared_ptr<ir::Graph> g, const std::string& name,
                                             const PipelineOptions& pipeline, Device::Type device,
                                             const GroupCompiler& backend, GroupCompileStats& stats) {
  auto c = std::make_shared<CompiledGraph>();
  c->name = name;
  c->graph = std::move(g);
  run_pipeline(*c->graph, pipeline);
  for_each_node(*c->graph->block(), [&](ir::Node* n) {
    if (n->prim() != ir::Prim::FusionGroup) return;
    const GroupKind* kind = find_group_kind(*n);  // on a device without kernels for it: interpreted, saying so
    if (!kind && !backend) return;
    auto t0 = std::chrono::steady_clock::now();
    std::string why;
    std::string kname = fmt::format("{}_{}", name, n->attrs().s("name"));
    std::shared_ptr<GroupKernel> k =
        kind ? backends::compile_kind(device, kind->name, *group_graph(*n), kname, backend, &why)
             : backend(*group_graph(*n), kname, &why);
    if (!k) {
      ++stats.interpreted_groups;
      kiln::logger().debug("{}: fusion group {} runs on the interpreter: {}", name, kname, why);
      return;
    }
    stats.kernel_compile_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    ++(kind && kind->gemm ? stats.gemm_kernels : stats.kernels);
    c->kernels[n] = std::move(k);
  });
  c->plan = std::make_unique<interp::Plan>(*c->graph, /*free_dead_values=*/true);
  c->param_casts = std::make_unique<ParamCastCache>(*c->graph);
  return c;
}

}  // namespace kiln::jit
