#pragma once
// A graph's tuples of tensors taken apart at its edges, for autodiff, which records tensors in and
// tensors out: a scripted word LM's forward(input, hidden) takes its LSTM state as one (h, c) argument
// and returns (log_probs, (h, c)). Each tuple input becomes its tensors, in order, rebuilt inside by a
// prim::TupleConstruct; each tuple output becomes its tensors; a prim::TupleIndex of a tuple built in
// the graph reads the element itself, so the tuples vanish where the graph only passes them through.
//
//   graph(%x : Tensor, %hc : Tuple[Tensor, Tensor]) -> graph(%x, %hc.0, %hc.1)
//   return (%y, TupleConstruct(%h, %c))            ->   return (%y, %h, %c)
#include <memory>
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/ivalue.h"

namespace kiln::jit {

struct FlatTuples {
  std::shared_ptr<ir::Graph> graph;      // null when an input or output holds something else than tensors
  std::vector<ir::Type> output_types;  // the source's outputs, to rebuild the results' nesting
};

FlatTuples flatten_tuples(const ir::Graph& source);

// The tensors of `values` in order, tuples taken apart (recursively); other values as they are.
std::vector<IValue> flatten_values(const std::vector<IValue>& values);
// Outputs of the flat graph nested again as the source returns them.
std::vector<IValue> nest_values(std::vector<IValue> flat, const std::vector<ir::Type>& types);
// Per output of the flat graph, the flag of the source output it comes from.
std::vector<bool> flatten_flags(const std::vector<bool>& flags, const std::vector<ir::Type>& types);

}  // namespace kiln::jit
