#include "jit/compiled_backward.h"

#include "eager/ops.h"

namespace kiln::jit {

Tensors CompiledBackward::apply(const Tensors& grad_outputs) {
  if (released)
    fail("{}: trying to backward through the graph of {} a second time (or directly access saved tensors after "
         "they have already been freed); saved values are freed by backward() or grad() unless retain_graph=true",
         name(), fn_name);
  // The engine turns grad mode on exactly when create_graph was asked for.
  if (GradMode::enabled())
    fail("{}: create_graph=true (a gradient of a gradient) through compiled function {} is not supported; its "
         "backward is a compiled graph that autograd does not record; call the uncompiled function for "
         "higher-order gradients",
         name(), fn_name);
  std::vector<IValue> in;
  in.reserve(saved.size() + grad_outputs.size());
  for (const SavedTensor& s : saved) in.emplace_back(s.unpack(name()));
  if (released_after_apply) release_saved();  // the backward graph frees each one after its last use
  for (size_t k = 0; k < output_shapes.size(); ++k) {
    const Tensor& g = k < grad_outputs.size() ? grad_outputs[k] : Tensor();
    if (!g.defined()) {
      in.emplace_back(zeros(output_shapes[k], {output_dtypes[k]}));
    } else if (g.sizes() != output_shapes[k] || g.dtype() != output_dtypes[k]) {
      fail("{}: gradient {} of {} has shape {} and dtype {}, the output has shape {} and dtype {}", name(), k,
           fn_name, shape_str(g.sizes()), dtype_name(g.dtype()), shape_str(output_shapes[k]),
           dtype_name(output_dtypes[k]));
    } else {
      in.emplace_back(g);
    }
  }
  Tensors grads;
  for (IValue& v : backward->run(std::move(in))) grads.push_back(v.to_tensor());
  return grads;
}

void CompiledBackward::release_saved() {
  saved.clear();
  released = true;
}

void attach_grad_fn(const std::shared_ptr<CompiledBackward>& node, std::vector<IValue>& outs,
                    const std::vector<size_t>& which, const std::vector<IValue>& inputs) {
  node->pre_hooks.resize(which.size());
  node->outputs.resize(which.size());
  for (size_t k = 0; k < which.size(); ++k) {
    Tensor o = outs[which[k]].to_tensor();
    for (const IValue& in : inputs)
      if (in.is_tensor() && o.is_same(in.to_tensor())) o = new_handle(o);
    for (size_t e = 0; e < k; ++e)  // one value returned twice: each output its own handle
      if (o.is_same(outs[which[e]].to_tensor())) o = new_handle(o);
    AutogradMeta& m = ensure_autograd_meta(o);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = int(k);
    node->outputs[k] = o.impl_ptr();
    node->output_shapes.push_back(o.sizes());
    node->output_dtypes.push_back(o.dtype());
    outs[which[k]] = IValue(o);
  }
}

}  // namespace kiln::jit
