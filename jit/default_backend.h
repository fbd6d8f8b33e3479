#pragma once
// The backend compile() uses for fusion groups unless told otherwise.
#include "jit/group_kernel.h"

namespace kiln::jit {

GroupCompiler default_backend();

}  // namespace kiln::jit
