#include "backends/x86/fusion_backend.h"

#include "backends/x86/kernel.h"
#include "backends/x86/program.h"
#include "backends/x86/row_kernel.h"
#include "core/ir/graph.h"

namespace kiln::x86 {
namespace {

// The type in which the emitter holds a value in a vector register: f32 (for f32 and bf16 tensors) or
// f64, or bool (kept as 0/1 in the group's float type, loaded from and stored as bytes).
std::optional<DType> vector_dtype(const ir::Value* v) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dtype || !t.dims) return std::nullopt;
  DType d = *t.dtype;
  if (d != DType::Float32 && d != DType::Float64 && d != DType::BFloat16 && d != DType::Bool) return std::nullopt;
  return detail::register_dtype(d);
}

bool is_scalar_constant(const ir::Value* v) {
  const ir::Node* n = v->node();
  return n->prim() == ir::Prim::Constant && n->tensor().defined() && n->tensor().dim() == 0;
}

bool reduction_ok(const ir::Node& n) {
  if (!n.is_op() || op_info(n.op()).kind != OpKind::Reduce) return false;
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
  bool row_groups() const override { return true; }
  std::shared_ptr<backends::FusedKernel> compile(const ir::Graph& group, const std::string& name,
                                                 std::string* why_not) const override {
    // each kernel lowered and emitted once: compiling is the check
    try {
      if (is_row_group(group)) return compile_row(group, name);
      return std::make_shared<X86FusedKernel>(x86::compile(group, name));
    } catch (const Error& e) {
      if (why_not) *why_not = e.what();
      return nullptr;
    }
  }
};

}  // namespace

bool can_fuse(const ir::Node& n, bool reduction) {
  if (!n.is_op() || n.outputs().size() != 1) return false;
  if (reduction) {
    if (!reduction_ok(n)) return false;
  } else {
    OpKind k = op_info(n.op()).kind;
    if (k != OpKind::Unary && k != OpKind::Binary && !n.is_op(OpId::Where) && !n.is_op(OpId::Cast)) return false;
  }
  // autocast's casts between f32 and bf16: a rounding (to bf16) or nothing (to f32) in f32 registers
  if (n.is_op(OpId::Cast)) {
    auto f32_or_bf16 = [](const ir::Value* v) {
      auto d = v->type().dtype;
      return v->type().is_tensor() && v->type().dims && (d == DType::Float32 || d == DType::BFloat16);
    };
    return n.inputs().size() == 1 && f32_or_bf16(n.input(0)) && f32_or_bf16(n.output());
  }
  // Every float value of the node has one register type (a group computes in one: bf16 in f32, so the two
  // mix, as autocast's chains do); bools may mix in, as
  // comparisons, where's condition, relu's mask times a gradient. Bools are 0/1 in registers, so what
  // would have to stay bool through arithmetic (neg of a bool, add of two) is left to eager kernels.
  const OpInfo& info = op_info(n.op());
  auto is_bool = [](const ir::Value* v) { return v->type().dtype == DType::Bool; };
  size_t arity = n.inputs().size();
  if (info.kind == OpKind::Unary && (arity != 1 || (info.rule == DTypeRule::Keep && is_bool(n.input(0))))) return false;
  if (info.kind == OpKind::Binary &&
      (arity != 2 || (info.rule == DTypeRule::Promote && is_bool(n.input(0)) && is_bool(n.input(1)))))
    return false;
  std::optional<DType> flt;
  auto ok = [&](const ir::Value* v) {
    auto dt = vector_dtype(v);
    if (!dt) return false;
    if (*dt == DType::Bool) return !reduction;
    if (flt && *flt != *dt) return false;
    flt = dt;
    return true;
  };
  if (!ok(n.output())) return false;
  for (const ir::Value* v : n.inputs())
    if (!is_scalar_constant(v) && !ok(v)) return false;
  return true;
}

const backends::FusionBackend& fusion_rules() {
  static const X86Backend backend;
  return backend;
}

const backends::FusionBackend* fusion_backend() { return best_isa() == Isa::None ? nullptr : &fusion_rules(); }

}  // namespace kiln::x86
