#include "jit/ir_utils.h"

namespace kiln::jit {

using ir::Prim;

bool is_pure(const ir::Node& n) {
  if (ir::prim_effect(n.prim()) != ir::Effect::Pure) return false;
  for (const ir::Block* b : n.blocks())
    for (const ir::Node* inner : b->nodes())
      if (!is_pure(*inner)) return false;
  return true;
}

void for_each_node(const ir::Block& b, const std::function<void(ir::Node*)>& f) {
  for (ir::Node* n : b.nodes()) {
    f(n);
    for (const ir::Block* sub : n->blocks()) for_each_node(*sub, f);
  }
}

int64_t sum_over_blocks(ir::Block& b, const std::function<int64_t(ir::Block&)>& f) {
  int64_t total = 0;
  for (ir::Node* n : b.nodes())
    if (n->prim() != Prim::FusionGroup)
      for (ir::Block* sub : n->blocks()) total += sum_over_blocks(*sub, f);
  return total + f(b);
}

bool is_constant(const ir::Value* v) { return v->node()->prim() == Prim::Constant; }

std::optional<double> scalar_constant(const ir::Value* v) {
  if (const Tensor* t = tensor_constant(v)) {
    if (t->numel() != 1) return std::nullopt;
    return t->item_double();
  }
  const ir::Node* n = v->node();
  if (n->prim() != Prim::Constant || !n->attrs().has("value")) return std::nullopt;
  for (const auto& [k, val] : n->attrs().items()) {
    if (k != "value") continue;
    if (auto* i = std::get_if<int64_t>(&val)) return double(*i);
    if (auto* d = std::get_if<double>(&val)) return *d;
    if (auto* b = std::get_if<bool>(&val)) return double(*b);
  }
  return std::nullopt;
}

bool is_elementwise(const ir::Node& n) {
  if (!n.is_op()) return false;
  OpKind k = op_info(n.op()).kind;
  return k == OpKind::Unary || k == OpKind::Binary || n.op() == OpId::Where;
}

ir::Type flash_attention_lse_type(const ir::Type& out) {
  std::optional<DType> dt;
  if (out.dtype) dt = *out.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  std::optional<std::vector<ir::Dim>> dims;
  if (out.dims && !out.dims->empty()) dims = std::vector<ir::Dim>(out.dims->begin(), out.dims->end() - 1);
  return ir::Type::tensor(dt, dims);
}

}  // namespace kiln::jit
