#include "script_frontend/parser.h"

#include <fmt/format.h>

#include "script_frontend/lexer.h"

namespace kiln::script {

namespace {

// Deep enough for any real program, shallow enough that the recursive descent cannot exhaust the
// stack on hostile input (the fuzzer feeds it thousands of '(').
constexpr int kMaxDepth = 100;
constexpr int kMaxChain = 500;

// Python keywords kiln script does not accept as statements or expressions, with the name used in
// the error (`lambda is not supported in kiln script`).
const char* unsupported_keyword(std::string_view w) {
  static constexpr std::pair<std::string_view, const char*> kw[] = {
      {"lambda", "lambda"},     {"class", "class"},         {"with", "with"},       {"try", "try"},
      {"except", "except"},     {"finally", "finally"},     {"raise", "raise"},     {"global", "global"},
      {"nonlocal", "nonlocal"}, {"yield", "yield"},         {"async", "async"},     {"await", "await"},
      {"del", "del"},           {"match", nullptr},         {"print", nullptr}};
  for (auto& [k, name] : kw)
    if (k == w) return name;
  return nullptr;
}

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

class Parser {
 public:
  explicit Parser(const Source& src) : src_(src), toks_(lex(src)) {}

  // Each top-level statement parses on its own: after an error the parser skips to the next line
  // that starts a top-level statement and goes on, so one run reports every broken definition
  // (clang-style) without cascades from the broken one.
  Module module(std::vector<std::string>& errors) {
    Module m;
    while (!at(Tok::End)) {
      try {
        top_level(m);
      } catch (const Error& e) {
        errors.push_back(e.what());
        depth_ = 0;
        resync();
      }
    }
    return m;
  }

 private:
  void top_level(Module& m) {
    if (accept(Tok::Newline)) return;
    if (at_name("import")) {
      import_stmt(m);
    } else if (at_name("from")) {
      from_import(m);
    } else if (at_name("def")) {
      m.functions.push_back(function(false));
    } else if (at_name("class")) {
      m.classes.push_back(class_def(m));
    } else if (at(Tok::String)) {
      expr_list();  // the module docstring
      end_of_statement();
    } else if (at_op("@")) {
      fail_here("decorators are not supported in kiln script");
    } else if (at(Tok::Indent)) {
      fail_here("unexpected indent");
    } else {
      fail_here("only imports, function definitions and classes are allowed at the top level of a kiln script");
    }
  }

  // Past the statement that failed: to the next token in column 1 (a top-level statement).
  void resync() {
    next();
    while (!at(Tok::End) && !(cur().loc.col == 1 && cur().kind == Tok::Name)) next();
  }

  // ---- tokens ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  bool at(Tok k) const { return cur().kind == k; }
  bool at_op(std::string_view o) const { return cur().kind == Tok::Op && cur().text == o; }
  bool at_name(std::string_view n) const { return cur().kind == Tok::Name && cur().text == n; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (!at(k)) return false;
    next();
    return true;
  }
  bool accept_op(std::string_view o) {
    if (!at_op(o)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view n) {
    if (!at_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail_here(std::string_view msg) const { src_.fail(cur().loc, msg); }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Tok::Name: return fmt::format("'{}'", t.text);
      case Tok::Int:
      case Tok::Float: return fmt::format("number {}", t.text);
      case Tok::String: return "a string";
      case Tok::Op: return fmt::format("'{}'", t.text);
      case Tok::Newline: return "end of line";
      case Tok::Indent: return "an indent";
      case Tok::Dedent: return "a dedent";
      case Tok::End: return "end of file";
    }
    return "?";
  }
  void expect_op(std::string_view o, std::string_view context) {
    if (!accept_op(o)) fail_here(fmt::format("expected '{}' {}, found {}", o, context, describe(cur())));
  }
  std::string expect_name(std::string_view context) {
    if (!at(Tok::Name) || is_keyword(cur().text))
      fail_here(fmt::format("expected a name {}, found {}", context, describe(cur())));
    return next().text;
  }
  void end_of_statement() {
    if (accept(Tok::Newline) || at(Tok::End)) return;
    if (at_op(";")) return;
    fail_here(fmt::format("invalid syntax: expected end of line, found {}", describe(cur())));
  }

  struct DepthGuard {
    DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail_here("expression or block nested too deeply");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // ---- imports ----
  void import_stmt(Module& m) {
    SourceLoc at_loc = cur().loc;
    next();
    std::string mod = dotted_name();
    std::string as;
    if (accept_name("as")) as = expect_name("after 'as'");
    if (mod == "torch" && as.empty()) {
      m.imported.insert("torch");
    } else if (mod == "math" && as.empty()) {
      m.imported.insert("math");
    } else if (mod == "torch.nn" || mod == "torch.nn.functional") {
      // `import torch.nn` binds torch, as Python does; `import torch.nn as nn` binds the alias only.
      std::set<std::string>& names = mod == "torch.nn" ? m.nn_names : m.functional_names;
      if (as.empty()) {
        m.imported.insert("torch");
        names.insert(mod);
      } else {
        names.insert(as);
      }
    } else if (!as.empty() && (mod == "torch" || mod == "math")) {
      src_.fail(at_loc, fmt::format("import {} as {} is not supported in kiln script (import {})", mod, as, mod));
    } else {
      src_.fail(at_loc, fmt::format("import of '{}' is not supported in kiln script (only torch, torch.nn, "
                                    "torch.nn.functional, math and typing)",
                                    mod));
    }
    end_of_statement();
  }
  void from_import(Module& m) {
    next();
    std::string mod = dotted_name();
    if (!accept_name("import")) fail_here("expected 'import' after the module name");
    bool paren = accept_op("(");
    do {
      if (paren && at_op(")")) break;
      SourceLoc nloc = cur().loc;
      std::string name = expect_name("to import");
      std::string as = name;
      if (accept_name("as")) as = expect_name("after 'as'");
      bool typing = mod == "typing" && (name == "List" || name == "Tuple" || name == "Optional" || name == "Dict");
      if (mod == "torch" && name == "nn") {
        m.nn_names.insert(as);
      } else if ((mod == "torch.nn" && name == "functional") || (mod == "torch" && name == "functional")) {
        m.functional_names.insert(as);
      } else if (mod == "torch.nn" && name == "Module" && as == name) {
        m.imported.insert("Module");
      } else if (((mod == "torch" && name == "Tensor") || typing) && as == name) {
        m.imported.insert(name);
      } else {
        src_.fail(nloc, fmt::format("from {} import {}{} is not supported in kiln script", mod, name,
                                    as == name ? "" : " as " + as));
      }
    } while (accept_op(","));
    if (paren) expect_op(")", "to close the import list");
    end_of_statement();
  }
  std::string dotted_name() {
    std::string n = expect_name("after import");
    while (accept_op(".")) {
      n += '.';
      n += expect_name("after '.'");
    }
    return n;
  }

  // ---- types ----
  TypeExpr type_expr() {
    DepthGuard g(*this);
    TypeExpr t;
    t.loc = cur().loc;
    if (at_name("None")) {
      next();
      t.name = "None";
      return t;
    }
    t.name = expect_name("as a type");
    while (accept_op(".")) {
      t.name += '.';
      t.name += expect_name("in the type name");
    }
    if (accept_op("[")) {
      if (at_op("(")) fail_here("expected a type, found '('");
      do {
        if (at_op("]")) break;
        t.args.push_back(type_expr());
      } while (accept_op(","));
      expect_op("]", "to close the type arguments");
    }
    return t;
  }

  // ---- functions and statements ----
  // A method may leave parameters unannotated (TorchScript reads them as Tensor) and, in __init__,
  // give them any constant default: __init__ runs once, when the module is built.
  std::unique_ptr<FunctionDef> function(bool method) {
    auto f = std::make_unique<FunctionDef>();
    next();  // def
    f->loc = cur().loc;
    f->name = expect_name("after 'def'");
    expect_op("(", "after the function name");
    while (!at_op(")")) {
      if (at_op("*") || at_op("**")) fail_here("*args and **kwargs are not supported in kiln script");
      if (at_op("/")) fail_here("positional-only parameters are not supported in kiln script");
      Param p;
      p.loc = cur().loc;
      p.name = expect_name("as a parameter");
      if (accept_op(":")) {
        p.type = type_expr();
        p.has_type = true;
      } else if (!method) {
        src_.fail(p.loc, fmt::format("parameter '{}' needs a type annotation (kiln script types every parameter)", p.name));
      }
      if (accept_op("=")) p.default_value = test();
      f->params.push_back(std::move(p));
      if (!accept_op(",")) break;
    }
    expect_op(")", "to close the parameter list");
    if (accept_op("->")) {
      f->returns = type_expr();
      f->has_returns = true;
    }
    expect_op(":", "after the function signature");
    f->body = suite();
    return f;
  }

  std::unique_ptr<ClassDef> class_def(const Module& m) {
    auto c = std::make_unique<ClassDef>();
    next();  // class
    c->loc = cur().loc;
    c->name = expect_name("after 'class'");
    if (!accept_op("(")) src_.fail(c->loc, fmt::format("class '{}' must derive from nn.Module in kiln script", c->name));
    SourceLoc bloc = cur().loc;
    std::string base = at_op(")") ? std::string() : dotted_name_in("as the base class");
    expect_op(")", "after the base class");
    size_t dot = base.rfind('.');
    std::string owner = dot == std::string::npos ? "" : base.substr(0, dot);
    bool ok = base == "Module" ? m.imported.count("Module") != 0
                               : base.substr(dot + 1) == "Module" && (m.nn_names.count(owner) != 0 ||
                                                                       (owner == "torch.nn" && m.imported.count("torch")));
    if (!ok)
      src_.fail(bloc, fmt::format("class '{}' must derive from nn.Module (imported as torch.nn) in kiln script, not '{}'",
                                  c->name, base));
    expect_op(":", "after the class header");
    if (!accept(Tok::Newline)) fail_here("expected an indented class body");
    if (!accept(Tok::Indent)) fail_here("expected an indented class body");
    while (!accept(Tok::Dedent)) {
      if (at(Tok::End)) break;
      if (accept(Tok::Newline)) continue;
      if (at_name("def")) {
        c->methods.push_back(function(true));
        for (size_t i = 0; i + 1 < c->methods.size(); ++i)
          if (c->methods[i]->name == c->methods.back()->name)
            src_.fail(c->methods.back()->loc, fmt::format("method '{}' is defined twice in class '{}'", c->methods.back()->name, c->name));
      } else if (at(Tok::String) || at_name("pass")) {
        next();  // a docstring
        end_of_statement();
      } else if (at_name("__constants__")) {
        // TorchScript's list of constant attributes: kiln treats every int/float/bool attribute as one.
        next();
        expect_op("=", "after __constants__");
        expr_list();
        end_of_statement();
      } else if (at_op("@")) {
        fail_here("decorators are not supported in kiln script");
      } else if (at(Tok::Name) && !is_keyword(cur().text) && peek().kind == Tok::Op &&
                 (peek().text == "=" || peek().text == ":")) {
        // A class-level attribute (`expansion = 1`): a constant every instance starts with.
        StmtPtr st = simple_statement();
        end_of_statement();
        if ((st->kind != StmtKind::Assign && st->kind != StmtKind::AnnAssign) || st->targets.size() != 1 ||
            st->targets[0]->kind != ExprKind::Name || !st->value)
          src_.fail(st->loc, "a class-level attribute in kiln script is `name = value`");
        c->attrs.emplace_back(st->targets[0]->name, std::move(st->value));
      } else {
        fail_here("a class body in kiln script holds methods (def), class attributes (name = value), a docstring and "
                  "__constants__");
      }
    }
    if (!c->method("forward")) src_.fail(c->loc, fmt::format("class '{}' has no forward method", c->name));
    return c;
  }
  std::string dotted_name_in(std::string_view context) {
    std::string n = expect_name(context);
    while (accept_op(".")) {
      n += '.';
      n += expect_name("after '.'");
    }
    return n;
  }

  std::vector<StmtPtr> suite() {
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

  void statement(std::vector<StmtPtr>& out) {
    if (at(Tok::Indent)) fail_here("unexpected indent");
    if (at(Tok::Name)) {
      const std::string& w = cur().text;
      if (w == "if") return out.push_back(if_stmt());
      if (w == "while") return out.push_back(while_stmt());
      if (w == "for") return out.push_back(for_stmt());
      if (w == "def") fail_here("nested functions are not supported in kiln script; define it at the top level");
      if (w == "class") fail_here("nested classes are not supported in kiln script; define it at the top level");
      if (w == "import" || w == "from") fail_here("imports are only allowed at the top level of a kiln script");
      if (w == "else" || w == "elif") fail_here(fmt::format("'{}' without a matching 'if'", w));
    }
    if (at_op("@")) fail_here("decorators are not supported in kiln script");
    simple_statements(out);
  }

  void simple_statements(std::vector<StmtPtr>& out) {
    for (;;) {
      out.push_back(simple_statement());
      if (accept_op(";")) {
        if (accept(Tok::Newline) || at(Tok::End)) return;
        continue;
      }
      end_of_statement();
      return;
    }
  }

  StmtPtr make(StmtKind k, SourceLoc loc) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->loc = loc;
    return s;
  }

  StmtPtr simple_statement() {
    SourceLoc loc = cur().loc;
    if (at(Tok::Name)) {
      const std::string& w = cur().text;
      if (const char* what = unsupported_keyword(w)) fail_here(fmt::format("{} is not supported in kiln script", what));
      if (w == "pass") return next(), make(StmtKind::Pass, loc);
      if (w == "break") return next(), make(StmtKind::Break, loc);
      if (w == "continue") return next(), make(StmtKind::Continue, loc);
      if (w == "return") {
        next();
        auto s = make(StmtKind::Return, loc);
        if (!at(Tok::Newline) && !at_op(";") && !at(Tok::End)) s->value = expr_list();
        return s;
      }
      if (w == "assert") {
        next();
        auto s = make(StmtKind::Assert, loc);
        s->test = test();
        if (accept_op(",")) s->value = test();
        return s;
      }
      if (w == "if" || w == "while" || w == "for" || w == "def" || w == "else" || w == "elif")
        fail_here(fmt::format("'{}' must start its own line", w));
    }
    ExprPtr first = expr_list();
    if (at_op(":")) {
      next();
      auto s = make(StmtKind::AnnAssign, loc);
      check_target(*first);
      s->targets.push_back(std::move(first));
      s->annotation = type_expr();
      if (!accept_op("=")) fail_here("an annotated name needs a value in kiln script");
      s->value = expr_list();
      return s;
    }
    static constexpr std::string_view aug[] = {"+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>="};
    for (auto a : aug)
      if (at_op(a)) {
        next();
        auto s = make(StmtKind::AugAssign, loc);
        s->op = std::string(a.substr(0, a.size() - 1));
        if (first->kind != ExprKind::Name && first->kind != ExprKind::Attribute && first->kind != ExprKind::Subscript)
          src_.fail(first->loc, "augmented assignment needs a name, an attribute or a subscript as its target");
        s->targets.push_back(std::move(first));
        s->value = expr_list();
        return s;
      }
    if (at_op("=")) {
      auto s = make(StmtKind::Assign, loc);
      std::vector<ExprPtr> chain;
      chain.push_back(std::move(first));
      while (accept_op("=")) chain.push_back(expr_list());
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

  void check_target(const Expr& e) {
    // Attributes are targets too: `self.fc = nn.Linear(...)` in __init__ (lowering rejects them elsewhere).
    if (e.kind == ExprKind::Name || e.kind == ExprKind::Subscript || e.kind == ExprKind::Attribute) return;
    if (e.kind == ExprKind::Tuple || e.kind == ExprKind::List) {
      for (auto& a : e.args) check_target(*a);
      return;
    }
    src_.fail(e.loc, "cannot assign to this expression");
  }

  StmtPtr if_stmt() {
    auto s = make(StmtKind::If, cur().loc);
    next();  // if / elif
    s->test = test();
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

  StmtPtr while_stmt() {
    auto s = make(StmtKind::While, cur().loc);
    next();
    s->test = test();
    expect_op(":", "after the while condition");
    s->body = suite();
    if (at_name("else")) fail_here("while ... else is not supported in kiln script");
    return s;
  }

  StmtPtr for_stmt() {
    auto s = make(StmtKind::For, cur().loc);
    next();
    ExprPtr target = target_list();
    check_target(*target);
    s->targets.push_back(std::move(target));
    if (!accept_name("in")) fail_here(fmt::format("expected 'in' after the for target, found {}", describe(cur())));
    s->value = expr_list();
    expect_op(":", "after the for header");
    s->body = suite();
    if (at_name("else")) fail_here("for ... else is not supported in kiln script");
    return s;
  }

  // for-loop targets stop before `in`, which an expression would swallow as a comparison.
  ExprPtr target_list() {
    SourceLoc loc = cur().loc;
    std::vector<ExprPtr> items;
    do {
      if (at_name("in")) break;
      items.push_back(bitor_expr());
    } while (accept_op(","));
    if (items.size() == 1) return std::move(items[0]);
    auto t = expr(ExprKind::Tuple, loc);
    t->args = std::move(items);
    return t;
  }

  // ---- expressions ----
  ExprPtr expr(ExprKind k, SourceLoc loc) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->loc = loc;
    return e;
  }

  // test (',' test)* [',']: a tuple when a comma appears
  ExprPtr expr_list() {
    SourceLoc loc = cur().loc;
    ExprPtr first = test();
    if (!at_op(",")) return first;
    auto t = expr(ExprKind::Tuple, loc);
    t->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (ends_expr_list()) break;
      t->args.push_back(test());
    }
    return t;
  }
  bool ends_expr_list() const {
    return at(Tok::Newline) || at(Tok::End) || at_op("=") || at_op(")") || at_op("]") || at_op(":") || at_op(";");
  }

  ExprPtr test() {
    DepthGuard g(*this);
    if (at_name("lambda")) fail_here("lambda is not supported in kiln script");
    if (at_name("yield")) fail_here("yield is not supported in kiln script");
    if (at_name("await")) fail_here("await is not supported in kiln script");
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
    if (at_op(":=")) fail_here("assignment expressions (:=) are not supported in kiln script");
    return e;
  }

  ExprPtr bool_op(std::string_view op, ExprPtr (Parser::*sub)()) {
    ExprPtr e = (this->*sub)();
    if (!at_name(op)) return e;
    auto b = expr(ExprKind::BoolOp, e->loc);
    b->op = std::string(op);
    b->args.push_back(std::move(e));
    while (accept_name(op)) b->args.push_back((this->*sub)());
    return b;
  }
  ExprPtr or_test() { return bool_op("or", &Parser::and_test); }
  ExprPtr and_test() { return bool_op("and", &Parser::not_test); }
  ExprPtr not_test() {
    DepthGuard g(*this);
    if (at_name("not")) {
      auto u = expr(ExprKind::Unary, cur().loc);
      next();
      u->op = "not";
      u->args.push_back(not_test());
      return u;
    }
    return comparison();
  }

  bool comparison_op(std::string* op) {
    static constexpr std::string_view ops[] = {"<", ">", "==", ">=", "<=", "!="};
    if (at(Tok::Op))
      for (auto o : ops)
        if (cur().text == o) {
          *op = std::string(o);
          next();
          return true;
        }
    if (at_name("in")) {
      next();
      *op = "in";
      return true;
    }
    if (at_name("not") && peek().kind == Tok::Name && peek().text == "in") {
      next();
      next();
      *op = "not in";
      return true;
    }
    if (at_name("is")) {
      next();
      *op = accept_name("not") ? "is not" : "is";
      return true;
    }
    return false;
  }

  ExprPtr comparison() {
    ExprPtr e = bitor_expr();
    std::string op;
    if (!comparison_op(&op)) return e;
    auto c = expr(ExprKind::Compare, e->loc);
    c->args.push_back(std::move(e));
    do {
      c->ops.push_back(op);
      c->args.push_back(bitor_expr());
    } while (comparison_op(&op));
    return c;
  }

  ExprPtr binary_level(std::initializer_list<std::string_view> ops, ExprPtr (Parser::*sub)()) {
    ExprPtr e = (this->*sub)();
    for (int chain = 0;; ++chain) {
      // Chains nest to the left; bounding them bounds the recursion of every later pass.
      if (chain > kMaxChain) fail_here("expression too long (split it into several statements)");
      bool found = false;
      for (auto o : ops)
        if (at_op(o)) {
          next();
          auto b = expr(ExprKind::Binary, e->loc);  // errors point at the whole expression's start
          b->op = std::string(o);
          b->args.push_back(std::move(e));
          b->args.push_back((this->*sub)());
          e = std::move(b);
          found = true;
          break;
        }
      if (!found) return e;
    }
  }
  ExprPtr bitor_expr() { return binary_level({"|"}, &Parser::bitxor_expr); }
  ExprPtr bitxor_expr() { return binary_level({"^"}, &Parser::bitand_expr); }
  ExprPtr bitand_expr() { return binary_level({"&"}, &Parser::shift_expr); }
  ExprPtr shift_expr() { return binary_level({"<<", ">>"}, &Parser::arith_expr); }
  ExprPtr arith_expr() { return binary_level({"+", "-"}, &Parser::term); }
  ExprPtr term() { return binary_level({"*", "/", "//", "%", "@"}, &Parser::factor); }

  ExprPtr factor() {
    DepthGuard g(*this);
    if (at_op("-") || at_op("+") || at_op("~")) {
      auto u = expr(ExprKind::Unary, cur().loc);
      u->op = next().text;
      u->args.push_back(factor());
      return u;
    }
    return power();
  }

  ExprPtr power() {
    ExprPtr e = primary();
    if (at_op("**")) {
      auto b = expr(ExprKind::Binary, e->loc);
      next();
      b->op = "**";
      b->args.push_back(std::move(e));
      b->args.push_back(factor());  // right-associative, binds tighter than unary on its left only
      return b;
    }
    return e;
  }

  ExprPtr primary() {
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

  void call_args(Expr& c) {
    DepthGuard g(*this);
    while (!at_op(")")) {
      if (at_op("**")) fail_here("**kwargs are not supported in kiln script");
      if (at_op("*")) {
        if (!c.keywords.empty()) fail_here("positional argument follows keyword argument");
        auto st = expr(ExprKind::Starred, cur().loc);
        next();
        st->args.push_back(test());
        c.args.push_back(std::move(st));
        if (!accept_op(",")) break;
        continue;
      }
      if (at(Tok::Name) && peek().kind == Tok::Op && peek().text == "=") {
        Keyword k;
        k.loc = cur().loc;
        k.name = next().text;
        next();
        k.value = test();
        for (auto& prev : c.keywords)
          if (prev.name == k.name) src_.fail(k.loc, fmt::format("keyword argument '{}' repeated", k.name));
        c.keywords.push_back(std::move(k));
      } else {
        if (!c.keywords.empty()) fail_here("positional argument follows keyword argument");
        c.args.push_back(test());
        if (at_name("for")) fail_here("generator expressions are not supported in kiln script");
      }
      if (!accept_op(",")) break;
    }
    expect_op(")", "to close the call");
  }

  ExprPtr subscript_item() {
    SourceLoc loc = cur().loc;
    ExprPtr lower;
    if (!at_op(":")) {
      lower = test();
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

  ExprPtr atom() {
    DepthGuard g(*this);
    const Token& t = cur();
    SourceLoc loc = t.loc;
    switch (t.kind) {
      case Tok::Int: {
        auto e = expr(ExprKind::Int, loc);
        e->int_value = next().int_value;
        return e;
      }
      case Tok::Float: {
        auto e = expr(ExprKind::Float, loc);
        e->float_value = next().float_value;
        return e;
      }
      case Tok::String: {
        auto e = expr(ExprKind::String, loc);
        while (at(Tok::String)) e->name += next().text;
        return e;
      }
      case Tok::Name: {
        if (t.text == "True" || t.text == "False") {
          auto e = expr(ExprKind::Bool, loc);
          e->int_value = next().text == "True";
          return e;
        }
        if (t.text == "None") return next(), expr(ExprKind::None, loc);
        if (const char* what = unsupported_keyword(t.text)) fail_here(fmt::format("{} is not supported in kiln script", what));
        if (is_keyword(t.text)) fail_here(fmt::format("invalid syntax: unexpected '{}'", t.text));
        auto e = expr(ExprKind::Name, loc);
        e->name = next().text;
        return e;
      }
      case Tok::Op: {
        if (t.text == "(") {
          next();
          if (accept_op(")")) return expr(ExprKind::Tuple, loc);
          ExprPtr first = test();
          if (at_name("for")) fail_here("generator expressions are not supported in kiln script");
          if (accept_op(")")) return first;
          auto tup = expr(ExprKind::Tuple, loc);
          tup->args.push_back(std::move(first));
          while (accept_op(",")) {
            if (at_op(")")) break;
            tup->args.push_back(test());
          }
          expect_op(")", "to close the parenthesis");
          return tup;
        }
        if (t.text == "[") {
          next();
          auto l = expr(ExprKind::List, loc);
          while (!at_op("]")) {
            l->args.push_back(test());
            if (at_name("for")) fail_here("list comprehensions are not supported in kiln script");
            if (!accept_op(",")) break;
          }
          expect_op("]", "to close the list");
          return l;
        }
        if (t.text == "{") {
          next();
          auto d = expr(ExprKind::Dict, loc);
          while (!at_op("}")) {
            d->args.push_back(test());
            if (!at_op(":")) fail_here("set literals are not supported in kiln script");
            next();
            d->args.push_back(test());
            if (at_name("for")) fail_here("dict comprehensions are not supported in kiln script");
            if (!accept_op(",")) break;
          }
          expect_op("}", "to close the dict");
          return d;
        }
        if (t.text == "...") return next(), expr(ExprKind::Ellipsis, loc);
        if (t.text == "*") fail_here("starred expressions are not supported in kiln script");
        fail_here(fmt::format("invalid syntax: unexpected '{}'", t.text));
      }
      case Tok::Newline: fail_here("invalid syntax: the expression is incomplete at the end of the line");
      case Tok::Indent: fail_here("unexpected indent");
      case Tok::Dedent:
      case Tok::End: fail_here("invalid syntax: unexpected end of input");
    }
    fail_here("invalid syntax");
  }

  const Source& src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Module parse(const Source& src, std::vector<std::string>& errors) { return Parser(src).module(errors); }

Module parse(const Source& src) {
  std::vector<std::string> errors;
  Module m = parse(src, errors);
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
