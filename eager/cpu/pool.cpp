#include "eager/kernels.h"
namespace kiln::cpu {
Tensors kernel_max_pool2d(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
Tensors kernel_avg_pool2d(OpId op, const Tensors&, const Attrs&) { fail("{}: pending", op_name(op)); }
}
