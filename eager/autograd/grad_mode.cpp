#include "eager/autograd/graph.h"

namespace kiln {
namespace {
thread_local bool t_grad_enabled = true;
}
bool GradMode::enabled() { return t_grad_enabled; }
void GradMode::set(bool on) { t_grad_enabled = on; }
}  // namespace kiln
