// torch.nn layers called in a method (`self.fc(x)`): a registered layer's forward is eager's own template
// (eager/nn/registry.h) lowered through a LoweringBuilder, with its parameters and buffers as bound graph
// inputs; Sequential calls its items. The composites lowered here for torch.nn.functional are eager's too.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "eager/composites.h"
#include "eager/nn/layers.h"
#include "eager/nn/registry.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/lowering_builder.h"

namespace kiln::script {

using ir::Prim;
using Kind = Static::Kind;

Value* softmax_of(Lowerer& L, Value* x, int64_t dim, bool log) {
  LoweringBuilder b(L);
  return log ? composite::log_softmax(b, x, dim) : composite::softmax(b, x, dim);
}

Value* dropout_of(Lowerer& L, Value* x, double p, bool training) {
  LoweringBuilder b(L);
  return composite::dropout(b, x, p, training);
}

Value* layer_norm_of(Lowerer& L, Value* x, const Shape& normalized_shape, Value* weight, Value* bias, double eps) {
  LoweringBuilder b(L);
  return composite::layer_norm(b, x, normalized_shape, weight, bias, eps);
}

// The attention composites' causal mask, over two (sz, 1) tensors that carry the length.
Value* square_subsequent_mask_of(Lowerer& L, Value* sz) {
  auto full = [&](std::vector<Value*> dims) {
    ir::Node* n = L.graph().create(Prim::Full, 1);
    n->add_input(L.prim(Prim::ListConstruct, dims, Type::list(Type::scalar(ir::TypeKind::Int))));
    n->add_input(L.constant(0.0));
    n->attrs().set("dtype", DType::Float32);
    n->output()->set_type(Type::tensor());
    return L.emit(n)->output();
  };
  LoweringBuilder b(L);
  Value* col = full({sz, L.constant(int64_t(1))});
  return b.op(OpId::Where, {b.causal_mask(col, col), full({sz, sz}), b.scalar(-INFINITY)});
}

Value* linear_of(Lowerer& L, Value* x, Value* weight, Value* bias) {
  LoweringBuilder b(L);
  return composite::linear(b, x, weight, bias);
}

namespace {

// forward's arguments bound to `names` as Python binds them (positional, then keywords); the first
// `required` must be given. Unset ones are null.
struct ForwardArgs {
  std::vector<Value*> values;
  std::vector<SourceLoc> locs;
};
ForwardArgs bind_forward(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, const std::vector<std::string>& names,
                         size_t required, SourceLoc loc) {
  ForwardArgs r{std::vector<Value*>(names.size(), nullptr), std::vector<SourceLoc>(names.size(), loc)};
  if (a.pos.size() > names.size())
    L.fail(loc, fmt::format("{}.forward() takes {} arguments ({}), got {}", o.cls, names.size(), fmt::join(names, ", "), a.pos.size()));
  for (size_t i = 0; i < a.pos.size(); ++i) r.values[i] = a.pos[i], r.locs[i] = a.pos_locs[i];
  for (const auto& k : a.kw) {
    auto it = std::find(names.begin(), names.end(), k.name);
    if (it == names.end()) L.fail(k.loc, fmt::format("{}.forward() got an unexpected keyword argument '{}'", o.cls, k.name));
    size_t i = size_t(it - names.begin());
    if (r.values[i]) L.fail(k.loc, fmt::format("{}.forward() got multiple values for argument '{}'", o.cls, k.name));
    r.values[i] = k.value, r.locs[i] = k.loc;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!r.values[i]) L.fail(loc, fmt::format("{}.forward() is missing required argument '{}'", o.cls, names[i]));
    if (!r.values[i]->type().is_tensor())
      L.fail(r.locs[i], fmt::format("{}.forward() expects a Tensor for {}, got {}", o.cls, names[i], r.values[i]->type().str()));
  }
  return r;
}

// forward(input, target, ...) of a layer taking several tensors (the losses).
Value* call_multi_input_layer(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, SourceLoc loc) {
  ForwardArgs f = bind_forward(L, o, a, o.spec->inputs, o.spec->inputs.size(), loc);
  LoweringBuilder b(L, o.path.empty() ? "" : o.path + ".");
  return o.spec->lower_inputs(b, *o.module, f.values);
}

// The tensors of a recurrent layer's hx argument: a Tensor, a tuple of them (h_0, c_0), or None.
std::vector<Value*> state_tensors(Lowerer& L, const Object& o, Value* hx, SourceLoc loc) {
  const Type& t = hx->type();
  if (t.kind == ir::TypeKind::None) return {};
  if (t.is_tensor()) return {hx};
  if (t.kind == ir::TypeKind::Tuple) {
    std::vector<Value*> r;
    for (size_t i = 0; i < t.elems.size(); ++i) {
      if (!t.elems[i].is_tensor())
        L.fail(loc, fmt::format("{}.forward(): hx must hold Tensors, got {}", o.cls, t.str()));
      if (hx->node()->prim() == Prim::TupleConstruct) {
        r.push_back(hx->node()->input(i));
        continue;
      }
      ir::Node* n = L.graph().create(Prim::TupleIndex, 1);
      n->add_input(hx);
      n->attrs().set("index", int64_t(i));
      n->output()->set_type(t.elems[i]);
      r.push_back(L.emit(n)->output());
    }
    return r;
  }
  L.fail(loc, fmt::format("{}.forward(): hx must be a Tensor, a tuple of Tensors or None, got {}", o.cls, t.str()));
}

// A recurrent layer on a packed batch (packed_sequences.cpp): its output packed as the input was.
Value* call_packed(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, SourceLoc loc) {
  ForwardArgs f = bind_forward(L, o, a, {"input", "hx"}, 0, loc);
  if (!o.spec->lower_packed) L.fail(f.locs[0], fmt::format("{}.forward() does not take a PackedSequence", o.cls));
  auto [padded, lengths] = *L.packed_parts(f.values[0]);
  std::vector<Value*> hx = f.values[1] ? state_tensors(L, o, f.values[1], f.locs[1]) : std::vector<Value*>{};
  LoweringBuilder b(L, o.path.empty() ? "" : o.path + ".");
  std::vector<Value*> r = o.spec->lower_packed(b, *o.module, padded, lengths, hx);
  Value* out = L.packed_value(r[0], lengths, L.packed_enforce_sorted(f.values[0]));  // torch keeps the input's indices
  return r.size() == 2 ? L.tuple({out, r[1]}) : L.tuple({out, L.tuple({r[1], r[2]})});
}

// forward(input, hx=None) of a layer with a state (nn.LSTM, nn.GRUCell, ...): torch's tuple results.
Value* call_with_state(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, SourceLoc loc) {
  Value* input = !a.pos.empty() ? a.pos[0] : nullptr;
  for (const auto& k : a.kw)
    if (k.name == "input") input = k.value;
  if (input && L.packed_parts(input)) return call_packed(L, o, a, loc);
  ForwardArgs f = bind_forward(L, o, a, {"input", "hx"}, 1, loc);
  std::vector<Value*> hx = f.values[1] ? state_tensors(L, o, f.values[1], f.locs[1]) : std::vector<Value*>{};
  LoweringBuilder b(L, o.path.empty() ? "" : o.path + ".");
  std::vector<Value*> r;
  try {
    r = o.spec->lower_with_state(b, *o.module, f.values[0], hx);
  } catch (const Error& e) {
    // word_lm's `forward(self, input, hidden)` passes an LSTM's (h, c) through an unannotated parameter: a
    // Tensor until a call gives it a tuple (ScriptedModule types such a parameter by the call's arguments)
    if (f.values[1] && L.untyped_parameter(f.values[1])) throw Lowerer::UntypedParameter(e.what());
    throw;
  }
  if (r.size() == 1) return r[0];
  if (r.size() == 2) return L.tuple({r[0], r[1]});
  return L.tuple({r[0], L.tuple({r[1], r[2]})});
}

// A flag of forward(): a bool constant, None meaning False (torch's Optional[bool] is_causal).
bool flag_of(Lowerer& L, const Object& o, const std::string& name, Value* v, SourceLoc loc) {
  if (v->type().kind == ir::TypeKind::None) return false;
  const ir::Node* n = v->node();
  if (n->prim() == Prim::Constant && !n->tensor().defined())
    for (const auto& [k, a] : n->attrs().items())
      if (k == "value" && std::holds_alternative<bool>(a)) return std::get<bool>(a);
  L.fail(loc, fmt::format("{}.forward(): {} must be a bool constant in kiln script, got {}", o.cls, name, v->type().str()));
}

// forward(...) of a layer with optional tensors and flags (nn.MultiheadAttention, the Transformer layers):
// torch's names and defaults from its LayerSpec; a tuple where it returns several values.
Value* call_with_params(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, SourceLoc loc) {
  const auto& params = o.spec->call_params;
  std::vector<std::string> names;
  size_t required = 0;
  for (const nn::LayerParam& p : params) {
    names.push_back(p.name);
    if (!p.default_value) ++required;
  }
  ForwardArgs f = bind_forward(L, o, a, names, required, loc);
  std::vector<Value*> tensors(params.size(), nullptr);
  std::map<std::string, bool> flags;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& d = params[i].default_value;
    Value* v = f.values[i];
    if (d && d->is_bool()) {
      flags[params[i].name] = v ? flag_of(L, o, params[i].name, v, f.locs[i]) : d->to_bool();
      continue;
    }
    if (!v || v->type().kind == ir::TypeKind::None) continue;
    if (!v->type().is_tensor())
      L.fail(f.locs[i], fmt::format("{}.forward() expects a Tensor or None for {}, got {}", o.cls, params[i].name, v->type().str()));
    tensors[i] = v;
  }
  LoweringBuilder b(L, o.path.empty() ? "" : o.path + ".");
  std::vector<Value*> r = o.spec->lower_call(b, *o.module, tensors, flags);
  for (Value*& v : r)
    if (!v) v = L.graph().insert_none();
  return r.size() == 1 ? r[0] : L.tuple(r);
}

}  // namespace

Value* call_layer(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, SourceLoc loc) {
  if (o.layer == Layer::ModuleList) L.fail(loc, "a ModuleList is not callable; iterate over it or index it");
  if (o.layer == Layer::ModuleDict) L.fail(loc, "a ModuleDict is not callable; call the modules it holds (self.blocks.name(x))");
  if (o.layer == Layer::Registered && o.spec->lower_call) return call_with_params(L, o, a, loc);
  if (o.layer == Layer::Registered && o.spec->inputs.size() > 1) return call_multi_input_layer(L, o, a, loc);
  if (o.layer == Layer::Registered && o.spec->lower_with_state) return call_with_state(L, o, a, loc);
  // Every layer's forward takes one input (named `input`, as in PyTorch).
  if (a.pos.size() + a.kw.size() != 1 || (!a.kw.empty() && a.kw[0].name != "input"))
    L.fail(loc, fmt::format("{}.forward() takes one argument (input), got {}", o.cls, a.pos.size() + a.kw.size()));
  Value* x = a.pos.empty() ? a.kw[0].value : a.pos[0];
  SourceLoc xloc = a.pos.empty() ? a.kw[0].loc : a.pos_locs[0];
  if (o.layer == Layer::Sequential) {
    for (const ObjectPtr& item : o.items) {
      Lowerer::CallArgs next;
      next.pos = {x};
      next.pos_locs = {xloc};
      x = L.call_object(*item, next, loc);
      if (!x->type().is_tensor())
        L.fail(loc, fmt::format("{} in a Sequential returns {}, not a Tensor", item->cls, x->type().str()));
    }
    return x;
  }
  if (!x->type().is_tensor()) L.fail(xloc, fmt::format("{}.forward() expects a Tensor, got {}", o.cls, x->type().str()));
  nn::Module& m = *o.module;
  std::string prefix = o.path.empty() ? "" : o.path + ".";
  if (o.layer == Layer::Registered) {
    LoweringBuilder b(L, prefix);
    return o.spec->lower(b, m, x);
  }
  L.fail(loc, fmt::format("internal error: {} has no lowering", o.cls));
}

}  // namespace kiln::script
