// script(): torch.einsum with '...' in lowered code, where no operand's rank is known: a '...' leading every
// term of two operands lowers through eager's composite (matmul broadcasts its dims); any other form becomes one
// prim::einsum that runs the composite once the ranks are known. tests/data/script_einsum/ellipsis.py and
// deferred.py are the models; tests/gen_script_einsum_values.py ran them in PyTorch 1.13 for the numbers below.
#include <string>
#include <vector>

#include "error_of.h"
#include "ramp.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

Tensor ramp(const Shape& shape, int k) { return kiln::test::ramp(shape, k).requires_grad_(); }

}  // namespace

TEST_CASE("script einsum: '...' leading two operands' terms matches torch.einsum, values and gradients") {
  ScriptFile file = script_file(std::string(KILN_TEST_DATA) + "/script_einsum/ellipsis.py");
  auto net = file.module("Contract");
  std::vector<Tensor> ins = {ramp({2, 2, 3}, 0), ramp({2, 3, 2}, 1), ramp({3, 2}, 2), ramp({2, 2, 3}, 3), ramp({2, 1, 2, 3}, 4)};
  std::vector<IValue> args(ins.begin(), ins.end());
  std::vector<IValue> out = net->call(args);
  std::vector<IValue> ys = out.size() == 1 && out[0].is_tuple() ? out[0].elements() : out;
  REQUIRE(ys.size() == 8);
  check_close(ys[0].to_tensor(), tensor({0.234375, -0.09375, -0.15625, 0.015625, -0.015625, 0.109375, 0.078125, 0.046875}, {2, 2, 2}));
  // b broadcast over a's ellipsis
  check_close(ys[1].to_tensor(), tensor({-0.09375, -0.09375, 0.046875, 0.0, 0.078125, -0.015625, -0.109375, 0.078125}, {2, 2, 2}));
  check_close(ys[2].to_tensor(), tensor({-0.033333, -0.0375, 0.25, -0.045833}, {2, 2}), 1e-5, 1e-5);
  check_close(ys[3].to_tensor(), tensor({0.15625, -0.109375, -0.109375, 0.140625, 0.28125, -0.046875, -0.046875, 0.140625}, {2, 2, 2}));
  // (2, 1) and (2,) ellipses broadcast to (2, 2)
  check_close(ys[4].to_tensor(), tensor({0.109375, 0.015625, 0.046875, 0.015625, -0.015625, 0.109375, 0.078125, 0.046875, -0.125, 0.015625,
                                         -0.1875, 0.015625, -0.046875, -0.125, 0.046875, -0.1875},
                                        {2, 2, 2, 2}));
  // an outer product over the ellipsis, and the implicit output ('...' first, then the letters seen once)
  check_close(ys[5].to_tensor(), tensor({-0.0, 0.0, 0.0, -0.1125, 0.0125, 0.1375, 0.0375, -0.004167, -0.045833, -0.075, 0.008333, 0.091667,
                                         0.075, -0.008333, -0.091667, -0.0375, 0.004167, 0.045833, 0.1125, -0.0125, -0.1375, -0.0, 0.0, 0.0,
                                         -0.1125, 0.0125, 0.1375, 0.0375, -0.004167, -0.045833, -0.075, 0.008333, 0.091667, 0.075, -0.008333,
                                         -0.091667},
                                        {2, 2, 3, 3}),
              1e-5, 1e-5);
  check_close(ys[6].to_tensor(), ys[1].to_tensor());
  Tensor loss = ys[7].to_tensor();
  CHECK(loss.item<double>() == doctest::Approx(0.584217).epsilon(1e-5));
  loss.backward();
  check_close(ins[0].grad(), tensor({0.078125, -0.644531, -0.519531, 0.300781, -0.351562, -0.839844, 0.21875, -0.492188, -0.574219, 0.296875,
                                     -0.421875, -0.621094},
                                    {2, 2, 3}),
              1e-5, 1e-5);
  check_close(ins[1].grad(), tensor({-0.355469, -0.152344, 0.046875, 0.132812, 0.285156, -0.046875, 0.335938, 0.34375, -0.257812, -0.34375,
                                     0.132812, 0.117188},
                                    {2, 3, 2}),
              1e-5, 1e-5);
  check_close(ins[2].grad(), tensor({0.0, 0.0, -0.5625, -0.5625, 0.84375, 0.84375}, {3, 2}), 1e-5, 1e-5);
  check_close(ins[3].grad(), tensor({0.52, 0.416944, -0.080833, 0.635278, 0.134722, 0.028889, -1.319167, 0.516667, 0.6025, -1.028889, 0.609722,
                                     0.103611},
                                    {2, 2, 3}),
              1e-5, 1e-5);
  check_close(ins[4].grad(), tensor({-0.015625, -0.078125, 0.078125, -0.015625, -0.078125, 0.078125, -0.015625, -0.078125, 0.078125,
                                     -0.015625, -0.078125, 0.078125},
                                    {2, 1, 2, 3}),
              1e-5, 1e-5);
  Tensor gv;
  for (auto& [n, t] : net->named_parameters())
    if (n == "v") gv = t.grad();
  REQUIRE(gv.defined());
  check_close(gv, tensor({-0.626042, 0.01875, 0.736458}, {3}), 1e-5, 1e-5);
  // compiled, the same graph
  std::vector<IValue> c = compile(net->method()).call(args);
  std::vector<IValue> cs = c.size() == 1 && c[0].is_tuple() ? c[0].elements() : c;
  check_close(cs[4].to_tensor(), ys[4].to_tensor());
}

TEST_CASE("script einsum: '...' summed away, not leading, in some operands, three operands: torch's values and gradients") {
  ScriptFile file = script_file(std::string(KILN_TEST_DATA) + "/script_einsum/deferred.py");
  auto net = file.module("Deferred");
  auto inputs = [] {
    return std::vector<Tensor>{ramp({2, 2, 3}, 0), ramp({2, 3, 2}, 1), ramp({3, 2}, 2), ramp({2, 2, 3}, 3),
                               ramp({2, 1, 3}, 5),    ramp({2, 2, 3}, 6), ramp({2, 1, 2, 3}, 4)};
  };
  Tensor w;
  for (auto& [n, t] : net->named_parameters())
    if (n == "w") w = t;
  REQUIRE(w.defined());
  auto check_grads = [](const std::vector<Tensor>& ins, const Tensor& gw) {
    check_close(ins[0].grad(), tensor({0.433672, 0.240449, 0.430039, 0.591484, 0.45666, 0.185117, 0.265566, 0.505576, 0.33543, 0.094512,
                                       0.39626, 0.369883},
                                      {2, 2, 3}),
                1e-5, 1e-5);
    check_close(ins[1].grad(), tensor({-0.144531, -0.027344, -0.039062, 0.03125, 0.203125, -0.019531, -0.003906, 0.050781, -0.144531,
                                       -0.027344, -0.039062, 0.03125},
                                      {2, 3, 2}),
                1e-5, 1e-5);
    check_close(ins[2].grad(), tensor({0.00875, 0.006504, 0.175156, -0.329043, -0.270664, 0.488906}, {3, 2}), 1e-5, 1e-5);
    check_close(ins[3].grad(), tensor({-0.25, 0.125, 0.0625, -0.25, 0.125, 0.0625, 0.25, -0.25, 0.125, 0.25, -0.25, 0.125}, {2, 2, 3}));
    check_close(ins[4].grad(), tensor({0.046875, -0.018555, 0.045898, -0.005859, -0.00293, 0.0}, {2, 1, 3}), 1e-5, 1e-5);
    check_close(ins[5].grad(), tensor({0.019531, -0.019531, 0.009766, -0.017578, 0.017578, -0.008789, 0.008789, 0.0, -0.008789, 0.008789,
                                       0.0, -0.008789},
                                      {2, 2, 3}),
                1e-5, 1e-5);
    check_close(ins[6].grad(), tensor({1.0, -1.0, 0.5, 1.0, -1.0, 0.5, -0.5, 1.0, -1.0, -0.5, 1.0, -1.0}, {2, 1, 2, 3}));
    check_close(gw, tensor({-0.163721, -0.162402, -0.064062, -0.060693}, {2, 2}), 1e-5, 1e-5);
  };
  {
    std::vector<Tensor> ins = inputs();
    std::vector<IValue> out = net->call(std::vector<IValue>(ins.begin(), ins.end()));
    std::vector<IValue> ys = out.size() == 1 && out[0].is_tuple() ? out[0].elements() : out;
    REQUIRE(ys.size() == 7);
    check_close(ys[0].to_tensor(), tensor({0.21875, 0.015625, -0.078125, 0.0625}, {2, 2}));
    check_close(ys[1].to_tensor(), tensor({-0.046875, 0.125, -0.046875, -0.125, -0.046875, -0.046875, -0.109375, -0.140625}, {2, 2, 2}));
    check_close(ys[2].to_tensor(), tensor({0.032813, -0.014063, 0.008594, 0.013281}, {2, 2}), 1e-5, 1e-5);
    check_close(ys[3].to_tensor(), tensor({0.15625, -0.140625, -0.046875, -0.046875}, {2, 2}));  // (1,) and (2,) broadcast
    check_close(ys[4].to_tensor(), tensor({0.5, -0.25, -0.5, 0.5, 0.25, -0.5}, {3, 2}));
    check_close(ys[5].to_tensor(),
                tensor({0.009375, -0.0375, -0.014063, -0.002344, -0.026563, -0.010938, 0.048438, 0.040625}, {2, 2, 2}), 1e-5, 1e-5);
    Tensor loss = ys[6].to_tensor();
    CHECK(loss.item<double>() == doctest::Approx(0.992089).epsilon(1e-5));
    loss.backward();
    check_grads(ins, w.grad());
  }
  // compiled: the backward recorded through the composite each prim::einsum runs
  {
    Function loss_of = compile(file.function("loss_of"));
    std::vector<Tensor> ins = inputs();
    Tensor wi = w.detach().requires_grad_();
    std::vector<IValue> args(ins.begin(), ins.end());
    args.push_back(wi);
    Tensor loss = loss_of.call(args)[0].to_tensor();
    CHECK(loss.item<double>() == doctest::Approx(0.992089).epsilon(1e-5));
    loss.backward();
    check_grads(ins, wi.grad());
    CHECK(compile_stats(loss_of).train_compiles == 1);
  }
  // a compiled forward without gradients: shape folding types each prim::einsum's result for what follows
  NoGradGuard no_grad;
  std::vector<Tensor> ins = inputs();
  std::vector<IValue> out = compile(net->method()).call(std::vector<IValue>(ins.begin(), ins.end()));
  std::vector<IValue> ys = out.size() == 1 && out[0].is_tuple() ? out[0].elements() : out;
  REQUIRE(ys.size() == 7);
  check_close(ys[3].to_tensor(), tensor({0.15625, -0.140625, -0.046875, -0.046875}, {2, 2}));
  CHECK(ys[6].to_tensor().item<double>() == doctest::Approx(0.992089).epsilon(1e-5));
}

TEST_CASE("script einsum: the letters' errors when lowering, the ranks' when the graph runs, with the line") {
  auto fn_error = [](const std::string& eq, bool call) {
    std::string src = "import torch\nfrom torch import Tensor\n\n\ndef f(a: Tensor, b: Tensor) -> Tensor:\n    return torch.einsum(\"" + eq +
                      "\", a, b)\n";
    return kiln::test::error_of([&] {
      auto f = script_source(src, "eq.py").function("f");
      if (call) f.call({ramp({2, 3}, 0), ramp({3}, 1)});
    });
  };
  std::string lowering = fn_error("...ii,...ij->...j", false);
  CHECK(lowering.find("eq.py:6:") != std::string::npos);
  CHECK(lowering.find("einsum: repeated subscript 'i' within an operand") != std::string::npos);
  CHECK(fn_error("i...,i...j.->i...", false).find("einsum: found '.' for operand 1 for which an ellipsis was already found") !=
        std::string::npos);
  // b has one dim and three letters: known only when it runs
  std::string e = fn_error("...ij,k...jl->ik", true);
  CHECK(e.find("line 6 (prim::einsum)") != std::string::npos);
  CHECK(e.find("einsum: the number of subscripts in the equation (3) is more than the number of dimensions (1) for operand 1") !=
        std::string::npos);
}
