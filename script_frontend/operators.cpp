#include "script_frontend/operators.h"

namespace kiln::script {

namespace {

using ir::Prim;

const Operator kOperators[] = {
    {"+", "add", OpId::Add, Prim::NumAdd},
    {"-", "subtract", OpId::Sub, Prim::NumSub},
    {"*", "multiply", OpId::Mul, Prim::NumMul},
    {"/", "divide", OpId::Div, Prim::NumDiv},
    {"//", "floor-divide", std::nullopt, Prim::NumFloorDiv},
    {"%", "take the remainder of", std::nullopt, Prim::NumMod},
    {"**", "raise", OpId::Pow, Prim::NumPow},
    {"@", "matrix-multiply", OpId::Matmul, Prim::Op},
    {"&", "", OpId::LogicalAnd, Prim::Op},
    {"|", "", OpId::LogicalOr, Prim::Op},
    {"<", "", OpId::Lt, Prim::NumLt},
    {"<=", "", OpId::Le, Prim::NumLe},
    {">", "", OpId::Gt, Prim::NumGt},
    {">=", "", OpId::Ge, Prim::NumGe},
    {"==", "", OpId::Eq, Prim::NumEq},
    {"!=", "", OpId::Ne, Prim::NumNe},
};

}  // namespace

const Operator* find_operator(std::string_view token) {
  for (const Operator& o : kOperators)
    if (o.token == token) return &o;
  return nullptr;
}

}  // namespace kiln::script
