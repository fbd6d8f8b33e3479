#pragma once
// One sample call per row of the op table (inputs and attributes), shared by the tests that run
// every row: traced == eager, compiled gradients == eager gradients.
#include <kiln/kiln.h>

namespace kiln::test {

struct OpCase {
  Tensors inputs;
  Attrs attrs;
};

// Inputs and attributes for one row of the table; `seed` changes the values, never the shapes.
// No default: a new row does not compile until it has a case here.
OpCase case_for(OpId op, uint64_t seed);

}  // namespace kiln::test
