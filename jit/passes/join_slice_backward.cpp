// Slices' gradients joined: the backward of `q, k, v = x.split(n, dim)` is one slice_backward per piece
// (each a zero tensor of x's shape with the piece's gradient copied in) summed by adds, so every piece
// costs a zero fill, a copy and an add over the whole of x. When the pieces tile a range of the dim,
// their gradients are one cat written once:
//   Given:   %a = slice_backward[shape=[4, 6], dim=1, start=0, end=2](%ga)
//            %b = slice_backward[shape=[4, 6], dim=1, start=2, end=6](%gb)
//            %s = add(%a, %b)
//   Result:  %s = cat[dim=1](%ga, %gb)
// A range short of the whole dim keeps one slice_backward around the cat. Each slice_backward and inner
// add must feed nothing else, so no value another node reads disappears.
#include <algorithm>

#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

struct Piece {
  ir::Node* node;
  int64_t start, end;
};

bool single_use(const ir::Value* v) { return v->uses().size() == 1; }

// The slice_backward leaves of the add tree under v (v itself feeding only its parent), or false.
bool collect(ir::Value* v, const ir::Block& b, std::vector<Piece>& pieces, std::vector<ir::Node*>& adds) {
  ir::Node* n = v->node();
  if (n->owning_block() != &b || !single_use(v)) return false;
  if (n->is_op(OpId::Add) && n->inputs().size() == 2 && !n->attrs().has("alpha")) {
    adds.push_back(n);
    return collect(n->input(0), b, pieces, adds) && collect(n->input(1), b, pieces, adds);
  }
  if (!n->is_op(OpId::SliceBackward) || n->attrs().i_or("step", 1) != 1) return false;
  const Shape& shape = n->attrs().ints("shape");
  int64_t d = n->attrs().i("dim");
  if (d < 0) d += int64_t(shape.size());
  if (d < 0 || d >= int64_t(shape.size())) return false;
  int64_t size = shape[size_t(d)];
  auto bound = [&](int64_t i) { return std::clamp(i < 0 ? i + size : i, int64_t(0), size); };
  pieces.push_back({n, bound(n->attrs().i_or("start", 0)), bound(n->attrs().i_or("end", size))});
  return true;
}

int64_t join_block(ir::Graph& g, ir::Block& b) {
  std::vector<ir::Node*> roots;
  for (ir::Node* n : b.nodes()) {
    if (!n->is_op(OpId::Add) || n->outputs().size() != 1) continue;
    // a root: its result is not the operand of a further add of the same tree
    const auto& uses = n->output()->uses();
    if (uses.size() == 1 && uses[0].user->is_op(OpId::Add) && uses[0].user->owning_block() == &b) continue;
    roots.push_back(n);
  }
  int64_t changed = 0;
  for (ir::Node* root : roots) {
    if (root->attrs().has("alpha") || root->inputs().size() != 2) continue;
    std::vector<Piece> pieces;
    std::vector<ir::Node*> adds{root};
    if (!collect(root->input(0), b, pieces, adds) || !collect(root->input(1), b, pieces, adds)) continue;
    const ir::Node* first = pieces[0].node;
    const Shape& shape = first->attrs().ints("shape");
    bool same = true;
    for (const Piece& p : pieces)
      same = same && p.node->attrs().ints("shape") == shape &&
             (p.node->attrs().i("dim") + int64_t(shape.size())) % int64_t(shape.size()) ==
                 (first->attrs().i("dim") + int64_t(shape.size())) % int64_t(shape.size());
    if (!same) continue;
    std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& c) { return a.start < c.start; });
    bool tiled = true;
    for (size_t i = 1; i < pieces.size(); ++i) tiled = tiled && pieces[i].start == pieces[i - 1].end;
    if (!tiled) continue;
    int64_t d = (first->attrs().i("dim") + int64_t(shape.size())) % int64_t(shape.size());
    std::vector<ir::Value*> grads;
    for (const Piece& p : pieces) grads.push_back(p.node->input(0));
    ir::Node* cat = g.create_op(OpId::Cat, grads, Attrs().set("dim", d));
    Shape joined = shape;
    joined[size_t(d)] = pieces.back().end - pieces.front().start;
    const ir::Type& t = root->output()->type();
    cat->output()->set_type(t.dtype && t.has_static_shape() ? ir::type_of(*t.dtype, joined) : ir::Type::tensor(t.dtype));
    cat->line = root->line;
    cat->insert_before(root);
    ir::Value* result = cat->output();
    if (joined != shape) {
      ir::Node* around = g.create_op(OpId::SliceBackward, {result},
                                     Attrs()
                                         .set("shape", shape)
                                         .set("dim", d)
                                         .set("start", pieces.front().start)
                                         .set("end", pieces.back().end)
                                         .set("step", int64_t(1)));
      around->output()->set_type(root->output()->type());
      around->line = root->line;
      around->insert_before(root);
      result = around->output();
    }
    result->set_name(root->output()->name());
    root->output()->replace_all_uses_with(result);
    for (ir::Node* a : adds) a->destroy();  // parents first: each add's operands lose their last use in turn
    for (const Piece& p : pieces) p.node->destroy();
    ++changed;
  }
  return changed;
}

}  // namespace

PassResult join_slice_backward(ir::Graph& g) {
  return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return join_block(g, b); }), {}};
}

}  // namespace kiln::jit
