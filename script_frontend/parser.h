#pragma once
// The script parser: tokens to AST, Python's grammar and precedence for the kiln subset. Constructs
// Python has and kiln does not (lambda, class, with, comprehensions, ...) are named in the error.
#include <string>
#include <vector>

#include "script_frontend/ast.h"
#include "script_frontend/source.h"

namespace kiln::script {

// Raises kiln::Error (`file:line:col: error: ...`) naming every problem, one per broken top-level
// statement.
Module parse(const Source& src);
// Appends one message per broken top-level statement to errors; the module holds the rest.
Module parse(const Source& src, std::vector<std::string>& errors);
// Raises kiln::Error holding every message, one after another, when there are any.
void raise_all(const std::vector<std::string>& errors);

}  // namespace kiln::script
