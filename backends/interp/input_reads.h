#pragma once
// Which top-level steps of a plan read the elements of each graph input, through any value that may share its
// memory (a view, a cast to the same dtype, a tuple holding it): what an owner of memory filled on demand
// (eager/on_demand.h) needs to know to fill it just before its first read and empty it after its last.
// May-alias is judged from the node kinds alone, erring towards "may": a wrong "no" would free memory a
// later step reads, a wrong "yes" only holds it longer.
#include <cstddef>
#include <vector>

#include "backends/interp/interpreter.h"

namespace kiln::interp {

struct InputReads {
  std::vector<size_t> steps;    // in order; a step that only makes a view of it (no element read) is not one
  std::vector<size_t> results;  // the graph outputs that may share its memory
};

// One per graph input.
std::vector<InputReads> input_reads(const Plan& plan);

}  // namespace kiln::interp
