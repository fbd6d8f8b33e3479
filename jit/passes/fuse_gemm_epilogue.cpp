// GEMM epilogue fusion: a float32 matmul of a [..., M, K] by a 2-D [K, N] (a Linear's weight; the
// leading dims are more rows of one GEMM) whose result only feeds an elementwise epilogue — add of a
// bias broadcast over rows ([N], [1,N], [1,1,N], ...), then relu or gelu (erf form), then add of a
// residual of the result's shape, each step optional but at least one present — becomes a gemm group.
// A float32 matmul whose result only feeds a multiply by a value of its shape (the backward's gradient
// through gelu or relu: the incoming gradient's product times the saved derivative) takes that multiply alone.
// A bf16 matmul (autocast's Linear) takes relu or gelu, then an add of a float32 residual of the result's
// shape (the float32 residual stream around autocast's Linears), whose float32 sum ends the chain: under
// autocast those steps are eager kernels converting to float32 and back, while oneDNN applies them to the
// float32 accumulator (one rounding fewer). Adds of two bf16 values (the backward's gradient sums) are left
// with eager's rounding of the product first.
//
//   %y : f32[M,N] = prim::FusionGroup[name="gemm_matmul_add_relu", kind="gemm"](%x, %wt, %b)
//     block0(%0 : f32[M,K], %1 : f32[K,N], %2 : f32[N]):
//       %3 : f32[M,N] = matmul(%0, %1)
//       %4 : f32[M,N] = add(%3, %2)
//       %5 : f32[M,N] = relu(%4)
//       -> (%5)
//
// The executor runs it as one oneDNN matmul with post-ops (backends/cpu/gemm_group.cpp), so the GEMM's result
// is finished while it is still in cache instead of being written out and read back by a second
// kernel; without oneDNN, the matmul and then the epilogue compiled as a fusion group. The block is
// an ordinary graph, so the interpreter runs it node by node.
//
// Runs before fuse_vertical, which would otherwise take the epilogue into an elementwise group. A
// transposed weight (traced nn::Linear's `matmul(x, permute(w))`) stays a view outside the group:
// the kernel reads its strides and copies nothing.
#include "jit/fusion_group.h"
#include "jit/group_kinds.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

// Equal at run time for certain: both known and equal, or the same symbol (unknown dims are not).
bool same_dim(const ir::Dim& a, const ir::Dim& b) {
  return a.is_known() ? a == b : !a.sym.empty() && a.sym == b.sym;
}

bool has_type(const ir::Value* v, size_t rank, DType dt) {
  const ir::Type& t = v->type();
  return t.is_tensor() && t.dtype == dt && t.dims && t.dims->size() == rank;
}

size_t rank_of(const ir::Value* v) {
  const ir::Type& t = v->type();
  return t.is_tensor() && t.dims ? t.dims->size() : 0;
}

// The type of the matmul's result, exactly (in dtype dt if given): an epilogue step that broadcast further
// would change it.
bool same_type(const ir::Value* v, const ir::Value* mm, std::optional<DType> dt = std::nullopt) {
  size_t r = rank_of(mm);
  if (!has_type(v, r, dt.value_or(*mm->type().dtype))) return false;
  const auto &d = *v->type().dims, &m = *mm->type().dims;
  for (size_t i = 0; i < r; ++i)
    if (!same_dim(d[i], m[i])) return false;
  return true;
}

// [N], [1,N], [1,1,N] up to the result's rank: one value per column, the same for every row.
bool is_row_bias(const ir::Value* v, const ir::Value* mm) {
  const ir::Dim& n = mm->type().dims->back();
  size_t r = rank_of(v);
  if (r == 0 || r > rank_of(mm) || !has_type(v, r, *mm->type().dtype)) return false;
  const auto& d = *v->type().dims;
  for (size_t i = 0; i + 1 < r; ++i)
    if (d[i] != ir::Dim::known(1)) return false;
  return same_dim(d.back(), n);
}

// The one node reading v, in v's block, reading it once; null otherwise.
ir::Node* sole_user(const ir::Value* v) {
  if (v->uses().size() != 1) return nullptr;
  ir::Node* u = v->uses()[0].user;
  return u->owning_block() == v->node()->owning_block() ? u : nullptr;
}

// The operand of a binary `op` other than `v`; null when n is not such an op of v and another value.
ir::Value* other_operand(const ir::Node* n, OpId op, const ir::Value* v) {
  if (!n->is_op(op) || n->inputs().size() != 2) return nullptr;
  ir::Value *x = n->input(0), *y = n->input(1);
  if (x == v && y != v) return y;
  if (y == v && x != v) return x;
  return nullptr;
}

// The matmul followed by its epilogue, in order; just the matmul when there is none to fuse.
std::vector<ir::Node*> epilogue_chain(ir::Node* mm) {
  std::vector<ir::Node*> chain{mm};
  if (!mm->is_op(OpId::Matmul) || mm->inputs().size() != 2 || mm->outputs().size() != 1) return chain;
  const ir::Value* out = mm->output();
  size_t r = rank_of(mm->input(0));
  const DType dt = out->type().dtype.value_or(DType::Float64);
  if (dt != DType::Float32 && dt != DType::BFloat16) return chain;
  if (r < 2 || !has_type(mm->input(0), r, dt) || !has_type(mm->input(1), 2, dt) || !has_type(out, r, dt)) return chain;
  // The steps in the order oneDNN applies them, each taken at most once.
  enum Step { Bias, Activation, Residual, Done };
  Step next = Bias;
  const ir::Value* cur = out;
  while (next != Done) {
    ir::Node* u = sole_user(cur);
    if (!u || u->outputs().size() != 1) break;
    ir::Value* x = other_operand(u, OpId::Add, cur);
    ir::Value* f = other_operand(u, OpId::Mul, cur);
    if (f) {
      // float32 only: a bf16 product would be rounded once where eager rounds it before the multiply
      if (dt != DType::Float32 || next != Bias || !same_type(f, out) || !same_type(u->output(), out)) break;
      next = Done;
    } else if (dt == DType::BFloat16 && x) {
      if (!same_type(x, out, DType::Float32) || !same_type(u->output(), out, DType::Float32)) break;
      next = Done;
    } else if (!same_type(u->output(), out)) {
      break;
    } else if (x) {
      if (next <= Bias && is_row_bias(x, out)) next = Activation;
      else if (same_type(x, out)) next = Done;
      else break;
    } else if ((u->is_op(OpId::Relu) || u->is_op(OpId::Gelu)) && next <= Activation) {
      next = Residual;
    } else {
      break;
    }
    chain.push_back(u);
    cur = u->output();
  }
  return chain;
}

int64_t fuse_block(ir::Graph& g, ir::Block& b) {
  int64_t fused = 0;
  std::vector<ir::Node*> matmuls;
  for (ir::Node* n : b.nodes())
    if (n->is_op(OpId::Matmul)) matmuls.push_back(n);
  // Chains are disjoint (every member but the last has one user, the next), so fusing one leaves
  // the others' nodes in place.
  for (ir::Node* mm : matmuls) {
    std::vector<ir::Node*> chain = epilogue_chain(mm);
    if (chain.size() < 2) continue;
    std::string name = "gemm";
    for (const ir::Node* n : chain) name.append("_").append(n->kind_name());
    ir::Node* group = make_group(g, chain);
    group->attrs().set("name", name);
    set_group_kind(*group, kGemmKind);
    fused += int64_t(chain.size());
  }
  return fused;
}

}  // namespace

PassResult fuse_gemm_epilogue(ir::Graph& g) { return {sum_over_blocks(*g.block(), [&](ir::Block& b) { return fuse_block(g, b); }), {}}; }

}  // namespace kiln::jit
