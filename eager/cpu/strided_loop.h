#pragma once
// StridedLoop: an N-operand iteration space (operand 0 is the output) after broadcasting, with byte
// strides, dims reordered innermost-first and coalesced where memory allows. Kernels walk it row by
// row; rows are the unit the compiler vectorises.
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln::cpu {

constexpr int kMaxOperands = 4;
constexpr int kMaxDims = 16;

struct StridedLoop {
  int nops = 0;
  int ndim = 0;
  char* ptr[kMaxOperands] = {};
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxOperands][kMaxDims] = {};  // bytes; dim 0 innermost
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
};

// Builds the loop over `out` (whose shape is the iteration space) and `inputs` broadcast to it.
StridedLoop make_loop(const char* op, const Tensor& out, const std::vector<const Tensor*>& inputs);

// Elements per thread below which a loop runs on one thread.
constexpr int64_t kParallelGrain = 32768;

}  // namespace kiln::cpu
