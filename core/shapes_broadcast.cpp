#include "core/shapes_broadcast.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

namespace kiln {

bool shapes_broadcast(const std::vector<Shape>& shapes) {
  Shape all;
  for (const Shape& s : shapes) {
    Shape a = all, c = s;
    if (a.size() < c.size()) std::swap(a, c);
    for (size_t j = 0; j < c.size(); ++j) {
      int64_t &p = a[a.size() - c.size() + j], q = c[j];
      if (p != q && p != 1 && q != 1) return false;
      if (p == 1) p = q;
    }
    all = a;
  }
  return true;
}

std::string shapes_list(const std::vector<Shape>& shapes) {
  std::string list;
  for (const Shape& s : shapes) list += fmt::format("{}[{}]", list.empty() ? "" : ", ", fmt::join(s, ", "));
  return list;
}

}  // namespace kiln
