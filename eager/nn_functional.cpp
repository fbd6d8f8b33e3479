#include "eager/ops.h"
namespace kiln {
Tensor softmax(const Tensor&, int64_t) { fail("pending"); }
Tensor log_softmax(const Tensor&, int64_t) { fail("pending"); }
}
