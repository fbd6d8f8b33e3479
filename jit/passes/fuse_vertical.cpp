// Vertical fusion: an elementwise chain (broadcasts allowed), optionally ending in one reduction over
// all dims or the last one, becomes a prim::FusionGroup the backend compiles into one kernel, so
// intermediates never reach memory. Greedy from the last node up, as TorchScript's fuser: a producer
// joins when every use of its result is in the group or comes after the group's place.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "jit/fusion_group.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

int64_t fuse_block(ir::Graph& g, ir::Block& b, const Backend* backend) {
  int64_t fused = 0;
  std::vector<ir::Node*> order;
  for (ir::Node* n : b.nodes()) order.push_back(n);
  std::unordered_map<const ir::Node*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  // the top-level node of b holding a use (a use may sit in a nested block)
  auto holder = [&](ir::Node* user) -> ir::Node* {
    while (user && user->owning_block() != &b) {
      ir::Block* ob = user->owning_block();
      user = ob ? ob->owning_node() : nullptr;
    }
    return user;
  };
  std::unordered_set<const ir::Node*> taken;
  for (size_t k = order.size(); k-- > 0;) {
    ir::Node* root = order[k];
    if (taken.count(root) || !(fusible(*root, false, backend) || fusible(*root, true, backend))) continue;
    std::vector<ir::Node*> members{root};
    std::unordered_set<const ir::Node*> in_group{root};
    // A kernel writes its outputs over one iteration space: the root's (its input's, for a reduction).
    bool reduces = op_info(root->op()).kind == OpKind::Reduce;
    const ir::Type& space = reduces ? root->input(0)->type() : root->output()->type();
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t m = 0; m < members.size(); ++m) {
        for (ir::Value* v : members[m]->inputs()) {
          ir::Node* p = v->node();
          if (p->owning_block() != &b || in_group.count(p) || taken.count(p) || !fusible(*p, false, backend)) continue;
          bool ok = true;
          for (ir::Value* o : p->outputs())
            for (const ir::Use& u : o->uses()) {
              if (in_group.count(u.user)) continue;
              ok &= o->type() == space;  // read outside: it becomes an output of the kernel
              ir::Node* h = holder(u.user);
              if (h == b.return_node()) continue;  // the block's result: read after everything
              ok &= h != nullptr && pos.count(h) && pos[h] > k;
            }
          if (!ok) continue;
          members.push_back(p);
          in_group.insert(p);
          grew = true;
        }
      }
    }
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end(), [&](ir::Node* a, ir::Node* c) { return pos[a] < pos[c]; });
    for (ir::Node* m : members) taken.insert(m);
    make_group(g, members);
    fused += int64_t(members.size());
  }
  if (fused > 0) drop_unused_constants(b);
  return fused;
}

}  // namespace

// A group's block is not entered: a gemm group's epilogue must stay a flat chain.
PassResult fuse_vertical(ir::Graph& g, const Backend* backend) {
  return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return fuse_block(g, b, backend); }), {}};
}

}  // namespace kiln::jit
