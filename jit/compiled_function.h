#pragma once
// kiln::compile: a Function whose calls run optimised graphs with compiled fusion groups, cached by
// input signature (dtype, shape with symbolic dims, contiguity, device, requires_grad, grad mode).
//
// A miss logs why (`recompiling f: input 0 dim 0 changed 64 -> 32`); after `recompile_limit` misses
// caused by one dim, that dim becomes symbolic and one shape-generic entry serves every size, instead
// of recompiling forever. Safe under concurrent calls.
//
// With grad mode on and an input requiring grad, a call runs a compiled forward graph and returns
// outputs whose grad_fn runs a compiled backward graph: the joint graph is recorded from the eager
// autograd engine (jit/joint_graph.h) and split by a min cut (jit/min_cut_partition.h). Such entries
// are specialised to exact shapes. A graph with control flow or tuple inputs and outputs (a scripted
// method: an LSTM's input checks, its (h, c) state) is flattened, specialised to the call and folded
// first: the checks the call's shapes decide go, and what is left is recorded if it can be; one that
// still branches (on a value) takes the interpreter (autograd records as in eager code) and says so once.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/interp/function.h"
#include "jit/group_kernel.h"
#include "jit/pass_manager.h"

namespace kiln::jit {

struct CompileOptions {
  int recompile_limit = 8;
  PipelineOptions pipeline;
  // The backend for fusion groups, whatever the inputs' device; default (use_default_backend): the
  // backend of the device the call's tensors live on (jit/default_backend.h): x86 for CPU tensors,
  // CUDA for GPU tensors.
  GroupCompiler backend;
  bool use_default_backend = true;
};

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;          // each one compiled an entry
  int64_t eager_calls = 0;     // calls that took the interpreter (inputs requiring grad, a graph still branching when specialised)
  int64_t train_compiles = 0;  // forward+backward pairs compiled
  int64_t saved_bytes = 0;     // last forward+backward pair: activations kept from forward for backward
  int64_t eager_saved_bytes = 0;  // what eager autograd keeps for the same call
  int64_t recomputed_nodes = 0;   // forward ops its backward runs again instead of saving their results
  int64_t symbolic_dims = 0;   // dims turned symbolic after the recompile limit
  int64_t kernels = 0;         // fusion groups compiled by the backend
  int64_t gemm_kernels = 0;    // gemm groups: matmul + epilogue run as one GEMM call (backends/cpu/gemm_group.h)
  int64_t interpreted_groups = 0;  // fusion groups the backend declined
  std::vector<double> compile_ms;  // per miss: passes + kernels
  std::vector<double> kernel_compile_ms;  // per compiled fusion group
  std::string last_miss_reason;  // as logged: "input 0 dim 0 changed 64 -> 32"
  std::string backend;  // what compiled the last entry's groups: "x86", "cuda", "custom"; empty: none
};

class CompiledFunction;

}  // namespace kiln::jit

namespace kiln {

// A compiled version of fn (from trace() or script()); it is a Function too.
Function compile(const Function& fn, jit::CompileOptions options = {});
// The cache statistics of a compiled function; raises for one compile() did not return.
jit::CacheStats compile_stats(const Function& fn);
// The optimised graph a call with these inputs runs (compiled if needed), for dumps and tests.
// For inputs requiring grad (grad mode on) it is the forward graph, which also returns the saved values.
std::shared_ptr<const ir::Graph> compiled_graph(const Function& fn, const std::vector<IValue>& inputs);
// The compiled backward graph a differentiable call with these inputs uses.
std::shared_ptr<const ir::Graph> compiled_backward_graph(const Function& fn, const std::vector<IValue>& inputs);

}  // namespace kiln
