#include "script_frontend/operators.h"

namespace kiln::script {

using ir::Prim;

const Operator* find_operator(PyOp op) {
  static const Operator add{"add", OpId::Add, Prim::NumAdd}, sub{"subtract", OpId::Sub, Prim::NumSub},
      mul{"multiply", OpId::Mul, Prim::NumMul}, div{"divide", OpId::Div, Prim::NumDiv},
      floordiv{"floor-divide", std::nullopt, Prim::NumFloorDiv}, mod{"take the remainder of", std::nullopt, Prim::NumMod},
      pow{"raise", OpId::Pow, Prim::NumPow}, matmul{"matrix-multiply", OpId::Matmul, Prim::Op},
      bitand_{"", OpId::LogicalAnd, Prim::Op}, bitor_{"", OpId::LogicalOr, Prim::Op}, lt{"", OpId::Lt, Prim::NumLt},
      le{"", OpId::Le, Prim::NumLe}, gt{"", OpId::Gt, Prim::NumGt}, ge{"", OpId::Ge, Prim::NumGe},
      eq{"", OpId::Eq, Prim::NumEq}, ne{"", OpId::Ne, Prim::NumNe};
  // a switch, not a lookup, so -Werror=switch asks where a new operator lowers
  switch (op) {
    case PyOp::Add: return &add;
    case PyOp::Sub: return &sub;
    case PyOp::Mul: return &mul;
    case PyOp::Div: return &div;
    case PyOp::FloorDiv: return &floordiv;
    case PyOp::Mod: return &mod;
    case PyOp::Pow: return &pow;
    case PyOp::MatMul: return &matmul;
    case PyOp::BitAnd: return &bitand_;
    case PyOp::BitOr: return &bitor_;
    case PyOp::Lt: return &lt;
    case PyOp::Le: return &le;
    case PyOp::Gt: return &gt;
    case PyOp::Ge: return &ge;
    case PyOp::Eq: return &eq;
    case PyOp::Ne: return &ne;
    case PyOp::LShift:
    case PyOp::RShift:
    case PyOp::BitXor:
    case PyOp::Pos:
    case PyOp::Neg:
    case PyOp::Not:
    case PyOp::Invert:
    case PyOp::And:
    case PyOp::Or:
    case PyOp::Is:
    case PyOp::IsNot:
    case PyOp::In:
    case PyOp::NotIn: return nullptr;
  }
  return nullptr;
}

}  // namespace kiln::script
