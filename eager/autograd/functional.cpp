#include "eager/autograd/functional.h"

#include "eager/autocast/autocast.h"
#include "eager/autograd/engine.h"
#include "eager/autograd/nodes.h"
#include "eager/ops.h"

namespace kiln {

std::pair<Tensors, Tensors> jvp(const TensorsFn& fn, const Tensors& primals, const Tensors& tangents) {
  if (primals.size() != tangents.size())
    fail("jvp: got {} primals but {} tangents", primals.size(), tangents.size());
  EnableGradGuard eg;
  Tensors xs;
  for (size_t i = 0; i < primals.size(); ++i) {
    if (primals[i].sizes() != tangents[i].sizes())
      fail("jvp: tangent {} has shape {} but its primal has shape {}", i, shape_str(tangents[i].sizes()),
           shape_str(primals[i].sizes()));
    if (!is_floating(primals[i].dtype())) fail("jvp: primal {} must be floating point, got {}", i, dtype_name(primals[i].dtype()));
    xs.push_back(primals[i].detach().requires_grad_());
  }
  Tensors ys = fn(xs);
  // u ↦ vjp(u) = J^T u is linear in u, so d<vjp(u), t>/du = J t.
  Tensors us;
  for (const Tensor& y : ys) us.push_back(zeros_like(y).requires_grad_());
  Tensors vjps = grad(ys, xs, us, true, true, true);
  Tensor dot = zeros({}, ys.empty() ? DType::Float32 : ys[0].dtype());
  for (size_t i = 0; i < vjps.size(); ++i)
    if (vjps[i].defined()) dot = dot + sum(vjps[i] * tangents[i]);
  Tensors jv;
  if (dot.requires_grad()) {
    jv = grad({dot}, us, {}, false, false, true);
  } else {
    jv.resize(us.size());
  }
  Tensors outs;
  for (size_t i = 0; i < ys.size(); ++i) {
    outs.push_back(ys[i].detach());
    if (!jv[i].defined()) jv[i] = zeros_like(ys[i]);
  }
  return {outs, jv};
}

namespace {

struct CheckpointNode : Node {
  TensorsFn fn;
  std::vector<SavedTensor> inputs;
  std::vector<bool> input_requires_grad;
  int n_outputs = 0;
  bool released = false;
  bool autocast = false;  // the forward's autocast scope, which the recomputation must see again
  DType autocast_dtype = DType::BFloat16;
  std::string name() const override { return "CheckpointBackward"; }
  int num_outputs() const override { return n_outputs; }
  void release_saved() override {
    inputs.clear();
    released = true;
  }
  Tensors apply(const Tensors& grad_outputs) override {
    if (released) fail("CheckpointBackward: trying to backward through the graph a second time; use retain_graph=true");
    Tensors xs, want;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor x = inputs[i].unpack(name()).detach();
      if (input_requires_grad[i]) {
        x.requires_grad_();
        want.push_back(x);
      }
      xs.push_back(x);
    }
    // Recompute with grad on, then backpropagate through the recomputed segment: parameters used
    // inside accumulate into their .grad, and the detached inputs' .grad is what flows further.
    bool create = GradMode::enabled();
    Tensors ys;
    {
      EnableGradGuard eg;
      AutocastGuard ac(autocast_dtype, autocast);
      ys = fn(xs);
    }
    Tensors roots, seeds;
    for (size_t k = 0; k < ys.size() && k < grad_outputs.size(); ++k)
      if (grad_outputs[k].defined() && ys[k].requires_grad()) {
        roots.push_back(ys[k]);
        seeds.push_back(grad_outputs[k]);
      }
    if (!roots.empty()) kiln::backward(roots, seeds, false, create);
    Tensors out(inputs.size());
    size_t k = 0;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (input_requires_grad[i]) out[i] = want[k++].grad();
    return out;
  }
};

}  // namespace

Tensors checkpoint(const TensorsFn& fn, const Tensors& inputs) {
  bool any = false;
  for (const Tensor& x : inputs) any = any || x.requires_grad();
  if (!GradMode::enabled() || !any) return fn(inputs);
  Tensors ys;
  {
    NoGradGuard ng;
    ys = fn(inputs);
  }
  auto node = std::make_shared<CheckpointNode>();
  node->fn = fn;
  node->n_outputs = int(ys.size());
  node->autocast = autocast_enabled();
  node->autocast_dtype = autocast_dtype();
  for (const Tensor& x : inputs) {
    node->inputs.emplace_back(x, true);
    node->input_requires_grad.push_back(x.requires_grad());
    node->next.push_back(gradient_edge(x));
  }
  node->pre_hooks.resize(ys.size());
  node->outputs.resize(ys.size());
  for (size_t k = 0; k < ys.size(); ++k) {
    if (!is_floating(ys[k].dtype())) continue;
    AutogradMeta& m = ensure_autograd_meta(ys[k]);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = int(k);
    node->outputs[k] = ys[k].impl_ptr();
  }
  return ys;
}

}  // namespace kiln
