#include "jit/compiled_graph.h"

#include "core/log.h"

#include <chrono>

#include "eager/profiler/profile_hooks.h"
#include "jit/group_kinds.h"
#include "jit/ir_utils.h"

namespace kiln::jit {

namespace {

// Runs fusion groups with their compiled kernels; the interpreter does the rest (conv2d nodes included:
// eager's kernel takes oneDNN's convolution where it applies, eager/cpu/conv_onednn.h).
class GroupRunner final : public interp::NodeRunner {
 public:
  explicit GroupRunner(const std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>>& k) : kernels_(k) {}
  bool run(const ir::Node& n, const std::vector<IValue>& in, std::vector<IValue>& out) override {
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
  const std::unordered_map<const ir::Node*, std::shared_ptr<GroupKernel>>& kernels_;
};

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
  GroupRunner runner(kernels);
  return interp::run(*plan, inputs, &runner);
}

std::vector<IValue> CompiledGraph::run(std::vector<IValue>&& inputs) const {
  ProfileScope scope(name);
  GroupRunner runner(kernels);
  return interp::run(*plan, std::move(inputs), &runner);
}

std::shared_ptr<CompiledGraph> compile_graph(std::shared_ptr<ir::Graph> g, const std::string& name,
                                             const PipelineOptions& pipeline, const GroupCompiler& backend,
                                             GroupCompileStats& stats) {
  auto c = std::make_shared<CompiledGraph>();
  c->name = name;
  c->graph = std::move(g);
  run_pipeline(*c->graph, pipeline);
  for_each_node(*c->graph->block(), [&](ir::Node* n) {
    if (n->prim() != ir::Prim::FusionGroup) return;
    const GroupKind* kind = find_group_kind(*n);
    if (!kind && !backend) return;
    auto t0 = std::chrono::steady_clock::now();
    std::string why;
    std::string kname = fmt::format("{}_{}", name, n->attrs().s("name"));
    std::shared_ptr<GroupKernel> k =
        kind ? kind->compile(*group_graph(*n), kname, backend, &why) : backend(*group_graph(*n), kname, &why);
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
  return c;
}

}  // namespace kiln::jit
