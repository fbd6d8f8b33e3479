// `xs[i] = v` on a list: lists are values in the graph (as for xs.append), so the store makes a new
// list (prim::list_set) and rebinds xs and every name bound to the same list, which is what torch
// shows for `ys = xs; xs[0] = v`.
#include <fmt/format.h>

#include "script_frontend/lowerer.h"

namespace kiln::script {

using ir::Prim;

void Lowerer::list_store(const Expr& target, std::optional<PyOp> op, const Expr& rhs, SourceLoc loc) {
  const Expr& base = *target.args[0];
  if (target.args.size() != 2 || target.args[1]->kind == ExprKind::Slice)
    fail(target.loc, "kiln script assigns one list element at a time (xs[i] = v), not slices");
  Value* v = nullptr;
  if (!op) v = expr(rhs);  // Python evaluates the value of `xs[i] = v` first
  Value* xs = name(base);
  check_list_shared(xs, base.name, loc);
  const Type& et = xs->type().elems[0];
  Value* i = expr(*target.args[1]);
  if (i->type().kind != TypeKind::Int)
    fail(target.args[1]->loc, fmt::format("list indices must be int, got {}", i->type().str()));
  loc_ = loc;
  if (op.has_value()) {
    if (et.is_tensor())
      fail(loc, fmt::format("'{}[i] {}= v' writes the tensor in place, which kiln script does not track inside a "
                            "list; write {}[i] = {}[i] {} v",
                            base.name, spelling(*op), base.name, base.name, spelling(*op)));
    Value* cur = prim(Prim::ListIndex, {xs, i}, et);
    Value* r = expr(rhs);
    loc_ = loc;
    v = binary(*op, cur, r, loc);
  }
  if (!same_type(v->type(), et)) v = coerce(v, et, rhs.loc, fmt::format("assign to an element of {}", xs->type().str()));
  loc_ = loc;
  Value* now = prim(Prim::ListSet, {xs, i, v}, xs->type());
  for (auto& [k, x] : frame().env)
    if (k[0] != '$' && x == xs) x = now;
}

void Lowerer::check_list_shared(Value* xs, const std::string& name, SourceLoc loc) {
  if (loop_depth_ == 0 && branch_depth_ == 0) return;
  auto refuse = [&](const std::string& k) {
    fail(loc, fmt::format("cannot change list '{}' inside an if or a loop while '{}' names the same list: kiln script "
                            "keeps two names of one list linked in straight-line code only; build '{}' as a list of "
                            "its own",
                            name, k, k));
  };
  for (const auto& [k, x] : frame().env)
    if (k[0] != '$' && k != name && x == xs) refuse(k);
  if (auto it = shared_list_.find(xs); it != shared_list_.end()) refuse(it->second);
}

}  // namespace kiln::script
