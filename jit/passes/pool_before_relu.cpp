// Max pooling before relu: relu is monotone, so the largest of a window's relu'd values is the relu of
// the window's largest value, and relu then runs on a quarter of the elements (2x2 windows). For a
// compiled training step the rewrite runs before the backward is recorded, so relu's gradient mask is
// taken at the pooled size too: no full-size relu output or mask is written, saved or read back.
//   Given:   %r = relu(%x)                 Result:  %p2, %i2 = max_pool2d(%x)
//            %p, %i = max_pool2d(%r)                %p = relu(%p2)
// Only when %r feeds nothing else and the indices are unused: where a whole window is negative, the
// pooled value is 0 either way, but pooling the relu'd zeros picks the window's first element while
// pooling %x picks its largest, and that index is not a gradient's business (relu's mask zeroes it).
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

int64_t rewrite_block(ir::Graph& g, ir::Block& b) {
  int64_t changed = 0;
  std::vector<ir::Node*> pools;
  for (ir::Node* n : b.nodes())
    if (n->is_op(OpId::MaxPool2d) && n->outputs().size() == 2 && !n->output(1)->has_uses()) pools.push_back(n);
  for (ir::Node* pool : pools) {
    ir::Node* relu = pool->input(0)->node();
    if (!relu->is_op(OpId::Relu) || relu->owning_block() != &b || relu->output()->uses().size() != 1) continue;
    ir::Node* p = g.create_op(OpId::MaxPool2d, {relu->input(0)}, pool->attrs(), 2);
    p->output(0)->set_type(pool->output(0)->type());
    p->output(1)->set_type(pool->output(1)->type());
    p->line = pool->line;
    p->insert_before(pool);
    ir::Node* r = g.create_op(OpId::Relu, {p->output(0)});
    r->output()->set_type(pool->output(0)->type());
    r->line = relu->line;
    r->insert_after(p);
    r->output()->set_name(pool->output(0)->name());
    pool->output(0)->replace_all_uses_with(r->output());
    pool->destroy();
    relu->destroy();
    ++changed;
  }
  return changed;
}

}  // namespace

PassResult pool_before_relu(ir::Graph& g) { return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return rewrite_block(g, b); }), {}}; }

}  // namespace kiln::jit
