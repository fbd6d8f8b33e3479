// Tensor's autograd methods.
#include "eager/autograd/engine.h"
#include "eager/autograd/nodes.h"

namespace kiln {

bool Tensor::requires_grad() const {
  AutogradMeta* m = autograd_meta(*this);
  return m && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
  AutogradMeta* m = autograd_meta(*this);
  if (m && m->grad_fn && !on)
    fail("requires_grad_: you can only change requires_grad flags of leaf variables; use detach() to get a "
         "tensor that does not require grad");
  if (on && !is_floating(dtype()))
    fail("requires_grad_: only tensors of floating point dtype can require gradients, got {}", dtype_name(dtype()));
  install_autograd_recorder();
  ensure_autograd_meta(*this).requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  AutogradMeta* m = autograd_meta(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined() && g.sizes() != sizes())
    fail("set_grad: gradient of shape {} does not match tensor of shape {}", shape_str(g.sizes()), shape_str(sizes()));
  ensure_autograd_meta(*this).grad = g;
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  AutogradMeta* m = autograd_meta(*this);
  return m ? m->grad_fn : nullptr;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::retain_grad() const {
  if (!requires_grad()) fail("retain_grad: can't retain_grad on a tensor that doesn't require gradients");
  ensure_autograd_meta(*this).retains_grad = true;
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  if (!requires_grad()) fail("register_hook: cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = ensure_autograd_meta(*this);
  if (m.grad_fn) m.grad_fn->pre_hooks[size_t(m.output_nr)].push_back(std::move(hook));
  else m.hooks.push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  if (!requires_grad())
    fail("register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = ensure_autograd_meta(*this);
  if (m.grad_fn) fail("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered on non-leaf tensors");
  m.post_accumulate_grad_hooks.push_back(std::move(hook));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  kiln::backward({*this}, {gradient}, retain_graph, create_graph);
}

}  // namespace kiln
