#include "jit/input_signature.h"

#include <fmt/format.h>

#include "eager/on_demand.h"
#include "jit/ir_utils.h"

namespace kiln::jit {

namespace {

InputKind kind_of(const IValue& v) {
  return v.is_tensor() ? InputKind::Tensor : v.is_int() ? InputKind::Int : v.is_double() ? InputKind::Float
       : v.is_bool() ? InputKind::Bool : v.is_string() ? InputKind::Str : v.is_none() ? InputKind::None
       : InputKind::Other;
}

std::string_view kind_name(InputKind k) {
  switch (k) {
    case InputKind::Tensor: return "Tensor";
    case InputKind::Int: return "int";
    case InputKind::Float: return "float";
    case InputKind::Bool: return "bool";
    case InputKind::Str: return "str";
    case InputKind::None: return "None";
    case InputKind::Other: return "other";
  }
  return "?";
}

// Registered storages only exist where some are (no look-up, no lock, otherwise).
bool is_on_demand(const Tensor& t, bool any) { return any && on_demand(t.storage().get()).has_value(); }

std::string sig_str(const InputSig& s) {
  if (s.kind != InputKind::Tensor) return std::string(kind_name(s.kind));
  std::string d;
  for (size_t i = 0; i < s.dims.size(); ++i) {
    // appended piece by piece: GCC 12's -Wrestrict misfires on `const char* + std::string` here
    if (i) d += ',';
    d += s.dims[i] == kSymbolicDim ? std::string("?") : std::to_string(s.dims[i]);
  }
  return fmt::format("{}[{}]{}{}{}", ir::dtype_short_name(s.dtype), d, s.contiguous ? "" : " strided",
                     s.requires_grad ? " requires_grad" : "", s.on_demand ? " on demand" : "");
}

}  // namespace

Signature signature_of(const std::vector<IValue>& inputs, bool grad_mode, const SymbolicDims* symbolic) {
  Signature s;
  s.grad_mode = grad_mode;
  s.inputs.reserve(inputs.size());
  const bool any = any_on_demand();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IValue& v = inputs[i];
    InputSig in;
    in.kind = kind_of(v);
    if (v.is_tensor()) {
      const Tensor& t = v.to_tensor();
      in.dtype = t.dtype();
      in.dims = t.impl()->sizes;
      in.contiguous = t.is_contiguous();
      in.device = t.device();
      in.requires_grad = t.requires_grad();
      in.on_demand = is_on_demand(t, any);
      if (symbolic)
        for (size_t d = 0; d < in.dims.size(); ++d)
          if (symbolic->count({int(i), int(d)})) in.dims[d] = kSymbolicDim;
    }
    s.inputs.push_back(std::move(in));
  }
  return s;
}

bool matches(const Signature& s, const std::vector<IValue>& inputs, bool grad_mode) {
  if (s.grad_mode != grad_mode || s.inputs.size() != inputs.size()) return false;
  const bool any = any_on_demand();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSig& want = s.inputs[i];
    const IValue& v = inputs[i];
    if (!v.is_tensor()) {
      if (want.kind == InputKind::Tensor) return false;
      continue;  // numbers and such: their kinds were checked by the Function's signature
    }
    if (want.kind != InputKind::Tensor) return false;
    const Tensor& t = v.to_tensor();
    const TensorImpl* impl = t.impl();
    if (impl->dtype != want.dtype || impl->sizes.size() != want.dims.size() || t.requires_grad() != want.requires_grad)
      return false;
    for (size_t d = 0; d < want.dims.size(); ++d)
      if (want.dims[d] != kSymbolicDim && want.dims[d] != impl->sizes[d]) return false;
    if (t.is_contiguous() != want.contiguous || !(t.device() == want.device)) return false;
    if (is_on_demand(t, any) != want.on_demand) return false;
  }
  return true;
}

std::string miss_reason(const Signature& before, const Signature& now, std::pair<int, int>* dim) {
  *dim = {-1, -1};
  if (before.grad_mode != now.grad_mode) return fmt::format("grad mode changed {} -> {}", before.grad_mode, now.grad_mode);
  for (size_t i = 0; i < now.inputs.size(); ++i) {
    const InputSig &a = before.inputs[i], &b = now.inputs[i];
    if (a == b) continue;
    if (a.kind != b.kind) return fmt::format("input {} changed kind {} -> {}", i, sig_str(a), sig_str(b));
    if (a.dtype != b.dtype)
      return fmt::format("input {} dtype changed {} -> {}", i, ir::dtype_short_name(a.dtype), ir::dtype_short_name(b.dtype));
    if (a.dims.size() != b.dims.size()) return fmt::format("input {} rank changed {} -> {}", i, a.dims.size(), b.dims.size());
    for (size_t d = 0; d < a.dims.size(); ++d)
      if (a.dims[d] != b.dims[d]) {
        *dim = {int(i), int(d)};
        return fmt::format("input {} dim {} changed {} -> {}", i, d, a.dims[d], b.dims[d]);
      }
    if (a.contiguous != b.contiguous) return fmt::format("input {} contiguity changed", i);
    if (!(a.device == b.device)) return fmt::format("input {} device changed {} -> {}", i, a.device.str(), b.device.str());
    if (a.on_demand != b.on_demand) return fmt::format("input {} {} memory filled on demand", i, b.on_demand ? "now has" : "no longer has");
    return fmt::format("input {} requires_grad changed", i);
  }
  return "signature changed";
}

std::shared_ptr<ir::Graph> specialise(const ir::Graph& source, const Signature& sig) {
  std::shared_ptr<ir::Graph> g = source.copy();
  bool changed = false;
  for (size_t i = 0; i < sig.inputs.size() && i < g->inputs().size(); ++i) {
    const InputSig& in = sig.inputs[i];
    if (in.kind != InputKind::Tensor) continue;
    std::vector<ir::Dim> dims;
    for (size_t d = 0; d < in.dims.size(); ++d)
      dims.push_back(in.dims[d] == kSymbolicDim ? ir::Dim::symbolic(fmt::format("s{}_{}", i, d)) : ir::Dim::known(in.dims[d]));
    ir::Type t = ir::Type::tensor(in.dtype, std::move(dims));
    if (!(g->inputs()[i]->type() == t)) changed = true;
    g->inputs()[i]->set_type(std::move(t));
  }
  if (changed)
    for_each_node(*g->block(), [](ir::Node* n) {
      if (n->is_op())
        for (ir::Value* o : n->outputs()) o->set_type(ir::Type::tensor());
    });
  return g;
}

}  // namespace kiln::jit
