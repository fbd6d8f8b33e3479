#include "script_frontend/py_ops.h"

namespace kiln::script {

namespace {

enum class Form : uint8_t { Binary, Unary, Bool, Compare };

struct Row {
  PyOp op;
  Form form;
  std::string_view token;
  std::string_view dunder;
};

// In PyOp's order, so a row is found by its operator's value.
constexpr Row kRows[] = {
    {PyOp::Add, Form::Binary, "+", "__add__"},
    {PyOp::Sub, Form::Binary, "-", "__sub__"},
    {PyOp::Mul, Form::Binary, "*", "__mul__"},
    {PyOp::Div, Form::Binary, "/", "__truediv__"},
    {PyOp::FloorDiv, Form::Binary, "//", "__floordiv__"},
    {PyOp::Mod, Form::Binary, "%", "__mod__"},
    {PyOp::Pow, Form::Binary, "**", "__pow__"},
    {PyOp::MatMul, Form::Binary, "@", "__matmul__"},
    {PyOp::LShift, Form::Binary, "<<", "__lshift__"},
    {PyOp::RShift, Form::Binary, ">>", "__rshift__"},
    {PyOp::BitAnd, Form::Binary, "&", "__and__"},
    {PyOp::BitOr, Form::Binary, "|", "__or__"},
    {PyOp::BitXor, Form::Binary, "^", "__xor__"},
    {PyOp::Pos, Form::Unary, "+", "__pos__"},
    {PyOp::Neg, Form::Unary, "-", "__neg__"},
    {PyOp::Not, Form::Unary, "not", ""},
    {PyOp::Invert, Form::Unary, "~", "__invert__"},
    {PyOp::And, Form::Bool, "and", ""},
    {PyOp::Or, Form::Bool, "or", ""},
    {PyOp::Lt, Form::Compare, "<", "__lt__"},
    {PyOp::Le, Form::Compare, "<=", "__le__"},
    {PyOp::Gt, Form::Compare, ">", "__gt__"},
    {PyOp::Ge, Form::Compare, ">=", "__ge__"},
    {PyOp::Eq, Form::Compare, "==", "__eq__"},
    {PyOp::Ne, Form::Compare, "!=", "__ne__"},
    {PyOp::Is, Form::Compare, "is", ""},
    {PyOp::IsNot, Form::Compare, "is not", ""},
    {PyOp::In, Form::Compare, "in", "__contains__"},
    {PyOp::NotIn, Form::Compare, "not in", "__contains__"},
};

constexpr bool in_order() {
  for (size_t i = 0; i < std::size(kRows); ++i)
    if (size_t(kRows[i].op) != i) return false;
  return true;
}
static_assert(in_order() && std::size(kRows) == size_t(PyOp::NotIn) + 1, "kRows: a row per PyOp, in its order");

std::optional<PyOp> find(Form form, std::string_view token) {
  for (const Row& r : kRows)
    if (r.form == form && r.token == token) return r.op;
  return std::nullopt;
}

}  // namespace

std::string_view spelling(PyOp op) { return kRows[size_t(op)].token; }
std::string_view dunder(PyOp op) { return kRows[size_t(op)].dunder; }

std::optional<PyOp> binary_op(std::string_view token) { return find(Form::Binary, token); }
std::optional<PyOp> unary_op(std::string_view token) { return find(Form::Unary, token); }
std::optional<PyOp> compare_op(std::string_view token) { return find(Form::Compare, token); }

}  // namespace kiln::script
