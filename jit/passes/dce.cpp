// Dead code elimination: a pure node none of whose outputs is used goes, innermost blocks first,
// last node first so a chain of dead nodes goes in one sweep.
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {
int64_t sweep(ir::Block& b) {
  int64_t removed = 0;
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : b.nodes()) nodes.push_back(n);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    ir::Node* n = *it;
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
