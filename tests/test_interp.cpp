// The reference interpreter: control flow, Python number semantics of the prims, containers, and
// errors that name the node.
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

std::vector<IValue> run_text(const char* text, const std::vector<IValue>& ins) {
  auto g = ir::parse_ir(text);
  ir::verify(*g);
  return interp::run(*g, ins);
}

// Runs `prim::<op>(a, b)` on two numbers.
IValue num(const char* op, IValue a, IValue b) {
  auto type = [](const IValue& v) { return v.is_double() ? "float" : v.is_bool() ? "bool" : "int"; };
  std::string text = fmt::format("graph(%a : {}, %b : {}):\n  %r : {} = prim::{}(%a, %b)\n  return (%r)\n", type(a),
                                 type(b), "int", op);
  auto g = ir::parse_ir(text);
  return interp::run(*g, {a, b})[0];
}

}  // namespace

TEST_CASE("interp: If and Loop with carried values") {
  const char* text = R"(graph(%x : f32[3], %n : int):
  %true : bool = prim::Constant[value=true]()
  %zero : int = prim::Constant[value=0]()
  %pos : bool = prim::gt(%n, %zero)
  %y : f32[3] = prim::If(%pos)
    block0():
      %r : f32[3] = relu(%x)
      -> (%r)
    block1():
      %m : f32[3] = neg(%x)
      -> (%m)
  %acc : f32[3], %iters : int = prim::Loop(%n, %true, %y, %zero)
    block0(%i : int, %a : f32[3], %k : int):
      %a2 : f32[3] = add(%a, %x)
      %one : int = prim::Constant[value=1]()
      %k2 : int = prim::add(%k, %one)
      -> (%true, %a2, %k2)
  return (%acc, %iters)
)";
  Tensor x = tensor({-1.0, 0.5, 2.0});
  auto r = run_text(text, {x, int64_t(3)});
  check_close(r[0].to_tensor(), relu(x) + x * 3.0);
  CHECK(r[1].to_int() == 3);
  r = run_text(text, {x, int64_t(0)});
  check_close(r[0].to_tensor(), neg(x));
  CHECK(r[1].to_int() == 0);
}

TEST_CASE("interp: a loop stops when its condition turns false; i counts trips") {
  const char* text = R"(graph(%limit : int):
  %true : bool = prim::Constant[value=true]()
  %big : int = prim::Constant[value=1000000]()
  %zero : int = prim::Constant[value=0]()
  %sum : int = prim::Loop(%big, %true, %zero)
    block0(%i : int, %s : int):
      %s2 : int = prim::add(%s, %i)
      %go : bool = prim::lt(%s2, %limit)
      -> (%go, %s2)
  return (%sum)
)";
  CHECK(run_text(text, {int64_t(10)})[0].to_int() == 10);  // 0+1+2+3+4
  CHECK(run_text(text, {int64_t(0)})[0].to_int() == 0);    // body runs once: the condition is checked after
}

TEST_CASE("interp: numbers follow Python") {
  CHECK(num("floordiv", int64_t(-7), int64_t(2)).to_int() == -4);
  CHECK(num("mod", int64_t(-7), int64_t(2)).to_int() == 1);
  CHECK(num("mod", int64_t(7), int64_t(-2)).to_int() == -1);
  CHECK(num("div", int64_t(7), int64_t(2)).to_double() == 3.5);
  CHECK(num("pow", int64_t(3), int64_t(4)).to_int() == 81);
  CHECK(num("pow", int64_t(2), int64_t(-1)).to_double() == 0.5);
  CHECK(num("add", int64_t(1), 0.5).to_double() == 1.5);
  CHECK(num("floordiv", -7.5, 2.0).to_double() == -4.0);
  CHECK(num("mod", -7.5, 2.0).to_double() == 0.5);
  CHECK(num("lt", int64_t(1), 1.5).to_bool());
  CHECK(num("eq", true, int64_t(1)).to_bool());
  CHECK(num("max", int64_t(3), int64_t(9)).to_int() == 9);
  check_error([] { num("floordiv", int64_t(1), int64_t(0)); }, "integer division or modulo by zero");
  check_error([] { num("div", 1.0, 0.0); }, "float division by zero");
  check_error([] { num("mul", int64_t(1) << 62, int64_t(4)); }, "integer overflow in 4611686018427387904 * 4");
  check_error([] { num("pow", int64_t(10), int64_t(30)); }, "integer overflow in 10 ** 30");
}

TEST_CASE("interp: tuples, lists, sizes and conversions") {
  const char* text = R"(graph(%x : f32[2,3]):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %rows : int = prim::size(%x, %zero)
  %shape : List[int] = prim::shape(%x)
  %cols : int = prim::ListIndex(%shape, %one)
  %n : int = prim::len(%shape)
  %t : Tuple[int, int] = prim::TupleConstruct(%rows, %cols)
  %a : int, %b : int = prim::TupleUnpack(%t)
  %second : int = prim::TupleIndex[index=-1](%t)
  %s : f32[] = sum(%x)
  %f : float = prim::float(%s)
  %i : int = prim::int(%f)
  %b2 : bool = prim::bool(%s)
  %tt : f64[] = prim::tensor(%f)
  return (%a, %b, %second, %n, %f, %i, %b2, %tt)
)";
  auto r = run_text(text, {tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.5}, {2, 3})});
  CHECK(r[0].to_int() == 2);
  CHECK(r[1].to_int() == 3);
  CHECK(r[2].to_int() == 3);
  CHECK(r[3].to_int() == 2);
  CHECK(r[4].to_double() == 21.5);
  CHECK(r[5].to_int() == 21);
  CHECK(r[6].to_bool());
  CHECK(r[7].to_tensor().impl()->wrapped_number);
}

TEST_CASE("interp: errors name the node's line and op") {
  const char* text = R"(graph(%x : f32[2], %y : f32[3]):
  %0 : f32[2] = add(%x, %y)
  return (%0)
)";
  check_error([&] { run_text(text, {tensor({1.0, 2.0}), tensor({1.0, 2.0, 3.0})}); }, "interp: line 2 (add): ");
  const char* cond = R"(graph(%x : f32[2]):
  %c : bool = prim::bool(%x)
  return (%c)
)";
  check_error([&] { run_text(cond, {tensor({1.0, 2.0})}); },
              "boolean value of a tensor with 2 elements is ambiguous (shape [2])");
  const char* raise = R"(graph():
  prim::raise[message="AssertionError: n must be positive"]()
  %none : NoneType = prim::Constant()
  return (%none)
)";
  check_error([&] { run_text(raise, {}); }, "interp: line 2 (prim::raise): AssertionError: n must be positive");
  const char* unwrap = R"(graph(%o : Optional[Tensor]):
  %t : Tensor = prim::unwrap(%o)
  return (%t)
)";
  check_error([&] { run_text(unwrap, {IValue()}); }, "unwrapped an Optional that is None");
  check_error([&] { run_text(unwrap, {}); }, "interp: the graph takes 1 inputs, got 0");
  const char* idx = R"(graph(%t : Tuple[int, int]):
  %v : int = prim::TupleIndex[index=2](%t)
  return (%v)
)";
  check_error([&] { run_text(idx, {IValue::tuple({int64_t(1), int64_t(2)})}); },
              "index 2 is out of range for a tuple of 2 elements");
}

TEST_CASE("interp: autograd records through an interpreted graph") {
  const char* text = R"(graph(%x : f64[3]):
  %0 : f64[3] = tanh(%x)
  %1 : f64[3] = mul(%0, %x)
  %2 : f64[] = sum(%1)
  return (%2)
)";
  Tensor x = tensor({0.1, -0.5, 2.0}, {}, DType::Float64).requires_grad_();
  Tensor y = run_text(text, {x})[0].to_tensor();
  y.backward();
  Tensor xe = tensor({0.1, -0.5, 2.0}, {}, DType::Float64).requires_grad_();
  (tanh(xe) * xe).sum().backward();
  check_close(x.grad(), xe.grad(), 1e-12, 1e-12);
}
