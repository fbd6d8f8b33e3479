#pragma once
// The signature of an op's kernel on any device: the tables of eager/kernels.h (CPU) and
// backends/cuda/kernels.h hold these, and eager/dispatch.h picks one per call.
#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln {

using Kernel = Tensors (*)(OpId op, const Tensors& inputs, const Attrs& attrs);

}  // namespace kiln
