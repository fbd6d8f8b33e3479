// Vertical fusion: an elementwise chain (broadcasts allowed), optionally ending in one reduction over
// all dims or the last one, becomes a prim::FusionGroup the backend compiles into one kernel, so
// intermediates never reach memory. Greedy from the last node up, as TorchScript's fuser: a producer
// joins when every use of its result is in the group or comes after the group's place. Where the backend
// has row groups, a reduction over the last dim whose result the chain reads joins as well: softmax,
// layer_norm and their gradients become one kernel that runs row by row (FusionBackend::row_groups).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "jit/fusion_group.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

// The group's iteration space: the same dims, and values held alike in registers (bf16 as float32), so a
// bf16 layer norm's float32 statistics and its bf16 output share one row kernel.
bool same_space(const ir::Type& t, const ir::Type& space) {
  auto held = [](std::optional<DType> d) { return d == DType::BFloat16 ? std::optional<DType>(DType::Float32) : d; };
  return t.kind == space.kind && t.dims == space.dims && held(t.dtype) == held(space.dtype);
}

// A reduction over the last dim of `space` with keepdim: its result is one number per row, which the
// row's elementwise nodes read broadcast.
bool row_reduction(const ir::Node& n, const ir::Type& space, const Backend* backend) {
  if (!fusible(n, true, backend) || op_info(n.op()).kind != OpKind::Reduce) return false;
  if (!same_space(n.input(0)->type(), space) || !space.dims || space.dims->empty()) return false;
  if (!n.attrs().has("dims") || !n.attrs().b_or("keepdim", false)) return false;
  const Shape& d = n.attrs().ints("dims");
  const int64_t r = int64_t(space.dims->size());
  return d.size() == 1 && (d[0] == r - 1 || d[0] == -1);
}

// A lone elementwise node reading or writing bf16 (a GPT's gelu between two bf16 GEMMs) is worth a kernel of
// its own: eager widens whole tensors to float32 and rounds the result back, three passes and two fresh
// buffers, where the fused kernel loads bf16 into float32 registers and stores bf16 in one pass. Casts are
// one pass in eager already.
bool worth_alone(const ir::Node& n) {
  if (n.is_op(OpId::Cast) || op_info(n.op()).kind == OpKind::Reduce) return false;
  auto bf16 = [](const ir::Value* v) { return v->type().is_tensor() && v->type().dtype == DType::BFloat16; };
  bool any = bf16(n.output());
  for (const ir::Value* v : n.inputs()) any |= bf16(v);
  return any;
}

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
    // A kernel writes its outputs over one iteration space: the root's (its input's, for a reduction).
    bool reduces = op_info(root->op()).kind == OpKind::Reduce;
    const ir::Type& space = reduces ? root->input(0)->type() : root->output()->type();
    // Row groups (Backend::row_groups): reductions over the last dim of `space` may join too, and so
    // may values of one number per row (`rowvec`: space with last dim 1), as outputs; a trailing
    // reduction over every dim keeps the old rule (its kernel folds everything into one number).
    const bool rows = rules_of(backend).row_groups() && (!reduces || row_reduction(*root, space, backend));
    ir::Type rowvec = space;
    if (rowvec.dims && !rowvec.dims->empty()) rowvec.dims->back() = ir::Dim::known(1);
    auto grow = [&](bool allow_rowvec) {
      std::vector<ir::Node*> members{root};
      std::unordered_set<const ir::Node*> in_group{root};
      for (bool grew = true; grew;) {
        grew = false;
        for (size_t m = 0; m < members.size(); ++m) {
          for (ir::Value* v : members[m]->inputs()) {
            ir::Node* p = v->node();
            if (p->owning_block() != &b || in_group.count(p) || taken.count(p)) continue;
            if (!fusible(*p, false, backend) && !(rows && row_reduction(*p, space, backend))) continue;
            bool ok = true;
            for (ir::Value* o : p->outputs())
              for (const ir::Use& u : o->uses()) {
                if (in_group.count(u.user)) continue;
                // read outside: it becomes an output of the kernel
                ok &= same_space(o->type(), space) || (allow_rowvec && same_space(o->type(), rowvec));
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
      return members;
    };
    std::vector<ir::Node*> members = grow(rows);
    // An output of one number per row needs the row kernel, which a group without an inner reduction
    // does not get (its kernel writes every output over the whole space): grow it again without them.
    bool inner_reduction = false;
    for (ir::Node* m : members) inner_reduction |= m != root && op_info(m->op()).kind == OpKind::Reduce;
    if (rows && !inner_reduction) members = grow(false);
    if (members.size() < 2 && !worth_alone(*root)) continue;
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
