#pragma once
// Whether several shapes broadcast together (NumPy's rule), and the list torch's messages name them by
// ("[2], [3, 4]"): an advanced index's tensors are checked so, now or when a graph runs.
#include <string>
#include <vector>

#include "core/shape.h"

namespace kiln {

bool shapes_broadcast(const std::vector<Shape>& shapes);
std::string shapes_list(const std::vector<Shape>& shapes);

}  // namespace kiln
