#include <doctest/doctest.h>
#include <kiln/kiln.h>
using namespace kiln;
TEST_CASE("smoke") {
  Tensor a = arange(6).reshape({2, 3}).to(DType::Float32);
  Tensor b = a * 2 + 1;
  CHECK(b.dtype() == DType::Float32);
  CHECK(b[1][2].item<float>() == 11.0f);
}
