#pragma once
// Checks a graph's invariants (core/ir/graph.h notes): definition before use, use lists, each
// node's arity, attributes and blocks against the op table and prims.def, and the dtype rules of
// elementwise and reduction rows where the input dtypes are known.
#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace kiln::ir {

// Every problem found, each naming the node's line (its source line, else its line in
// print_graph's text) and the node.
std::vector<std::string> verify_errors(const Graph& g);
// Raises kiln::Error listing every problem; does nothing for a well-formed graph.
void verify(const Graph& g);

}  // namespace kiln::ir
