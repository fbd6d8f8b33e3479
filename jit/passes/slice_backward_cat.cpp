// The gradient of a tensor split along a dim (nanoGPT's q, k, v = qkv.split(n_embd, dim=2)) arrives as
// one slice_backward per piece — a zero tensor of the whole shape with the piece copied in — summed by
// adds: three fills, three copies and two full-size adds. When the pieces' [start, end) ranges tile the
// dim exactly (step 1), and nothing else reads the slice_backwards or the partial sums, the sum is
// cat(pieces, dim): each piece is written once, and no zeros are filled or added.
#include <algorithm>

#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

// The add tree under n (n included): every add has two inputs and is read only by its parent; the
// leaves are slice_backwards read only by their add. False when n is not such a tree.
bool collect(ir::Node* n, std::vector<ir::Node*>& adds, std::vector<ir::Node*>& leaves) {
  if (n->is_op(OpId::SliceBackward)) {
    leaves.push_back(n);
    return true;
  }
  if (!n->is_op(OpId::Add) || n->inputs().size() != 2 || !n->attrs().items().empty()) return false;
  adds.push_back(n);
  for (ir::Value* v : n->inputs())
    if (v->node()->owning_block() != n->owning_block() || v->uses().size() != 1 || !collect(v->node(), adds, leaves))
      return false;
  return true;
}

// The leaves' grads in dim order when their ranges tile `out`'s dim exactly; empty otherwise.
std::vector<ir::Value*> tiles(std::vector<ir::Node*> leaves, const ir::Type& out, int64_t* dim) {
  if (leaves.size() < 2 || !out.dims || !out.has_static_shape() || !out.dtype) return {};
  const Shape shape = out.static_shape();
  const Attrs& a0 = leaves[0]->attrs();
  if (!a0.has("shape") || a0.ints("shape") != shape || !a0.has("dim")) return {};
  int64_t d = a0.i("dim");
  if (d < 0) d += int64_t(shape.size());
  if (d < 0 || d >= int64_t(shape.size())) return {};
  const int64_t size = shape[size_t(d)];
  struct Piece {
    int64_t start, end;
    ir::Value* grad;
  };
  std::vector<Piece> pieces;
  for (ir::Node* l : leaves) {
    const Attrs& a = l->attrs();
    int64_t ld = a.i("dim");
    if (ld < 0) ld += int64_t(shape.size());
    if (a.ints("shape") != shape || ld != d || a.i_or("step", 1) != 1) return {};
    if (l->input(0)->type().dtype != out.dtype || l->output()->type() != out) return {};
    pieces.push_back({a.i_or("start", 0), std::min(a.i_or("end", size), size), l->input(0)});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& x, const Piece& y) { return x.start < y.start; });
  int64_t at = 0;
  std::vector<ir::Value*> grads;
  for (const Piece& p : pieces) {
    if (p.start != at || p.end <= p.start) return {};
    at = p.end;
    grads.push_back(p.grad);
  }
  if (at != size) return {};
  *dim = d;
  return grads;
}

int64_t run_block(ir::Graph& g, ir::Block& b) {
  // roots: adds not read by exactly one add (the top of a tree)
  std::vector<ir::Node*> roots;
  for (ir::Node* n : b.nodes()) {
    if (!n->is_op(OpId::Add)) continue;
    const auto& uses = n->output()->uses();
    if (uses.size() == 1 && uses[0].user->is_op(OpId::Add)) continue;
    roots.push_back(n);
  }
  int64_t changed = 0;
  for (ir::Node* root : roots) {
    std::vector<ir::Node*> adds, leaves;
    if (!collect(root, adds, leaves)) continue;
    int64_t dim = 0;
    std::vector<ir::Value*> grads = tiles(leaves, root->output()->type(), &dim);
    if (grads.empty()) continue;
    ir::Node* cat = g.create_op(OpId::Cat, grads, Attrs().set("dim", dim));
    cat->output()->set_type(root->output()->type());
    cat->insert_before(root);
    root->output()->replace_all_uses_with(cat->output());
    for (ir::Node* a : adds) a->destroy();  // parents before children: each is unused when destroyed
    for (ir::Node* l : leaves) l->destroy();
    changed += int64_t(adds.size() + leaves.size());
  }
  return changed;
}

}  // namespace

PassResult slice_backward_cat(ir::Graph& g) {
  return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return run_block(g, b); }), {}};
}

}  // namespace kiln::jit
