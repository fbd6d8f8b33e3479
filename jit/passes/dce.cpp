// Dead code elimination: a pure node none of whose outputs is used goes, innermost blocks first,
// last node first so a chain of dead nodes goes in one sweep. An If's or a Loop's output nobody reads
// goes too, with the work inside the blocks that only fed it:
//   If:   output k unused → output k of the If and of both blocks removed.
//   Loop: carried value k whose loop output is unused and which nothing else in the body depends on
//         (the condition, other carried values, a raise) → its initial value, block argument, next
//         value and output removed.
#include <unordered_set>

#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

int64_t sweep(ir::Block& b);

// Every value read inside n's blocks, at any depth (a nested block may read an outer block's values).
void reads_inside(const ir::Node& n, std::unordered_set<const ir::Value*>& out) {
  for (const ir::Block* sub : n.blocks()) {
    for (const ir::Node* m : sub->nodes()) {
      for (const ir::Value* v : m->inputs()) out.insert(v);
      reads_inside(*m, out);
    }
    for (const ir::Value* v : sub->outputs()) out.insert(v);
  }
}

// The values body's results other than `skip` and its impure nodes depend on.
std::unordered_set<const ir::Value*> live_without(const ir::Block& body, size_t skip) {
  std::unordered_set<const ir::Value*> live;
  for (size_t i = 0; i < body.outputs().size(); ++i)
    if (i != skip) live.insert(body.outputs()[i]);
  std::vector<const ir::Node*> nodes;
  for (const ir::Node* n : body.nodes()) nodes.push_back(n);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node* n = *it;
    bool needed = !is_pure(*n);
    for (const ir::Value* o : n->outputs()) needed |= live.count(o) > 0;
    if (!needed) continue;
    for (const ir::Value* v : n->inputs()) live.insert(v);
    reads_inside(*n, live);
  }
  return live;
}

int64_t drop_dead_outputs(ir::Node* n) {
  int64_t removed = 0;
  if (n->prim() == ir::Prim::If) {
    for (size_t k = n->outputs().size(); k-- > 0;) {
      if (n->output(k)->has_uses()) continue;
      for (ir::Block* b : n->blocks()) b->erase_output(k);
      n->erase_output(k);
      ++removed;
    }
  } else if (n->prim() == ir::Prim::Loop) {
    ir::Block* body = n->blocks()[0];
    // Loop inputs (trip_count, cond, carried...), block arguments (i, carried...), block results
    // (cond, carried...), outputs (carried...): carried value k sits at k+2, k+1, k+1 and k.
    for (size_t k = n->outputs().size(); k-- > 0;) {
      if (n->output(k)->has_uses()) continue;
      if (live_without(*body, k + 1).count(body->inputs()[k + 1])) continue;
      body->erase_output(k + 1);
      removed += sweep(*body);
      body->erase_input(k + 1);
      n->remove_input(k + 2);
      n->erase_output(k);
      ++removed;
    }
  }
  return removed;
}

int64_t sweep(ir::Block& b) {
  int64_t removed = 0;
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : b.nodes()) nodes.push_back(n);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    ir::Node* n = *it;
    removed += drop_dead_outputs(n);
    for (ir::Block* sub : n->blocks()) removed += sweep(*sub);
    bool used = false;
    for (ir::Value* v : n->outputs()) used |= v->has_uses();
    if (!used && is_pure(*n)) {
      n->destroy();
      ++removed;
    }
  }
  return removed;
}

}  // namespace

PassResult eliminate_dead_code(ir::Graph& g) { return {sweep(*g.block()), {}}; }

}  // namespace kiln::jit
