#include "backends/interp/kernel_flops.h"

#include <optional>
#include <string>
#include <unordered_map>

#include "core/log.h"

#include "eager/profiler/flops.h"

namespace kiln::interp {
namespace {

using Bindings = std::unordered_map<std::string, int64_t>;

void bind_dims(const ir::Value* v, const IValue& x, Bindings& b) {
  if (!x.is_tensor() || !x.to_tensor().defined() || !v->type().dims) return;
  const std::vector<ir::Dim>& dims = *v->type().dims;
  const Tensor& t = x.to_tensor();
  if (int64_t(dims.size()) != t.dim()) return;
  for (size_t d = 0; d < dims.size(); ++d)
    if (!dims[d].sym.empty()) b.emplace(dims[d].sym, t.size(int64_t(d)));
}

std::optional<Shape> resolve(const ir::Value* v, const Bindings& b) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dims) return std::nullopt;
  Shape s;
  for (const ir::Dim& d : *t.dims) {
    if (d.size >= 0) {
      s.push_back(d.size);
    } else if (auto it = b.find(d.sym); !d.sym.empty() && it != b.end()) {
      s.push_back(it->second);
    } else {
      return std::nullopt;
    }
  }
  return s;
}

std::vector<Tensor> tensors(const std::vector<IValue>& vs) {
  std::vector<Tensor> ts;
  for (const IValue& v : vs) ts.push_back(v.is_tensor() ? v.to_tensor() : Tensor());
  return ts;
}

}  // namespace

int64_t kernel_flops(const ir::Node& n, const std::vector<IValue>& inputs, const std::vector<IValue>& outputs) {
  if (n.is_op()) return op_flops(n.op(), tensors(inputs), n.attrs(), tensors(outputs));
  if (n.prim() != ir::Prim::FusionGroup || n.blocks().empty()) return 0;  // no op runs: nothing to count
  const ir::Block& body = *n.blocks()[0];
  Bindings b;
  for (size_t i = 0; i < body.inputs().size() && i < inputs.size(); ++i) bind_dims(body.inputs()[i], inputs[i], b);
  for (size_t i = 0; i < body.outputs().size() && i < outputs.size(); ++i) bind_dims(body.outputs()[i], outputs[i], b);
  int64_t total = 0;
  for (const ir::Node* m : body.nodes()) {
    if (!m->is_op()) continue;
    std::vector<Shape> in, out;
    bool known = true;
    for (const ir::Value* v : m->inputs()) {
      std::optional<Shape> s = resolve(v, b);
      known = known && (s || !v->type().is_tensor());
      in.push_back(s.value_or(Shape{}));
    }
    for (const ir::Value* v : m->outputs()) {
      std::optional<Shape> s = resolve(v, b);
      known = known && s;
      out.push_back(s.value_or(Shape{}));
    }
    if (!known) {
      // Shape propagation leaves a dim unknown only after data-dependent ops, which no group holds.
      kiln::logger().warn("profile: {} in kernel {} has a dim its inputs do not determine; its flops are not counted",
                   m->kind_name(), n.attrs().s("name"));
      continue;
    }
    total += op_flops(m->op(), in, m->attrs(), out);
  }
  return total;
}

}  // namespace kiln::interp
