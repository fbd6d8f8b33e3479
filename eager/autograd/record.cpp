// Recording: after an op ran with an input that requires grad (and grad mode on), an OpNode is
// attached to its floating outputs.
#include <cctype>
#include <mutex>

#include "eager/autograd/derivatives.h"
#include "eager/autograd/nodes.h"
#include "eager/cpu/views.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {

AutogradMeta* autograd_meta(const Tensor& t) { return t.defined() ? t.impl()->autograd.get() : nullptr; }

AutogradMeta& ensure_autograd_meta(const Tensor& t) {
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

Tensor new_handle(const Tensor& t) { return cpu::make_view(t, t.sizes(), t.strides(), t.storage_offset()); }

namespace {
// A leaf's accumulator is made by the first op recorded on it, on whichever thread runs that op: threads
// that share parameters (one model run from several threads with grad mode on, autocast's weight cache
// among them) record on the same leaves at once (docs/threads.md).
std::mutex g_accumulator_mu;
}  // namespace

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (!m || !m->requires_grad) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  std::lock_guard<std::mutex> lock(g_accumulator_mu);
  if (!m->grad_accumulator) {
    auto acc = std::make_shared<AccumulateGrad>();
    acc->leaf = t.impl_ptr();
    acc->outputs.push_back(t.impl_ptr());
    m->grad_accumulator = acc;
  }
  return {m->grad_accumulator, 0};
}

SavedTensor::SavedTensor(const Tensor& x, bool values) : t(x), meta_only(!values) {
  if (!x.defined()) return;
  if (values) {
    version = x.version();
    hold = SavedForBackward(x.storage());
    return;
  }
  // Shape, dtype and device only: a derivative that reads no values still builds on x's device.
  static const auto no_cpu_data = std::make_shared<Storage>();
  auto impl = std::make_shared<TensorImpl>();
  if (x.device().is_cpu()) {
    impl->storage = no_cpu_data;
  } else {
    impl->storage = std::make_shared<Storage>();
    impl->storage->device = x.device();
  }
  impl->sizes = x.sizes();
  impl->strides = contiguous_strides(x.sizes());
  impl->dtype = x.dtype();
  t = Tensor(std::move(impl));
}

SavedTensor SavedTensor::of_output(const Tensor& y) {
  SavedTensor s;
  if (!y.defined()) return s;
  s.t = new_handle(y);
  s.version = y.version();
  s.hold = SavedForBackward(y.storage());
  s.output = y.impl_ptr();
  s.is_output = true;
  return s;
}

Tensor SavedTensor::unpack(const std::string& node_name) const {
  if (!meta_only && t.defined() && t.version() != version)
    fail("a tensor needed for gradient computation was modified by an in-place operation: {} saved "
         "by {} is at version {}, expected version {}",
         is_output ? "its output" : "an input", node_name, t.version(), version);
  if (auto y = output.lock()) return Tensor(y);
  return t;
}

std::string OpNode::name() const {
  std::string n;
  bool up = true;
  for (char c : op_name(op)) {
    if (c == '_') { up = true; continue; }
    n += up ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return n + "Backward";
}

// Frees the saved values. Shapes saved without values stay, as torch keeps a node's sizes: a node that
// saved no values (a cast, an add) can run again, and only one whose values are gone refuses (torch too).
void OpNode::release_saved() {
  for (auto* saved : {&inputs, &outputs_saved})
    for (auto& s : *saved) {
      if (s.meta_only || !s.t.defined()) continue;
      s = SavedTensor();
      released = true;
    }
}

Tensors OpNode::apply(const Tensors& grad_outputs) {
  if (released)
    fail("{}: trying to backward through the graph a second time (or directly access saved tensors after "
         "they have already been freed); saved values are freed by backward() or grad() unless "
         "retain_graph=true",
         name());
  if (!grad_outputs[0].defined()) return Tensors(next.size());
  Tensors in;
  std::vector<bool> needs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(inputs[i].unpack(name()));
    needs.push_back(next[i].node != nullptr);
  }
  Tensors outs;
  for (size_t k = 0; k < outputs_saved.size(); ++k) {
    Tensor y = outputs_saved[k].unpack(name());
    // Under create_graph a dropped output's alias must still lead back here, as the output did (torch too):
    // a fresh alias each time, since the saved one pointing at this node would be a cycle.
    if (y.defined() && GradMode::enabled() && !autograd_meta(y) && is_floating(y.dtype())) {
      y = new_handle(y);
      AutogradMeta& m = ensure_autograd_meta(y);
      m.requires_grad = true;
      m.grad_fn = shared_from_this();
      m.output_nr = int(k);
    }
    outs.push_back(y);
  }
  Tensors grads = derivative(op, attrs, in, grad_outputs, needs, outs);
  for (size_t i = 0; i < grads.size() && i < next.size(); ++i) {
    if (!next[i].node || !grads[i].defined()) { grads[i] = Tensor(); continue; }
    if (grads[i].sizes() != input_shapes[i]) grads[i] = sum_to(grads[i], input_shapes[i]);
    if (grads[i].dtype() != input_dtypes[i]) grads[i] = grads[i].to(input_dtypes[i]);
  }
  grads.resize(next.size());
  return grads;
}

Tensors AccumulateGrad::apply(const Tensors& grad_outputs) {
  auto impl = leaf.lock();
  if (!impl || !grad_outputs[0].defined()) return {};
  Tensor t(impl);
  AutogradMeta& m = ensure_autograd_meta(t);
  Tensor g = grad_outputs[0];
  if (!GradMode::enabled()) g = g.detach();
  // torch's layout contract: a contiguous parameter gets a contiguous .grad (a weight's gradient
  // often arrives transposed), so optimizers take their fused single-pass loop.
  if (!m.grad.defined() && t.is_contiguous() && !g.is_contiguous()) g = g.contiguous();
  m.grad = m.grad.defined() ? add(m.grad, g) : g;
  set_memory_category(m.grad, MemoryCategory::Gradient);  // memory accounting: .grad holds it now
  return {};
}

namespace {

void record(OpId op, const Tensors& in, const Attrs& attrs, Tensors& out) {
  if (!GradMode::enabled() || !is_differentiable(op)) return;
  bool any = false;
  for (const Tensor& t : in)
    if (AutogradMeta* m = autograd_meta(t); m && m->requires_grad) any = true;
  if (!any) return;
  auto node = std::make_shared<OpNode>();
  node->op = op;
  node->attrs = attrs;
  node->n_outputs = int(out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    node->next.push_back(gradient_edge(t));
    node->inputs.emplace_back(t, derivative_reads_input(op, i));
    node->input_shapes.push_back(t.sizes());
    node->input_dtypes.push_back(t.dtype());
  }
  node->pre_hooks.resize(out.size());
  node->outputs.resize(out.size());
  for (size_t k = 0; k < out.size(); ++k) {
    Tensor& o = out[k];
    if (!is_floating(o.dtype())) continue;
    for (const Tensor& t : in)  // a kernel may return its input (contiguous, to): give it its own handle
      if (o.is_same(t)) o = new_handle(o);
    AutogradMeta& m = ensure_autograd_meta(o);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = int(k);
    node->outputs[k] = o.impl_ptr();
  }
  for (size_t k = 0; k < out.size(); ++k)
    if (op_facts(op).derivative_reads_output(k)) {
      node->outputs_saved.resize(out.size());
      node->outputs_saved[k] = SavedTensor::of_output(out[k]);
    }
}

}  // namespace

void install_autograd_recorder() {
  static bool done = [] {
    set_autograd_observer(&record);
    return true;
  }();
  (void)done;
}

}  // namespace kiln
