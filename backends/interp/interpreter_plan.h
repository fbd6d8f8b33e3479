#pragma once
// The inside of an interpreter Plan (interpreter.h): what the planner (interpreter_plan.cpp) decides and the
// executor (interpreter.cpp) follows. Internal to backends/interp.
#include <vector>

#include "backends/interp/interop_scheduler.h"
#include "backends/interp/interpreter.h"

namespace kiln::interp {

// Values live in numbered slots; each block's nodes become steps naming their input and output
// slots (and, at the top level, the slots whose value is dead after the step), so a call does no
// lookups by pointer.
struct Plan::Step {
  const ir::Node* node;
  std::vector<int> in, out, dead;
  std::vector<int> reads;  // distinct slots read, by the node or its nested blocks
  // A step that takes a tensor over (takeover.h): the block's values to drop once it has read its inputs.
  std::vector<int> drop;
};
struct Plan::BlockPlan {
  std::vector<Step> steps;
  std::vector<int> args, results;
  // For the inter-op scheduler: the steps' dependencies, and whether two steps could run at once.
  StepGraph order;
  bool concurrent = false;
  // Top level with free_dead_values: per slot, how many steps read it when its value is released
  // after the last of them (0: kept).
  std::vector<int> releases;
};

}  // namespace kiln::interp
