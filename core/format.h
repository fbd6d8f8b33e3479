#pragma once
#include <ostream>
#include "core/tensor.h"
namespace kiln {
std::ostream& operator<<(std::ostream& os, const Tensor& t);
}
