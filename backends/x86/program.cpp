#include "backends/x86/program.h"

#include <unordered_map>

#include "core/error.h"
#include "core/ir/graph.h"

namespace kiln::x86::detail {

Program lower(const ir::Graph& g) {
  Program p;
  std::unordered_map<const ir::Value*, int> id;
  bool any32 = false, any64 = false;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const ir::Value* v = g.inputs()[k];
    const ir::Type& t = v->type();
    if (!t.is_tensor() || !t.dtype) fail("x86: input {} is not a tensor of known dtype", k);
    DType dt = *t.dtype;
    if (dt == DType::Float32 || dt == DType::BFloat16) any32 = true;
    else if (dt == DType::Float64) any64 = true;
    else if (dt != DType::Bool) fail("x86: input {} has dtype {} (f32, bf16, f64 or bool only)", k, dtype_name(dt));
    p.input_dtypes.push_back(dt);
    PValue pv;
    pv.kind = PValue::Input;
    pv.input = int(k);
    pv.is_bool = dt == DType::Bool;
    pv.deps = uint64_t(1) << (k < 63 ? k : 63);
    id[v] = int(p.vals.size());
    p.vals.push_back(pv);
  }
  if (any32 && any64) fail("x86: inputs mix f32 (or bf16) and f64");
  p.f64 = any64;
  const DType cd = p.compute();
  auto arg = [&](const ir::Node* n, size_t i) {
    auto it = id.find(n->input(i));
    if (it == id.end()) fail("x86: {} reads a value defined outside the group", n->kind_name());
    return it->second;
  };
  auto check_dtype = [&](const ir::Value* v, bool is_bool) {
    const auto& t = v->type();
    if (t.dtype && register_dtype(*t.dtype) != (is_bool ? DType::Bool : cd))
      fail("x86: value of dtype {} in a {} group", dtype_name(*t.dtype), dtype_name(cd));
  };
  for (ir::Node* n : g.block()->nodes()) {
    if (p.red_val >= 0) fail("x86: the reduction must be the last node");
    if (n->prim() == ir::Prim::Constant) {
      PValue pv;
    pv.kind = PValue::Const;
      if (n->tensor().defined()) {
        if (n->tensor().numel() != 1) fail("x86: tensor constants must have one element");
        pv.cval = n->tensor().item<double>();
      } else if (n->attrs().has("value")) {
        bool ok = false;
        for (auto& [name, val] : n->attrs().items()) {
          if (name != "value") continue;
          if (auto* d = std::get_if<double>(&val)) pv.cval = *d, ok = true;
          else if (auto* i = std::get_if<int64_t>(&val)) pv.cval = double(*i), ok = true;
          else if (auto* b = std::get_if<bool>(&val)) pv.cval = *b ? 1.0 : 0.0, ok = true;
        }
        if (!ok) fail("x86: constant of unsupported kind");
      } else {
        fail("x86: constant without a value");
      }
      // Constants take the compute type (promotion already resolved), except bool tensor constants.
      if (n->tensor().defined() && n->tensor().dtype() == DType::Bool) pv.is_bool = true;
      if (p.f64 == false) pv.cval = double(float(pv.cval));
      id[n->output()] = int(p.vals.size());
      p.vals.push_back(pv);
      continue;
    }
    if (!n->is_op()) fail("x86: {} is not supported", n->kind_name());
    OpId op = n->op();
    const OpInfo& info = op_info(op);
    if (n->outputs().size() != 1) fail("x86: {} with {} outputs", info.name, n->outputs().size());
    if (info.kind == OpKind::Reduce) {
      if (n->inputs().size() != 1) fail("x86: {} takes one input", info.name);
      int a = arg(n, 0);
      if (p.vals[size_t(a)].is_bool) fail("x86: {} of a bool value", info.name);
      if (n->output()->has_uses()) {
        for (const auto& u : n->output()->uses())
          if (u.user->prim() != ir::Prim::Return) fail("x86: the reduction's result is used inside the group");
      }
      check_dtype(n->output(), false);
      p.red_dtype = n->output()->type().dtype.value_or(cd);
      p.red_val = a;
      p.red_op = op;
      if (n->attrs().has("dims")) p.red_dims = n->attrs().ints("dims");
      p.red_keepdim = n->attrs().b_or("keepdim", false);
      // Only "all dims" or "the last dim" (checked against the rank at run time when unknown here).
      const auto& t = n->input()->type();
      if (!p.red_dims.empty() && t.dims) {
        int64_t r = int64_t(t.dims->size());
        std::vector<bool> seen(size_t(r), false);
        for (int64_t d : p.red_dims) {
          int64_t dd = d < 0 ? d + r : d;
          if (dd < 0 || dd >= r) fail("x86: {} dim {} out of range", info.name, d);
          seen[size_t(dd)] = true;
        }
        size_t cnt = 0;
        for (bool s : seen) cnt += s;
        bool all = cnt == size_t(r);
        bool last = cnt == 1 && seen[size_t(r - 1)];
        if (!all && !last) fail("x86: {} over dims other than all or the last", info.name);
      }
      id[n->output()] = -1;
      continue;
    }
    PValue pv;
    pv.kind = PValue::Node;
    pv.op = op;
    if (op == OpId::Where) {
      if (n->inputs().size() != 3) fail("x86: where takes three inputs");
      for (size_t i = 0; i < 3; ++i) pv.args.push_back(arg(n, i));
      pv.is_bool = p.vals[size_t(pv.args[1])].is_bool && p.vals[size_t(pv.args[2])].is_bool;
    } else if (info.kind == OpKind::Unary) {
      if (n->inputs().size() != 1) fail("x86: {} takes one input", info.name);
      pv.args.push_back(arg(n, 0));
      bool in_bool = p.vals[size_t(pv.args[0])].is_bool;
      if (info.rule == DTypeRule::Logical) pv.is_bool = true;
      else if (info.rule == DTypeRule::Keep && in_bool) fail("x86: {} of a bool value", info.name);
    } else if (info.kind == OpKind::Binary) {
      if (n->inputs().size() != 2) fail("x86: {} takes two inputs", info.name);
      pv.args = {arg(n, 0), arg(n, 1)};
      bool both_bool = p.vals[size_t(pv.args[0])].is_bool && p.vals[size_t(pv.args[1])].is_bool;
      if (info.rule == DTypeRule::Compare || info.rule == DTypeRule::Logical) pv.is_bool = true;
      else if (info.rule == DTypeRule::Promote && both_bool) fail("x86: {} of two bool values", info.name);
    } else if (op == OpId::Cast) {
      // autocast's casts between f32 and bf16, both held as f32 in registers
      if (n->inputs().size() != 1) fail("x86: to takes one input");
      pv.args.push_back(arg(n, 0));
      if (p.vals[size_t(pv.args[0])].is_bool) fail("x86: to of a bool value");
      pv.to_bf16 = n->output()->type().dtype == DType::BFloat16;
    } else {
      fail("x86: op {} is not elementwise", info.name);
    }
    for (int a : pv.args) {
      if (a < 0) fail("x86: the reduction's result is used inside the group");
      pv.deps |= p.vals[size_t(a)].deps;
    }
    check_dtype(n->output(), pv.is_bool);
    id[n->output()] = int(p.vals.size());
    p.vals.push_back(pv);
    ++p.num_ops;
  }
  for (const ir::Value* v : g.outputs()) {
    auto it = id.find(v);
    if (it == id.end()) fail("x86: a group output is not defined in the group");
    if (it->second < 0) {
      p.out_slot.push_back(-1);
    } else {
      p.out_slot.push_back(int(p.outputs.size()));
      p.outputs.push_back(it->second);
      p.output_dtypes.push_back(p.vals[size_t(it->second)].is_bool ? DType::Bool : v->type().dtype.value_or(cd));
    }
  }
  if (g.outputs().empty()) fail("x86: the group has no outputs");
  return p;
}

}  // namespace kiln::x86::detail
