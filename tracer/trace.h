#pragma once
// trace(fn, sample_inputs): runs fn once eagerly and records every op it dispatches into a graph.
//
// What a trace cannot see it says: reading a traced tensor's value into C++ (item(), data
// pointers) warns that the trace may not generalise, and reading sizes as numbers specialises the
// function to the sample shapes (calls with other shapes then raise). check_inputs re-runs fn
// eagerly on more inputs and raises at the first output that differs from the trace.
#include <functional>
#include <string>
#include <vector>

#include "backends/interp/function.h"

namespace kiln {

namespace nn {
class Module;
}

struct TraceOptions {
  std::string name = "forward";
  // Graph input names; default x0, x1, ...
  std::vector<std::string> input_names;
  // Inputs to check the trace against eager execution on; each set as sample_inputs.
  std::vector<std::vector<Tensor>> check_inputs;
  double check_rtol = 1e-5;
  // Keep the warnings in Binding::warnings without logging them (callers that re-trace per shape).
  bool quiet = false;
  // Guard every value the traced code reads into C++ (item(), data pointers): a later call that sees
  // another value raises GuardFailure instead of returning what the traced path computed.
  bool guard_value_reads = false;
  double check_atol = 1e-6;
};

using TracedFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

Function trace(const TracedFn& fn, const std::vector<Tensor>& sample_inputs, TraceOptions options = {});

// As trace(), with m's parameters and buffers as graph inputs the function supplies at each call (not
// baked constants), so the traced model keeps training and its buffers keep updating.
Function trace_module(nn::Module& m, const TracedFn& fn, const std::vector<Tensor>& sample_inputs,
                      TraceOptions options = {});

}  // namespace kiln
