#pragma once
// Command-line values for `kiln run`: each argument text becomes an IValue of the parameter's type.
#include <string>

#include "core/ir/ivalue.h"
#include "core/ir/type.h"

namespace kiln::cli {

// Tensor: a .npy path; int, float, bool: a literal (True/False/true/false/1/0 for bool);
// Optional[T]: None or T; List[T]: comma-separated elements. Raises kiln::Error naming the parameter.
IValue parse_arg(const std::string& text, const ir::Type& type, const std::string& param);
// `--randn 64x784`: a tensor of N(0, 1) samples of that shape ("" for 0-d), in the parameter's floating
// dtype (float32 when it has none). Raises for a parameter that is not a floating tensor or a bad shape.
IValue random_arg(const std::string& shape, const ir::Type& type, const std::string& param);

}  // namespace kiln::cli
