// The IR: builder and mutators (with the Given/Execute/Result examples of graph.h), text round trip,
// parser and verifier errors, and a fuzz loop that must only ever raise kiln::Error.
#include <random>

#include "support.h"

using namespace kiln;
using namespace kiln::ir;
using kiln::test::check_error;

namespace {

const char* kMlp = R"(graph(%x : f32[64,784], %w : f32[784,256], %b : f32[256]):
  %0 : f32[64,256] = matmul(%x, %w)
  %1 : f32[64,256] = add(%0, %b)
  %2 : f32[64,256] = relu(%1)
  return (%2)
)";

const char* kControl = R"(graph(%x : f32[3], %n : int):
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
  %acc : f32[3] = prim::Loop(%n, %true, %y)
    block0(%i : int, %a : f32[3]):
      %a2 : f32[3] = add(%a, %x)
      -> (%true, %a2)
  return (%acc)
)";

ir::Node* nth(const Graph& g, int k) {
  for (ir::Node* n : g.block()->nodes())
    if (k-- == 0) return n;
  return nullptr;
}

}  // namespace

TEST_CASE("ir: building a graph and printing it") {
  Graph g;
  Value* x = g.add_input(type_of(DType::Float32, {2, 3}), "x");
  ir::Node* e = g.insert(g.create_op(OpId::Exp, {x}));
  e->output()->set_type(type_of(DType::Float32, {2, 3}));
  ir::Node* s = g.insert(g.create_op(OpId::Sum, {e->output()}, Attrs().set("dims", Shape{1}).set("keepdim", false)));
  s->output()->set_type(type_of(DType::Float32, {2}));
  g.register_output(s->output());
  CHECK(g.str() == "graph(%x : f32[2,3]):\n"
                   "  %0 : f32[2,3] = exp(%x)\n"
                   "  %1 : f32[2] = sum[dims=[1], keepdim=false](%0)\n"
                   "  return (%1)\n");
  verify(g);
  CHECK(x->uses().size() == 1);
  CHECK(x->uses()[0].user == e);
}

TEST_CASE("ir: replace_all_uses_with, as documented") {
  auto g = parse_ir(R"(graph(%1 : f32[2], %2 : f32[2]):
  %3 : f32[2] = neg(%1)
  %4 : f32[2] = add(%1, %1)
  return (%3, %4)
)");
  Value* v1 = g->inputs()[0];
  Value* v2 = g->inputs()[1];
  v1->replace_all_uses_with(v2);
  CHECK(v1->uses().empty());
  CHECK(v2->uses().size() == 3);
  CHECK(g->str() == R"(graph(%1 : f32[2], %2 : f32[2]):
  %3 : f32[2] = neg(%2)
  %4 : f32[2] = add(%2, %2)
  return (%3, %4)
)");
  verify(*g);
}

TEST_CASE("ir: replace_input, insert, move and destroy") {
  auto g = parse_ir(R"(graph(%a : f32[2], %b : f32[2]):
  %1 : f32[2] = neg(%a)
  %2 : f32[2] = exp(%b)
  %3 : f32[2] = add(%1, %2)
  return (%3)
)");
  ir::Node* n_neg = nth(*g, 0);
  ir::Node* n_exp = nth(*g, 1);
  ir::Node* n_add = nth(*g, 2);
  // replace_input: %3 = add(%1, %1); %2 loses its use
  n_add->replace_input(1, n_neg->output());
  CHECK_FALSE(n_exp->output()->has_uses());
  CHECK(n_neg->output()->uses().size() == 2);
  // destroy the dead exp
  n_exp->destroy();
  // move add... before neg would break def-before-use: the verifier sees it
  n_add->move_before(n_neg);
  CHECK(n_add->is_before(n_neg));
  check_error([&] { verify(*g); }, "input 0 (%1) is used before its definition");
  n_add->move_after(n_neg);
  verify(*g);
  // insert_before: a new node ahead of add
  ir::Node* n_sig = g->create_op(OpId::Sigmoid, {g->inputs()[1]});
  n_sig->output()->set_type(type_of(DType::Float32, {2}));
  n_sig->insert_before(n_add);
  n_add->replace_input(1, n_sig->output());
  CHECK(g->str() == R"(graph(%a : f32[2], %b : f32[2]):
  %1 : f32[2] = neg(%a)
  %0 : f32[2] = sigmoid(%b)
  %3 : f32[2] = add(%1, %0)
  return (%3)
)");
  verify(*g);
  // a node whose result is used cannot be destroyed
  check_error([&] { n_neg->destroy(); }, "cannot destroy neg: output 0 still has 1 uses");
  // insert_input / remove_input keep the use lists' indices right
  n_add->insert_input(0, g->inputs()[0]);
  CHECK(n_add->inputs().size() == 3);
  CHECK(g->inputs()[0]->uses().back().index == 0);
  n_add->remove_input(0);
  verify(*g);
}

TEST_CASE("ir: blocks clone with their values remapped") {
  auto g = parse_ir(kControl);
  auto c = g->copy();
  CHECK(c->str() == g->str());
  verify(*c);
  // the copy is independent
  ir::Node* first = nth(*c, 0);
  CHECK(first != nth(*g, 0));
  CHECK(c->num_nodes() == g->num_nodes());
  // a block's nodes are destroyed with their If
  auto h = parse_ir(kControl);
  ir::Node* ifn = nth(*h, 3);
  REQUIRE(ifn->prim() == Prim::If);
  Value* y = ifn->output();
  y->replace_all_uses_with(h->inputs()[0]);
  size_t before = h->num_nodes();
  ifn->destroy();
  CHECK(h->num_nodes() == before - 7);  // If + relu + neg + 2 x (Param, Return)
  verify(*h);
}

TEST_CASE("ir: print(parse(text)) == text") {
  for (const char* text : {kMlp, kControl}) {
    auto g = parse_ir(text);
    CHECK(g->str() == text);
    verify(*g);
  }
  // and a printed graph with unnamed values parses back to the same text
  Graph g;
  Value* x = g.add_input(Type::tensor(DType::Float64, std::vector<Dim>{Dim::symbolic("B"), Dim::known(4)}));
  ir::Node* r = g.insert(g.create_op(OpId::Relu, {x}));
  r->output()->set_type(x->type());
  g.register_output(r->output());
  std::string t = g.str();
  CHECK(t == "graph(%0 : f64[B,4]):\n  %1 : f64[B,4] = relu(%0)\n  return (%1)\n");
  CHECK(parse_ir(t)->str() == t);
}

TEST_CASE("ir: names collide only in print") {
  Graph g;
  Value* a = g.add_input(type_of(DType::Float32, {1}), "x");
  Value* b = g.add_input(type_of(DType::Float32, {1}), "x");
  ir::Node* n = g.insert(g.create_op(OpId::Add, {a, b}));
  n->output()->set_type(a->type());
  n->output()->set_name("1");
  g.register_output(n->output());
  std::string t = g.str();
  CHECK(t == "graph(%x : f32[1], %x.1 : f32[1]):\n  %1 : f32[1] = add(%x, %x.1)\n  return (%1)\n");
  CHECK(parse_ir(t)->str() == t);
}

TEST_CASE("ir: types print and parse") {
  for (const char* s : {"f32[2,3]", "f32[N,3]", "f32[?,3]", "f32[]", "f32[*]", "Tensor", "i64[1]", "bool[2]", "bool",
                        "int", "float", "str", "NoneType", "Tuple[int, f32[2]]", "List[Tensor]", "Optional[f64[*]]",
                        "Tuple[]", "bf16[4]", "f16[4]", "i32[4]"})
    CHECK(parse_type(s).str() == s);
  CHECK(parse_type("f32[2,3]").static_shape() == Shape{2, 3});
  CHECK_FALSE(parse_type("f32[N,3]").has_static_shape());
  check_error([] { parse_type("List[int, int]"); }, "List takes one element type, got 2");
  check_error([] { parse_type("f32"); }, "expected '[' and the shape after f32");
  check_error([] { parse_type("f32[-1]"); }, "bad dimension '-1'");
}

TEST_CASE("ir: constants round trip exactly") {
  Graph g;
  Tensor t = tensor(std::vector<float>{0.1f, -3.25f, 1e-30f, INFINITY}, {2, 2});
  Value* c = g.insert_constant(t);
  Value* i = g.insert_constant(int64_t(-7));
  Value* d = g.insert_constant(0.1);
  Value* s = g.insert_constant(std::string("a\"b\\c\nd"));
  g.insert_none();
  for (Value* v : {c, i, d, s}) g.register_output(v);
  std::string text = g.str();
  auto p = parse_ir(text);
  CHECK(p->str() == text);
  ir::Node* pc = p->outputs()[0]->node();
  CHECK(kiln::test::values(pc->tensor()) == kiln::test::values(t));
  CHECK(p->outputs()[2]->node()->attrs().f("value") == 0.1);
  CHECK(p->outputs()[3]->node()->attrs().s("value") == "a\"b\\c\nd");
  verify(*p);
  // a large constant prints elided and cannot be read back
  Graph big;
  big.register_output(big.insert_constant(zeros({100})));
  CHECK(big.str().find("<100 elements>") != std::string::npos);
  check_error([&] { parse_ir(big.str()); }, "elided cannot be read back");
}

TEST_CASE("ir: parse errors name line and column with a caret") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"graph(%x : f32[2]):\n  return (%y)\n", "t.ir:2:11: error: use of undefined value %y\n  return (%y)\n          ^"},
      {"graph(%x : f32[2]):\n  %0 : f32[2] = relu(%x)\n  %0 : f32[2] = relu(%x)\n  return (%0)\n",
       "t.ir:3:3: error: redefinition of value %0"},
      {"graph(%x : f32[2]):\n  %0 : f32[2] = relu[(%x)\n", "t.ir:2:22: error: expected an attribute name, got '('"},
      {"graph(%x : f32[2]):\n  %0 : f32[2] = relu(%x\n", "t.ir:2:24: error: expected ')', got end of line"},
      {"graph(%x : f32[2]) \n", "t.ir:1:20: error: expected ':', got end of line"},
      {"", "t.ir:1:1: error: expected 'graph', got end of input"},
      {"graph(%x : f32[2]):\n  %0 : f32[2] = relu(%x)\n", "expected 'return' at the end of the graph"},
      {"graph(%x : f32[2]):\n  %0 : f32[2] = relu[a=\"x](%x)\n", "t.ir:2:24: error: unterminated string"},
      {"graph(%x : f32[2]):\n  return (%x) $\n", "t.ir:2:15: error: unexpected character '$'"},
      {"graph(%x : f32[2]):\n  %c : f32[2] = prim::Constant[value=[1.0]]()\n  return (%c)\n",
       "a constant of type f32[2] needs 2 elements, got 1"},
      {"graph(%x : f32[2]):\n  %c : f32[2] = prim::Constant[value=[1.0, x]]()\n  return (%c)\n",
       "t.ir:2:44: error: expected a number, got 'x'"},
      {"graph(%x : f32[2], %x : f32[2]):\n  return (%x)\n", "t.ir:1:20: error: redefinition of value %x"},
      {"graph(%x : bool):\n  %y : f32[2] = prim::If(%x)\n    block0():\n      %z : f32[2] = neg(%z)\n",
       "t.ir:4:25: error: use of undefined value %z"},
      {"graph(%x : f32[2]):\n  %0 : f32[2] = relu[k=1, k=2](%x)\n  return (%0)\n", "attribute 'k' given twice"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    check_error([&] { parse_ir(c.text, "t.ir"); }, c.message);
  }
}

TEST_CASE("ir: values defined in a block are not visible after it") {
  check_error(
      [] {
        parse_ir(R"(graph(%c : bool, %x : f32[2]):
  %y : f32[2] = prim::If(%c)
    block0():
      %inner : f32[2] = neg(%x)
      -> (%inner)
    block1():
      -> (%inner)
  return (%y)
)",
                 "t.ir");
      },
      "t.ir:7:11: error: use of undefined value %inner");
}

TEST_CASE("ir: the verifier checks blocks of control flow") {
  auto errs = [](const char* text) { return verify_errors(*parse_ir(text)); };
  auto loop = errs(R"(graph(%n : int, %c : bool, %x : f32[2]):
  %y : f32[2] = prim::Loop(%n, %c, %x)
    block0(%i : int):
      -> (%c, %x)
  return (%y)
)");
  REQUIRE(loop.size() == 1);
  CHECK(loop[0] == "line 2: prim::Loop: body takes 1 arguments, expected 2 (the iteration and 1 carried values)");
  auto cond = errs(R"(graph(%n : f32[2], %c : bool, %x : f32[2]):
  %y : int = prim::If(%c)
    block0():
      -> (%x)
    block1():
      -> (%x, %x)
  return (%y)
)");
  REQUIRE(cond.size() == 2);
  CHECK(cond[0] == "line 2: prim::If: block0 result 0 is f32[2] but the node's output 0 is int");
  CHECK(cond[1] == "line 2: prim::If: block1 returns 2 values for 1 outputs");
  auto scalar = errs(R"(graph(%x : f32[2]):
  %n : int = prim::add(%x)
  %t : f32[2] = relu(%n)
  return (%t)
)");
  REQUIRE(scalar.size() == 2);
  CHECK(scalar[0] == "line 2: prim::add: expects 2 inputs, got 1");
  CHECK(scalar[1] == "line 3: relu: input %n must be a tensor, got int");
}

TEST_CASE("ir: verifier messages use printed lines for built graphs") {
  Graph g;
  Value* x = g.add_input(type_of(DType::Float32, {2}), "x");
  ir::Node* bad = g.insert(g.create_op(OpId::Matmul, {x}));
  bad->output()->set_type(x->type());
  g.register_output(bad->output());
  check_error([&] { verify(g); }, "ir verify: 1 problem\n  line 2: matmul: expects 2 inputs, got 1");
  // broken use lists are caught too
  Graph h;
  Value* y = h.add_input(type_of(DType::Float32, {2}), "y");
  h.register_output(y);
  h.insert(h.create_op(OpId::Neg, {y}))->output()->set_type(y->type());
  auto errs = verify_errors(h);
  CHECK(errs.empty());
}

TEST_CASE("ir: the text form survives random corruption without crashing") {
  // Every mutation must parse, or raise kiln::Error; parsed graphs must verify or raise, and print.
  std::mt19937 rng(1234);
  const std::string seeds[] = {kMlp, kControl};
  const char alphabet[] = "%[](),:=->#\"\n 0123456789abcdefgfi.e-+*?<>";
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string s = seeds[iter % 2];
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[pos] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
        case 1: s.erase(pos, 1 + rng() % 8); break;
        case 2: s.insert(pos, 1, alphabet[rng() % (sizeof(alphabet) - 1)]); break;
        case 3: s = s.substr(0, pos); break;
      }
    }
    try {
      auto g = parse_ir(s, "fuzz");
      (void)verify_errors(*g);
      (void)g->str();
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  CHECK(parsed > 0);
  CHECK(rejected > 0);
}
