// Gather before a row's shift: gathering from a - b or a + b where b is one value per row along the
// gathered dim equals gathering from a and shifting the gathered values by b. A language model's loss
// gathers its targets' log-probabilities, x - amax - log(sum(exp(x - amax))), from a [tokens, vocab]
// log_softmax it reads nothing else of: gathered first, the log-probabilities of the whole vocabulary
// are never written (the softmax's own row kernel keeps its exp and sum, which the backward reads).
//   Given:   %l = sub(%a, %b)            %b: [N, 1]     Result:  %g2 = gather[dim=1](%a, %i)
//            %g = gather[dim=1](%l, %i)  %i: [N, K]              %g = sub(%g2, %b)
// Only with every shape and dtype known, %a of %l's shape and dtype (not broadcast, no promotion), and
// %b of size 1 along the gathered dim and of %i's size or 1 along the others; it repeats, so a chain
// of shifts (x - amax - log(sum)) is gathered from x.
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

bool shifts_rows(const ir::Node& gather) {
  const ir::Node& op = *gather.input(0)->node();
  if (!(op.is_op(OpId::Sub) || op.is_op(OpId::Add)) || op.inputs().size() != 2) return false;
  const ir::Type &x = op.output()->type(), &a = op.input(0)->type(), &b = op.input(1)->type(),
                 &i = gather.input(1)->type();
  for (const ir::Type* t : {&x, &a, &b, &i})
    if (!t->is_tensor() || !t->dtype || !t->has_static_shape()) return false;
  if (a != x || *b.dtype != *x.dtype) return false;
  Shape bs = b.static_shape(), is = i.static_shape();
  if (bs.size() != is.size()) return false;
  int64_t dim = gather.attrs().i("dim");
  if (dim < 0) dim += int64_t(is.size());
  if (dim < 0 || dim >= int64_t(is.size())) return false;
  for (size_t e = 0; e < bs.size(); ++e)
    if (int64_t(e) == dim ? bs[e] != 1 : bs[e] != 1 && bs[e] != is[e]) return false;
  return true;
}

int64_t rewrite_block(ir::Graph& g, ir::Block& b) {
  int64_t changed = 0;
  for (bool again = true; again;) {
    again = false;
    for (ir::Node* n : b.nodes()) {
      if (!n->is_op(OpId::Gather) || n->inputs().size() != 2 || !shifts_rows(*n)) continue;
      ir::Node* op = n->input(0)->node();
      ir::Node* first = g.create_op(OpId::Gather, {op->input(0), n->input(1)}, n->attrs());
      first->output()->set_type(ir::Type::tensor(*op->output()->type().dtype, n->input(1)->type().static_shape()));
      first->line = n->line;
      first->insert_before(n);
      ir::Node* shift = g.create_op(op->op(), {first->output(), op->input(1)}, op->attrs());
      shift->output()->set_type(n->output()->type());
      shift->line = op->line;
      shift->insert_after(first);
      shift->output()->set_name(n->output()->name());
      n->output()->replace_all_uses_with(shift->output());
      n->destroy();
      if (!op->output()->has_uses()) op->destroy();
      ++changed;
      again = true;
      break;
    }
  }
  return changed;
}

}  // namespace

PassResult gather_first(ir::Graph& g) {
  return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return rewrite_block(g, b); }), {}};
}

}  // namespace kiln::jit
