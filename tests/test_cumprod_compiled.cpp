// compile() of cumprod with its gradient: the backward is recorded once from a sample, so it must hold for inputs
// the sample did not have; the input with zeros and torch 1.13's gradient are test_tensor_ops.cpp's ("cumprod's
// gradient over zeros").
#include <string>
#include <vector>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::seq;

TEST_CASE("compiled cumprod: a backward recorded from a sample without zeros is torch's on inputs with zeros") {
  const char* src = "import torch\nfrom torch import Tensor\n\n\ndef f0(x: Tensor, g: Tensor) -> Tensor:\n"
                    "    return (torch.cumprod(x, 0) * g).sum()\n\n\ndef f1(x: Tensor, g: Tensor) -> Tensor:\n"
                    "    return (x.cumprod(1) * g).sum()\n";
  ScriptFile file = script_source(src, "cumprod.py");
  Function fns[2] = {compile(file.function("f0")), compile(file.function("f1"))};
  Tensor gz = seq({3, 5}, 0.4, 0.3);
  auto grad_of = [&](const Tensor& x, int64_t d) {
    Tensor xg = x.detach().requires_grad_();
    fns[d].call({xg, gz})[0].to_tensor().backward();
    return xg.grad();
  };
  Tensor z = tensor({2.0, 0.0, 3.0, 0.0, 5.0, 0.5, 1.5, -2.0, 4.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0}, {3, 5}, DType::Float64);
  for (int64_t d : {1, 0}) {
    CAPTURE(d);
    // the sample the entry records: no zero, where eager divides
    Tensor nz = add(abs(z), 0.5);
    check_close(grad_of(nz, d), [&] {
      Tensor e = nz.detach().requires_grad_();
      sum(mul(cumprod(e, d), gz)).backward();
      return e.grad();
    }());
  }
  check_close(grad_of(z, 1), tensor({0.29552020666133955, 6.6356795348439945, 0.0, 0.0, 0.0, 5.471431777503032, 1.5752421884421037,
                                  -1.0211641862438916, 0.5261748415344297, 4.126596955103842, -16.974000468317033, 0.0, 0.0, 0.0, 0.0},
                                 {3, 5}, DType::Float64));
  check_close(grad_of(z, 0), tensor({0.6683728127496997, -0.21459737875771578, 4.511304764505783, -8.872121830999127, 0.9463000876874144,
                                  1.4914104243534405, 0.0, -5.4301461066665215, 0.0, -10.916364092524589, -0.9161659367494549, 0.0,
                                  5.554888093966393, 0.0, 0.0},
                                 {3, 5}, DType::Float64));
  for (const Function& f : fns) CHECK(compile_stats(f).train_compiles == 1);  // one recorded backward each, reused
}
