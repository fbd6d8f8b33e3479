#pragma once
// Shape propagation's rule for one op node (shape_prop.cpp): its first output's dims from its inputs'
// types, or nothing where they do not pin them down. The pass applies it to a graph; a shapes-only
// recording (tracer/recorder.h) to each op as it is recorded.
#include <optional>
#include <vector>

#include "core/ir/graph.h"

namespace kiln::jit {

std::optional<std::vector<ir::Dim>> op_output_dims(const ir::Node& n);

}  // namespace kiln::jit
