#include "core/shapes_broadcast.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace kiln {

// broadcast_shapes' rule, asked as a question: its message names two shapes, torch's for indices all of them
bool shapes_broadcast(const std::vector<Shape>& shapes) {
  try {
    Shape all;
    for (const Shape& s : shapes) all = broadcast_shapes("index", all, s);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string shapes_list(const std::vector<Shape>& shapes) {
  std::string list;
  for (const Shape& s : shapes) list += fmt::format("{}[{}]", list.empty() ? "" : ", ", fmt::join(s, ", "));
  return list;
}

}  // namespace kiln
