// nn.GroupNorm / F.group_norm and nn.InstanceNorm2d / F.instance_norm, composites over the builder: values
// against float64 loops written here, gradcheck, InstanceNorm2d's running statistics as torch moves them
// (values PyTorch 1.13 printed), torch's errors, and script graphs (no shape known when lowering) equal to
// eager, compiled. The registry's test scripts both layers from their samples.
#include <cmath>

#include "eager/autograd/gradcheck.h"
#include "eager/nn/layers.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;
using kiln::test::values;

namespace {

// x viewed as (N, G, M): each row normalised (biased variance), then per-channel affine over (N, C, S).
Tensor norm_ref(const Tensor& x, int64_t groups, const std::vector<double>& w, const std::vector<double>& b, double eps) {
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C), M = C / groups * S;
  std::vector<double> v = values(x), y(v.size());
  for (int64_t r = 0; r < N * groups; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < M; ++i) mean += v[size_t(r * M + i)];
    mean /= double(M);
    for (int64_t i = 0; i < M; ++i) var += (v[size_t(r * M + i)] - mean) * (v[size_t(r * M + i)] - mean);
    var /= double(M);
    for (int64_t i = 0; i < M; ++i) {
      int64_t c = (r % groups) * (C / groups) + i / S;
      double z = (v[size_t(r * M + i)] - mean) / std::sqrt(var + eps);
      y[size_t(r * M + i)] = z * (w.empty() ? 1.0 : w[size_t(c)]) + (b.empty() ? 0.0 : b[size_t(c)]);
    }
  }
  return tensor(y, x.sizes(), DType::Float64);
}

}  // namespace

TEST_CASE("group_norm and instance_norm: values against float64 loops, gradcheck") {
  Tensor x = seq({2, 6, 3, 4}, 0.37, 0.2);
  std::vector<double> w = {0.5, -1.0, 2.0, 1.5, 0.25, 3.0}, b = {0.1, 0.2, -0.3, 0.4, 0.0, -1.0};
  Tensor wt = tensor(w, {6}, DType::Float64), bt = tensor(b, {6}, DType::Float64);
  check_close(group_norm(x, 3, wt, bt, 1e-5), norm_ref(x, 3, w, b, 1e-5), 1e-10, 1e-10);
  check_close(group_norm(x, 1), norm_ref(x, 1, {}, {}, 1e-5), 1e-10, 1e-10);
  check_close(group_norm(x, 6, {}, {}, 0.1), norm_ref(x, 6, {}, {}, 0.1), 1e-10, 1e-10);
  Tensor x3 = seq({2, 4, 5}, 0.53, 0.1);  // (N, C, L) and (N, C)
  check_close(group_norm(x3, 2), norm_ref(x3, 2, {}, {}, 1e-5), 1e-10, 1e-10);
  Tensor x2 = seq({3, 4}, 0.71, 0.3);
  check_close(group_norm(x2, 2), norm_ref(x2, 2, {}, {}, 1e-5), 1e-10, 1e-10);
  check_close(instance_norm(x, {}, {}, wt, bt), norm_ref(x, 6, w, b, 1e-5), 1e-10, 1e-10);
  check_close(nn::GroupNorm(3, 6)(x.to(DType::Float32)), norm_ref(x, 3, {}, {}, 1e-5).to(DType::Float32), 1e-5, 1e-5);
  check_close(nn::InstanceNorm2d(6)(x[1].to(DType::Float32)), norm_ref(x, 6, {}, {}, 1e-5)[1].to(DType::Float32), 1e-5, 1e-5);

  Tensor xg = seq({2, 4, 2, 3}, 0.91, 0.3).requires_grad_();
  Tensor wg = tensor({0.5, -1.0, 2.0, 1.5}, {4}, DType::Float64).requires_grad_(), bg = tensor({0.1, 0.2, -0.3, 0.4}, {4}, DType::Float64).requires_grad_();
  CHECK(gradcheck([](const Tensors& in) { return group_norm(in[0], 2, in[1], in[2]); }, {xg, wg, bg}));
  CHECK(gradcheck([](const Tensors& in) { return instance_norm(in[0], {}, {}, in[1], in[2]); }, {xg, wg, bg}));
}

TEST_CASE("instance_norm: running statistics as torch's, torch's errors, script and compile()") {
  // PyTorch 1.13: InstanceNorm2d(3, momentum=0.3, track_running_stats=True) on sin(0.37 * arange(48) + 0.2)
  // shaped (2, 3, 2, 4), one training call
  nn::InstanceNorm2d m(3, 1e-5, 0.3, false, true);
  Tensor x = seq({2, 3, 2, 4}, 0.37, 0.2, DType::Float32);
  Tensor y = m(x);
  check_close(m.running_mean, tensor({0.018635980784893036, -0.027601830661296844, 0.03565998747944832}, {3}), 1e-5, 1e-6);
  check_close(m.running_var, tensor({0.7484252452850342, 0.7645426988601685, 0.7843618392944336}, {3}), 1e-5, 1e-6);
  CHECK(m.num_batches_tracked.item<int64_t>() == 1);
  m.eval();
  check_close(m(x), tensor({0.2081018, 0.6022229, 0.9119205, 1.0952784, 1.12748, 1.0041668,
                          0.7420289, 0.3765453, 0.0105165, -0.4015533, -0.7550024, -1.0019929,
                          -1.1090961, -1.0618157, -0.8665512, -0.5497305, -0.2237029, 0.1915926,
                          0.5755073, 0.8760803, 1.0526303, 1.0812622, 0.9581008, 0.6998152,
                          0.3691409, -0.0506927, -0.4665808, -0.8222349, -1.0695189, -1.1749641,
                          -1.1242989, -0.9243807, -0.5430052, -0.1465396, 0.274032, 0.661787,
                          0.9642447, 1.140469, 1.1666085, 1.0391254, 0.6939869, 0.3341129,
                          -0.0764313, -0.4820805, -0.8279319, -1.0671761, -1.1674328, -1.1151323},
                         {2, 3, 2, 4}), 1e-5, 1e-5);
  auto sd = m.state_dict();
  CHECK(sd.size() == 3);
  CHECK(sd.count("running_mean") == 1);
  CHECK(nn::InstanceNorm2d(3).state_dict().empty());
  CHECK(nn::GroupNorm(2, 4).state_dict().size() == 2);

  check_error([] { group_norm(randn({2, 5, 4}), 2); },
              "group_norm: Expected number of channels in input to be divisible by num_groups, but got input of shape [2,5,4] and num_groups=2");
  check_error([] { group_norm(randn({2, 4, 3}), 2, randn({3})); },
              "group_norm: Expected weight to be a vector of size equal to the number of channels in input, but got weight of shape [3] and input of shape [2,4,3]");
  check_error([] { nn::InstanceNorm2d(3)(randn({3, 4})); }, "InstanceNorm2d: expected 3D or 4D input (got 2D input)");
  check_error([] { instance_norm(randn({2, 3, 1, 1})); }, "instance_norm: Expected more than 1 spatial element when training, got input size [2,3,1,1]");
  check_error([] { nn::GroupNorm(3, 4); }, "GroupNorm: num_channels must be divisible by num_groups");

  const char* src = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n\n"
                    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.gn = nn.GroupNorm(2, 4)\n        self.inorm = nn.InstanceNorm2d(4, affine=True)\n\n"
                    "    def forward(self, x):\n        return self.inorm(self.gn(x) * 2.0)\n\n\n"
                    "def f(x: Tensor) -> Tensor:\n    return F.group_norm(x, 2) + F.instance_norm(x)\n";
  ScriptFile sm = script_source(src, "norms.py");
  auto net = sm.module("Net");
  for (Shape s : {Shape{2, 4, 3, 5}, Shape{1, 4, 2, 2}}) {
    CAPTURE(shape_str(s));
    Tensor xs = randn(s);
    Tensor want = nn::InstanceNorm2d(4, 1e-5, 0.1, true)(mul(nn::GroupNorm(2, 4)(xs), 2.0));
    check_close((*net)(xs), want, 1e-5, 1e-5);
    check_close(compile(net->method())({xs})[0], want, 1e-5, 1e-5);
    Tensor xa = xs.detach().requires_grad_(), xe = xs.detach().requires_grad_();
    Tensor ya = sm.function("f").call({xa})[0].to_tensor(), ye = add(group_norm(xe, 2), instance_norm(xe));
    check_close(ya, ye, 1e-5, 1e-5);
    Tensor g = randn(ya.sizes());
    check_close(grad({sum(mul(ya, g))}, {xa})[0], grad({sum(mul(ye, g))}, {xe})[0], 1e-4, 1e-5);
  }
}
