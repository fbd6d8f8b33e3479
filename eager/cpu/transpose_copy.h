#pragma once
// A copy whose destination rows run down the source's columns (x.t().contiguous(), a permute of the
// last two dims then contiguous), in 8x8 tiles transposed in registers. Element by element such a
// copy reads one cache line per element. Built per instruction set beside the elementwise kernels.
#include <cstddef>
#include <cstdint>

#include "eager/cpu/strided_loop.h"

namespace kiln::cpu::KILN_ISA {

// Copies operand 1 of L into operand 0 when both are 4-byte elements of one type, operand 0's
// innermost dim is dense and operand 1 is dense along the next one; false (nothing done) otherwise.
bool transpose_copy(const StridedLoop& L, size_t elem_size);

// dst[i * ld + j] = src[j * ls + i] for i < rows, j < cols: one plane of 4-byte elements (attention's key tiles).
void transpose_plane(const uint32_t* src, int64_t ls, uint32_t* dst, int64_t ld, int64_t rows, int64_t cols);

}  // namespace kiln::cpu::KILN_ISA
