#pragma once
// Errors that point into source text, in one format for the IR parser and the script frontend:
//
//   model.py:3:9: error: cannot add Tensor and Tuple[Tensor, Tensor]
//       y = x + t
//           ^
#include <string>
#include <string_view>

#include "core/error.h"

namespace kiln {

struct SourceLoc {
  int line = 0;  // 1-based
  int col = 0;   // 1-based
};

std::string format_source_error(std::string_view file, std::string_view text, SourceLoc loc, std::string_view message);
[[noreturn]] void fail_at(std::string_view file, std::string_view text, SourceLoc loc, std::string_view message);

}  // namespace kiln
