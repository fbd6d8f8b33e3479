// Scatter-into-zeros fusion: scatter_add whose self is a constant zero tensor (max_pool2d's and
// nll_loss's recorded backward scatter the gradient into zeros) becomes a scatter-into-zeros group
// holding a copy of the constant and the scatter:
//
//   %3 : f32[64,16,64] = prim::FusionGroup[name="scatter_zeros", kind="scatter_zeros"](%idx, %g)
//     block0(%0 : i64[64,16,16], %1 : f32[64,16,16]):
//       %2 : f32[64,16,64] = prim::Constant[value=<65536 elements>]()
//       %4 : f32[64,16,64] = scatter_add[dim=-1](%2, %0, %1)
//       -> (%4)
//
// The executor writes the result once, each row zeroed as its values land (backends/cpu/scatter_zeros_group.cpp),
// where scatter_add copies its self first: the constant is read and the output written twice.
#include "jit/fusion_group.h"
#include "jit/group_kinds.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

int64_t fuse_block(ir::Graph& g, ir::Block& b) {
  std::vector<ir::Node*> scatters;
  for (ir::Node* n : b.nodes())
    if (n->is_op(OpId::ScatterAdd) && n->inputs().size() == 3 && n->outputs().size() == 1 && is_zero_constant(n->input(0)))
      scatters.push_back(n);
  for (ir::Node* n : scatters) {
    // A copy of the constant for the group (the original may have other readers), made just before
    // the scatter so the group's members stay in block order.
    const ir::Node* original = n->input(0)->node();
    ir::Node* zeros = g.create(ir::Prim::Constant);
    zeros->set_tensor(original->tensor());
    zeros->attrs() = original->attrs();
    zeros->output()->set_type(original->output()->type());
    zeros->insert_before(n);
    n->replace_input(0, zeros->output());
    ir::Node* group = make_group(g, {zeros, n});
    group->attrs().set("name", "scatter_zeros");
    set_group_kind(*group, kScatterZerosKind);
  }
  if (!scatters.empty()) drop_unused_constants(b);
  return int64_t(scatters.size());
}

}  // namespace

PassResult fuse_scatter_zeros(ir::Graph& g) {
  return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return fuse_block(g, b); }), {}};
}

}  // namespace kiln::jit
