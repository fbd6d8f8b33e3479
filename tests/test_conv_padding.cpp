// Convolution padding as torch takes it: padding='same' / 'valid' (an odd total puts the extra on the right and
// bottom), padding_mode 'zeros' / 'reflect' / 'replicate' / 'circular' (F.pad's modes, circular new), on
// nn::Conv1d / nn::Conv2d, F.conv1d / F.conv2d, in script modules and functions, traced and compiled. Values PyTorch
// 1.13 printed (tests/gen_conv_padding_values.py over the same seq() inputs), gradients by gradcheck, torch's errors.
#include <string>

#include "eager/autograd/gradcheck.h"
#include "eager/conv1d.h"
#include "eager/tensor_ops.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s, DType::Float64); }

const char* const kModes[] = {"zeros", "reflect", "replicate", "circular"};

// torch's outputs of Conv2d(2, 2, (2, 3), padding='same', padding_mode=mode) on seq({1, 2, 3, 4}) with weight
// seq({2, 2, 2, 3}, 0.7, 0.2) and bias seq({2}, 0.5, 0.3)
Tensor same_conv2d_want(int mode) {
  switch (mode) {
    case 0:
      return f64({-0.450776456032, 1.63574167548, 2.98511137265, 3.17369277683, 3.24828952062, 5.22571623977,
                  5.14701556629, 2.82183257224, 1.21366456047, 0.595735528351, -0.651750681299, -0.889895075952,
                  -1.61138534005, -3.83453129677, -3.92270695106, -1.92424442328, -2.16339368518, -1.85134892145,
                  -0.588485787095, 1.53475743851, 0.579497799755, 1.63150133304, 2.11564955108, 1.337891919},
                  {1, 2, 3, 4});
    case 1:
      return f64({0.902102340221, 1.63574167548, 2.98511137265, 3.03711107637, 4.56244589514, 5.22571623977,
                  5.14701556629, 4.4779151186, -0.331246869364, -0.663366425517, -1.41531593669, -1.943363404,
                  -3.09546485669, -3.83453129677, -3.92270695106, -3.22084352228, -1.87004831281, -1.85134892145,
                  -0.588485787095, 0.071178106918, -1.69049683492, -1.04637388431, -0.529461720657, -0.521073013082},
                  {1, 2, 3, 4});
    case 2:
      return f64({0.580435719331, 1.63574167548, 2.98511137265, 3.58399502786, 4.78171992563, 5.22571623977,
                  5.14701556629, 4.6375254066, 1.79182269766, 1.52499780392, 0.741994012778, -0.0554132209962,
                  -3.29270041173, -3.83453129677, -3.92270695106, -3.478018566, -2.38740806892, -1.85134892145,
                  -0.588485787095, 0.379503513779, -0.51284800008, 0.387270429935, 1.63310771657, 2.43947222357},
                  {1, 2, 3, 4});
    default:
      return f64({1.16495120832, 1.63574167548, 2.98511137265, 2.02770616896, 3.80180197517, 5.22571623977,
                  5.14701556629, 3.74236769665, -0.417321564158, -1.24601746054, -2.59886295805, -1.17581694209,
                  -2.33274894218, -3.83453129677, -3.92270695106, -2.3923480828, -0.95781331648, -1.85134892145,
                  -0.588485787095, -0.137397731297, -0.881010400227, 0.935034535081, 0.681238224054, -1.07792875809},
                  {1, 2, 3, 4});
  }
}

}  // namespace

TEST_CASE("F.pad circular: values as torch, gradient, errors") {
  Tensor x = seq({1, 2, 3, 4});
  check_close(pad(x, {2, 1, 1, 3}, "circular"),
              f64({0.0415806624333, -0.255541102027, 0.598472144104, 0.334988150156, 0.0415806624333, -0.255541102027,
                  0.598472144104, 0.644217687238, 0.841470984808, 0.0998334166468, 0.389418342309, 0.644217687238,
                  0.841470984808, 0.0998334166468, 0.946300087687, 0.80849640382, 0.963558185417, 0.999573603042,
                  0.946300087687, 0.80849640382, 0.963558185417, 0.0415806624333, -0.255541102027, 0.598472144104,
                  0.334988150156, 0.0415806624333, -0.255541102027, 0.598472144104, 0.644217687238, 0.841470984808,
                  0.0998334166468, 0.389418342309, 0.644217687238, 0.841470984808, 0.0998334166468, 0.946300087687,
                  0.80849640382, 0.963558185417, 0.999573603042, 0.946300087687, 0.80849640382, 0.963558185417,
                  0.0415806624333, -0.255541102027, 0.598472144104, 0.334988150156, 0.0415806624333, -0.255541102027,
                  0.598472144104, 0.404849920617, 0.656986598719, -0.182162504272, 0.11654920485, 0.404849920617,
                  0.656986598719, -0.182162504272, -0.916165936749, -0.993691003633, -0.529836140908,
                  -0.756802495308, -0.916165936749, -0.993691003633, -0.529836140908, -0.70554032557,
                  -0.464602179414, -0.982452612624, -0.88345465572, -0.70554032557, -0.464602179414, -0.982452612624,
                  0.404849920617, 0.656986598719, -0.182162504272, 0.11654920485, 0.404849920617, 0.656986598719,
                  -0.182162504272, -0.916165936749, -0.993691003633, -0.529836140908, -0.756802495308,
                  -0.916165936749, -0.993691003633, -0.529836140908, -0.70554032557, -0.464602179414,
                  -0.982452612624, -0.88345465572, -0.70554032557, -0.464602179414, -0.982452612624, 0.404849920617,
                  0.656986598719, -0.182162504272, 0.11654920485, 0.404849920617, 0.656986598719, -0.182162504272},
                  {1, 2, 7, 7}));
  CHECK(gradcheck([](const Tensors& in) { return pad(in[0], {2, 1, 1, 3}, "circular"); }, {seq({1, 2, 3, 4}).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return pad(in[0], {1, 2}, "reflect"); }, {seq({2, 4}).requires_grad_()}));
  check_error([&] { pad(x, {5, 0}, "circular"); }, "pad: circular padding (5, 0) at dimension 3 of input [1,2,3,4] wraps around");
}

TEST_CASE("nn::Conv2d padding='same' with each padding_mode: values as torch, gradients") {
  Tensor x = seq({1, 2, 3, 4}), w = seq({2, 2, 2, 3}, 0.7, 0.2), b = seq({2}, 0.5, 0.3);
  for (int m = 0; m < 4; ++m) {
    const std::string mode = kModes[m];
    CAPTURE(mode);
    nn::Conv2d conv(2, 2, {2, 3}, {1, 1}, "same", {1, 1}, 1, true, mode);
    conv.load_state_dict({{"weight", w.to(DType::Float32)}, {"bias", b.to(DType::Float32)}});
    check_close(conv(x.to(DType::Float32)), same_conv2d_want(m).to(DType::Float32), 1e-5, 1e-5);
    check_close(conv2d(x, w, b, {1, 1}, "same", {1, 1}, 1, mode), same_conv2d_want(m), 1e-9, 1e-9);
    CHECK(gradcheck([mode](const Tensors& in) { return conv2d(in[0], in[1], in[2], {1, 1}, "same", {1, 1}, 1, mode); },
                    {x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()}));
  }
}

TEST_CASE("F.conv2d / F.conv1d padding 'same' (dilated, even kernels), 'valid', ints with padding_mode: values as torch") {
  Tensor x = seq({1, 2, 3, 4}), w = seq({2, 2, 2, 3}, 0.7, 0.2), b = seq({2}, 0.5, 0.3);
  check_close(conv2d(x, w, b, {1, 1}, "same", {2, 1}),
              f64({-1.76037312047, -0.963581747206, -0.468045048728, 0.594760487649, 1.48393372962, 3.82410590493,
                  5.14242132212, 3.47791791065, 3.36947266211, 4.2964539642, 3.75327087221, 2.21836715743,
                  -0.230775151333, -1.96051912645, -1.92775518084, -1.49126604019, -1.4487424077, -2.40088698252,
                  -1.76013751383, 0.842977577191, -1.37790537529, -0.607118018353, -0.105943952587, 0.97615756913},
                  {1, 2, 3, 4}), 1e-9, 1e-9);
  check_close(conv2d(x, w, {}, {1, 1}, "valid"),
              f64({1.34022146882, 2.68959116599, 4.93019603311, 4.85149535963, -4.55188738767, -4.64006304196,
                  -2.56870501235, -1.30584187799},
                  {1, 2, 2, 2}), 1e-9, 1e-9);
  check_close(conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 1, "circular"),
              f64({-0.417321564158, -1.24601746054, -2.59886295805, -1.17581694209, 1.16495120832, 1.63574167548,
                  2.98511137265, 2.02770616896, 3.80180197517, 5.22571623977, 5.14701556629, 3.74236769665,
                  -0.417321564158, -1.24601746054, -2.59886295805, -1.17581694209, -0.881010400227, 0.935034535081,
                  0.681238224054, -1.07792875809, -2.33274894218, -3.83453129677, -3.92270695106, -2.3923480828,
                  -0.95781331648, -1.85134892145, -0.588485787095, -0.137397731297, -0.881010400227, 0.935034535081,
                  0.681238224054, -1.07792875809},
                  {1, 2, 4, 4}), 1e-9, 1e-9);
  Tensor x1 = seq({2, 2, 5}), w1 = seq({3, 2, 4}, 0.9, 0.4);
  check_close(conv1d(x1, w1, {}, 1, "same"),
              f64({-0.65654144272, -0.849571782456, -0.16012368454, 0.485230924777, 0.47409341734, 0.328819861753,
                  -0.705287005568, -0.540602015796, 0.39931509707, 0.847227945567, 1.056617433, -0.00855277146391,
                  -0.497628209357, 0.000616803652348, 0.556731051448, 0.886467788326, 1.15218256927, 0.491169115621,
                  -0.098652206725, -0.187087656805, -0.391089944817, 0.761828497913, 0.625364167937, -0.152741242824,
                  -0.564314150763, -1.36230795239, -0.225263832966, 0.26971311163, -0.0871884649852, -0.499514854046},
                  {2, 3, 5}), 1e-9, 1e-9);
  Tensor want_reflect = f64({-1.22105706507, -0.849571782456, -0.16012368454, 0.762511245776, 1.2304749231, -0.220850435034,
                  -0.705287005568, -0.540602015796, 0.33504917615, 1.41084180711, 0.952347760129, -0.00855277146391,
                  -0.497628209357, -0.354856032288, 0.486100012802, 1.53047798474, 1.15218256927, 0.491169115621,
                  -0.41575850061, -0.850861664696, 0.323562513746, 0.761828497913, 0.625364167937, -0.257545195373,
                  -1.33148590815, -1.1367986236, -0.225263832966, 0.26971311163, 0.102402584296, -0.769160740315},
                  {2, 3, 5});
  check_close(conv1d(x1, w1, {}, 1, "same", 1, 1, "reflect"), want_reflect, 1e-9, 1e-9);
  nn::Conv1d conv1(2, 3, 4, 1, "same", 1, 1, false, "reflect");
  conv1.load_state_dict({{"weight", w1.to(DType::Float32)}});
  check_close(conv1(x1.to(DType::Float32)), want_reflect.to(DType::Float32), 1e-5, 1e-5);
  CHECK(gradcheck([](const Tensors& in) { return conv1d(in[0], in[1], {}, 1, "same", 2, 1, "replicate"); },
                  {x1.clone().requires_grad_(), w1.clone().requires_grad_()}));
}

TEST_CASE("convolution padding errors: torch's, naming the op and the values") {
  Tensor x = seq({1, 2, 3, 4}), w = seq({2, 2, 2, 3});
  check_error([&] { conv2d(x, w, {}, {2, 1}, "same"); },
              "conv2d: padding='same' is not supported for strided convolutions, got stride [2,1]");
  check_error([&] { conv2d(x, w, {}, {1, 1}, "full"); }, "conv2d: invalid padding string 'full', should be one of 'valid', 'same'");
  check_error([&] { conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 1, "mirror"); },
              "conv2d: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', but got padding_mode='mirror'");
  check_error([&] { conv2d(x, w, {}, {1, 1}, {3, 0}, {1, 1}, 1, "reflect"); },
              "pad: padding size should be less than the corresponding input dimension");
  check_error([&] { nn::Conv2d(2, 2, {3, 3}, {2, 2}, "same"); }, "Conv2d: padding='same' is not supported for strided convolutions");
  check_error([&] { nn::Conv1d(2, 2, 3, 1, 1, 1, 1, true, "wrap"); }, "Conv1d: padding_mode must be one of");
  check_error([&] { conv1d(seq({1, 2, 5}), seq({2, 2, 3}), {}, 2, "same"); },
              "conv1d: padding='same' is not supported for strided convolutions");
}

TEST_CASE("convolution padding in script: nn.Conv2d / nn.Conv1d padding='same' with padding_mode, F.conv2d 'valid', "
          "F.pad circular; equal to eager, traced and compiled, gradients") {
  const char* src = R"(
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, (2, 3), padding='same', padding_mode='reflect')
        self.conv1 = nn.Conv1d(3, 2, 4, padding='same', padding_mode='circular', bias=False)

    def forward(self, x):
        h = self.conv(x)
        y = self.conv1(h.flatten(2))
        return y, F.conv2d(x, self.conv.weight, padding='valid'), F.pad(x, [1, 2], mode='circular')
)";
  auto net = script_source(src, "conv_padding.py").module("Net");
  auto state = net->state_dict();
  nn::Conv2d conv(2, 3, {2, 3}, {1, 1}, "same", {1, 1}, 1, true, "reflect");
  nn::Conv1d conv1(3, 2, 4, 1, "same", 1, 1, false, "circular");
  conv.load_state_dict({{"weight", state.at("conv.weight")}, {"bias", state.at("conv.bias")}});
  conv1.load_state_dict({{"weight", state.at("conv1.weight")}});
  TracedFn eager = [&](const Tensors& in) {
    Tensor h = conv(in[0]);
    return Tensors{conv1(h.flatten(2)), conv2d(in[0], conv.weight, {}, {1, 1}, "valid"), pad(in[0], {1, 2}, "circular")};
  };
  Tensor x = seq({2, 2, 4, 5}, 0.37, 0.2, DType::Float32);
  Tensors want = eager({x});
  Function traced = trace(eager, {x});
  Function compiled = compile(net->method());
  auto got = net->call({x})[0].elements();
  std::vector<IValue> got_c;
  {
    NoGradGuard no_grad;  // the compiled graph itself (with grad, a tuple output runs on the interpreter)
    got_c = compiled.call({x})[0].elements();
  }
  Tensors got_t = traced({x});
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    check_close(got[i].to_tensor(), want[i], 1e-5, 1e-5);
    check_close(got_c[i].to_tensor(), want[i], 1e-5, 1e-5);
    check_close(got_t[i], want[i], 1e-5, 1e-5);
  }
  // gradients through the scripted padding modes equal eager's
  Tensor ys = got[0].to_tensor();
  sum(ys * ys).backward();
  sum(want[0] * want[0]).backward();
  Tensor gw;
  for (auto& [n, t] : net->named_parameters())
    if (n == "conv.weight") gw = t.grad();
  REQUIRE(gw.defined());
  check_close(gw, conv.weight.grad(), 1e-4, 1e-5);
}

TEST_CASE("script padding='same': F.conv2d / F.conv1d in a function (weight shape known only at run time), nn.Conv2d") {
  // eager's conv2d / conv1d with 'same' are checked against torch above; the scripted forms must equal them
  const char* src =
      "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
      "def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
      "    return F.conv2d(x, w, b, 1, 'same', (2, 1))\n"
      "def g(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:\n"
      "    return F.conv1d(x, w, padding='same', dilation=3)\n"
      "def strided(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:\n"
      "    return F.conv2d(x, w, None, 2, 'same')\n"
      "class Net(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.conv = nn.Conv2d(2, 2, (2, 4), padding='same', dilation=(2, 1))\n"
      "    def forward(self, x):\n"
      "        return self.conv(x)\n";
  ScriptFile s = script_source(src, "same.py");
  Tensor x = seq({1, 2, 5, 6}), w = seq({2, 2, 2, 4}, 0.7, 0.2), b = seq({2}, 0.5, 0.3);
  Tensor xr = x.clone().requires_grad_(), wr = w.clone().requires_grad_();
  Tensor got = s.function("f").call({xr, wr, b})[0].to_tensor();
  Tensor want = conv2d(x, w, b, {1, 1}, "same", {2, 1});
  check_close(got, want, 1e-12, 1e-12);
  sum(mul(got, seq(got.sizes(), 0.4))).backward();
  Tensor xe = x.clone().requires_grad_(), we = w.clone().requires_grad_();
  sum(mul(conv2d(xe, we, b, {1, 1}, "same", {2, 1}), seq(got.sizes(), 0.4))).backward();
  check_close(xr.grad(), xe.grad(), 1e-12, 1e-12);
  check_close(wr.grad(), we.grad(), 1e-12, 1e-12);
  Tensor x1 = seq({2, 2, 9}), w1 = seq({3, 2, 4}, 0.6);
  check_close(s.function("g").call({x1, w1})[0].to_tensor(), conv1d(x1, w1, {}, 1, "same", 3), 1e-12, 1e-12);
  check_error([&] { s.function("strided"); }, "conv2d: padding='same' is not supported for strided convolutions, got stride [2,2]");
  auto net = s.module("Net");
  Tensor y = (*net)(x.to(DType::Float32));
  std::map<std::string, Tensor> p = net->state_dict();
  check_close(y, conv2d(x.to(DType::Float32), p.at("conv.weight"), p.at("conv.bias"), {1, 1}, "same", {2, 1}), 1e-5, 1e-5);
}
