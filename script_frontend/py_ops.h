#pragma once
// Python's operators as the parser reads them: one enum the AST carries from the parser on, so lowering and
// the evaluator of __init__ switch on it (-Werror=switch names every switch a new operator must join).
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln::script {

enum class PyOp : uint8_t {
  // binary (`a + b`, and `a += b`)
  Add, Sub, Mul, Div, FloorDiv, Mod, Pow, MatMul, LShift, RShift, BitAnd, BitOr, BitXor,
  // unary
  Pos, Neg, Not, Invert,
  // boolean, two or more operands
  And, Or,
  // comparison, chained
  Lt, Le, Gt, Ge, Eq, Ne, Is, IsNot, In, NotIn,
};

// The source spelling, which messages quote: "+", "not in".
std::string_view spelling(PyOp op);
// The method Python calls for it ("__add__", "__neg__"); empty for and, or, not, is and is not, which have none.
std::string_view dunder(PyOp op);

// The operator a token spells where a binary, unary or comparison operator is expected; nullopt for none.
std::optional<PyOp> binary_op(std::string_view token);
std::optional<PyOp> unary_op(std::string_view token);
std::optional<PyOp> compare_op(std::string_view token);

}  // namespace kiln::script
