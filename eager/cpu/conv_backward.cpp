#include "eager/kernels.h"
namespace kiln::cpu {
Tensors kernel_conv2d_backward_input(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_conv2d_backward_weight(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_avg_pool2d_backward(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
}
