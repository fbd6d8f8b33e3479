#pragma once
// The IR's text form (see core/ir/type.h for types):
//
//   graph(%x : f32[2,3], %n : int):
//     %0 : f32[2,3] = relu(%x)
//     %1 : f32[2] = sum[dims=[1], keepdim=false](%0)
//     %2 : f32[2] = prim::If(%c)
//       block0():
//         -> (%1)
//       block1():
//         %3 : f32[2] = neg(%1)
//         -> (%3)
//     return (%2)
//
// Values print by their name, or as %<number> (numbered in print order, skipping used names).
// Attribute values: 3, 2.5, true, "text", f32, [1, 2]; a tensor constant prints its elements as a
// flat list, `prim::Constant[value=[1, 2.5]]()`, its type giving the shape (elided past 64 elements).
#include <string>
#include <unordered_map>

#include "core/ir/graph.h"

namespace kiln::ir {

struct PrintedGraph {
  std::string text;
  std::unordered_map<const Node*, int> lines;           // 1-based line of each printed node
  std::unordered_map<const Value*, std::string> names;  // "%x", "%3"
};

PrintedGraph print_graph(const Graph& g);
// The text of one attribute value, as the parser reads it back.
std::string attr_value_str(const AttrValue& v);

}  // namespace kiln::ir
