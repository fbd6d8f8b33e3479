#pragma once
// The script AST: what the parser builds and lowering reads. Every node carries the source location
// errors point at. Expressions and statements are each one struct with a kind tag, so passes switch
// over the kind (no default: a new kind does not compile until every switch handles it). The parser
// reads all of Python 3.11; the kinds below the first block of each enum are the constructs kiln
// parses but does not evaluate or lower yet (unsupported_construct() names them in errors).
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/source_error.h"
#include "script_frontend/py_ops.h"

namespace kiln::script {

enum class ExprKind : uint8_t {
  Name,       // name
  Int,        // int_value
  Float,      // float_value
  Bool,       // int_value (0/1)
  None,
  String,     // name holds the value
  Ellipsis,   // `...`
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
  Starred,    // *args[0]: a call argument (nn.Sequential(*layers) in __init__), display item or target
  Dict,       // {args[0]: args[1], args[2]: args[3], ...}; a null key is `**args[2k+1]`
  // Parsed, neither evaluated nor lowered yet.
  BigInt,        // an integer literal beyond int64; name holds its spelling
  Imaginary,     // float_value j
  Bytes,         // b"...": name holds the bytes
  FString,       // f"...": args are String parts and FormattedValue fields, in order
  FormattedValue,  // {args[0]!conversion:args[1]} in an f-string; args[1], the spec (an FString), when written
  Set,           // {args...}
  ListComp,      // [args[0] generators]
  SetComp,       // {args[0] generators}
  DictComp,      // {args[0]: args[1] generators}
  GeneratorExp,  // (args[0] generators)
  Lambda,        // lambda fn->params...: fn->body is one Return of the expression
  NamedExpr,     // args[0] := args[1]
  Yield,         // yield args[0] (args empty when bare)
  YieldFrom,     // yield from args[0]
  Await,         // await args[0]
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct FunctionDef;
struct ClassDef;

struct Keyword {
  std::string name;  // empty for `**value`
  ExprPtr value;
  SourceLoc loc;
};

// One `for target in iter if cond...` of a comprehension.
struct Comprehension {
  ExprPtr target;
  ExprPtr iter;
  std::vector<ExprPtr> ifs;
  bool is_async = false;
};

struct Expr {
  ExprKind kind;
  SourceLoc loc;
  std::string name;  // Name, Attribute, String
  PyOp op = PyOp::Add;  // Unary, Binary, BoolOp
  std::vector<PyOp> ops;  // Compare
  std::string conversion;  // FormattedValue: "", "r", "s" or "a"
  int64_t int_value = 0;
  double float_value = 0;
  std::vector<ExprPtr> args;  // may hold nulls for absent slice bounds
  std::vector<Keyword> keywords;  // Call
  std::vector<Comprehension> generators;  // ListComp, SetComp, DictComp, GeneratorExp
  std::shared_ptr<FunctionDef> fn;  // Lambda
};

// A type annotation as kiln reads it: Tensor, int, Tuple[Tensor, int], Optional[Tensor], List[int].
// An annotation that is no such name (`int | None`, a string) keeps its spelling as the name, which
// type_from_annotation() rejects as an unknown type.
struct TypeExpr {
  std::string name;
  std::vector<TypeExpr> args;
  SourceLoc loc;
};

enum class StmtKind : uint8_t {
  Expr,       // value (docstrings and bare calls)
  Assign,     // targets = value (targets: one Name/Tuple/List/Subscript per `=`)
  AugAssign,  // targets[0] op= value
  AnnAssign,  // targets[0] : annotation = value (value may be null: `x: int`)
  If,         // test, body, orelse (elif is an If alone in orelse)
  While,      // test, body, orelse (`while ... else`)
  For,        // for targets[0] in value: body, orelse
  Return,     // value (may be null)
  Break,
  Continue,
  Pass,
  Assert,     // test, value (the message, may be null)
  // Parsed, neither evaluated nor lowered yet. At the top level and in class bodies, defs, classes and
  // imports are what collect() reads.
  FunctionDef,  // fn (def and async def)
  ClassDef,     // cls
  Import,       // names
  ImportFrom,   // from module (level dots before it) import names
  AsyncFor,     // as For
  Try,          // body, handlers, orelse, finalbody
  TryStar,      // as Try, with except*
  With,         // items, body
  AsyncWith,    // as With
  Raise,        // raise value from cause (either may be null)
  Global,       // names (each Alias's name)
  Nonlocal,     // names (each Alias's name)
  Delete,       // targets
  Match,        // match value: cases
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

// `name as asname` of an import; name is dotted, or "*" in `from m import *`.
struct Alias {
  std::string name, asname;
  SourceLoc loc;
};

struct ExceptHandler {
  ExprPtr type;  // null for a bare except
  std::string name;  // `as name`, empty when absent
  std::vector<StmtPtr> body;
  SourceLoc loc;
};

struct WithItem {
  ExprPtr context;
  ExprPtr vars;  // `as vars`, may be null
};

// A match-statement pattern: Value (value), Singleton (value: None/True/False), Sequence (patterns),
// Mapping (keys with patterns; name is `**name`), Class (value is the class; patterns, then kwd_names
// with kwd_patterns), Star (`*name`), As (patterns[0] as name; no pattern: a capture, or `_` when name
// is empty too), Or (patterns).
struct Pattern {
  enum class Kind : uint8_t { Value, Singleton, Sequence, Mapping, Class, Star, As, Or };
  Kind kind;
  SourceLoc loc;
  ExprPtr value;
  std::vector<ExprPtr> keys;
  std::vector<Pattern> patterns;
  std::vector<std::string> kwd_names;
  std::vector<Pattern> kwd_patterns;
  std::string name;
};

struct MatchCase {
  Pattern pattern;
  ExprPtr guard;  // may be null
  std::vector<StmtPtr> body;
};

struct Stmt {
  StmtKind kind;
  SourceLoc loc;
  std::vector<ExprPtr> targets;
  ExprPtr value;
  ExprPtr test;
  PyOp op = PyOp::Add;  // AugAssign: `+=` holds Add
  TypeExpr annotation;  // AnnAssign
  ExprPtr annotation_expr;  // AnnAssign: the annotation as written
  std::vector<StmtPtr> body;
  std::vector<StmtPtr> orelse;  // If, While, For, Try
  std::shared_ptr<FunctionDef> fn;  // FunctionDef
  std::shared_ptr<ClassDef> cls;    // ClassDef
  std::vector<Alias> names;  // Import, ImportFrom (aliases); Global, Nonlocal (names in name)
  std::string module;  // ImportFrom, without the leading dots
  int level = 0;       // ImportFrom: the leading dots
  std::vector<ExceptHandler> handlers;  // Try, TryStar
  std::vector<StmtPtr> finalbody;  // Try, TryStar
  std::vector<WithItem> items;  // With, AsyncWith
  ExprPtr cause;  // Raise
  std::vector<MatchCase> cases;  // Match
};

struct Param {
  std::string name;
  TypeExpr type;
  bool has_type = false;  // methods may leave parameters unannotated (Tensor, as in TorchScript)
  ExprPtr annotation;  // as written, null when none (type is read from it)
  ExprPtr default_value;  // null when none
  SourceLoc loc;
};

struct FunctionDef {
  std::string name;  // "<lambda>" for a lambda
  SourceLoc loc;
  std::vector<Param> params;  // positional ones (the first posonly of them before `/`)
  size_t posonly = 0;
  std::unique_ptr<Param> vararg;  // *args, may be null
  std::vector<Param> kwonly;      // after `*` or *args
  std::unique_ptr<Param> kwarg;   // **kwargs, may be null
  TypeExpr returns;
  bool has_returns = false;
  ExprPtr returns_expr;  // as written
  bool is_async = false;
  std::vector<ExprPtr> decorators;
  std::vector<StmtPtr> body;
  // Whether a bare-name decorator marks it: @property, @staticmethod, @classmethod.
  bool decorated(std::string_view decorator) const {
    for (const ExprPtr& d : decorators)
      if (d->kind == ExprKind::Name && d->name == decorator) return true;
    return false;
  }
  // A method's @torch.jit._overload_method declarations before it: the other parameter types a call may
  // pass (densenet's forward takes a Tensor or a List[Tensor]); inlining types the body for the caller's.
  std::vector<std::shared_ptr<FunctionDef>> overloads;
};

// `class Net(nn.Module):` with its methods. Only torch.nn.Module is accepted as the base (checked when
// the module is collected, not by the parser).
struct ClassDef {
  std::string name;
  SourceLoc loc;
  std::vector<ExprPtr> bases;
  std::vector<Keyword> keywords;  // metaclass=..., **kw
  std::vector<ExprPtr> decorators;
  std::vector<StmtPtr> body;  // every statement, as written
  // Collected from body for lowering: the methods and class-level `name = value`, in order.
  std::vector<std::shared_ptr<FunctionDef>> methods;
  std::vector<std::pair<std::string, const Expr*>> attrs;
  // Its base: a class of the same file (`class Conv2dNormActivation(ConvNormActivation)`), or none and
  // the torch.nn class it derives from: "Module", "Sequential" or "ModuleDict".
  // Set when the class is first built for a base imported from another file (base_import).
  mutable const ClassDef* parent = nullptr;
  // A base class imported from another file (regnet's `class SimpleStemIN(Conv2dNormActivation)`): the
  // name bound by the import, resolved by the evaluator when the class is first built.
  std::string base_import;
  // "" for a plain class and "dataclass" for a @dataclass (config objects, built by __init__ only)
  std::string torch_base = "Module";
  std::vector<std::pair<std::string, const Expr*>> fields;  // a @dataclass's `name: T [= default]`, in order
  // Its own method, or the nearest base class's (Python's lookup along single inheritance).
  const FunctionDef* method(std::string_view n) const {
    for (const ClassDef* c = this; c; c = c->parent)
      for (const auto& m : c->methods)
        if (m->name == n) return m.get();
    return nullptr;
  }
  // The class among this one and its bases that defines method `n` (where its super() starts).
  const ClassDef* owner_of(std::string_view n) const {
    for (const ClassDef* c = this; c; c = c->parent)
      for (const auto& m : c->methods)
        if (m->name == n) return c;
    return nullptr;
  }
  const ClassDef* root() const { return parent ? parent->root() : this; }
};

// `Outputs = namedtuple("Outputs", ["logits", "aux"])` (its field types from a later
// `Outputs.__annotations__ = {...}`, else Tensor, as TorchScript reads it) or `class Outputs(NamedTuple):`
// with annotated fields: a tuple type whose elements are also read by name.
struct NamedTupleDef {
  std::string name;
  SourceLoc loc;
  std::vector<std::string> fields;
  std::vector<TypeExpr> types;  // one per field
};

// The AST of one parsed .py file (not a module: kiln::ScriptFile holds it, ScriptedModule is what a class
// of it builds).
struct FileAst {
  std::vector<StmtPtr> body;  // every top-level statement, in order
  // Collected from body: the top-level functions and classes kiln lowers.
  std::vector<std::shared_ptr<FunctionDef>> functions;
  std::vector<std::shared_ptr<ClassDef>> classes;
  // What the imports bound: "torch" for `import torch`, "Tensor", "List", ... for from-imports.
  std::set<std::string> imported;
  // Names bound to torch.nn and torch.nn.functional (`import torch.nn as nn`, `from torch import nn`,
  // `import torch.nn.functional as F`); "torch.nn" and "torch.nn.functional" when torch is imported.
  std::set<std::string> nn_names, functional_names;
  // Names bound by `from torch.nn.utils.rnn import pack_padded_sequence [as ...]`: the function each names.
  std::map<std::string, std::string> rnn_utils_names;
  // Names the file binds that kiln cannot give a value, and why: imports of modules it cannot read,
  // module-level code it does not run, classes it does not build. Reading the file never fails for
  // them; code that kiln evaluates or lowers and uses one fails naming the reason.
  std::map<std::string, std::string> unavailable;
  // torch's and torchvision's API-usage logging (`_log_api_usage_once(self)` opens torchvision's
  // __init__s): calls do nothing, as they change nothing a model computes.
  std::set<std::string> no_op_calls;
  // Module-level `NAME = value` and `A, B = value` statements: the evaluator of __init__ computes one when it
  // first reads the name, and lowered code reads it as a constant of the graph (module_globals.cpp).
  std::map<std::string, const Expr*> constants;
  // The names among them that an unpacking binds (`MEAN, STD = (0.5,), (0.25,)`): the whole target, which the
  // evaluator unpacks the value into.
  std::map<std::string, const Expr*> unpacked;
  // Names bound to Python modules and objects the evaluator of __init__ knows, by their dotted names:
  // "partial" → "functools.partial", "OrderedDict" → "collections.OrderedDict", "init" → "torch.nn.init",
  // "warnings" → "warnings". (They stay in `unavailable` for lowered code.)
  std::map<std::string, std::string> aliases;
  // The classes among them that are not built, with the place and words of their first problem: what
  // ScriptFile::module() raises when asked for one.
  std::map<std::string, std::pair<SourceLoc, std::string>> unbuilt;
  // The namedtuple types of the file, by every name bound to one (`_Outputs = Outputs` too).
  std::map<std::string, std::shared_ptr<NamedTupleDef>> namedtuples;
  // Names bound to collections.namedtuple and typing.NamedTuple (dotted, `collections.namedtuple` after
  // `import collections`), each to which of the two it is.
  std::map<std::string, std::string> namedtuple_makers;
  const NamedTupleDef* namedtuple(const std::string& name) const {
    auto it = namedtuples.find(name);
    return it == namedtuples.end() ? nullptr : it->second.get();
  }
  const std::string* why_unavailable(const std::string& name) const {
    auto it = unavailable.find(name);
    return it == unavailable.end() ? nullptr : &it->second;
  }
};

// "lambda is", "list comprehensions are", ...: the construct, for "... not supported in <where>".
const char* unsupported_construct(ExprKind k);
const char* unsupported_construct(StmtKind k);
// " (TorchScript accepts this)" for a construct TorchScript compiles and kiln does not lower, else "".
const char* torchscript_accepts(ExprKind k);
const char* torchscript_accepts(StmtKind k);
// "torch.cuda.is_available" for that chain of names and attributes; "" for any other expression.
std::string dotted(const Expr& e);

}  // namespace kiln::script
