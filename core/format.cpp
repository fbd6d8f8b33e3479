#include "core/format.h"
namespace kiln {
std::string Tensor::str() const { return "tensor(pending)"; }
std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }
}
