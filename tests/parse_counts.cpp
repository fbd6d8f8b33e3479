// Parses Python files with kiln's parser and prints, per file, how many nodes of each kind it built;
// tests/parse_stdlib.py compares the counts with Python's own ast module over the standard library.
//   parse_counts [--shape] FILE...      (or `-`: the file names one per line on stdin)
// Prints a header line of the count names, then `FILE<tab>count...` per file, or `FILE<tab>ERROR
// message`; with --shape, each count line is followed by `<tab>shape word...` (see Shape).
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

// The tree's shape: its nodes in pre-order, children in the order of the fields of Python's ast
// classes, each as a word (a name with its identifier, an operator with its symbol); tuples are left
// out, as Python wraps `a[i, j]`'s indices in one and kiln does not. Equal shapes mean the same
// nesting, precedence and argument order, which equal counts alone would not show.
class Shape {
 public:
  std::string out;

  void body(const std::vector<StmtPtr>& b) {
    for (const auto& s : b) stmt(*s);
  }

 private:
  void word(std::string_view w) {
    out += ' ';
    out += w;
  }
  void exprs(const std::vector<ExprPtr>& es) {
    for (const auto& e : es) expr(e.get());
  }
  void param(const Param& p) {
    word("arg:" + p.name);
    expr(p.annotation.get());
  }
  // Python's `arguments`: posonlyargs, args, vararg, kwonlyargs, kw_defaults, kwarg, defaults.
  void arguments(const FunctionDef& f) {
    for (const Param& p : f.params) param(p);
    if (f.vararg) param(*f.vararg);
    for (const Param& p : f.kwonly) param(p);
    for (const Param& p : f.kwonly) expr(p.default_value.get());
    if (f.kwarg) param(*f.kwarg);
    for (const Param& p : f.params) expr(p.default_value.get());
  }
  void pattern(const Pattern& p) {
    static const char* const kinds[] = {"MatchValue", "MatchSingleton", "MatchSequence", "MatchMapping",
                                        "MatchClass", "MatchStar",      "MatchAs",       "MatchOr"};
    word(std::string("p:") + kinds[int(p.kind)]);
    if (p.kind != Pattern::Kind::Singleton) expr(p.value.get());
    exprs(p.keys);
    for (const Pattern& q : p.patterns) pattern(q);
    for (const Pattern& q : p.kwd_patterns) pattern(q);
  }

  void stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::FunctionDef:
        word("def:" + s.fn->name);
        arguments(*s.fn);
        body(s.fn->body);
        exprs(s.fn->decorators);
        expr(s.fn->returns_expr.get());
        return;
      case StmtKind::ClassDef:
        word("class:" + s.cls->name);
        exprs(s.cls->bases);
        for (const Keyword& k : s.cls->keywords) keyword(k);
        body(s.cls->body);
        exprs(s.cls->decorators);
        return;
      case StmtKind::Expr: word("expr"); break;
      case StmtKind::Assign: word("assign"); break;
      case StmtKind::AugAssign: word("augassign:" + std::string(kiln::script::spelling(s.op))); break;
      case StmtKind::AnnAssign:
        word("annassign");
        expr(s.targets[0].get());
        expr(s.annotation_expr.get());
        expr(s.value.get());
        return;
      case StmtKind::If: word("if"); break;
      case StmtKind::While: word("while"); break;
      case StmtKind::For:
      case StmtKind::AsyncFor:
        word(s.kind == StmtKind::For ? "for" : "asyncfor");
        expr(s.targets[0].get());
        expr(s.value.get());
        body(s.body);
        body(s.orelse);
        return;
      case StmtKind::Return: word("return"); break;
      case StmtKind::Break: word("break"); break;
      case StmtKind::Continue: word("continue"); break;
      case StmtKind::Pass: word("pass"); break;
      case StmtKind::Assert:
        word("assert");
        expr(s.test.get());
        expr(s.value.get());
        return;
      case StmtKind::Import: word("import"); return;
      case StmtKind::ImportFrom: word("importfrom"); return;
      case StmtKind::Try:
      case StmtKind::TryStar:
        word(s.kind == StmtKind::Try ? "try" : "trystar");
        body(s.body);
        for (const ExceptHandler& h : s.handlers) {
          word("except");
          expr(h.type.get());
          body(h.body);
        }
        body(s.orelse);
        body(s.finalbody);
        return;
      case StmtKind::With:
      case StmtKind::AsyncWith:
        word(s.kind == StmtKind::With ? "with" : "asyncwith");
        for (const WithItem& w : s.items) {
          expr(w.context.get());
          expr(w.vars.get());
        }
        body(s.body);
        return;
      case StmtKind::Raise:
        word("raise");
        expr(s.value.get());
        expr(s.cause.get());
        return;
      case StmtKind::Global: word("global"); return;
      case StmtKind::Nonlocal: word("nonlocal"); return;
      case StmtKind::Delete: word("delete"); break;
      case StmtKind::Match:
        word("match");
        expr(s.value.get());
        for (const MatchCase& c : s.cases) {
          word("case");
          pattern(c.pattern);
          expr(c.guard.get());
          body(c.body);
        }
        return;
    }
    // The rest: targets, test, value, body, orelse, in the order Python's fields have them.
    exprs(s.targets);
    expr(s.test.get());
    expr(s.value.get());
    body(s.body);
    body(s.orelse);
  }

  void keyword(const Keyword& k) {
    word("kw:" + (k.name.empty() ? std::string("**") : k.name));
    expr(k.value.get());
  }
  void generators(const Expr& e) {
    for (const Comprehension& c : e.generators) {
      word(c.is_async ? "asynccomp" : "comp");
      expr(c.target.get());
      expr(c.iter.get());
      exprs(c.ifs);
    }
  }

  void expr(const Expr* e) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::Name: word("n:" + e->name); return;
      case ExprKind::Int:
      case ExprKind::Float:
      case ExprKind::Bool:
      case ExprKind::None:
      case ExprKind::String:
      case ExprKind::Ellipsis:
      case ExprKind::BigInt:
      case ExprKind::Imaginary:
      case ExprKind::Bytes: word("c"); return;
      case ExprKind::Tuple: exprs(e->args); return;
      case ExprKind::List: word("list"); break;
      case ExprKind::Set: word("set"); break;
      case ExprKind::Attribute:
        word("attr:" + e->name);
        break;
      case ExprKind::Call:
        word("call");
        exprs(e->args);
        for (const Keyword& k : e->keywords) keyword(k);
        return;
      case ExprKind::Subscript: word("sub"); break;
      case ExprKind::Slice: word("slice"); break;
      case ExprKind::Unary: word("u" + std::string(kiln::script::spelling(e->op))); break;
      case ExprKind::Binary: word("b" + std::string(kiln::script::spelling(e->op))); break;
      case ExprKind::BoolOp: word(std::string(kiln::script::spelling(e->op))); break;
      case ExprKind::Compare: {
        std::string w = "cmp";
        for (kiln::script::PyOp o : e->ops)
          w += ":" + (o == kiln::script::PyOp::IsNot ? std::string("isnot")
                      : o == kiln::script::PyOp::NotIn ? "notin" : std::string(kiln::script::spelling(o)));
        word(w);
        break;
      }
      case ExprKind::IfExp:
        word("ifexp");
        expr(e->args[0].get());
        expr(e->args[1].get());
        expr(e->args[2].get());
        return;
      case ExprKind::Starred: word("star"); break;
      case ExprKind::Dict:
        word("dict");
        for (size_t i = 0; i < e->args.size(); i += 2) expr(e->args[i].get());
        for (size_t i = 1; i < e->args.size(); i += 2) expr(e->args[i].get());
        return;
      case ExprKind::FString: word("fstr"); break;
      case ExprKind::FormattedValue: word("fv:" + e->conversion); break;
      case ExprKind::ListComp: word("listcomp"); break;
      case ExprKind::SetComp: word("setcomp"); break;
      case ExprKind::DictComp: word("dictcomp"); break;
      case ExprKind::GeneratorExp: word("genexp"); break;
      case ExprKind::Lambda:
        word("lambda");
        arguments(*e->fn);
        expr(e->fn->body[0]->value.get());
        return;
      case ExprKind::NamedExpr: word(":="); break;
      case ExprKind::Yield: word("yield"); break;
      case ExprKind::YieldFrom: word("yieldfrom"); break;
      case ExprKind::Await: word("await"); break;
    }
    exprs(e->args);
    generators(*e);
  }
};

void one(const std::string& path, bool shape) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) {
    std::cout << path << "\tERROR cannot read\n";
    return;
  }
  try {
    FileAst m = parse_syntax(Source{path, ss.str()});
    Counter c;
    c.body(m.body);
    std::cout << path << '\t';
    for (long v : c.n) std::cout << v << ' ';
    std::cout << '\n';
    if (shape) {
      Shape sh;
      sh.body(m.body);
      std::cout << "\tshape" << sh.out << '\n';
    }
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    std::cout << path << "\tERROR " << msg.substr(0, msg.find('\n')) << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::cout << "file";
  for (const char* name : kNamesOf) std::cout << ' ' << name;
  std::cout << '\n';
  bool shape = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--shape") {
      shape = true;
    } else if (arg == "-") {
      for (std::string line; std::getline(std::cin, line);)
        if (!line.empty()) one(line, shape);
    } else {
      one(arg, shape);
    }
  }
  std::cout.flush();
  return 0;
}
