#pragma once
// The structs kernels take by value, as the host fills them. source_render.cpp writes the same structs
// in CUDA C (kParamsSource); the static_asserts there and here keep the two layouts equal.
#include <cstdint>

namespace kiln::cuda {

constexpr int kMaxOperands = 4;
constexpr int kMaxDims = 16;

// An elementwise iteration space (operand 0 is the output) with byte strides, dim 0 innermost, as
// cpu::make_loop builds it; `extra` carries an indexing op's stride and size along its dim.
struct LoopParams {
  int32_t ndim;
  int64_t n;
  char* ptr[kMaxOperands];
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxOperands][kMaxDims];
  int64_t extra[2];
};

// A reduction: output o (row-major over the kept dims) folds every reduced index r (row-major over the
// reduced dims); element strides into the input; the output is contiguous.
struct ReduceParams {
  int64_t nout, nred;
  char* in;
  char* out;
  int32_t ndk, ndr, tpo, pad;
  int64_t ksizes[kMaxDims], kstrides[kMaxDims], rsizes[kMaxDims], rstrides[kMaxDims];
};

// Whether an operand can take a 4-wide vector kernel (eager `_v` and fused `<name>_v`): contiguous and
// aligned to four elements, or, for an input, a broadcast scalar (stride 0).
inline bool vector_operand(int64_t stride, int64_t item, const void* ptr, bool input) {
  return stride == item ? reinterpret_cast<uintptr_t>(ptr) % uintptr_t(4 * item) == 0 : stride == 0 && input;
}

static_assert(sizeof(LoopParams) == 8 + 8 + 8 * kMaxOperands + 8 * kMaxDims + 8 * kMaxOperands * kMaxDims + 16);
static_assert(sizeof(ReduceParams) == 16 + 16 + 16 + 4 * 8 * kMaxDims);

}  // namespace kiln::cuda
