#pragma once
// Graphviz text of a graph (`dot -Tsvg`): a box per node labelled with its op and output types,
// edges from definitions to uses, and a cluster per If/Loop block.
#include <string>

#include "core/ir/graph.h"

namespace kiln::ir {

std::string to_dot(const Graph& g, const std::string& title = "graph");

}  // namespace kiln::ir
