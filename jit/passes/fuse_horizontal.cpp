// Horizontal fusion: two fusion groups (or lone fusible ops) in one block that iterate over the same
// shape and do not depend on each other become one kernel with both sets of outputs, so inputs they
// share are read once and one loop runs instead of two. Groups ending in a reduction iterate over
// their input, not their output, and stay apart.
#include <algorithm>

#include "jit/fusion_group.h"
#include "jit/group_kinds.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

bool candidate(const ir::Node& n, const Backend* backend) {
  // A gemm group is a GEMM call, not a loop over its output, a conv-backward group GEMMs and folds, a
  // scatter-into-zeros group scatters: merged, any of them would become a group no backend compiles.
  if (!group_kind(n).empty()) return false;
  if (n.prim() == ir::Prim::FusionGroup) {
    for (const ir::Node* inner : n.blocks()[0]->nodes())
      if (inner->is_op() && op_info(inner->op()).kind == OpKind::Reduce) return false;
    return true;
  }
  return fusible(n, false, backend);
}

// The shape and dtype every output of a candidate has, or nothing when they differ or are unknown.
std::optional<ir::Type> space_of(const ir::Node& n) {
  std::optional<ir::Type> t;
  for (const ir::Value* v : n.outputs()) {
    if (!v->type().dims || !v->type().dtype) return std::nullopt;
    if (t && !(*t == v->type())) return std::nullopt;
    t = v->type();
  }
  return t;
}

// b reads nothing a produces, nor anything defined after a; every use of a's results comes after b.
bool independent(ir::Node* a, ir::Node* b) {
  for (ir::Value* v : b->inputs()) {
    ir::Node* d = v->node();
    if (d == a || (d->owning_block() == a->owning_block() && d->prim() != ir::Prim::Param && a->is_before(d)))
      return false;
  }
  for (ir::Value* o : a->outputs())
    for (const ir::Use& u : o->uses()) {
      ir::Node* h = u.user;
      while (h && h->owning_block() != a->owning_block()) h = h->owning_block()->owning_node();
      if (!h) return false;
      if (h != h->owning_block()->return_node() && !b->is_before(h)) return false;
    }
  return true;
}

// b may move up to just after a: everything it reads is defined before a (so nothing of a's either), and
// it reads no graph input a does not (moving a read of a parameter earlier would hold it longer: an FSDP
// unit's parameters are gathered just before their first reader).
bool hoistable(ir::Node* a, ir::Node* b) {
  for (ir::Value* v : b->inputs()) {
    ir::Node* d = v->node();
    if (d->prim() == ir::Prim::Param) {
      if (std::find(a->inputs().begin(), a->inputs().end(), v) == a->inputs().end()) return false;
      continue;
    }
    if (d->owning_block() == a->owning_block() && !d->is_before(a)) return false;
  }
  return true;
}

bool share_input(const ir::Node& a, const ir::Node& b) {
  for (const ir::Value* v : a.inputs())
    for (const ir::Value* w : b.inputs())
      if (v == w && !tensor_constant(v)) return true;
  return false;
}

std::vector<ir::Node*> members_of(ir::Node* n) {
  return n->prim() == ir::Prim::FusionGroup ? inline_group(n) : std::vector<ir::Node*>{n};
}

int64_t merge_block(ir::Graph& g, ir::Block& blk, const Backend* backend) {
  int64_t merged = 0;
  for (bool again = true; again;) {
    again = false;
    std::vector<ir::Node*> cands;
    for (ir::Node* n : blk.nodes())
      if (candidate(*n, backend)) cands.push_back(n);
    // pairs reading a common input first (a training forward's gelu and the derivative it saves share x and
    // its erf: gelu_shares_erf), then any pair
    for (int round = 0; round < 2 && !again; ++round)
      for (size_t i = 0; i < cands.size() && !again; ++i)
        for (size_t j = i + 1; j < cands.size() && !again; ++j) {
          ir::Node *a = cands[i], *b = cands[j];
          if (round == 0 && !share_input(*a, *b)) continue;
          auto sa = space_of(*a), sb = space_of(*b);
          if (!sa || !sb || !(*sa == *sb)) continue;
          const bool down = independent(a, b), up = !down && hoistable(a, b);
          if (!down && !up) continue;
          bool lone = a->prim() != ir::Prim::FusionGroup && b->prim() != ir::Prim::FusionGroup;
          if (lone) continue;  // two single ops: vertical fusion's business, not worth a kernel
          std::vector<ir::Node*> members = members_of(a), rest = members_of(b);
          if (down) {  // a's nodes move to just before b's, then both become one group in b's place
            for (ir::Node* m : members) m->move_before(rest.front());
          } else {  // b's nodes move to just after a's (a's results are read before b): the group in a's place
            ir::Node* after = members.back();
            for (ir::Node* m : rest) {
              m->move_after(after);
              after = m;
            }
          }
          members.insert(members.end(), rest.begin(), rest.end());
          make_group(g, members);
          ++merged;
          again = true;
        }
  }
  if (merged > 0) drop_unused_constants(blk);
  return merged;
}

}  // namespace

PassResult fuse_horizontal(ir::Graph& g, const Backend* backend) { return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return merge_block(g, b, backend); }), {}}; }

}  // namespace kiln::jit
