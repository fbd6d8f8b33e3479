#pragma once
// Reads the IR's text form (core/ir/printer.h) back into a Graph; print(parse(t)) == t for printed
// text. `#` starts a comment to the end of the line. Bad text raises kiln::Error as
// `name:line:col: error: message` with the line and a caret; nodes remember their line.
#include <memory>
#include <string_view>

#include "core/ir/graph.h"

namespace kiln::ir {

std::unique_ptr<Graph> parse_ir(std::string_view text, std::string_view name = "<ir>");
// The type syntax alone (e.g. "f32[N,3]"), for tools and tests.
Type parse_type(std::string_view text);

}  // namespace kiln::ir
