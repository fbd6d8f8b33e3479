#include "core/ir/match.h"

#include <algorithm>

namespace kiln::ir {

const Tensor* tensor_constant(const Value* v) {
  const Node* n = v->node();
  if (n->prim() != Prim::Constant || !n->tensor().defined()) return nullptr;
  return &n->tensor();
}

std::optional<size_t> argument_index(const Graph& g, const Value* v) {
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i] == v) return i;
  return std::nullopt;
}

bool is_zero_constant(const Value* v) {
  const Tensor* t = tensor_constant(v);
  if (!t || (t->dtype() != DType::Float32 && t->dtype() != DType::Float64) || !t->device().is_cpu()) return false;
  Tensor c = t->host_contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  return std::all_of(p, p + c.numel() * int64_t(c.element_size()), [](unsigned char b) { return b == 0; });
}

bool is_conv_bias_sum(const Node& n) {
  if (!n.is_op(OpId::Sum) || n.inputs().size() != 1 || n.outputs().size() != 1) return false;
  const Type &t = n.input(0)->type(), &o = n.output()->type();
  if (!t.is_tensor() || !t.dims || t.dims->size() != 4 || !t.dtype || !is_floating(*t.dtype) || o.dtype != t.dtype)
    return false;
  const Attrs& a = n.attrs();
  if (a.items().size() != 2 || !a.has("dims") || !a.has("keepdim") || a.b("keepdim")) return false;
  Shape dims = a.ints("dims");
  for (int64_t& d : dims)
    if (d < 0) d += 4;
  std::sort(dims.begin(), dims.end());
  return dims == Shape{0, 2, 3};
}

}  // namespace kiln::ir
