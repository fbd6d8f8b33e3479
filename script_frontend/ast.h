#pragma once
// The script AST: what the parser builds and lowering reads. Every node carries the source location
// errors point at. Expressions and statements are each one struct with a kind tag, so passes switch
// over the kind (no default: a new kind does not compile until every switch handles it).
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/source_error.h"

namespace kiln::script {

enum class ExprKind : uint8_t {
  Name,       // name
  Int,        // int_value
  Float,      // float_value
  Bool,       // int_value (0/1)
  None,
  String,     // name holds the value
  Ellipsis,   // `...` inside a subscript
  Tuple,      // args
  List,       // args
  Attribute,  // args[0].name
  Call,       // args[0](args[1..], keywords)
  Subscript,  // args[0][args[1..]] (one per comma-separated index)
  Slice,      // args: lower, upper, step (null when absent)
  Unary,      // op args[0]; op is "-", "+", "not", "~"
  Binary,     // args[0] op args[1]; op is "+", "-", "*", "/", "//", "%", "**", "@", "&", "|", "^"
  BoolOp,     // args joined by op "and" / "or" (two or more)
  Compare,    // args[0] ops[0] args[1] ops[1] args[2] ... ("<", "==", "is", "is not", "in", ...)
  IfExp,      // args[1] if args[0] else args[2]
  Starred,    // *args[0], as a call argument (nn.Sequential(*layers) in __init__)
  Dict,       // {args[0]: args[1], args[2]: args[3], ...}
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  ExprPtr value;
  SourceLoc loc;
};

struct Expr {
  ExprKind kind;
  SourceLoc loc;
  std::string name;  // Name, Attribute, String
  std::string op;    // Unary, Binary, BoolOp
  std::vector<std::string> ops;  // Compare
  int64_t int_value = 0;
  double float_value = 0;
  std::vector<ExprPtr> args;  // may hold nulls for absent slice bounds
  std::vector<Keyword> keywords;  // Call
};

// A type annotation as written: Tensor, int, Tuple[Tensor, int], Optional[Tensor], List[int].
struct TypeExpr {
  std::string name;
  std::vector<TypeExpr> args;
  SourceLoc loc;
};

enum class StmtKind : uint8_t {
  Expr,       // value (docstrings and bare calls)
  Assign,     // targets = value (targets: one Name/Tuple/List/Subscript per `=`)
  AugAssign,  // targets[0] op= value
  AnnAssign,  // targets[0] : annotation = value
  If,         // test, body, orelse (elif is an If alone in orelse)
  While,      // test, body
  For,        // for targets[0] in value: body
  Return,     // value (may be null)
  Break,
  Continue,
  Pass,
  Assert,     // test, value (the message, may be null)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Stmt {
  StmtKind kind;
  SourceLoc loc;
  std::vector<ExprPtr> targets;
  ExprPtr value;
  ExprPtr test;
  std::string op;  // AugAssign: "+", ...
  TypeExpr annotation;  // AnnAssign
  std::vector<StmtPtr> body;
  std::vector<StmtPtr> orelse;
};

struct Param {
  std::string name;
  TypeExpr type;
  bool has_type = false;  // methods may leave parameters unannotated (Tensor, as in TorchScript)
  ExprPtr default_value;  // null when none
  SourceLoc loc;
};

struct FunctionDef {
  std::string name;
  SourceLoc loc;
  std::vector<Param> params;
  TypeExpr returns;
  bool has_returns = false;
  std::vector<StmtPtr> body;
};

// `class Net(nn.Module):` with its methods. Only torch.nn.Module is accepted as the base.
struct ClassDef {
  std::string name;
  SourceLoc loc;
  std::vector<std::unique_ptr<FunctionDef>> methods;
  std::vector<std::pair<std::string, ExprPtr>> attrs;  // class-level `name = value`, in order
  const FunctionDef* method(std::string_view n) const {
    for (const auto& m : methods)
      if (m->name == n) return m.get();
    return nullptr;
  }
};

struct Module {
  std::vector<std::unique_ptr<FunctionDef>> functions;
  std::vector<std::unique_ptr<ClassDef>> classes;
  // What the imports bound: "torch" for `import torch`, "Tensor", "List", ... for from-imports.
  std::set<std::string> imported;
  // Names bound to torch.nn and torch.nn.functional (`import torch.nn as nn`, `from torch import nn`,
  // `import torch.nn.functional as F`); "torch.nn" and "torch.nn.functional" when torch is imported.
  std::set<std::string> nn_names, functional_names;
};

}  // namespace kiln::script
