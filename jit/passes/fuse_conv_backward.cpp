// Conv backward fusion: conv2d_backward_input, conv2d_backward_weight and the bias gradient's sum over
// dims 0, 2, 3, where two or three of them read one gradient (a Conv2d's recorded backward), become a
// conv-backward group:
//
//   %dx : f32[64,16,4,4], %dw : f32[32,16,3,3], %db : f32[32] = prim::FusionGroup[name="conv_backward", kind="conv_backward"](%g, %w, %x)
//     block0(%0 : f32[64,32,4,4], %1 : f32[32,16,3,3], %2 : f32[64,16,4,4]):
//       %3 : f32[64,16,4,4] = conv2d_backward_input[..., shape=[64, 16, 4, 4]](%0, %1)
//       %4 : f32[32,16,3,3] = conv2d_backward_weight[..., shape=[32, 16, 3, 3]](%0, %2)
//       %5 : f32[32] = sum[dims=[0, 2, 3], keepdim=false](%0)
//       -> (%3, %4, %5)
//
// The executor runs it as one pass over the gradient (backends/cpu/conv_backward_group.cpp): the gradient is
// gathered to channel-major once instead of once per op, the bias gradient is summed from those rows
// instead of in a strided reduction of its own, and one column-matrix scratch serves both GEMMs.
//
// The group stands where its last member stood, so a member whose result is read before that point
// keeps the members apart.
#include <algorithm>
#include <unordered_map>

#include "jit/fusion_group.h"
#include "jit/group_kinds.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

bool is_f4(const ir::Value* v) {
  const ir::Type& t = v->type();
  return t.is_tensor() && t.dims && t.dims->size() == 4 && t.dtype && is_floating(*t.dtype);
}

int64_t fuse_block(ir::Graph& g, ir::Block& b) {
  std::vector<ir::Value*> grads;
  for (ir::Node* n : b.nodes()) {
    if ((n->is_op(OpId::Conv2dBackwardInput) || n->is_op(OpId::Conv2dBackwardWeight)) && n->inputs().size() == 2 &&
        is_f4(n->input(0)) && std::find(grads.begin(), grads.end(), n->input(0)) == grads.end())
      grads.push_back(n->input(0));
  }
  int64_t fused = 0;
  // Latest first: a group's members are destroyed with their outputs, and a member's output that is itself a
  // gradient (a conv's input gradient, the next conv back's gradient) is read after its member, so it comes
  // later in `grads` and has been taken already; in block order it would be read after it was freed.
  for (auto it = grads.rbegin(); it != grads.rend(); ++it) {
    ir::Value* grad = *it;
    // Block order, the block's return last; made anew as each group replaces its members.
    std::unordered_map<const ir::Node*, size_t> pos;
    size_t i = 0;
    for (ir::Node* n : b.nodes()) pos[n] = i++;
    pos[b.return_node()] = i;
    ir::Node *input = nullptr, *weight = nullptr, *bias = nullptr;
    for (const ir::Use& u : grad->uses()) {
      ir::Node* m = u.user;
      if (m->owning_block() != &b || u.index != 0 || m->outputs().size() != 1) continue;
      // a conv_transpose2d forward (no "shape") is not a gradient
      if (m->is_op(OpId::Conv2dBackwardInput) && m->inputs().size() == 2 && m->attrs().has("shape") && !input) input = m;
      else if (m->is_op(OpId::Conv2dBackwardWeight) && m->inputs().size() == 2 && !weight) weight = m;
      else if (is_conv_bias_sum(*m) && !bias) bias = m;
    }
    if (input && weight && !(input->attrs().without("shape") == weight->attrs().without("shape"))) weight = nullptr;
    std::vector<ir::Node*> members;
    for (ir::Node* m : {input, weight, bias})
      if (m) members.push_back(m);
    if (members.size() < 2 || !(input || weight)) continue;
    std::sort(members.begin(), members.end(), [&](ir::Node* x, ir::Node* y) { return pos.at(x) < pos.at(y); });
    size_t last = pos.at(members.back());
    bool read_early = false;
    for (ir::Node* m : members)
      for (ir::Value* o : m->outputs())
        for (const ir::Use& u : o->uses()) {
          auto it = pos.find(u.user);
          read_early |= it == pos.end() || it->second <= last;
        }
    if (read_early) continue;
    ir::Node* group = make_group(g, members);
    group->attrs().set("name", "conv_backward");
    set_group_kind(*group, kConvBackwardKind);
    fused += int64_t(members.size());
  }
  return fused;
}

}  // namespace

PassResult fuse_conv_backward(ir::Graph& g) {
  return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return fuse_block(g, b); }), {}};
}

}  // namespace kiln::jit
