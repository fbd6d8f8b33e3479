#pragma once
// The outputs a shapes-only recording gives without running their kernels (Recorder::set_shapes_only).
// Nothing reads their contents as values, yet a fresh allocation each would touch new memory: the GPT
// step's recording held ~100 MB that way, and faulting it in (zeroing pages the host may not have backed
// yet) was most of the first compiled step. They share instead one mapping per thread of never-written
// pages, which reads as zeros (so an index read from one is in range) and costs no memory until a kernel
// writes to it in place.
#include "core/tensor.h"

namespace kiln::tracing {

// A tensor of these sizes on borrowed memory with undefined contents (zeros until written). The memory
// is never unmapped, so a tensor that outlives its recording stays valid.
Tensor undefined_tensor(const Shape& sizes, DType dtype);

}  // namespace kiln::tracing
