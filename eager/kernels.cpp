#include "eager/kernels.h"

namespace kiln::cpu {

// A switch with no default: a new row of ops.def does not compile until it has a kernel here.
Kernel kernel_for(OpId op) {
  switch (op) {
#define KILN_UNARY(Id, name, rule, expr) \
  case OpId::Id: return &kernel_unary;
#define KILN_BINARY(Id, name, rule, expr) \
  case OpId::Id: return &kernel_binary;
#define KILN_REDUCE(Id, name, ...) \
  case OpId::Id: return &kernel_##name;
#define KILN_OP(Id, name, kind) \
  case OpId::Id: return &kernel_##name;
#include "core/ops.def"
  }
  return nullptr;
}

}  // namespace kiln::cpu
