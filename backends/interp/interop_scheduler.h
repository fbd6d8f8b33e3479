#pragma once
// Inter-op parallelism: the independent steps of one straight-line block run at the same time on the
// calling thread's OpenMP team when each is too small to keep every core busy (two branches of a
// network). Each small step runs with one OpenMP thread, so the cores are shared between steps instead
// of between the threads of one step; a large step runs alone with all of them.
// The determinism contract: the result is bit-identical to a sequential run in which each step has the
// intra-op thread count this scheduler gave it (one for a small step, all for a large one), whatever the
// schedule, since which steps are small depends on the graph and the shapes only. Against a sequential run
// at another thread count, only kernels whose rounding depends on their thread count (a GEMM oneDNN splits
// along K) differ, within rounding (docs/jit.md, "Same results").
#include <cstdint>
#include <functional>
#include <vector>

namespace kiln {

// How many steps may run at once (the calling thread included); 1 runs every graph sequentially.
// Default: KILN_NUM_INTEROP_THREADS, else 1.
void set_num_interop_threads(int n);
int get_num_interop_threads();

}  // namespace kiln

namespace kiln::interp {

// A block's steps as the scheduler sees them: step i may start once num_deps[i] of its predecessors
// finished; finishing it counts down each of succs[i]. An exclusive step runs alone on the calling
// thread (control flow, random ops, raise: the order a sequential run would have).
struct StepGraph {
  std::vector<int> num_deps;
  std::vector<std::vector<int>> succs;
  std::vector<bool> exclusive;
};

// Runs every step of g once, each after its predecessors: small(i) says, when step i is ready, whether
// it is too small to use every core; run(i) runs it. Small ready steps run concurrently, on this
// thread and the other threads of an OpenMP team of get_num_interop_threads(), each with one OpenMP
// thread; large and exclusive ones alone on this thread, outside the team, with all its OpenMP threads. Which steps get one thread depends on g and small() only, never on timing,
// so results are the same from run to run. The first error is rethrown here, as thrown, after the
// steps in flight finished; no further step starts.
void run_steps(const StepGraph& g, const std::function<bool(int)>& small, const std::function<void(int)>& run);

// Whether this thread runs a small step next to others: a graph run from inside a step runs
// sequentially, so nested calls never wait on the team they occupy.
bool in_interop_worker();

}  // namespace kiln::interp
