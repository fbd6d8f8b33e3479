#include "jit/default_backend.h"

namespace kiln::jit {

// No native backend in this build yet: fusion groups run on the interpreter.
GroupCompiler default_backend() { return {}; }

}  // namespace kiln::jit
