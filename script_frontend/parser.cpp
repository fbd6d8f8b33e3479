// Python 3.11's statements: simple statements, compound statements and blocks, definitions with
// their decorators and parameters, imports. parse() then collects the kiln module from them.
#include "script_frontend/parser.h"

#include <fmt/format.h>

#include <algorithm>

#include "script_frontend/parser_impl.h"

namespace kiln::script {

namespace {

// Deep enough for any real program, shallow enough that the recursive descent cannot exhaust the
// stack on hostile input (the fuzzer feeds it thousands of '(').
constexpr int kMaxDepth = 1000;

}  // namespace

bool is_keyword(std::string_view w) {
  static constexpr std::string_view kws[] = {"False", "None",  "True",   "and",     "as",     "assert", "async",
                                             "await", "break", "class",  "continue", "def",   "del",    "elif",
                                             "else",  "except", "finally", "for",    "from",  "global", "if",
                                             "import", "in",   "is",     "lambda",  "nonlocal", "not",  "or",
                                             "pass",  "raise", "return", "try",     "while",  "with",   "yield"};
  for (auto k : kws)
    if (k == w) return true;
  return false;
}

Parser::Parser(const Source& src) : src_(src), toks_(lex(src)) {}

Parser::DepthGuard::DepthGuard(Parser& p) : p_(p) {
  if (++p_.depth_ > kMaxDepth) p_.fail_here("expression or block nested too deeply");
}

bool Parser::at_keyword() const { return at(Tok::Name) && is_keyword(cur().text); }
bool Parser::accept(Tok k) {
  if (!at(k)) return false;
  next();
  return true;
}
bool Parser::accept_op(std::string_view o) {
  if (!at_op(o)) return false;
  next();
  return true;
}
bool Parser::accept_name(std::string_view n) {
  if (!at_name(n)) return false;
  next();
  return true;
}

std::string Parser::describe(const Token& t) const {
  switch (t.kind) {
    case Tok::Name: return fmt::format("'{}'", t.text);
    case Tok::Int:
    case Tok::Float:
    case Tok::Imag: return fmt::format("number {}", t.text);
    case Tok::String: return "a string";
    case Tok::FStringStart: return "an f-string";
    case Tok::FStringMiddle: return "f-string text";
    case Tok::FStringEnd: return "the end of the f-string";
    case Tok::Op: return fmt::format("'{}'", t.text);
    case Tok::Newline: return "end of line";
    case Tok::Indent: return "an indent";
    case Tok::Dedent: return "a dedent";
    case Tok::End: return "end of file";
  }
  return "?";
}
void Parser::expect_op(std::string_view o, std::string_view context) {
  if (!accept_op(o)) fail_here(fmt::format("expected '{}' {}, found {}", o, context, describe(cur())));
}
std::string Parser::expect_name(std::string_view context) {
  if (!at(Tok::Name) || is_keyword(cur().text))
    fail_here(fmt::format("expected a name {}, found {}", context, describe(cur())));
  return next().text;
}

// Each top-level statement parses on its own: after an error the parser skips to the next line that
// starts a top-level statement and goes on, so one run reports every broken definition (clang-style)
// without cascades from the broken one.
std::vector<StmtPtr> Parser::module(std::vector<std::string>& errors) {
  std::vector<StmtPtr> body;
  while (!at(Tok::End)) {
    try {
      if (accept(Tok::Newline)) continue;
      if (at(Tok::Indent)) fail_here("unexpected indent");
      statement(body);
    } catch (const Error& e) {
      errors.push_back(e.what());
      depth_ = 0;
      next();
      while (!at(Tok::End) && !(cur().loc.col == 1 && (cur().kind == Tok::Name || at_op("@")))) next();
    }
  }
  return body;
}

StmtPtr Parser::make(StmtKind k, SourceLoc loc) {
  auto s = std::make_unique<Stmt>();
  s->kind = k;
  s->loc = loc;
  return s;
}

std::vector<StmtPtr> Parser::suite() {
  DepthGuard g(*this);
  std::vector<StmtPtr> body;
  if (!accept(Tok::Newline)) {
    simple_statements(body);
    return body;
  }
  if (!accept(Tok::Indent)) fail_here("expected an indented block");
  while (!accept(Tok::Dedent)) {
    if (at(Tok::End)) fail_here("expected a dedent");
    statement(body);
  }
  return body;
}

void Parser::statement(std::vector<StmtPtr>& out) {
  if (at(Tok::Indent)) fail_here("unexpected indent");
  SourceLoc loc = cur().loc;
  if (at_op("@")) return out.push_back(decorated());
  if (at(Tok::Name)) {
    const std::string& w = cur().text;
    if (w == "if") return out.push_back(if_stmt());
    if (w == "while") return out.push_back(while_stmt());
    if (w == "for") return out.push_back(for_stmt(false, loc));
    if (w == "try") return out.push_back(try_stmt());
    if (w == "with") return out.push_back(with_stmt(false, loc));
    if (w == "def") return out.push_back(function_def({}, false, loc));
    if (w == "class") return out.push_back(class_def({}, loc));
    if (w == "async" && peek().kind == Tok::Name) {
      next();
      if (at_name("def")) return out.push_back(function_def({}, true, loc));
      if (at_name("for")) return out.push_back(for_stmt(true, loc));
      if (at_name("with")) return out.push_back(with_stmt(true, loc));
      fail_here(fmt::format("expected 'def', 'for' or 'with' after 'async', found {}", describe(cur())));
    }
    if (w == "match")
      if (StmtPtr m = match_stmt()) return out.push_back(std::move(m));
    if (w == "else" || w == "elif" || w == "except" || w == "finally")
      fail_here(fmt::format("'{}' without a matching '{}'", w, w == "except" || w == "finally" ? "try" : "if"));
  }
  simple_statements(out);
}

void Parser::simple_statements(std::vector<StmtPtr>& out) {
  for (;;) {
    out.push_back(simple_statement());
    if (accept_op(";")) {
      if (accept(Tok::Newline) || at(Tok::End)) return;
      continue;
    }
    if (accept(Tok::Newline) || at(Tok::End)) return;
    fail_here(fmt::format("invalid syntax: expected end of line, found {}", describe(cur())));
  }
}

StmtPtr Parser::simple_statement() {
  SourceLoc loc = cur().loc;
  if (at(Tok::Name)) {
    const std::string& w = cur().text;
    if (w == "pass") return next(), make(StmtKind::Pass, loc);
    if (w == "break") return next(), make(StmtKind::Break, loc);
    if (w == "continue") return next(), make(StmtKind::Continue, loc);
    if (w == "return") {
      next();
      auto s = make(StmtKind::Return, loc);
      if (!at(Tok::Newline) && !at_op(";") && !at(Tok::End)) s->value = star_expressions();
      return s;
    }
    if (w == "assert") {
      next();
      auto s = make(StmtKind::Assert, loc);
      s->test = test();
      if (accept_op(",")) s->value = test();
      return s;
    }
    if (w == "raise") {
      next();
      auto s = make(StmtKind::Raise, loc);
      if (!at(Tok::Newline) && !at_op(";") && !at(Tok::End)) {
        s->value = test();
        if (accept_name("from")) s->cause = test();
      }
      return s;
    }
    if (w == "global" || w == "nonlocal") {
      next();
      auto s = make(w == "global" ? StmtKind::Global : StmtKind::Nonlocal, loc);
      do {
        SourceLoc nloc = cur().loc;
        s->names.push_back({expect_name("to declare"), "", nloc});
      } while (accept_op(","));
      return s;
    }
    if (w == "del") {
      next();
      auto s = make(StmtKind::Delete, loc);
      do {
        if (at(Tok::Newline) || at_op(";") || at(Tok::End)) break;
        ExprPtr t = bitor_expr();
        check_target(*t);
        s->targets.push_back(std::move(t));
      } while (accept_op(","));
      if (s->targets.empty()) fail_here("expected a target after 'del'");
      return s;
    }
    if (w == "import") return import_stmt();
    if (w == "from") return from_import();
    if (w == "if" || w == "while" || w == "for" || w == "def" || w == "class" || w == "try" || w == "with" ||
        w == "else" || w == "elif")
      fail_here(fmt::format("'{}' must start its own line", w));
  }
  ExprPtr first = yield_or_star_expressions();
  if (at_op(":")) {
    next();
    auto s = make(StmtKind::AnnAssign, loc);
    if (first->kind != ExprKind::Name && first->kind != ExprKind::Attribute && first->kind != ExprKind::Subscript)
      src_.fail(first->loc, "only a single target can be annotated");
    s->targets.push_back(std::move(first));
    s->annotation_expr = test();
    s->annotation = type_of(*s->annotation_expr);
    if (accept_op("=")) s->value = yield_or_star_expressions();
    return s;
  }
  static constexpr std::string_view aug[] = {"+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>="};
  for (auto a : aug)
    if (at_op(a)) {
      next();
      auto s = make(StmtKind::AugAssign, loc);
      s->op = *binary_op(a.substr(0, a.size() - 1));
      if (first->kind != ExprKind::Name && first->kind != ExprKind::Attribute && first->kind != ExprKind::Subscript)
        src_.fail(first->loc, "augmented assignment needs a name, an attribute or a subscript as its target");
      s->targets.push_back(std::move(first));
      s->value = yield_or_star_expressions();
      return s;
    }
  if (at_op("=")) {
    auto s = make(StmtKind::Assign, loc);
    std::vector<ExprPtr> chain;
    chain.push_back(std::move(first));
    while (accept_op("=")) chain.push_back(yield_or_star_expressions());
    s->value = std::move(chain.back());
    chain.pop_back();
    for (auto& t : chain) check_target(*t);
    s->targets = std::move(chain);
    return s;
  }
  auto s = make(StmtKind::Expr, loc);
  s->value = std::move(first);
  return s;
}

void Parser::check_target(const Expr& e) {
  // Attributes are targets too: `self.fc = nn.Linear(...)` in __init__ (lowering rejects them elsewhere).
  if (e.kind == ExprKind::Name || e.kind == ExprKind::Subscript || e.kind == ExprKind::Attribute) return;
  if (e.kind == ExprKind::Starred) return check_target(*e.args[0]);
  if (e.kind == ExprKind::Tuple || e.kind == ExprKind::List) {
    if (std::count_if(e.args.begin(), e.args.end(), [](const ExprPtr& a) { return a->kind == ExprKind::Starred; }) > 1)
      src_.fail(e.loc, "multiple starred expressions in assignment");
    for (auto& a : e.args) check_target(*a);
    return;
  }
  src_.fail(e.loc, "cannot assign to this expression");
}

// ---- definitions

StmtPtr Parser::decorated() {
  std::vector<ExprPtr> decorators;
  while (accept_op("@")) {
    decorators.push_back(named_expression());
    if (!accept(Tok::Newline)) fail_here(fmt::format("expected end of line after the decorator, found {}", describe(cur())));
  }
  SourceLoc loc = cur().loc;
  if (at_name("def")) return function_def(std::move(decorators), false, loc);
  if (at_name("async") && peek().kind == Tok::Name && peek().text == "def") {
    next();
    return function_def(std::move(decorators), true, loc);
  }
  if (at_name("class")) return class_def(std::move(decorators), loc);
  fail_here(fmt::format("expected 'def' or 'class' after the decorators, found {}", describe(cur())));
}

StmtPtr Parser::function_def(std::vector<ExprPtr> decorators, bool is_async, SourceLoc loc) {
  auto s = make(StmtKind::FunctionDef, loc);
  auto f = std::make_shared<FunctionDef>();
  next();  // def
  f->loc = cur().loc;
  f->name = expect_name("after 'def'");
  f->is_async = is_async;
  f->decorators = std::move(decorators);
  expect_op("(", "after the function name");
  parameters(*f, true, ")");
  expect_op(")", "to close the parameter list");
  if (accept_op("->")) {
    f->returns_expr = test();
    f->returns = type_of(*f->returns_expr);
    f->has_returns = true;
  }
  expect_op(":", "after the function signature");
  f->body = suite();
  s->fn = std::move(f);
  return s;
}

// def and lambda parameters: [posonly, /,] positional [, *[args] [, kwonly]] [, **kwargs], with
// annotations for def only.
void Parser::parameters(FunctionDef& f, bool annotated, std::string_view close) {
  bool star = false, defaults = false;
  auto param = [&](bool star_annotation) {
    Param p;
    p.loc = cur().loc;
    p.name = expect_name("as a parameter");
    if (annotated && accept_op(":")) {
      p.annotation = star_annotation && at_op("*") ? star_expression() : test();
      p.type = type_of(*p.annotation);
      p.has_type = true;
    }
    return p;
  };
  while (!at_op(close)) {
    if (at_op("**")) {
      next();
      f.kwarg = std::make_unique<Param>(param(false));
      accept_op(",");
      break;
    }
    if (at_op("*")) {
      if (star) fail_here("* argument may appear only once");
      star = true;
      SourceLoc sloc = cur().loc;
      next();
      if (at(Tok::Name)) {
        f.vararg = std::make_unique<Param>(param(true));
        f.vararg->loc = sloc;
      } else if (!at_op(",")) {
        fail_here("named arguments must follow bare *");
      }
    } else if (at_op("/")) {
      if (star || f.posonly || f.params.empty()) fail_here("invalid syntax: '/' must follow the positional parameters");
      next();
      f.posonly = f.params.size();
    } else {
      Param p = param(false);
      if (accept_op("=")) p.default_value = test();
      if (!star) {
        if (p.default_value) defaults = true;
        else if (defaults) src_.fail(p.loc, "non-default argument follows default argument");
        f.params.push_back(std::move(p));
      } else {
        f.kwonly.push_back(std::move(p));
      }
    }
    if (!accept_op(",")) break;
  }
  for (const auto* list : {&f.params, &f.kwonly})
    for (const Param& p : *list)
      for (const Param* q : {f.vararg.get(), f.kwarg.get()})
        if (q && q->name == p.name) src_.fail(q->loc, fmt::format("duplicate argument '{}' in function definition", p.name));
}

StmtPtr Parser::class_def(std::vector<ExprPtr> decorators, SourceLoc loc) {
  auto s = make(StmtKind::ClassDef, loc);
  auto c = std::make_shared<ClassDef>();
  next();  // class
  c->loc = cur().loc;
  c->name = expect_name("after 'class'");
  c->decorators = std::move(decorators);
  if (at_op("(")) {
    // The bases are a call's arguments: positional ones, keywords (metaclass=...), * and **.
    Expr call;
    next();
    call_args(call);
    c->bases = std::move(call.args);
    c->keywords = std::move(call.keywords);
  }
  expect_op(":", "after the class header");
  c->body = suite();
  s->cls = std::move(c);
  return s;
}

// ---- compound statements

StmtPtr Parser::if_stmt() {
  auto s = make(StmtKind::If, cur().loc);
  next();  // if / elif
  s->test = named_expression();
  expect_op(":", "after the if condition");
  s->body = suite();
  if (at_name("elif")) {
    s->orelse.push_back(if_stmt());
  } else if (accept_name("else")) {
    expect_op(":", "after 'else'");
    s->orelse = suite();
  }
  return s;
}

StmtPtr Parser::while_stmt() {
  auto s = make(StmtKind::While, cur().loc);
  next();
  s->test = named_expression();
  expect_op(":", "after the while condition");
  s->body = suite();
  if (accept_name("else")) {
    expect_op(":", "after 'else'");
    s->orelse = suite();
  }
  return s;
}

StmtPtr Parser::for_stmt(bool is_async, SourceLoc loc) {
  auto s = make(is_async ? StmtKind::AsyncFor : StmtKind::For, loc);
  next();  // for
  ExprPtr target = target_list();
  check_target(*target);
  s->targets.push_back(std::move(target));
  if (!accept_name("in")) fail_here(fmt::format("expected 'in' after the for target, found {}", describe(cur())));
  s->value = star_expressions();
  expect_op(":", "after the for header");
  s->body = suite();
  if (accept_name("else")) {
    expect_op(":", "after 'else'");
    s->orelse = suite();
  }
  return s;
}

StmtPtr Parser::try_stmt() {
  auto s = make(StmtKind::Try, cur().loc);
  next();  // try
  expect_op(":", "after 'try'");
  s->body = suite();
  while (at_name("except")) {
    ExceptHandler h;
    h.loc = cur().loc;
    next();
    bool star = accept_op("*");
    if (star) s->kind = StmtKind::TryStar;
    if (star != (s->kind == StmtKind::TryStar)) fail_here("cannot have both 'except' and 'except*' on the same 'try'");
    if (!at_op(":")) {
      h.type = test();
      if (at_op(",")) fail_here("multiple exception types must be parenthesized");
      if (accept_name("as")) h.name = expect_name("after 'as'");
    } else if (star) {
      fail_here("expected an exception type after 'except*'");
    }
    expect_op(":", "after the except clause");
    h.body = suite();
    s->handlers.push_back(std::move(h));
  }
  if (accept_name("else")) {
    if (s->handlers.empty()) fail_here("'else' needs an 'except' before it");
    expect_op(":", "after 'else'");
    s->orelse = suite();
  }
  if (accept_name("finally")) {
    expect_op(":", "after 'finally'");
    s->finalbody = suite();
  }
  if (s->handlers.empty() && s->finalbody.empty()) fail_here("expected 'except' or 'finally' block");
  return s;
}

StmtPtr Parser::with_stmt(bool is_async, SourceLoc loc) {
  auto s = make(is_async ? StmtKind::AsyncWith : StmtKind::With, loc);
  next();  // with
  if (!(at_op("(") && with_items_parenthesized(*s))) {
    do {
      WithItem item;
      item.context = test();
      if (accept_name("as")) {
        item.vars = bitor_expr();  // one target: a comma starts the next item
        check_target(*item.vars);
      }
      s->items.push_back(std::move(item));
    } while (accept_op(","));
  }
  expect_op(":", "after the with items");
  s->body = suite();
  return s;
}

// `with (a as b, c):`; false, with nothing consumed, when the parenthesis is an expression's
// (`with (a, b) as c:`, `with (yield):`).
bool Parser::with_items_parenthesized(Stmt& s) {
  size_t saved = pos_;
  int saved_depth = depth_;
  try {
    next();  // (
    std::vector<WithItem> items;
    while (!at_op(")")) {
      WithItem item;
      item.context = test();
      if (accept_name("as")) {
        item.vars = bitor_expr();  // one target: a comma starts the next item
        check_target(*item.vars);
      }
      items.push_back(std::move(item));
      if (!accept_op(",")) break;
    }
    if (!items.empty() && accept_op(")") && at_op(":")) {
      s.items = std::move(items);
      return true;
    }
  } catch (const Error&) {
  }
  pos_ = saved;
  depth_ = saved_depth;
  return false;
}

// ---- imports

std::string Parser::dotted_name(std::string_view context) {
  std::string n = expect_name(context);
  while (accept_op(".")) {
    n += '.';
    n += expect_name("after '.'");
  }
  return n;
}

StmtPtr Parser::import_stmt() {
  auto s = make(StmtKind::Import, cur().loc);
  next();  // import
  do {
    Alias a;
    a.loc = cur().loc;
    a.name = dotted_name("after import");
    if (accept_name("as")) a.asname = expect_name("after 'as'");
    s->names.push_back(std::move(a));
  } while (accept_op(","));
  return s;
}

StmtPtr Parser::from_import() {
  auto s = make(StmtKind::ImportFrom, cur().loc);
  next();  // from
  for (;;) {
    if (accept_op(".")) ++s->level;
    else if (accept_op("...")) s->level += 3;
    else break;
  }
  if (!at_name("import")) s->module = dotted_name("after 'from'");
  else if (s->level == 0) fail_here("expected a module name after 'from'");
  if (!accept_name("import")) fail_here("expected 'import' after the module name");
  if (at_op("*")) {
    s->names.push_back({"*", "", cur().loc});
    next();
    return s;
  }
  bool paren = accept_op("(");
  do {
    if (paren && at_op(")")) break;
    Alias a;
    a.loc = cur().loc;
    a.name = expect_name("to import");
    if (accept_name("as")) a.asname = expect_name("after 'as'");
    s->names.push_back(std::move(a));
  } while (accept_op(","));
  if (paren) expect_op(")", "to close the import list");
  if (s->names.empty()) fail_here("expected a name to import");
  return s;
}

// ---- the parse

FileAst parse(const Source& src, std::vector<std::string>& errors) {
  FileAst m;
  m.body = Parser(src).module(errors);
  collect(src, m, errors);
  return m;
}

FileAst parse(const Source& src) {
  std::vector<std::string> errors;
  FileAst m = parse(src, errors);
  raise_all(errors);
  return m;
}

FileAst parse_syntax(const Source& src) {
  std::vector<std::string> errors;
  FileAst m;
  m.body = Parser(src).module(errors);
  raise_all(errors);
  return m;
}

void raise_all(const std::vector<std::string>& errors) {
  if (errors.empty()) return;
  std::string all;
  for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + e;
  throw Error(all);
}

}  // namespace kiln::script
