// nn.parallel.data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None) in
// lowered code (PyTorch's DCGAN example calls it when `input.is_cuda and self.ngpu > 1`). It scatters the batch
// over the devices, runs a replica of the module on each piece and gathers the results along dim: the same
// maths as the module on the whole batch on one device, which is what it lowers to. device_ids, output_device
// and dim only place the work, so they are not lowered (`range(self.ngpu)` is no value a graph needs).
#include <fmt/format.h>

#include <algorithm>

#include "script_frontend/lowerer.h"

namespace kiln::script {

using ir::Node;
using ir::Prim;

bool Lowerer::is_data_parallel(const Expr& fn) {
  if (fn.kind != ExprKind::Attribute || fn.name != "data_parallel") return false;
  const Expr& parallel = *fn.args[0];
  if (parallel.kind != ExprKind::Attribute || parallel.name != "parallel") return false;
  const Expr& nn = *parallel.args[0];
  if (nn.kind == ExprKind::Name) return m_->nn_names.count(nn.name) && !frame().env.count(nn.name);
  return nn.kind == ExprKind::Attribute && nn.name == "nn" && nn.args[0]->kind == ExprKind::Name &&
         nn.args[0]->name == "torch" && m_->imported.count("torch") && !frame().env.count("torch");
}

Value* Lowerer::data_parallel(const Expr& call) {
  static const std::vector<std::string> params = {"module", "inputs", "device_ids", "output_device", "dim", "module_kwargs"};
  std::vector<const Expr*> bound(params.size(), nullptr);
  for (size_t i = 1; i < call.args.size(); ++i) {
    if (call.args[i]->kind == ExprKind::Starred) fail(call.args[i]->loc, "data_parallel() takes no starred arguments in kiln script");
    if (i > params.size()) fail(call.args[i]->loc, fmt::format("data_parallel() takes at most {} arguments", params.size()));
    bound[i - 1] = call.args[i].get();
  }
  for (const Keyword& k : call.keywords) {
    auto it = std::find(params.begin(), params.end(), k.name);
    if (it == params.end()) fail(k.loc, fmt::format("data_parallel() got an unexpected keyword argument '{}'", k.name));
    size_t i = size_t(it - params.begin());
    if (bound[i]) fail(k.loc, fmt::format("data_parallel() got multiple values for argument '{}'", k.name));
    bound[i] = k.value.get();
  }
  if (!bound[0] || !bound[1]) fail(call.loc, "data_parallel() takes a module and its inputs");
  const Object* module = static_object(*bound[0]);
  if (!module) fail(bound[0]->loc, "data_parallel()'s module must be a module of self (self.main) in kiln script");
  if (bound[5] && bound[5]->kind != ExprKind::None)
    fail(bound[5]->loc, "data_parallel()'s module_kwargs are not supported in kiln script");
  // inputs: a tuple of the module's arguments, or one argument (torch wraps it in a tuple)
  CallArgs a;
  Value* in = expr(*bound[1]);
  const Type& t = in->type();
  if (t.kind == TypeKind::Tuple) {
    for (size_t i = 0; i < t.elems.size(); ++i) {
      if (in->node()->prim() == Prim::TupleConstruct) {
        a.pos.push_back(in->node()->input(i));
      } else {
        Node* n = g_->create(Prim::TupleIndex, 1);
        n->add_input(in);
        n->attrs().set("index", int64_t(i));
        n->output()->set_type(t.elems[i]);
        a.pos.push_back(emit(n)->output());
      }
      a.pos_locs.push_back(bound[1]->loc);
    }
  } else if (t.kind != TypeKind::None) {
    a.pos.push_back(in);
    a.pos_locs.push_back(bound[1]->loc);
  }
  loc_ = call.loc;
  return call_object(*module, a, call.loc);
}

}  // namespace kiln::script
