#pragma once
// Python's arithmetic and comparisons on ints, floats and bools (int op int stays int except for
// true division; floor division and modulo round toward negative infinity).
#include "core/ir/graph.h"
#include "core/ir/ivalue.h"

namespace kiln::interp {

IValue number_binary(ir::Prim op, const IValue& a, const IValue& b);

}  // namespace kiln::interp
