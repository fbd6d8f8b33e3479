#pragma once
// The autograd graph: each differentiable op that ran with an input requiring grad leaves a Node
// holding what its derivative needs; edges point at the nodes that produced its inputs. Leaves
// requiring grad end in an AccumulateGrad node that adds into tensor.grad().
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/memory_category.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln {

struct Node;
using Hook = std::function<Tensor(const Tensor&)>;  // returns a replacement gradient, or undefined to keep it

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  int input_nr = 0;            // which of node's outputs this edge feeds
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;          // null for leaves
  std::shared_ptr<Node> grad_accumulator;  // leaves: created on first use, shared by every use
  int output_nr = 0;
  bool retains_grad = false;
  std::vector<Hook> hooks;  // leaves; non-leaf hooks live on grad_fn as pre-hooks
  std::vector<std::function<void(const Tensor&)>> post_accumulate_grad_hooks;  // leaves, after .grad is updated
};

// A tensor saved for backward, with the version it had then (in-place changes are caught). When the
// derivative needs only its shape and dtype, just those are kept (no storage stays alive).
struct SavedTensor {
  Tensor t;
  uint64_t version = 0;
  bool meta_only = false;
  SavedForBackward hold;  // memory accounting: t's storage counts as an activation while saved
  // An output of the node that saves it: the node is the output's grad_fn, so a strong reference would be a
  // cycle. The output is held weakly beside a storage-sharing alias without autograd (t), which stands in
  // once the output itself is gone (torch's SavedVariable does the same for outputs).
  std::weak_ptr<TensorImpl> output;
  bool is_output = false;
  SavedTensor() = default;
  SavedTensor(const Tensor& x, bool values);
  static SavedTensor of_output(const Tensor& y);
  // The saved tensor; raises when it was changed in place since. A saved output comes back as the output
  // itself while it lives (a trace recording the backward knows it), else as the alias.
  Tensor unpack(const std::string& node_name) const;
};

struct Node : std::enable_shared_from_this<Node> {
  std::vector<Edge> next;  // one per differentiable input
  std::vector<std::vector<Hook>> pre_hooks;  // per output: tensor hooks of non-leaf outputs
  std::vector<int> retained;                 // outputs whose grad is kept (retain_grad)
  std::vector<std::weak_ptr<TensorImpl>> outputs;  // to store retained grads
  // Set by the engine before apply(): release_saved() follows it, so apply may consume saved values
  // (a compiled backward frees each one after its last use instead of at the end).
  bool released_after_apply = false;
  virtual ~Node() = default;
  virtual std::string name() const = 0;
  virtual int num_outputs() const { return 1; }
  // Given the gradients of this node's outputs (undefined = zero), returns one per next edge.
  virtual Tensors apply(const Tensors& grad_outputs) = 0;
  virtual void release_saved() {}
};

// Thread-local switch for recording (torch.no_grad / enable_grad).
struct GradMode {
  static bool enabled();
  static void set(bool on);
};
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set(false); }
  ~NoGradGuard() { GradMode::set(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::enabled()) { GradMode::set(true); }
  ~EnableGradGuard() { GradMode::set(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// The edge a gradient for t flows into: its grad_fn, or its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
AutogradMeta* autograd_meta(const Tensor& t);         // null when t has none
AutogradMeta& ensure_autograd_meta(const Tensor& t);  // creates it
// Another handle on t's bytes (its storage, sizes, strides and offset) without t's autograd history: an
// output that is also an input of what made it (or returned twice) gets its own before its grad_fn is set.
Tensor new_handle(const Tensor& t);

}  // namespace kiln
