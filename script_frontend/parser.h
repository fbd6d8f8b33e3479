#pragma once
// The script parser: tokens to AST, Python's grammar and precedence for the kiln subset. Constructs
// Python has and kiln does not (lambda, class, with, comprehensions, ...) are named in the error.
#include "script_frontend/ast.h"
#include "script_frontend/source.h"

namespace kiln::script {

// Raises kiln::Error (`file:line:col: error: ...`) at the first problem.
Module parse(const Source& src);

}  // namespace kiln::script
