#include "core/source_error.h"

#include <fmt/format.h>

namespace kiln {

std::string format_source_error(std::string_view file, std::string_view text, SourceLoc loc, std::string_view message) {
  std::string out = fmt::format("{}:{}:{}: error: {}", file, loc.line, loc.col, message);
  // Find the line; a location past the end (an unexpected end of file) shows no source line.
  size_t start = 0;
  for (int l = 1; l < loc.line && start != std::string_view::npos; ++l) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos || start > text.size() || loc.line < 1) return out;
  size_t end = text.find('\n', start);
  std::string_view line = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  out += "\n";
  out += line;
  out += "\n";
  // Tabs stay tabs under the caret so it lines up however the terminal renders them.
  for (int c = 1; c < loc.col && size_t(c - 1) < line.size(); ++c) out += line[size_t(c - 1)] == '\t' ? '\t' : ' ';
  out += "^";
  return out;
}

void fail_at(std::string_view file, std::string_view text, SourceLoc loc, std::string_view message) {
  throw Error(format_source_error(file, text, loc, message));
}

}  // namespace kiln
