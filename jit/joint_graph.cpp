// The joint graph is recorded, not derived by a second set of rules: the forward graph runs on the
// interpreter with autograd on, then the engine's grad() runs every OpNode's formula; the recorder
// sees both as dispatched ops. Shapes are those of the sample, so an entry is specialised to them.
#include "jit/joint_graph.h"

#include "backends/interp/interpreter.h"
#include "eager/autograd/engine.h"
#include "eager/ops.h"
#include "jit/passes/passes.h"
#include "tracer/recorder.h"

namespace kiln::jit {

bool can_differentiate(const ir::Graph& g, std::string* why_not) {
  auto no = [&](std::string why) {
    if (why_not) *why_not = std::move(why);
    return false;
  };
  for (const ir::Value* v : g.inputs())
    if (!v->type().is_tensor()) return no(fmt::format("input {} is a {}, not a tensor", v->name(), v->type().str()));
  for (const ir::Value* v : g.outputs())
    if (!v->type().is_tensor()) return no(fmt::format("an output is a {}, not a tensor", v->type().str()));
  for (const ir::Node* n : g.block()->nodes()) {
    switch (n->prim()) {
      case ir::Prim::If:
      case ir::Prim::Loop:
        return no(fmt::format("line {}: {} (a recorded backward would bake in the path one sample took)", n->line,
                              n->kind_name()));
      case ir::Prim::ToBool:
      case ir::Prim::ToInt:
      case ir::Prim::ToFloat:
        return no(fmt::format("line {}: {} reads a tensor's value", n->line, n->kind_name()));
      case ir::Prim::Print:
        return no(fmt::format("line {}: {} prints at each call", n->line, n->kind_name()));
      // prim::detach records as the value it detaches, and autograd leaves the path out of the recorded
      // backward as it does in eager (softmax's max): nothing is lost.
      default:
        break;
    }
  }
  return true;
}

JointGraph build_joint_graph(const ir::Graph& g, const std::vector<IValue>& sample,
                             const std::vector<bool>& requires_grad, const std::vector<bool>& hidden_outputs) {
  tracing::Recorder rec("joint", /*silent=*/true);
  rec.set_keep_detach(false);  // the recorded backward already leaves detached paths out
  JointGraph j;
  j.num_primals = sample.size();
  std::vector<IValue> ins;
  Tensors wrt;
  std::vector<size_t> wrt_index;
  for (size_t i = 0; i < sample.size(); ++i) {
    Tensor t = sample[i].to_tensor().detach();  // a fresh leaf: the caller's tensor keeps its autograd state
    if (requires_grad[i]) {
      t.requires_grad_(true);
      wrt.push_back(t);
      wrt_index.push_back(i);
    }
    rec.add_input(t, g.inputs()[i]->name());
    ins.emplace_back(t);
  }
  std::vector<IValue> outs;
  {
    // The graph's rand_like nodes draw here too; compiling leaves the caller's random stream as it was.
    RestoreRngState rng;
    tracing::TraceScope scope(rec);
    EnableGradGuard grad_on;
    outs = interp::run(g, ins);
  }
  Tensors diff, tangents;
  for (size_t k = 0; k < outs.size(); ++k) {
    const Tensor& t = outs[k].to_tensor();
    if ((k < hidden_outputs.size() && hidden_outputs[k]) || !is_floating(t.dtype()) || !t.requires_grad()) continue;
    diff.push_back(t);
    tangents.push_back(ones_like(t));
    rec.add_input(tangents.back(), fmt::format("grad_{}", k));
    j.tangent_of.push_back(k);
  }
  Tensors grads;
  if (!diff.empty()) {
    tracing::TraceScope scope(rec);
    grads = kiln::grad(diff, wrt, tangents, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
  }
  ir::Graph& jg = *rec.graph();
  for (const IValue& o : outs) jg.register_output(rec.value_of(o.to_tensor()));
  j.num_forward_outputs = outs.size();
  for (size_t k = 0; k < grads.size(); ++k) {
    if (!grads[k].defined()) continue;  // unused: the input's .grad stays undefined, as in eager
    jg.register_output(rec.value_of(grads[k]));
    j.grad_of.push_back(wrt_index[k]);
  }
  finish_joint_graph(jg);
  j.graph = rec.graph();
  return j;
}

void finish_joint_graph(ir::Graph& jg) {
  // A recording that kept prim::detach (a trace's) has its gradients already, recorded as eager ran
  // them: the detach is the value it detaches, as in build_joint_graph's own recording.
  std::vector<ir::Node*> detaches;
  for (ir::Node* n : jg.block()->nodes())
    if (n->prim() == ir::Prim::Detach) detaches.push_back(n);
  for (ir::Node* n : detaches) {
    n->output()->replace_all_uses_with(n->input(0));
    n->destroy();
  }
  // Formulas recompute forward values (tanh in tanh's, amax in log_softmax's); merging them with the
  // forward's own nodes lets the partition see one value.
  eliminate_common_subexpressions(jg);
  eliminate_dead_code(jg);
  ir::verify(jg);
}

}  // namespace kiln::jit
