#pragma once
// The script parser: tokens to AST, all of Python 3.11's grammar. Parsing checks syntax only; the
// kiln subset is checked when the module is collected (its imports, top-level functions and
// nn.Module classes) and when code is evaluated (__init__) or lowered (forward and what it calls),
// each naming the construct it does not support.
#include <string>
#include <vector>

#include "script_frontend/ast.h"
#include "script_frontend/source.h"

namespace kiln::script {

// Parses and collects. Raises kiln::Error (`file:line:col: error: ...`) naming every problem, one per
// broken top-level statement.
FileAst parse(const Source& src);
// Appends one message per broken top-level statement to errors; the module holds the rest.
FileAst parse(const Source& src, std::vector<std::string>& errors);
// Python's syntax alone: Module::body, nothing collected; raises kiln::Error on a syntax error.
FileAst parse_syntax(const Source& src);
// Fills m's functions, classes, import names and unavailable names from m.body (collect.cpp says what
// each top-level statement gives), appending a message only for a function defined twice.
void collect(const Source& src, FileAst& m, std::vector<std::string>& errors);
// A namedtuple definition at the top level (`X = namedtuple(...)`, `X.__annotations__ = {...}`, `Y = X`,
// `class X(NamedTuple):`): records it in m.namedtuples and returns true; raises on a malformed one.
bool collect_namedtuple(const Source& src, FileAst& m, const Stmt& s);
// Raises the first problem of a def kiln is about to evaluate or lower: decorators, async, *args,
// keyword-only or positional-only parameters, an unannotated parameter of a function (methods may
// leave them out), a construct of a parameter default kiln does not support; for __init__ (where ==
// "__init__") then every construct of its body the evaluator does not support, in one error. Lowered
// code (where == "kiln script") has its body checked a statement at a time (unsupported_constructs).
void check_def(const Source& src, const FunctionDef& f, bool method, std::string_view where);
// The constructs of a lowered statement's own expressions that kiln script does not lower (lambda, a set
// literal, try, ...), each an error in the source format, in source order; one inside another is only the
// outer one. The statements of its blocks are left out: they are checked when they are lowered.
std::vector<std::string> unsupported_constructs(const Source& src, const Stmt& s);
// Every such construct of a body, its blocks included.
std::vector<std::string> unsupported_constructs(const Source& src, const std::vector<StmtPtr>& body);
// TorchScript's marks on a def: @torch.jit.export (lowered beside forward), @torch.jit.ignore and
// @torch.jit.unused (never lowered; kiln runs no Python, so lowered code that calls one is an error).
enum class JitMark : uint8_t { None, Export, Ignore, Unused };
JitMark jit_mark(const FunctionDef& f);
const char* jit_mark_name(JitMark m);  // "export", "ignore", "unused"
// @torch.no_grad() / @torch.inference_mode() on a method (nanoGPT's generate): calls record no autograd.
bool runs_without_grad(const FunctionDef& f);
// A def written as a kiln script function: a return annotation of a script type (Tensor, int, Tuple[...],
// ...), no **kwargs, not async, no decorator but @torch.jit.export. What `kiln
// check FILE` lowers without a class: a model file's builders and __init__ helpers (returning modules) are
// not script functions.
bool looks_scripted(const FunctionDef& f);
// An expression read as an annotation (`List[int]` as torch.jit.annotate's first argument), as a def's are.
TypeExpr annotation_type(const Expr& e);
// Raises kiln::Error holding every message, one after another, when there are any.
void raise_all(const std::vector<std::string>& errors);

}  // namespace kiln::script
