// Parses Python files with kiln's parser and prints, per file, how many nodes of each kind it built;
// tests/parse_stdlib.py compares the counts with Python's own ast module over the standard library.
//   parse_counts FILE...      (or `-`: the file names one per line on stdin)
// Prints a header line of the count names, then `FILE count...` per file, or `FILE ERROR message`.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "script_frontend/parser.h"

using namespace kiln::script;

namespace {

enum Count {
  kFunctions, kLambdas, kClasses, kCalls, kListComps, kSetComps, kDictComps, kGenExps, kComprehensions, kFStrings,
  kFormatted, kNames, kAttributes, kConstants, kSubscripts, kSlices, kStarred, kYields, kAwaits, kNamedExprs,
  kKeywords, kArgs, kDecorators, kImports, kTries, kWiths, kMatches, kStatements, kPatterns, kCount
};
const char* const kNamesOf[kCount] = {"functions", "lambdas", "classes", "calls", "listcomps", "setcomps", "dictcomps",
                                       "genexps", "comprehensions", "fstrings", "formatted", "names", "attributes",
                                       "constants", "subscripts", "slices", "starred", "yields", "awaits", "namedexprs",
                                       "keywords", "args", "decorators", "imports", "tries", "withs", "matches",
                                       "statements", "patterns"};

struct Counter {
  long n[kCount] = {};

  void body(const std::vector<StmtPtr>& b) {
    for (const auto& s : b) stmt(*s);
  }
  void exprs(const std::vector<ExprPtr>& es) {
    for (const auto& e : es) expr(e.get());
  }
  void param(const Param& p) {
    ++n[kArgs];
    expr(p.annotation.get());
  }
  void function(const FunctionDef& f) {
    exprs(f.decorators);
    n[kDecorators] += long(f.decorators.size());
    for (const Param& p : f.params) param(p);
    if (f.vararg) param(*f.vararg);
    for (const Param& p : f.kwonly) param(p);
    if (f.kwarg) param(*f.kwarg);
    for (const Param& p : f.params) expr(p.default_value.get());
    for (const Param& p : f.kwonly) expr(p.default_value.get());
    expr(f.returns_expr.get());
  }
  void pattern(const Pattern& p) {
    ++n[kPatterns];
    // Python's MatchSingleton holds None/True/False as a plain value, not a Constant node.
    if (p.kind != Pattern::Kind::Singleton) expr(p.value.get());
    exprs(p.keys);
    for (const Pattern& q : p.patterns) pattern(q);
    for (const Pattern& q : p.kwd_patterns) pattern(q);
  }

  void stmt(const Stmt& s) {
    ++n[kStatements];
    exprs(s.targets);
    expr(s.value.get());
    expr(s.test.get());
    expr(s.annotation_expr.get());
    expr(s.cause.get());
    body(s.body);
    body(s.orelse);
    body(s.finalbody);
    for (const ExceptHandler& h : s.handlers) {
      expr(h.type.get());
      body(h.body);
    }
    for (const WithItem& w : s.items) {
      expr(w.context.get());
      expr(w.vars.get());
    }
    for (const MatchCase& c : s.cases) {
      pattern(c.pattern);
      expr(c.guard.get());
      body(c.body);
    }
    switch (s.kind) {
      case StmtKind::FunctionDef:
        ++n[kFunctions];
        function(*s.fn);
        body(s.fn->body);
        break;
      case StmtKind::ClassDef:
        ++n[kClasses];
        exprs(s.cls->decorators);
        n[kDecorators] += long(s.cls->decorators.size());
        exprs(s.cls->bases);
        for (const Keyword& k : s.cls->keywords) ++n[kKeywords], expr(k.value.get());
        body(s.cls->body);
        break;
      case StmtKind::Import:
      case StmtKind::ImportFrom: ++n[kImports]; break;
      case StmtKind::Try:
      case StmtKind::TryStar: ++n[kTries]; break;
      case StmtKind::With:
      case StmtKind::AsyncWith: ++n[kWiths]; break;
      case StmtKind::Match: ++n[kMatches]; break;
      case StmtKind::Expr:
      case StmtKind::Assign:
      case StmtKind::AugAssign:
      case StmtKind::AnnAssign:
      case StmtKind::If:
      case StmtKind::While:
      case StmtKind::For:
      case StmtKind::AsyncFor:
      case StmtKind::Return:
      case StmtKind::Break:
      case StmtKind::Continue:
      case StmtKind::Pass:
      case StmtKind::Assert:
      case StmtKind::Raise:
      case StmtKind::Global:
      case StmtKind::Nonlocal:
      case StmtKind::Delete: break;
    }
  }

  void expr(const Expr* e) {
    if (!e) return;
    exprs(e->args);
    for (const Keyword& k : e->keywords) ++n[kKeywords], expr(k.value.get());
    for (const Comprehension& c : e->generators) {
      ++n[kComprehensions];
      expr(c.target.get());
      expr(c.iter.get());
      exprs(c.ifs);
    }
    switch (e->kind) {
      case ExprKind::Name: ++n[kNames]; break;
      case ExprKind::Int:
      case ExprKind::Float:
      case ExprKind::Bool:
      case ExprKind::None:
      case ExprKind::String:
      case ExprKind::Ellipsis:
      case ExprKind::BigInt:
      case ExprKind::Imaginary:
      case ExprKind::Bytes: ++n[kConstants]; break;
      case ExprKind::Attribute: ++n[kAttributes]; break;
      case ExprKind::Call: ++n[kCalls]; break;
      case ExprKind::Subscript: ++n[kSubscripts]; break;
      case ExprKind::Slice: ++n[kSlices]; break;
      case ExprKind::Starred: ++n[kStarred]; break;
      case ExprKind::FString: ++n[kFStrings]; break;
      case ExprKind::FormattedValue: ++n[kFormatted]; break;
      case ExprKind::ListComp: ++n[kListComps]; break;
      case ExprKind::SetComp: ++n[kSetComps]; break;
      case ExprKind::DictComp: ++n[kDictComps]; break;
      case ExprKind::GeneratorExp: ++n[kGenExps]; break;
      case ExprKind::Lambda:
        ++n[kLambdas];
        function(*e->fn);
        expr(e->fn->body[0]->value.get());  // the body, without the Return the AST wraps it in
        break;
      case ExprKind::NamedExpr: ++n[kNamedExprs]; break;
      case ExprKind::Yield:
      case ExprKind::YieldFrom: ++n[kYields]; break;
      case ExprKind::Await: ++n[kAwaits]; break;
      case ExprKind::Tuple:
      case ExprKind::List:
      case ExprKind::Unary:
      case ExprKind::Binary:
      case ExprKind::BoolOp:
      case ExprKind::Compare:
      case ExprKind::IfExp:
      case ExprKind::Dict:
      case ExprKind::Set: break;
    }
  }
};

void one(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) {
    std::cout << path << " ERROR cannot read\n";
    return;
  }
  try {
    Module m = parse_syntax(Source{path, ss.str()});
    Counter c;
    c.body(m.body);
    std::cout << path;
    for (long v : c.n) std::cout << ' ' << v;
    std::cout << '\n';
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    std::cout << path << " ERROR " << msg.substr(0, msg.find('\n')) << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::cout << "file";
  for (const char* name : kNamesOf) std::cout << ' ' << name;
  std::cout << '\n';
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "-") {
      for (std::string line; std::getline(std::cin, line);)
        if (!line.empty()) one(line);
    } else {
      one(argv[i]);
    }
  }
  std::cout.flush();
  return 0;
}
