// The engine: counts how many edges feed each node, then runs nodes whose consumers have all
// delivered, so each node runs once with its summed gradient (a topological order).
#include "eager/autograd/engine.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "eager/autocast/autocast.h"
#include "eager/autograd/nodes.h"
#include "eager/ops.h"
#include "eager/profiler/profile_hooks.h"

namespace kiln {
namespace {

struct Target {  // an input of grad(): where its gradient is read off
  Node* node;
  int nr;
};

Tensor accumulate(const Tensor& a, const Tensor& b) { return a.defined() ? add(a, b) : b; }

// The callbacks queued (queue_callback) during each backward now running on this thread, innermost
// last: a node's apply may itself run a backward (checkpoint), whose callbacks are its own.
thread_local std::vector<std::vector<std::function<void()>>*> queued_callbacks;

// Runs the graph below the roots. With `targets`, gradients arriving at those edges are returned and
// leaves are not accumulated into.
Tensors run(const Tensors& roots, const Tensors& grad_roots, bool retain_graph, bool create_graph,
            const std::vector<Target>* targets) {
  if (!grad_roots.empty() && grad_roots.size() != roots.size())
    fail("backward: got {} gradients for {} outputs", grad_roots.size(), roots.size());
  std::unordered_map<Node*, Tensors> buffers;
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> order_roots;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    Edge e = gradient_edge(r);
    if (!e.node)
      fail("backward: element {} of tensors does not require grad and does not have a grad_fn", i);
    Tensor g;
    if (grad_roots.empty() || !grad_roots[i].defined()) {
      if (r.numel() != 1)
        fail("backward: grad can be implicitly created only for scalar outputs, got shape {}", shape_str(r.sizes()));
      g = ones_like(r);
    } else {
      g = grad_roots[i];
      if (g.sizes() != r.sizes())
        fail("backward: gradient of shape {} does not match output of shape {}", shape_str(g.sizes()),
             shape_str(r.sizes()));
    }
    Tensors& buf = buffers[e.node.get()];
    buf.resize(size_t(e.node->num_outputs()));
    buf[size_t(e.input_nr)] = accumulate(buf[size_t(e.input_nr)], g);
    order_roots.push_back(e.node);
  }
  // Count dependencies over the reachable graph.
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (auto& n : order_roots)
    if (!seen[n.get()]) { seen[n.get()] = true; stack.push_back(n.get()); }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      deps[e.node.get()]++;
      if (!seen[e.node.get()]) { seen[e.node.get()] = true; stack.push_back(e.node.get()); }
    }
  }
  Tensors results(targets ? targets->size() : 0);
  std::deque<std::shared_ptr<Node>> ready;
  for (auto& n : order_roots)
    if (deps[n.get()] == 0 && std::find(ready.begin(), ready.end(), n) == ready.end()) ready.push_back(n);

  struct Restore {
    bool prev;
    ~Restore() { GradMode::set(prev); }
  } restore{GradMode::enabled()};
  GradMode::set(create_graph);  // with create_graph the formulas record, so gradients are differentiable
  // Derivatives run in the dtypes forward chose (torch runs backward outside autocast too); the
  // gradients are then cast back to each input's own dtype.
  AutocastGuard no_autocast(false);
  std::vector<std::function<void()>> callbacks;
  queued_callbacks.push_back(&callbacks);
  struct PopCallbacks {
    ~PopCallbacks() { queued_callbacks.pop_back(); }
  } pop_callbacks;
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.front();
    ready.pop_front();
    Tensors grads = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    grads.resize(size_t(node->num_outputs()));
    // Tensor hooks and retain_grad see the full gradient of a non-leaf output.
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined()) continue;
      if (k < node->pre_hooks.size())
        for (auto& h : node->pre_hooks[k])
          if (Tensor r = h(grads[k]); r.defined()) grads[k] = r;
      if (k < node->outputs.size())
        if (auto impl = node->outputs[k].lock(); impl && impl->autograd && impl->autograd->retains_grad &&
                                                 impl->autograd->grad_fn.get() == node.get())
          impl->autograd->grad = create_graph ? grads[k] : grads[k].detach();
    }
    bool is_leaf_sink = dynamic_cast<AccumulateGrad*>(node.get()) != nullptr;
    if (targets) {
      for (size_t t = 0; t < targets->size(); ++t)
        if ((*targets)[t].node == node.get() && grads[size_t((*targets)[t].nr)].defined())
          results[t] = grads[size_t((*targets)[t].nr)];
      if (is_leaf_sink) continue;
    }
    if (is_leaf_sink) {
      auto* acc = static_cast<AccumulateGrad*>(node.get());
      if (auto impl = acc->leaf.lock(); impl && impl->autograd)
        for (auto& h : impl->autograd->hooks)
          if (Tensor r = h(grads[0]); r.defined()) grads[0] = r;
    }
    node->released_after_apply = !retain_graph;
    Tensors out = node->apply(grads);
    if (!retain_graph) node->release_saved();
    if (is_leaf_sink && grads[0].defined())
      if (auto impl = static_cast<AccumulateGrad*>(node.get())->leaf.lock();
          impl && impl->autograd && !impl->autograd->post_accumulate_grad_hooks.empty()) {
        Tensor leaf(impl);
        for (auto& h : impl->autograd->post_accumulate_grad_hooks) h(leaf);
      }
    for (size_t i = 0; i < node->next.size() && i < out.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.node) continue;
      if (out[i].defined()) {
        Tensors& buf = buffers[e.node.get()];
        buf.resize(size_t(e.node->num_outputs()));
        buf[size_t(e.input_nr)] = accumulate(buf[size_t(e.input_nr)], out[i]);
      }
      if (--deps[e.node.get()] == 0) ready.push_back(e.node);
    }
  }
  // By index: a callback may queue another, which runs after it.
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> cb = std::move(callbacks[i]);
    cb();
  }
  return results;
}

}  // namespace

void queue_callback(std::function<void()> callback) {
  if (queued_callbacks.empty()) fail("queue_callback: no backward is running on this thread");
  queued_callbacks.back()->push_back(std::move(callback));
}

void backward(const Tensors& roots, const Tensors& grad_roots, bool retain_graph, bool create_graph) {
  ProfileScope scope("backward");  // the profiler's span around the derivative ops
  run(roots, grad_roots, retain_graph || create_graph, create_graph, nullptr);
}

Tensors grad(const Tensors& outputs, const Tensors& inputs, const Tensors& grad_outputs, bool retain_graph,
             bool create_graph, bool allow_unused) {
  ProfileScope scope("grad");  // the profiler's span around the derivative ops
  std::vector<Target> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    if (!e.node) fail("grad: input {} does not require grad", i);
    targets.push_back({e.node.get(), e.input_nr});
  }
  Tensors r = run(outputs, grad_outputs, retain_graph || create_graph, create_graph, &targets);
  for (size_t i = 0; i < r.size(); ++i)
    if (!r[i].defined() && !allow_unused)
      fail("grad: input {} was not used in the graph of the outputs; pass allow_unused=true to get an "
           "undefined gradient for it",
           i);
  return r;
}

}  // namespace kiln
