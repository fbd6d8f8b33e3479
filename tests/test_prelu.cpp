// F.prelu and nn.PReLU: values and gradients PyTorch 1.13 printed (tests/gen_prelu_values.py, over the same
// seq() inputs, with exact zeros where torch takes the scaled branch), torch's errors, the layer's state_dict,
// and the layer scripted (nn.PReLU is registered; tests/test_layer_registry.cpp compares it with eager, and
// tests/script/prelu.py F.prelu with torch).
#include "eager/autograd/gradcheck.h"
#include "eager/nn/layers.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;

namespace {

struct Case {
  Shape x, w;
  std::vector<double> y, gx, gw;
};

const Case kCases[] = {
    {{2, 3, 4}, {3},
     {0.0, 0.644217687237691, 0.9854497299884601, 0.8632093666488739, 0.3349881501559051, -0.3380000503473961, -0.839813969720425, -0.9466502566786823, -0.5103768065710554, 0.016813900484349713, 0.6569865987187891, 0.9881682338770003, 0.8545989080882814, 0.3190983623493521, -0.142713695004003, -0.34256966458411625, -0.9434947159019711, -0.5956110742061409, 0.033623047221136695, 0.669569762196601, 0.9906073556948704, 0.8457468311429343, 0.303118356745704, -0.30890336679552305},
     {0.11508098899676866, 0.644217687237691, 0.8912073600614354, 0.9974949866040544, 0.9463000876874145, 0.7185303611011434, 0.4118053818819263, 0.04006538764266623, -0.2836069781072861, -0.6877661591839738, -0.9161659367494549, -0.9999232575641008, -0.9258146823277321, -0.7055403255703919, -0.14559443104607744, 0.006547641254358081, 0.39009645487562405, 0.7024040855290025, 0.9379999767747389, 0.998941341839772, 0.9021718337562933, 0.662969230082182, 0.3190983623493504, -0.06075941063638707},
     {0.12222687760993133, -1.5219487041934505, 0.2501508438634375}},
    {{2, 3, 4}, {1},
     {0.0, 0.644217687237691, 0.9854497299884601, 0.8632093666488739, 0.3349881501559051, -0.13660142303656966, -0.339407592489681, -0.38258506780497037, -0.24582680767499468, 0.016813900484349713, 0.6569865987187891, 0.9881682338770003, 0.8545989080882814, 0.3190983623493521, -0.142713695004003, -0.34256966458411625, -0.3813097681116548, -0.24071392956680232, 0.033623047221136695, 0.669569762196601, 0.9906073556948704, 0.8457468311429343, 0.303118356745704, -0.1487856179233124},
     {0.11508098899676866, 0.644217687237691, 0.8912073600614354, 0.9974949866040544, 0.9463000876874145, 0.2903912875767789, 0.16642956449672758, 0.016192272636867563, -0.13660142303656966, -0.6877661591839738, -0.9161659367494549, -0.9999232575641008, -0.9258146823277321, -0.7055403255703919, -0.14559443104607744, 0.006547641254358081, 0.15765598497030447, 0.283873915200147, 0.9379999767747389, 0.998941341839772, 0.9021718337562933, 0.662969230082182, 0.3190983623493504, -0.029265224752876177},
     {-1.1495709827200817}},
    {{4, 3}, {3},
     {0.0, 0.644217687237691, 0.9854497299884601, 0.8632093666488739, 0.3349881501559051, -0.2836069781072861, -0.339407592489681, -0.9466502566786823, -0.5103768065710554, 0.016813900484349713, 0.6569865987187891, 0.9881682338770003},
     {0.11508098899676866, 0.644217687237691, 0.8912073600614354, 0.9974949866040544, 0.9463000876874145, 0.6028999823544028, 0.16642956449672758, 0.04006538764266623, -0.2836069781072861, -0.6877661591839738, -0.9161659367494549, -0.9999232575641008},
     {-0.37249394922882684, -0.04085103044223668, -0.040143132466695375}},
    {{5}, {1},
     {0.0, 0.644217687237691, 0.9854497299884601, 0.8632093666488739, 0.3349881501559051},
     {0.11508098899676866, 0.644217687237691, 0.8912073600614354, 0.9974949866040544, 0.9463000876874145},
     {0.0}},
};

Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s, DType::Float64); }

}  // namespace

TEST_CASE("prelu: values and gradients as torch's, one slope or one per channel, zeros on the scaled branch") {
  for (const Case& c : kCases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(shape_str(c.w));
    Tensor x = seq(c.x, 0.7, 0.0).requires_grad_(), w = seq(c.w, 0.9, 0.4).requires_grad_();
    Tensor y = prelu(x, w);
    check_close(y, f64(c.y, c.x), 1e-12, 1e-12);
    sum(mul(y, seq(c.x, 0.4, 0.3))).backward();
    check_close(x.grad(), f64(c.gx, c.x), 1e-12, 1e-12);
    check_close(w.grad(), f64(c.gw, c.w), 1e-12, 1e-12);
  }
  Tensor x = seq({2, 3, 2}, 0.7, 0.05).requires_grad_(), w = seq({3}, 0.9, 0.4).requires_grad_();
  CHECK(gradcheck([](const Tensors& in) { return prelu(in[0], in[1]); }, {x, w}));
  check_close(prelu(seq({2, 3}), scalar_tensor(0.5, DType::Float64)), prelu(seq({2, 3}), f64({0.5}, {1})), 0, 0);
}

TEST_CASE("prelu: torch's errors; nn.PReLU's parameter, state_dict and script") {
  check_error([] { prelu(randn({2, 3, 4}), randn({2})); },
              "prelu: Mismatch of parameter numbers and input channel size. Found parameter numbers = 2 and channel size = 3");
  check_error([] { prelu(randn({3}), randn({3})); },
              "prelu: Mismatch of parameter numbers and input channel size. Found parameter numbers = 3 and channel size = 1");
  check_error([] { prelu(randn({2, 3}), randn({3, 1})); }, "prelu: Expected `weight` to be a scalar or 1D tensor, but got ndim = 2");

  nn::PReLU one, three(3, 0.1);
  CHECK(one.weight.sizes() == Shape{1});
  CHECK(three.weight.dtype() == DType::Float32);
  auto sd = three.state_dict();
  REQUIRE(sd.size() == 1);
  CHECK(sd.begin()->first == "weight");
  check_close(sd.begin()->second, tensor({0.1, 0.1, 0.1}, {3}), 0, 0);
  Tensor x = tensor({-2.0, 0.0, 3.0, -1.0, 4.0, -5.0}, {2, 3});
  check_close(three(x), tensor({-0.2, 0.0, 3.0, -0.1, 4.0, -0.5}, {2, 3}));
  check_close(one(x), tensor({-0.5, 0.0, 3.0, -0.25, 4.0, -1.25}, {2, 3}));
  sum(three(x)).backward();
  check_close(three.weight.grad(), tensor({-3.0, 0.0, -5.0}, {3}));

  const char* src = R"(
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.PReLU(num_parameters=3, init=0.1)
        self.one = nn.PReLU()

    def forward(self, x):
        return self.act(x) + self.one(x)
)";
  ScriptModule file = script_source(src, "prelu_net.py");
  auto net = file.module("Net");
  check_close((*net)(x), tensor({-0.7, 0.0, 6.0, -0.35, 8.0, -1.75}, {2, 3}));
}
