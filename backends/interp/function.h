#pragma once
// kiln::Function: a graph made callable, as trace() and script() return it. Calls run on the
// reference interpreter; the JIT's compile() returns a Function too.
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/graph.h"
#include "core/error.h"
#include "core/ir/ivalue.h"

namespace kiln {

// A traced function's guard saw another value than at trace time (Function::Binding::guards).
class GuardFailure : public Error {
 public:
  using Error::Error;
};

class Function {
 public:
  // How a traced graph meets its caller.
  struct Binding {
    // Trailing graph inputs the function supplies itself (a traced module's parameters), read at
    // each call so in-place optimiser updates are seen.
    std::vector<Tensor> bound;
    // (graph input, graph output): the input was modified in place by the traced code; the output
    // holds its new value, written back after each call. These outputs are not returned.
    std::vector<std::pair<size_t, size_t>> writebacks;
    // Calls must match the traced input shapes exactly (the trace read sizes as numbers).
    bool exact_shapes = false;
    std::string exact_shapes_reason;
    // What the tracer warned about, kept for tests and tools.
    std::vector<std::string> warnings;
    // Values the traced code read into C++ (item(), data pointers), with what they were when traced:
    // each is a hidden graph output checked after every call (TraceOptions::guard_value_reads). A
    // different value means C++ control flow may have taken another path: the call raises GuardFailure
    // before any write-back, instead of returning what a stale graph computed.
    struct Guard {
      size_t output;
      Tensor expected;
      std::string what;  // "item() of the output of sum"
    };
    std::vector<Guard> guards;
  };

  // Runs calls in place of the interpreter: the JIT's compiled function. Gets the graph's inputs
  // (bound ones included) after the signature check; returns the graph's outputs.
  class Executor {
   public:
    virtual ~Executor() = default;
    virtual std::vector<IValue> run(const std::vector<IValue>& inputs) = 0;
  };

  Function() = default;
  Function(std::shared_ptr<ir::Graph> graph, std::string name);
  Function(std::shared_ptr<ir::Graph> graph, std::string name, Binding binding);

  const ir::Graph& graph() const;
  const std::string& name() const { return name_; }
  const Binding& binding() const { return binding_; }
  bool defined() const { return graph_ != nullptr; }

  // Tensors in, tensors out (tuple results flattened in order).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  // Any IValues in (ints, floats, bools, tuples, lists of them), one IValue per result.
  std::vector<IValue> call(const std::vector<IValue>& inputs) const;

  // The signature the caller sees: the graph's input types without the bound ones.
  std::vector<ir::Type> input_types() const;

  // This function with calls run by `e` (same graph, name and binding).
  Function with_executor(std::shared_ptr<Executor> e) const;
  const std::shared_ptr<Executor>& executor() const { return executor_; }

 private:
  void check_signature(const std::vector<IValue>& inputs) const;
  std::shared_ptr<ir::Graph> graph_;
  std::string name_;
  Binding binding_;
  std::shared_ptr<Executor> executor_;
};

std::ostream& operator<<(std::ostream& os, const Function& f);

}  // namespace kiln
