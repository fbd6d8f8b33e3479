#pragma once
// The parser's state, shared by its three parts: statements (parser.cpp), expressions
// (parse_exprs.cpp) and match patterns (parse_patterns.cpp). Recursive descent over Python 3.11's
// grammar; it checks syntax only; which constructs kiln runs is decided when the code is collected,
// evaluated or lowered.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "script_frontend/ast.h"
#include "script_frontend/lexer.h"
#include "script_frontend/source.h"

namespace kiln::script {

class Parser {
 public:
  explicit Parser(const Source& src);
  // Every top-level statement; one message per broken one in errors.
  std::vector<StmtPtr> module(std::vector<std::string>& errors);

  // ---- tokens
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  bool at(Tok k) const { return cur().kind == k; }
  bool at_op(std::string_view o) const { return cur().kind == Tok::Op && cur().text == o; }
  bool at_name(std::string_view n) const { return cur().kind == Tok::Name && cur().text == n; }
  bool at_keyword() const;
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(Tok k);
  bool accept_op(std::string_view o);
  bool accept_name(std::string_view n);
  [[noreturn]] void fail_here(std::string_view msg) const { src_.fail(cur().loc, msg); }
  std::string describe(const Token& t) const;
  void expect_op(std::string_view o, std::string_view context);
  std::string expect_name(std::string_view context);

  struct DepthGuard {
    explicit DepthGuard(Parser& p);
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // ---- statements (parser.cpp)
  void statement(std::vector<StmtPtr>& out);
  void simple_statements(std::vector<StmtPtr>& out);
  StmtPtr simple_statement();
  std::vector<StmtPtr> suite();
  StmtPtr make(StmtKind k, SourceLoc loc);
  StmtPtr decorated();
  StmtPtr function_def(std::vector<ExprPtr> decorators, bool is_async, SourceLoc loc);
  StmtPtr class_def(std::vector<ExprPtr> decorators, SourceLoc loc);
  void parameters(FunctionDef& f, bool annotated, std::string_view close);
  StmtPtr if_stmt();
  StmtPtr while_stmt();
  StmtPtr for_stmt(bool is_async, SourceLoc loc);
  StmtPtr try_stmt();
  StmtPtr with_stmt(bool is_async, SourceLoc loc);
  bool with_items_parenthesized(Stmt& s);
  StmtPtr import_stmt();
  StmtPtr from_import();
  std::string dotted_name(std::string_view context);
  StmtPtr match_stmt();  // null (and nothing consumed) when `match` is an ordinary name here
  void check_target(const Expr& e);

  // ---- expressions (parse_exprs.cpp)
  ExprPtr expr(ExprKind k, SourceLoc loc);
  ExprPtr star_expressions();        // a, *b, c (a tuple when there is a comma)
  ExprPtr yield_or_star_expressions();
  ExprPtr star_expression();         // *bitor | test
  ExprPtr named_expression();        // NAME := test | test
  ExprPtr test();                    // lambda | or_test [if or_test else test]
  ExprPtr test_no_cond();            // or_test (comprehension conditions)
  ExprPtr lambda();
  ExprPtr yield_expr();
  ExprPtr or_test();
  ExprPtr and_test();
  ExprPtr not_test();
  ExprPtr bool_op(PyOp op, ExprPtr (Parser::*sub)());
  bool comparison_op(PyOp* op);
  ExprPtr comparison();
  ExprPtr binary_level(std::initializer_list<PyOp> ops, ExprPtr (Parser::*sub)());
  ExprPtr bitor_expr();
  ExprPtr bitxor_expr();
  ExprPtr bitand_expr();
  ExprPtr shift_expr();
  ExprPtr arith_expr();
  ExprPtr term();
  ExprPtr factor();
  ExprPtr power();
  ExprPtr primary();
  ExprPtr atom();
  ExprPtr strings();
  void fstring_field(Expr& f);
  void fstring_literal(Expr& f, const std::string& text, SourceLoc loc);
  ExprPtr paren_atom(SourceLoc loc);
  ExprPtr list_atom(SourceLoc loc);
  ExprPtr brace_atom(SourceLoc loc);
  void comprehension(Expr& e);
  bool at_comprehension() const;
  void call_args(Expr& c);
  ExprPtr subscript_item();
  ExprPtr target_list();  // for-loop targets: they stop before `in`
  static TypeExpr type_of(const Expr& e);
  static std::string spelling(const Expr& e);

  // ---- match patterns (parse_patterns.cpp)
  Pattern patterns();
  Pattern pattern();
  Pattern or_pattern();
  Pattern closed_pattern();
  Pattern sequence_items(Pattern::Kind kind, std::string_view close, SourceLoc loc);

  const Source& src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

bool is_keyword(std::string_view w);

}  // namespace kiln::script
