#pragma once
// Lowering: a parsed script module to one IR graph per function. Names, types and op signatures are
// checked here, as each construct is lowered and before anything runs; calls between the file's
// functions are inlined, so every graph stands alone.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "script_frontend/ast.h"
#include "script_frontend/source.h"

namespace kiln::script {

// Raises kiln::Error in the source error format naming the first problem of each function.
std::map<std::string, std::shared_ptr<ir::Graph>> lower(const Source& src, const FileAst& m);
// Appends the first problem of each function to errors (once, though inlining meets it again); only the
// functions `which` accepts, when given, are lowered (the others may still be called and inlined).
struct File;
std::map<std::string, std::shared_ptr<ir::Graph>> lower(const Source& src, const FileAst& m, std::vector<std::string>& errors,
                                                         const std::function<bool(const FunctionDef&)>& which = {},
                                                         std::shared_ptr<const File> file = nullptr);

// One function, as ScriptFile::function lowers it on first use: the graph, or null with its errors
// appended.
// `file`, when given, holds src and m: its module-level constants and imports can then be read.
std::shared_ptr<ir::Graph> lower_one(const Source& src, const FileAst& m, const FunctionDef& f, std::vector<std::string>& errors,
                                     std::shared_ptr<const File> file = nullptr);

// A function taking a Dict parameter is lowered only where another function of the file calls it
// (calls are inlined, so the dict's keys are known there); it has no graph of its own.
bool is_dict_annotation(const TypeExpr& t);
const Param* dict_param(const FunctionDef& f);

}  // namespace kiln::script
