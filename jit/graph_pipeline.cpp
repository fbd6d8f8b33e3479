#include "jit/graph_pipeline.h"

#include <algorithm>
#include <unordered_map>

#include "eager/autograd/graph.h"
#include "eager/dist/dist.h"
#include "eager/ops.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

// The traced forward without the nodes nothing reads (a loss the trace computed beside the logits), so
// they cost no stage anything.
Function pruned(const Function& f) {
  const Function::Binding& b = f.binding();
  if (!b.guards.empty()) fail("pipeline: the traced forward has value guards; trace it without guard_value_reads");
  auto g = std::make_shared<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> env;
  for (const ir::Value* v : f.graph().inputs()) env[v] = g->add_input(v->type(), v->name());
  g->block()->clone_from(*f.graph().block(), env);
  for (const ir::Value* v : f.graph().outputs()) g->register_output(env.at(v));
  eliminate_dead_code(*g);
  return Function(g, f.name(), b);
}

Shape shape_of(const ir::Value* v, size_t stage, const char* what) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dtype || !t.has_static_shape())
    fail("pipeline: stage {} {} %{} of type {}; only tensors of known shape cross stages", stage, what, v->name(), t.str());
  return t.static_shape();
}

// One stage of the graph as the module a PipelineStage runs: the received activation (several values
// travel flattened into one tensor) and the stage's parameters in, the values for the next stage out.
class GraphStageModule : public nn::Module {
 public:
  GraphStageModule(const StageGraph& sg, const std::vector<Tensor>& bound, size_t stage, bool last)
      : fn_(sg.graph, "pipeline_stage_" + std::to_string(stage)), stage_(stage) {
    const ir::Graph& g = *sg.graph;
    if (stage == 0 && sg.num_received != 1)
      fail("pipeline: the traced forward takes {} inputs; a pipeline's first stage reads one (the batch)", sg.num_received);
    for (size_t i = 0; i < sg.num_received; ++i) received_.push_back(shape_of(g.inputs()[i], stage, "receives"));
    // the trailing outputs are new values of bound tensors (running statistics), written back after each forward
    for (size_t k : sg.writebacks) written_.push_back(bound[k]);
    const size_t sent = g.outputs().size() - written_.size();
    for (size_t i = 0; i < sent; ++i) {
      Shape s = shape_of(g.outputs()[i], stage, last ? "returns" : "sends");
      DType t = *g.outputs()[i]->type().dtype;
      if (!last && sent > 1 && (!is_floating(t) || t != *g.outputs()[0]->type().dtype))
        fail("pipeline: stage {} sends {} values of dtypes {} and {}; several values cross a cut in one tensor, so "
             "they must share a floating dtype", stage, sent, dtype_name(*g.outputs()[0]->type().dtype),
             dtype_name(t));
      (void)s;
    }
    for (size_t k : sg.params) {
      std::string name = g.inputs()[sg.num_received + params_.size()]->name();
      std::replace(name.begin(), name.end(), '.', '_');
      if (name.empty()) name = "p" + std::to_string(k);
      params_.push_back(bound[k].requires_grad() ? register_parameter(name, bound[k]) : register_buffer(name, bound[k]));
    }
    last_ = last;
  }

  Tensor forward(const Tensor& x) override {
    std::vector<Tensor> in;
    if (received_.size() == 1) {
      in.push_back(x);
    } else {
      int64_t at = 0;
      for (const Shape& s : received_) {
        int64_t n = numel_of(s);
        in.push_back(x.slice(0, at, at + n).reshape(s));
        at += n;
      }
      if (at != x.numel())
        fail("pipeline: stage {} received {} elements, its {} values hold {}", stage_, x.numel(), received_.size(), at);
    }
    in.insert(in.end(), params_.begin(), params_.end());
    std::vector<Tensor> out = fn_(in);
    if (!written_.empty()) {
      NoGradGuard no_grad;
      const size_t sent = out.size() - written_.size();
      for (size_t i = 0; i < written_.size(); ++i) written_[i].copy_(out[sent + i]);
      out.resize(sent);
    }
    if (last_) {
      if (out.size() != 1) fail("pipeline: the traced forward returns {} tensors; the loss function takes one", out.size());
      return out[0];
    }
    if (out.size() == 1) return out[0];
    std::vector<Tensor> flat;
    for (const Tensor& t : out) flat.push_back(t.reshape({-1}));
    return cat(flat, 0);
  }
  std::string name() const override { return "GraphStage"; }

 private:
  Function fn_;
  size_t stage_;
  bool last_ = false;
  std::vector<Shape> received_;
  std::vector<Tensor> params_;
  std::vector<Tensor> written_;  // bound tensors the forward writes in place, in the graph's trailing outputs
};

}  // namespace

GraphPipeline::GraphPipeline(const Function& forward, PipelinePartitionOptions options) {
  Function f = pruned(forward);
  plan_ = partition_for_pipeline(f, dist::get_world_size(), options);
  build(f);
}

GraphPipeline::GraphPipeline(const Function& forward, std::vector<size_t> starts) {
  if (int(starts.size()) != dist::get_world_size())
    fail("pipeline: a plan of {} stages for {} ranks; one stage per rank", starts.size(), dist::get_world_size());
  Function f = pruned(forward);
  plan_ = evaluate_pipeline_plan(f, std::move(starts));
  build(f);
}

void GraphPipeline::build(const Function& forward) {
  std::vector<StageGraph> stages = split_for_pipeline(forward, plan_);
  const std::vector<Tensor>& bound = forward.binding().bound;
  std::vector<int> readers(bound.size(), 0);
  for (const StageGraph& sg : stages)
    for (size_t k : sg.params) ++readers[k];
  int rank = dist::get_rank();
  std::vector<bool> mine(bound.size(), false);
  for (size_t k : stages[size_t(rank)].params) mine[k] = true;
  for (size_t k = 0; k < bound.size(); ++k)
    if (readers[k] > 1 && bound[k].requires_grad())
      shared_.push_back({mine[k] ? bound[k] : Tensor(), bound[k].sizes(), bound[k].dtype()});
  auto module = std::make_shared<GraphStageModule>(stages[size_t(rank)], bound, size_t(rank), size_t(rank) + 1 == stages.size());
  stage_ = std::make_unique<dist::PipelineStage>(module, rank, int(stages.size()));
}

std::vector<Tensor> GraphPipeline::parameters() const { return stage_->parameters(); }

void GraphPipeline::sync_shared_gradients() {
  NoGradGuard no_grad;
  for (const Shared& s : shared_) {
    Tensor p = s.mine;
    Tensor g = p.defined() && p.grad().defined() ? p.grad().contiguous().clone() : zeros(s.shape, s.dtype);
    dist::all_reduce(g, dist::ReduceOp::Sum);
    if (p.defined()) p.set_grad(g);
  }
}

}  // namespace kiln::jit
