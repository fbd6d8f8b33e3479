// The constructs kiln script does not lower but TorchScript compiles: an error naming one says so, since
// the user's file is valid TorchScript and the gap is kiln's. Each row was checked with torch.jit.script
// (PyTorch 1.13); a construct TorchScript rejects as well stays out.
#include "script_frontend/ast.h"

namespace kiln::script {

const char* torchscript_accepts(ExprKind k) {
  switch (k) {
    case ExprKind::ListComp:
    case ExprKind::DictComp:
    case ExprKind::GeneratorExp:
    case ExprKind::FString:
    case ExprKind::FormattedValue:
    case ExprKind::Imaginary: return " (TorchScript accepts this)";
    default: return "";
  }
}

const char* torchscript_accepts(StmtKind k) {
  switch (k) {
    case StmtKind::With:    // with torch.no_grad(): and other context managers TorchScript knows
    case StmtKind::Delete: return " (TorchScript accepts this)";
    default: return "";
  }
}

}  // namespace kiln::script
