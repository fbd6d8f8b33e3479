// A call to a @torch.jit.unused or @torch.jit.ignore function, as TorchScript compiles it: the callee's
// body is never lowered (it may hold any Python), and the call becomes a node that raises when it runs.
// So a forward that calls one only on a path not taken (`if self.training and self.use_checkpoint:`)
// lowers and runs; TorchScript compiles an unused method's body to the same raise, and an ignored function is Python,
// which kiln cannot call.
#include <fmt/format.h>

#include "script_frontend/lowerer.h"
#include "script_frontend/parser.h"

namespace kiln::script {

Value* Lowerer::call_jit_marked(const FunctionDef& f, SourceLoc call_loc) {
  JitMark mark = jit_mark(f);
  std::string why = mark == JitMark::Unused
                        ? fmt::format("RuntimeError: '{}' was marked @torch.jit.unused, so it cannot be called from kiln script", f.name)
                        : fmt::format("RuntimeError: '{}' is marked @torch.jit.ignore: it runs in Python, which kiln cannot call",
                                      f.name);
  loc_ = call_loc;
  ir::Node* r = g_->create(ir::Prim::Raise, 0);
  r->attrs().set("message", fmt::format("{}:{}: {}", src_->name, call_loc.line, why));
  emit(r);
  // The result is never reached; it has the type TorchScript gives the replaced body: the annotation, else Tensor.
  Type ret = f.has_returns ? type_from_annotation(*src_, f.returns, *m_) : Type::tensor();
  return placeholder(ret);
}

}  // namespace kiln::script
