// Loop-invariant code motion: a pure node in a prim::Loop body whose inputs are all defined outside
// the loop computes the same value every trip, so it moves before the loop. Moving one can make its
// users invariant: the body is scanned in order, so a chain moves in one sweep. Nodes with blocks
// stay (their cost is not known to be worth running when the loop runs zero times).
#include <unordered_set>

#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

int64_t hoist(ir::Block& b) {
  int64_t moved = 0;
  for (ir::Node* n : b.nodes()) {
    for (ir::Block* sub : n->blocks()) moved += hoist(*sub);
    if (n->prim() != ir::Prim::Loop) continue;
    ir::Block* body = n->blocks()[0];
    std::unordered_set<const ir::Value*> variant(body->inputs().begin(), body->inputs().end());
    for (ir::Node* inner : body->nodes()) {
      bool invariant = is_pure(*inner) && inner->blocks().empty();
      for (const ir::Value* v : inner->inputs()) invariant &= !variant.count(v);
      if (invariant) {
        inner->move_before(n);
        ++moved;
      } else {
        variant.insert(inner->outputs().begin(), inner->outputs().end());
      }
    }
  }
  return moved;
}

}  // namespace

PassResult hoist_loop_invariants(ir::Graph& g) { return {hoist(*g.block()), {}}; }

}  // namespace kiln::jit
