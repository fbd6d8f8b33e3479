#include "eager/kernels.h"
namespace kiln::cpu {
Tensors kernel_sum(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_prod(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_amax(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_amin(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_argmax(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_argmin(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
}
