// Python 3.11's expressions: precedence climbing from lambda and conditional expressions down to
// atoms, displays and comprehensions, calls, subscripts, f-strings.
#include <fmt/format.h>

#include "script_frontend/parser_impl.h"

namespace kiln::script {

namespace {
constexpr int kMaxChain = 500;
}

ExprPtr Parser::expr(ExprKind k, SourceLoc loc) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->loc = loc;
  return e;
}

// What may follow the last comma of a tuple written without parentheses.
static bool ends_tuple(const Parser& p) {
  return p.at(Tok::Newline) || p.at(Tok::End) || p.at_op("=") || p.at_op(")") || p.at_op("]") || p.at_op("}") ||
         p.at_op(":") || p.at_op(";") || p.at_op("!") || (p.cur().kind == Tok::Op && p.cur().text.size() >= 2 &&
                                                           p.cur().text.back() == '=' && p.cur().text != "==");
}

ExprPtr Parser::star_expressions() {
  SourceLoc loc = cur().loc;
  ExprPtr first = star_expression();
  if (!at_op(",")) return first;
  auto t = expr(ExprKind::Tuple, loc);
  t->args.push_back(std::move(first));
  while (accept_op(",")) {
    if (ends_tuple(*this)) break;
    t->args.push_back(star_expression());
  }
  return t;
}

ExprPtr Parser::yield_or_star_expressions() { return at_name("yield") ? yield_expr() : star_expressions(); }

ExprPtr Parser::star_expression() {
  if (at_op("*")) {
    auto s = expr(ExprKind::Starred, cur().loc);
    next();
    s->args.push_back(bitor_expr());
    return s;
  }
  return named_expression();
}

ExprPtr Parser::named_expression() {
  if (at(Tok::Name) && peek().kind == Tok::Op && peek().text == ":=" && !at_keyword()) {
    auto n = expr(ExprKind::NamedExpr, cur().loc);
    auto target = expr(ExprKind::Name, cur().loc);
    target->name = next().text;
    next();  // :=
    n->args.push_back(std::move(target));
    n->args.push_back(test());
    return n;
  }
  return test();
}

ExprPtr Parser::test() {
  DepthGuard g(*this);
  if (at_name("lambda")) return lambda();
  ExprPtr e = or_test();
  if (at_name("if")) {
    SourceLoc loc = cur().loc;
    next();
    auto c = expr(ExprKind::IfExp, e->loc);
    c->args.resize(3);
    c->args[1] = std::move(e);
    c->args[0] = or_test();
    if (!accept_name("else")) src_.fail(loc, "conditional expression needs 'else'");
    c->args[2] = test();
    return c;
  }
  return e;
}

ExprPtr Parser::test_no_cond() {
  DepthGuard g(*this);
  if (at_name("lambda")) return lambda();
  return or_test();
}

ExprPtr Parser::lambda() {
  auto l = expr(ExprKind::Lambda, cur().loc);
  next();  // lambda
  l->fn = std::make_shared<FunctionDef>();
  l->fn->name = "<lambda>";
  l->fn->loc = l->loc;
  parameters(*l->fn, false, ":");
  expect_op(":", "after the lambda parameters");
  auto ret = make(StmtKind::Return, cur().loc);
  ret->value = test();
  l->fn->body.push_back(std::move(ret));
  return l;
}

ExprPtr Parser::yield_expr() {
  SourceLoc loc = cur().loc;
  next();  // yield
  if (accept_name("from")) {
    auto y = expr(ExprKind::YieldFrom, loc);
    y->args.push_back(test());
    return y;
  }
  auto y = expr(ExprKind::Yield, loc);
  if (!ends_tuple(*this)) y->args.push_back(star_expressions());
  return y;
}

ExprPtr Parser::bool_op(PyOp op, ExprPtr (Parser::*sub)()) {
  ExprPtr e = (this->*sub)();
  if (!at_name(kiln::script::spelling(op))) return e;
  auto b = expr(ExprKind::BoolOp, e->loc);
  b->op = op;
  b->args.push_back(std::move(e));
  for (int chain = 0; accept_name(kiln::script::spelling(op)); ++chain) {
    if (chain > kMaxChain) fail_here("expression too long (split it into several statements)");
    b->args.push_back((this->*sub)());
  }
  return b;
}
ExprPtr Parser::or_test() { return bool_op(PyOp::Or, &Parser::and_test); }
ExprPtr Parser::and_test() { return bool_op(PyOp::And, &Parser::not_test); }
ExprPtr Parser::not_test() {
  DepthGuard g(*this);
  if (at_name("not")) {
    auto u = expr(ExprKind::Unary, cur().loc);
    next();
    u->op = PyOp::Not;
    u->args.push_back(not_test());
    return u;
  }
  return comparison();
}

bool Parser::comparison_op(PyOp* op) {
  if (at(Tok::Op))
    if (std::optional<PyOp> o = compare_op(cur().text)) {
      *op = *o;
      next();
      return true;
    }
  if (at_name("in")) {
    next();
    *op = PyOp::In;
    return true;
  }
  if (at_name("not") && peek().kind == Tok::Name && peek().text == "in") {
    next();
    next();
    *op = PyOp::NotIn;
    return true;
  }
  if (at_name("is")) {
    next();
    *op = accept_name("not") ? PyOp::IsNot : PyOp::Is;
    return true;
  }
  return false;
}

ExprPtr Parser::comparison() {
  ExprPtr e = bitor_expr();
  PyOp op;
  if (!comparison_op(&op)) return e;
  auto c = expr(ExprKind::Compare, e->loc);
  c->args.push_back(std::move(e));
  int chain = 0;
  do {
    if (++chain > kMaxChain) fail_here("expression too long (split it into several statements)");
    c->ops.push_back(op);
    c->args.push_back(bitor_expr());
  } while (comparison_op(&op));
  return c;
}

ExprPtr Parser::binary_level(std::initializer_list<PyOp> ops, ExprPtr (Parser::*sub)()) {
  ExprPtr e = (this->*sub)();
  for (int chain = 0;; ++chain) {
    // Chains nest to the left; bounding them bounds the recursion of every later pass.
    if (chain > kMaxChain) fail_here("expression too long (split it into several statements)");
    bool found = false;
    for (auto o : ops)
      if (at_op(kiln::script::spelling(o))) {
        next();
        auto b = expr(ExprKind::Binary, e->loc);  // errors point at the whole expression's start
        b->op = o;
        b->args.push_back(std::move(e));
        b->args.push_back((this->*sub)());
        e = std::move(b);
        found = true;
        break;
      }
    if (!found) return e;
  }
}
ExprPtr Parser::bitor_expr() { return binary_level({PyOp::BitOr}, &Parser::bitxor_expr); }
ExprPtr Parser::bitxor_expr() { return binary_level({PyOp::BitXor}, &Parser::bitand_expr); }
ExprPtr Parser::bitand_expr() { return binary_level({PyOp::BitAnd}, &Parser::shift_expr); }
ExprPtr Parser::shift_expr() { return binary_level({PyOp::LShift, PyOp::RShift}, &Parser::arith_expr); }
ExprPtr Parser::arith_expr() { return binary_level({PyOp::Add, PyOp::Sub}, &Parser::term); }
ExprPtr Parser::term() { return binary_level({PyOp::Mul, PyOp::Div, PyOp::FloorDiv, PyOp::Mod, PyOp::MatMul}, &Parser::factor); }

ExprPtr Parser::factor() {
  DepthGuard g(*this);
  if (at_op("-") || at_op("+") || at_op("~")) {
    auto u = expr(ExprKind::Unary, cur().loc);
    u->op = *unary_op(next().text);
    u->args.push_back(factor());
    return u;
  }
  return power();
}

ExprPtr Parser::power() {
  ExprPtr e;
  if (at_name("await")) {
    e = expr(ExprKind::Await, cur().loc);
    next();
    e->args.push_back(primary());
  } else {
    e = primary();
  }
  if (at_op("**")) {
    auto b = expr(ExprKind::Binary, e->loc);
    next();
    b->op = PyOp::Pow;
    b->args.push_back(std::move(e));
    b->args.push_back(factor());  // right-associative, binds tighter than unary on its left only
    return b;
  }
  return e;
}

ExprPtr Parser::primary() {
  ExprPtr e = atom();
  for (int chain = 0;; ++chain) {
    if (chain > kMaxChain) fail_here("expression too long (split it into several statements)");
    if (at_op(".")) {
      next();
      auto a = expr(ExprKind::Attribute, cur().loc);
      a->name = expect_name("after '.'");
      a->args.push_back(std::move(e));
      e = std::move(a);
    } else if (at_op("(")) {
      auto c = expr(ExprKind::Call, e->loc);
      next();
      c->args.push_back(std::move(e));
      call_args(*c);
      e = std::move(c);
    } else if (at_op("[")) {
      auto s = expr(ExprKind::Subscript, cur().loc);
      next();
      s->args.push_back(std::move(e));
      do {
        if (at_op("]")) break;
        s->args.push_back(subscript_item());
      } while (accept_op(","));
      if (s->args.size() == 1) fail_here("expected an index");
      expect_op("]", "to close the subscript");
      e = std::move(s);
    } else {
      return e;
    }
  }
}

void Parser::call_args(Expr& c) {
  DepthGuard g(*this);
  bool unpacked_kw = false;
  while (!at_op(")")) {
    if (at_op("**")) {
      Keyword k;
      k.loc = cur().loc;
      next();
      k.value = test();
      c.keywords.push_back(std::move(k));
      unpacked_kw = true;
    } else if (at_op("*")) {
      if (unpacked_kw) fail_here("iterable argument unpacking follows keyword argument unpacking");
      auto st = expr(ExprKind::Starred, cur().loc);
      next();
      st->args.push_back(test());
      c.args.push_back(std::move(st));
    } else if (at(Tok::Name) && peek().kind == Tok::Op && peek().text == "=" && !at_keyword()) {
      Keyword k;
      k.loc = cur().loc;
      k.name = next().text;
      next();
      k.value = test();
      for (auto& prev : c.keywords)
        if (prev.name == k.name) src_.fail(k.loc, fmt::format("keyword argument '{}' repeated", k.name));
      c.keywords.push_back(std::move(k));
    } else {
      if (!c.keywords.empty()) fail_here(unpacked_kw ? "positional argument follows keyword argument unpacking"
                                                     : "positional argument follows keyword argument");
      SourceLoc loc = cur().loc;
      ExprPtr a = named_expression();
      if (at_comprehension()) {
        auto gen = expr(ExprKind::GeneratorExp, loc);
        gen->args.push_back(std::move(a));
        comprehension(*gen);
        a = std::move(gen);
        if (c.args.size() != 1 || !at_op(")")) src_.fail(loc, "generator expression must be parenthesized");
      }
      c.args.push_back(std::move(a));
    }
    if (!accept_op(",")) break;
  }
  expect_op(")", "to close the call");
}

ExprPtr Parser::subscript_item() {
  SourceLoc loc = cur().loc;
  if (at_op("*")) return star_expression();
  ExprPtr lower;
  if (!at_op(":")) {
    lower = named_expression();
    if (!at_op(":")) return lower;
  }
  auto s = expr(ExprKind::Slice, loc);
  s->args.resize(3);
  s->args[0] = std::move(lower);
  next();  // ':'
  if (!at_op(":") && !at_op(",") && !at_op("]")) s->args[1] = test();
  if (accept_op(":"))
    if (!at_op(",") && !at_op("]")) s->args[2] = test();
  return s;
}

bool Parser::at_comprehension() const {
  return at_name("for") || (at_name("async") && peek().kind == Tok::Name && peek().text == "for");
}

void Parser::comprehension(Expr& e) {
  while (at_comprehension()) {
    Comprehension c;
    c.is_async = accept_name("async");
    next();  // for
    c.target = target_list();
    check_target(*c.target);
    if (!accept_name("in")) fail_here(fmt::format("expected 'in' after the comprehension target, found {}", describe(cur())));
    c.iter = or_test();
    while (accept_name("if")) c.ifs.push_back(test_no_cond());
    e.generators.push_back(std::move(c));
  }
}

ExprPtr Parser::target_list() {
  SourceLoc loc = cur().loc;
  std::vector<ExprPtr> items;
  bool comma = false;
  do {
    if (at_name("in")) break;
    if (at_op("*")) {
      auto s = expr(ExprKind::Starred, cur().loc);
      next();
      s->args.push_back(bitor_expr());
      items.push_back(std::move(s));
    } else {
      items.push_back(bitor_expr());
    }
  } while ((comma = accept_op(",")));
  if (items.empty()) fail_here(fmt::format("expected a target, found {}", describe(cur())));
  if (items.size() == 1 && !comma) return std::move(items[0]);
  auto t = expr(ExprKind::Tuple, loc);
  t->args = std::move(items);
  return t;
}

ExprPtr Parser::paren_atom(SourceLoc loc) {
  next();  // (
  if (accept_op(")")) return expr(ExprKind::Tuple, loc);
  if (at_name("yield")) {
    ExprPtr y = yield_expr();
    expect_op(")", "to close the parenthesis");
    return y;
  }
  ExprPtr first = star_expression();
  if (at_comprehension()) {
    auto gen = expr(ExprKind::GeneratorExp, loc);
    gen->args.push_back(std::move(first));
    comprehension(*gen);
    expect_op(")", "to close the generator expression");
    return gen;
  }
  if (accept_op(")")) {
    if (first->kind == ExprKind::Starred) src_.fail(first->loc, "cannot use starred expression here");
    return first;
  }
  auto tup = expr(ExprKind::Tuple, loc);
  tup->args.push_back(std::move(first));
  while (accept_op(",")) {
    if (at_op(")")) break;
    tup->args.push_back(star_expression());
  }
  expect_op(")", "to close the parenthesis");
  return tup;
}

ExprPtr Parser::list_atom(SourceLoc loc) {
  next();  // [
  auto l = expr(ExprKind::List, loc);
  while (!at_op("]")) {
    l->args.push_back(star_expression());
    if (l->args.size() == 1 && at_comprehension()) {
      l->kind = ExprKind::ListComp;
      comprehension(*l);
      break;
    }
    if (!accept_op(",")) break;
  }
  expect_op("]", "to close the list");
  return l;
}

ExprPtr Parser::brace_atom(SourceLoc loc) {
  next();  // {
  auto d = expr(ExprKind::Dict, loc);
  bool first = true;
  while (!at_op("}")) {
    if (accept_op("**")) {
      if (d->kind != ExprKind::Dict) fail_here("invalid syntax: '**' in a set");
      d->args.emplace_back();
      d->args.push_back(bitor_expr());
    } else {
      ExprPtr item = star_expression();
      if (first && !at_op(":")) d->kind = ExprKind::Set;
      if (d->kind == ExprKind::Dict) {
        if (item->kind == ExprKind::Starred) src_.fail(item->loc, "cannot use a starred expression in a dict");
        expect_op(":", "after the dict key");
        d->args.push_back(std::move(item));
        d->args.push_back(test());
      } else {
        if (at_op(":")) fail_here("invalid syntax: ':' in a set");
        d->args.push_back(std::move(item));
      }
      if (first && at_comprehension()) {
        d->kind = d->kind == ExprKind::Dict ? ExprKind::DictComp : ExprKind::SetComp;
        comprehension(*d);
        break;
      }
    }
    first = false;
    if (!accept_op(",")) break;
  }
  expect_op("}", d->kind == ExprKind::Dict ? "to close the dict" : "to close the set");
  return d;
}

ExprPtr Parser::atom() {
  DepthGuard g(*this);
  const Token& t = cur();
  SourceLoc loc = t.loc;
  switch (t.kind) {
    case Tok::Int: {
      auto e = expr(t.big ? ExprKind::BigInt : ExprKind::Int, loc);
      e->int_value = t.int_value;
      e->name = next().text;
      return e;
    }
    case Tok::Float: {
      auto e = expr(ExprKind::Float, loc);
      e->float_value = next().float_value;
      return e;
    }
    case Tok::Imag: {
      auto e = expr(ExprKind::Imaginary, loc);
      e->float_value = next().float_value;
      return e;
    }
    case Tok::String:
    case Tok::FStringStart: return strings();
    case Tok::FStringMiddle:
    case Tok::FStringEnd: fail_here("invalid syntax in an f-string");
    case Tok::Name: {
      if (t.text == "True" || t.text == "False") {
        auto e = expr(ExprKind::Bool, loc);
        e->int_value = next().text == "True";
        return e;
      }
      if (t.text == "None") return next(), expr(ExprKind::None, loc);
      if (is_keyword(t.text)) fail_here(fmt::format("invalid syntax: unexpected '{}'", t.text));
      auto e = expr(ExprKind::Name, loc);
      e->name = next().text;
      return e;
    }
    case Tok::Op: {
      if (t.text == "(") return paren_atom(loc);
      if (t.text == "[") return list_atom(loc);
      if (t.text == "{") return brace_atom(loc);
      if (t.text == "...") return next(), expr(ExprKind::Ellipsis, loc);
      if (t.text == "*") fail_here("cannot use starred expression here");
      fail_here(fmt::format("invalid syntax: unexpected '{}'", t.text));
    }
    case Tok::Newline: fail_here("invalid syntax: the expression is incomplete at the end of the line");
    case Tok::Indent: fail_here("unexpected indent");
    case Tok::Dedent:
    case Tok::End: fail_here("invalid syntax: unexpected end of input");
  }
  fail_here("invalid syntax");
}

// Adjacent literals are one: all plain strings make a String, all bytes a Bytes, and any f-string
// among them makes the whole an FString.
ExprPtr Parser::strings() {
  SourceLoc loc = cur().loc;
  bool any_f = false, any_bytes = false, any_str = false;
  for (size_t k = pos_; k < toks_.size(); ++k) {
    const Token& t = toks_[k];
    if (t.kind == Tok::String) {
      (t.bytes ? any_bytes : any_str) = true;
    } else if (t.kind == Tok::FStringStart) {
      any_f = true;
      int nest = 0;
      for (; k < toks_.size(); ++k) {
        if (toks_[k].kind == Tok::FStringStart) ++nest;
        if (toks_[k].kind == Tok::FStringEnd && --nest == 0) break;
      }
    } else {
      break;
    }
  }
  if (any_bytes && (any_str || any_f)) fail_here("cannot mix bytes and nonbytes literals");
  if (any_bytes) {
    auto e = expr(ExprKind::Bytes, loc);
    while (at(Tok::String)) e->name += next().text;
    return e;
  }
  if (!any_f) {
    auto e = expr(ExprKind::String, loc);
    while (at(Tok::String)) e->name += next().text;
    return e;
  }
  auto f = expr(ExprKind::FString, loc);
  auto literal = [&](const Token& t) { fstring_literal(*f, t.text, t.loc); };
  while (at(Tok::String) || at(Tok::FStringStart)) {
    if (at(Tok::String)) {
      const Token& t = next();
      if (!t.text.empty()) literal(t);
      continue;
    }
    next();  // FStringStart
    while (!accept(Tok::FStringEnd)) {
      if (at(Tok::FStringMiddle)) {
        literal(next());
      } else if (at_op("{")) {
        fstring_field(*f);
      } else {
        fail_here(fmt::format("invalid syntax in an f-string: {}", describe(cur())));
      }
    }
  }
  return f;
}

// Literal text of an f-string or a format spec: one String part with the text before it, as Python.
void Parser::fstring_literal(Expr& f, const std::string& text, SourceLoc loc) {
  if (!f.args.empty() && f.args.back()->kind == ExprKind::String) {
    f.args.back()->name += text;
    return;
  }
  auto s = expr(ExprKind::String, loc);
  s->name = text;
  f.args.push_back(std::move(s));
}

// A replacement field from its '{' to its '}', appended to f's parts: the expression, `=` (its text
// then goes before it, and its repr unless a conversion or spec says otherwise), the conversion and
// the format spec, itself an FString whose fields may hold specs too.
void Parser::fstring_field(Expr& f) {
  DepthGuard g(*this);
  size_t text_from = cur().pos + 1;
  next();  // {
  auto v = expr(ExprKind::FormattedValue, cur().loc);
  if (at_op("}")) fail_here("f-string: empty expression not allowed");
  v->args.push_back(yield_or_star_expressions());
  if (at_comprehension()) {
    auto gen = expr(ExprKind::GeneratorExp, v->args[0]->loc);
    gen->args.push_back(std::move(v->args[0]));
    comprehension(*gen);
    v->args[0] = std::move(gen);
  }
  bool debug = accept_op("=");
  if (debug) fstring_literal(f, src_.text.substr(text_from, cur().pos - text_from), v->loc);
  if (accept_op("!")) {
    if (!at(Tok::Name) || cur().loc.col != toks_[pos_ - 1].loc.col + 1 || cur().loc.line != toks_[pos_ - 1].loc.line)
      fail_here("f-string: invalid conversion character: expected 's', 'r', or 'a'");
    v->conversion = next().text;
    if (v->conversion != "r" && v->conversion != "s" && v->conversion != "a")
      fail_here(fmt::format("f-string: invalid conversion character '{}': expected 's', 'r', or 'a'", v->conversion));
  } else if (debug && !at_op(":")) {
    v->conversion = "r";
  }
  if (at_op(":")) {
    auto spec = expr(ExprKind::FString, cur().loc);
    next();
    while (!at_op("}")) {
      if (at(Tok::FStringMiddle)) {
        const Token& t = next();
        fstring_literal(*spec, t.text, t.loc);
      } else if (at_op("{")) {
        fstring_field(*spec);
      } else {
        fail_here(fmt::format("invalid syntax in an f-string format spec: {}", describe(cur())));
      }
    }
    v->args.push_back(std::move(spec));
  }
  expect_op("}", "to close the f-string field");
  f.args.push_back(std::move(v));
}

// The annotation as kiln reads it: names, dotted names and subscripts of them; anything else keeps
// its spelling (an unknown type when it is used).
TypeExpr Parser::type_of(const Expr& e) {
  TypeExpr t;
  t.loc = e.loc;
  switch (e.kind) {
    case ExprKind::None: t.name = "None"; return t;
    case ExprKind::Name:
    case ExprKind::Attribute: t.name = spelling(e); return t;
    case ExprKind::Subscript:
      t = type_of(*e.args[0]);
      t.loc = e.loc;
      for (size_t i = 1; i < e.args.size(); ++i) {
        if (e.args[i]->kind == ExprKind::Tuple)
          for (const auto& a : e.args[i]->args) t.args.push_back(type_of(*a));
        else
          t.args.push_back(type_of(*e.args[i]));
      }
      return t;
    default: t.name = spelling(e); return t;
  }
}

// A short spelling of an expression, for annotations kiln does not read.
std::string Parser::spelling(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name: return e.name;
    case ExprKind::None: return "None";
    case ExprKind::Attribute: return spelling(*e.args[0]) + "." + e.name;
    case ExprKind::String: return "'" + e.name + "'";
    case ExprKind::Ellipsis: return "...";
    case ExprKind::Binary: return spelling(*e.args[0]) + " " + std::string(kiln::script::spelling(e.op)) + " " + spelling(*e.args[1]);
    case ExprKind::Subscript: {
      std::string s = spelling(*e.args[0]) + "[";
      for (size_t i = 1; i < e.args.size(); ++i) s += (i > 1 ? ", " : "") + spelling(*e.args[i]);
      return s + "]";
    }
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::string s = e.kind == ExprKind::List ? "[" : "";
      for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + spelling(*e.args[i]);
      return s + (e.kind == ExprKind::List ? "]" : "");
    }
    default: return "<expression>";
  }
}

TypeExpr annotation_type(const Expr& e) { return Parser::type_of(e); }

}  // namespace kiln::script
