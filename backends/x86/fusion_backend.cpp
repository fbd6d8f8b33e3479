#include "backends/x86/fusion_backend.h"

#include "backends/x86/kernel.h"
#include "core/ir/graph.h"

namespace kiln::x86 {
namespace {

std::optional<DType> float_dtype(const ir::Value* v) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dtype || !t.dims) return std::nullopt;
  if (*t.dtype != DType::Float32 && *t.dtype != DType::Float64) return std::nullopt;
  return t.dtype;
}

bool is_scalar_constant(const ir::Value* v) {
  const ir::Node* n = v->node();
  return n->prim() == ir::Prim::Constant && n->tensor().defined() && n->tensor().dim() == 0;
}

bool reduction_ok(const ir::Node& n) {
  if (!(n.is_op(OpId::Sum) || n.is_op(OpId::Amax) || n.is_op(OpId::Amin))) return false;
  const auto& in = n.input(0)->type().dims;
  if (!in) return false;
  if (!n.attrs().has("dims") || n.attrs().ints("dims").empty()) return true;
  const Shape& d = n.attrs().ints("dims");
  int64_t rank = int64_t(in->size());
  if (d.size() == size_t(rank)) return true;  // every dim listed
  return d.size() == 1 && (d[0] == rank - 1 || d[0] == -1);
}

class X86FusedKernel final : public backends::FusedKernel {
 public:
  explicit X86FusedKernel(std::shared_ptr<Kernel> k) : k_(std::move(k)) {}
  const std::string& name() const override { return k_->name(); }
  Tensors run(const Tensors& inputs) const override { return k_->run(inputs); }

 private:
  std::shared_ptr<Kernel> k_;
};

class X86Backend final : public backends::FusionBackend {
 public:
  std::string_view name() const override { return "x86"; }
  Device::Type device_type() const override { return Device::Type::CPU; }
  bool can_fuse(const ir::Node& n, bool reduction) const override { return x86::can_fuse(n, reduction); }
  std::shared_ptr<backends::FusedKernel> compile(const ir::Graph& group, const std::string& name,
                                                 std::string* why_not) const override {
    if (!supported(group, why_not)) return nullptr;
    return std::make_shared<X86FusedKernel>(x86::compile(group, name));
  }
};

}  // namespace

bool can_fuse(const ir::Node& n, bool reduction) {
  if (!n.is_op() || n.outputs().size() != 1) return false;
  if (reduction) {
    if (!reduction_ok(n)) return false;
  } else {
    OpKind k = op_info(n.op()).kind;
    if (k != OpKind::Unary && k != OpKind::Binary) return false;  // where's bool condition is not of the group's dtype
  }
  auto dt = float_dtype(n.output());
  if (!dt) return false;
  for (const ir::Value* v : n.inputs()) {
    if (is_scalar_constant(v)) continue;
    auto in = float_dtype(v);
    if (!in || *in != *dt) return false;
  }
  return true;
}

const backends::FusionBackend* fusion_backend() {
  static const X86Backend backend;
  if (best_isa() == Isa::None) return nullptr;
  return &backend;
}

}  // namespace kiln::x86
