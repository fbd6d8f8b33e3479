#pragma once
// CPU kernels, one per row of core/ops.def: elementwise rows share the generic kernels, every other
// row has kernel_<name>, defined in the eager/cpu file of its family.
#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"
#include "eager/kernel_type.h"

namespace kiln::cpu {

Kernel kernel_for(OpId op);

Tensors kernel_unary(OpId op, const Tensors& inputs, const Attrs& attrs);
Tensors kernel_binary(OpId op, const Tensors& inputs, const Attrs& attrs);
#define KILN_REDUCE(Id, name, ...) Tensors kernel_##name(OpId op, const Tensors& inputs, const Attrs& attrs);
#define KILN_OP(Id, name, kind) Tensors kernel_##name(OpId op, const Tensors& inputs, const Attrs& attrs);
#include "core/ops.def"

}  // namespace kiln::cpu
