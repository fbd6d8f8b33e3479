// `xs * n` and `xs + ys` on lists in lowered code, as torchvision's stochastic_depth builds a shape
// (`[input.shape[0]] + [1] * (input.ndim - 1)`): n is usually known only when the graph runs (a rank), so
// the repeat is a prim::Loop appending xs n times (none for n <= 0, as Python gives []).
#include <fmt/format.h>

#include "script_frontend/lowerer.h"

namespace kiln::script {

using ir::Node;
using ir::Prim;

Value* Lowerer::list_repeat(Value* xs, Value* n) {
  const Type& t = xs->type();
  Value* empty = prim(Prim::ListConstruct, {}, t);
  Value* go = constant(true);
  Node* l = emit(g_->create(Prim::Loop, 0));
  l->add_input(n);
  l->add_input(go);
  l->add_input(empty);
  ir::Block* b = l->add_block();
  b->add_input(Type::scalar(TypeKind::Int), "iter");
  Value* acc = b->add_input(t, "acc");
  {
    ir::InsertPointGuard guard(*g_);
    g_->set_insert_point(b);
    Value* next = prim(Prim::ListAdd, {acc, xs}, t);
    b->register_output(constant(true));
    b->register_output(next);
  }
  return l->add_output(t);
}

Value* Lowerer::list_binary(PyOp op, Value* a, Value* b) {
  const Type& ta = a->type();
  const Type& tb = b->type();
  if (op == PyOp::Add && ta.kind == TypeKind::List && same_type(ta, tb)) return prim(Prim::ListAdd, {a, b}, ta);
  if (op == PyOp::Mul && ta.kind == TypeKind::List && tb.kind == TypeKind::Int) return list_repeat(a, b);
  if (op == PyOp::Mul && tb.kind == TypeKind::List && ta.kind == TypeKind::Int) return list_repeat(b, a);
  return nullptr;
}

}  // namespace kiln::script
