// Tensor ops of model files (masked_fill, tril/triu, sort/argsort/topk, median/kthvalue, multinomial, repeat,
// expand in script): values PyTorch 1.13 printed (tests/gen_tensor_ops_values.py, over the same seq() inputs;
// median/kthvalue's in tests/gen_order_statistics_values.py),
// gradients by gradcheck, dtypes, edge sizes, torch's errors, and the same ops traced, compiled and scripted
// (where no shape is known when lowering) equal to eager.
#include <cmath>
#include <limits>
#include <set>

#include "eager/autograd/gradcheck.h"
#include "eager/tensor_ops.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;
using kiln::test::values;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s, DType::Float64); }
Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return tensor(v, s); }

void check_indices(const Tensor& got, const Tensor& want) {
  CHECK(got.dtype() == DType::Int64);
  CHECK(got.sizes() == want.sizes());
  CHECK(values(got) == values(want));
}

const double kInf = std::numeric_limits<double>::infinity();

// ties in every row and column
Tensor ties() { return f64({3.0, 1.0, 2.0, 1.0, 2.0, 2.0, 5.0, 2.0, 0.5, -1.0, 4.0, -1.0}, {3, 4}); }

// (values, indices) of fn(ties()) and the gradient of sum(values * w[:n]) (w[0] for a 0-d result)
struct Picked {
  Tensor v, i, g;
};
template <class Fn>
Picked picked(Fn fn) {
  Tensor x = ties().requires_grad_();
  auto [v, i] = fn(x);
  Tensor w = f64({1.0, -2.0, 0.5, 3.0}, {4});
  sum(mul(v, v.dim() == 0 ? w.select(0, 0) : w.slice(0, 0, v.size(-1)))).backward();
  return {v, i, x.grad()};
}

}  // namespace

TEST_CASE("masked_fill: broadcast bool mask, -inf, the input's dtype, in place, gradients, errors") {
  Tensor m = tensor(std::vector<int64_t>{1, 0, 1, 0}, {4}, DType::Bool);
  Tensor y = masked_fill(seq({2, 4}), m, -kInf);
  check_close(y, f64({-kInf, 0.3894183423086505, -kInf, 0.8414709848078964, -kInf, 0.9995736030415051, -kInf, 0.8084964038195901},
                     {2, 4}));
  Tensor yi = arange(8).reshape({2, 4}).masked_fill(m, 2.7);  // torch casts the value to int64: 2
  CHECK(yi.dtype() == DType::Int64);
  CHECK(values(yi) == std::vector<double>{2, 1, 2, 3, 2, 5, 2, 7});
  Tensor z = zeros({0, 4});
  CHECK(masked_fill(z, m, 1.0).sizes() == Shape{0, 4});
  check_close(masked_fill(seq({2, 4}), m, scalar_tensor(5.0, DType::Float64)), where(m, 5.0, seq({2, 4})));
  Tensor x = seq({2, 4});
  x.masked_fill_(m.reshape({1, 4}), 0.5);
  check_close(x, where(m, 0.5, seq({2, 4})));
  CHECK(gradcheck([m](const Tensors& in) { return masked_fill(in[0], m, 3.0); }, {seq({3, 4}).requires_grad_()}));
  Tensor g = seq({2, 4}).requires_grad_();
  sum(masked_fill(g, m, -kInf).exp()).backward();
  CHECK(values(g.grad())[0] == 0.0);
  CHECK(values(g.grad())[1] == doctest::Approx(std::exp(0.3894183423086505)));
  // in place under autograd, on a non-leaf
  Tensor a = seq({2, 4}).requires_grad_();
  Tensor b = a * 2.0;
  b.masked_fill_(m, 0.0);
  sum(b).backward();
  CHECK(values(a.grad()) == std::vector<double>{0, 2, 0, 2, 0, 2, 0, 2});
  check_error([&] { masked_fill(seq({2, 4}), seq({4}), 1.0); }, "masked_fill: expected a bool mask, got float64");
  check_error([&] { masked_fill(seq({2, 4}), tensor(std::vector<int64_t>{1, 0, 1}, {3}, DType::Bool), 1.0); },
              "masked_fill: mask of shape [3] cannot be broadcast to the input's shape [2,4]");
  check_error([&] { masked_fill(seq({2, 4}), m, seq({2})); }, "masked_fill: only supports a 0-dimensional value tensor");
}

TEST_CASE("tril and triu: any rank >= 2, diagonal offsets, gradients, errors") {
  Tensor x = seq({2, 3, 4});
  check_close(tril(x, -1), f64({0.0, 0.0, 0.0, 0.0, 0.963558185417193, 0.0, 0.0, 0.0, 0.5984721441039565, 0.3349881501559051, 0.0,
                                0.0, 0.0, 0.0, 0.0, 0.0, -0.9824526126243326, 0.0, 0.0, 0.0, -0.18216250427209588,
                                0.11654920485049276, 0.0, 0.0},
                               {2, 3, 4}), 0, 0);
  check_close(x.triu(1), f64({0.0, 0.3894183423086505, 0.644217687237691, 0.8414709848078964, 0.0, 0.0, 0.9463000876874145,
                              0.8084964038195901, 0.0, 0.0, 0.0, -0.2555411020268312, 0.0, -0.7568024953079282,
                              -0.9161659367494549, -0.9936910036334644, 0.0, 0.0, -0.7055403255703926, -0.46460217941375737,
                              0.0, 0.0, 0.0, 0.6569865987187884},
                             {2, 3, 4}), 0, 0);
  check_close(tril(seq({3, 5}), 2), f64({0.09983341664682815, 0.3894183423086505, 0.644217687237691, 0.0, 0.0, 0.9995736030415051,
                                         0.9463000876874145, 0.8084964038195901, 0.5984721441039565, 0.0, 0.04158066243329049,
                                         -0.2555411020268312, -0.529836140908493, -0.7568024953079282, -0.9161659367494549},
                                        {3, 5}), 0, 0);
  check_close(add(tril(x), triu(x, 1)), x, 0, 0);
  Tensor ones_i = ones({3, 3}, DType::Int64);
  CHECK(tril(ones_i).dtype() == DType::Int64);
  CHECK(values(sum(tril(ones_i)))[0] == 6.0);
  Tensor bools = ones({2, 2}, DType::Bool);
  CHECK(triu(bools).dtype() == DType::Bool);
  CHECK(tril(zeros({0, 3})).sizes() == Shape{0, 3});
  CHECK(gradcheck([](const Tensors& in) { return tril(in[0], 1); }, {seq({2, 3, 4}).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return triu(in[0], -1); }, {seq({4, 3}).requires_grad_()}));
  check_error([] { tril(seq({3})); }, "tril: input tensor must have at least 2 dimensions, got 1-D");
}

TEST_CASE("index_tensors: torch's advanced indexing (broadcast indices, negative ones, trailing dims), gradients, errors") {
  Tensor x = seq({3, 4, 2});
  Tensor i = i64({0, 2, -1, 1}, {2, 2}), j = i64({3, -4}, {2});
  Tensor y = index_tensors(x, 0, {i, j});  // x[i, j]: (2, 2) picks of rows of 2
  REQUIRE(y.sizes() == Shape{2, 2, 2});
  std::vector<double> xv = values(x), yv = values(y);
  int64_t rows[4][2] = {{0, 3}, {2, 0}, {2, 3}, {1, 0}};  // i and j broadcast, negatives wrapped
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) CHECK(yv[size_t(2 * r + c)] == xv[size_t((rows[r][0] * 4 + rows[r][1]) * 2 + c)]);
  CHECK(index_tensors(x, 1, {j, i64({1, 0}, {2})}).sizes() == Shape{3, 2});  // x[:, j, k]
  CHECK(gradcheck([&](const Tensors& in) { return index_tensors(in[0], 0, {i, j}); }, {seq({3, 4, 2}).requires_grad_()}));
  check_error([&] { index_tensors(x, 0, {i, i64({4}, {1})}); }, "index 4 is out of bounds for dimension 1 with size 4");
}

TEST_CASE("masked_rows: x[mask] over all of x or its leading dims, in order; gradients; errors") {
  Tensor x = seq({3, 2});
  Tensor all = masked_rows(x, gt(x, full({}, 0.5)));
  std::vector<double> want;
  for (double v : values(x))
    if (v > 0.5) want.push_back(v);
  CHECK(values(all) == want);
  Tensor rows = masked_rows(x, f64({1, 0, 1}, {3}).to(DType::Bool));
  REQUIRE(rows.sizes() == Shape{2, 2});
  std::vector<double> xv = values(x);
  CHECK(values(rows) == std::vector<double>{xv[0], xv[1], xv[4], xv[5]});
  Tensor none = masked_rows(x, zeros({3, 2}, DType::Bool));
  CHECK(none.sizes() == Shape{0});
  Tensor mask = f64({1, 0, 1, 1, 0, 1}, {3, 2}).to(DType::Bool);
  CHECK(gradcheck([&](const Tensors& in) { return masked_rows(in[0], mask); }, {seq({3, 2}).requires_grad_()}));
  check_error([&] { masked_rows(x, zeros({2}, DType::Bool)); }, 
              "the shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 2] at index 0");
}

TEST_CASE("a bool mask inside an index tuple: x[mask, 0], x[0, mask], x[:, mask] read, x[:, mask] written, as torch") {
  Tensor x = f64({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor rows = f64({1, 0, 1}, {3}).to(DType::Bool), cols = f64({1, 0, 1, 1}, {4}).to(DType::Bool);
  // the numbers PyTorch 1.13 gives for the same indexing
  CHECK(values(index_dims(x, {0, 1}, {rows, i64({0}, {})})) == std::vector<double>{0, 8});
  CHECK(values(index_dims(x, {0, 1}, {i64({0}, {}), cols})) == std::vector<double>{0, 2, 3});
  CHECK(values(masked_dim(x, 1, cols)) == std::vector<double>{0, 2, 3, 4, 6, 7, 8, 10, 11});
  CHECK(values(masked_put_dim(x, 1, cols, f64({-3}, {}))) == std::vector<double>{-3, 1, -3, -3, -3, 5, -3, -3, -3, 9, -3, -3});
  // index_put with a mask in the tuple reads it as the coordinates of its true elements, a 2-D mask as two
  CHECK(values(index_put(x, {rows, i64({0}, {})}, f64({-1}, {}))) == std::vector<double>{-1, 1, 2, 3, 4, 5, 6, 7, -1, 9, 10, 11});
  CHECK(values(index_put(x, {i64({0, 0, 0}, {3}), cols}, f64({5, 6, 7}, {3}), true)) ==
        std::vector<double>{5, 1, 8, 10, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor y = f64({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  Tensor m = f64({1, 0, 1, 0, 1, 1}, {2, 3}).to(DType::Bool);
  CHECK(values(index_put(y, {m, i64({1, 0, 1, 0}, {4})}, f64({-1, -2, -3, -4}, {4}))) ==
        std::vector<double>{0, -1, 2, 3, -2, 5, 6, 7, 8, -3, -4, 11});
  check_error([&] { index_put(x, {f64({1, 0}, {2}).to(DType::Bool), i64({0}, {})}, f64({1}, {})); },
              "index_put: the shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0");
}

TEST_CASE("sort, argsort and topk: values, int64 indices, ties stable, NaN largest, gradients, errors") {
  Tensor s = seq({3, 5}, 0.7, 0.2);
  auto [v, i] = topk(s, 3);
  check_close(v, f64({0.9995736030415052, 0.7833269096274833, 0.7457052121767203, 0.21511998808781552, -0.46460217941375737,
                      -0.5298361409084934, 0.998941341839772, 0.7936678638491531, 0.7343970978741146},
                     {3, 3}));
  check_indices(i, i64({2, 1, 3, 4, 3, 0, 1, 0, 2}, {3, 3}));
  auto [v2, i2] = s.topk(2, 0, false);
  check_close(v2, f64({-0.5298361409084934, -0.9516020738895158, -0.9258146823277325, -0.46460217941375737, -0.5440211108893683,
                       0.19866933079506122, 0.7833269096274833, 0.7343970978741146, 0.12445442350706347, 0.1411200080598672},
                      {2, 5}));
  check_indices(i2, i64({1, 1, 1, 1, 2, 0, 0, 2, 2, 0}, {2, 5}));
  Tensor t = f64({3.0, 1.0, 3.0, std::nan(""), 1.0, 2.0}, {1, 6});
  check_indices(sort(t).second, i64({1, 4, 5, 0, 2, 3}, {1, 6}));
  check_indices(argsort(t, -1, true), i64({3, 0, 2, 5, 1, 4}, {1, 6}));
  auto [sv, si] = sort(mul(arange(5), -1).to(DType::Int32));
  CHECK(sv.dtype() == DType::Int32);
  CHECK(values(sv) == std::vector<double>{-4, -3, -2, -1, 0});
  CHECK(topk(zeros({2, 0}), 0).first.sizes() == Shape{2, 0});
  CHECK(topk(seq({4, 3}), 0, 0).second.sizes() == Shape{0, 3});
  CHECK(gradcheck([](const Tensors& in) { return topk(in[0], 2, 1).first; }, {seq({3, 4}, 0.9, 0.3).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return sort(in[0], 0, true).first; }, {seq({3, 4}, 0.9, 0.3).requires_grad_()}));
  check_error([] { topk(seq({2, 3}), 4); }, "topk: selected index k out of range: k is 4 for a dim of size 3");
  check_error([] { argsort(seq({2, 3}), 2); }, "dim");
}

TEST_CASE("multinomial: seeded draws, with and without replacement, zero weights never drawn, errors") {
  RestoreRngState keep;
  Tensor p = tensor({0.1, 0.0, 0.6, 0.3}, {4});
  manual_seed(3);
  Tensor a = multinomial(p, 4000, true);
  manual_seed(3);
  CHECK(values(multinomial(p, 4000, true)) == values(a));
  CHECK(a.dtype() == DType::Int64);
  CHECK(a.sizes() == Shape{4000});
  std::vector<double> count(4, 0.0);
  for (double k : values(a)) count[size_t(k)] += 1;
  CHECK(count[1] == 0);
  CHECK(count[0] / 4000 == doctest::Approx(0.1).epsilon(0.25));
  CHECK(count[2] / 4000 == doctest::Approx(0.6).epsilon(0.08));
  CHECK(count[3] / 4000 == doctest::Approx(0.3).epsilon(0.15));
  Tensor rows = tensor({1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 5.0, 2.0, 2.0}, {2, 5});
  for (int rep = 0; rep < 20; ++rep) {
    Tensor d = multinomial(rows, 3);
    CHECK(d.sizes() == Shape{2, 3});
    std::vector<double> dv = values(d);
    CHECK(std::set<double>(dv.begin(), dv.begin() + 3).size() == 3);
    CHECK(std::set<double>(dv.begin() + 3, dv.end()).size() == 3);
    for (size_t j = 3; j < 6; ++j) CHECK(dv[j] != 0.0);
  }
  check_error([&] { multinomial(p, 5); }, "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  check_error([&] { multinomial(zeros({2, 2, 2}), 1); }, "multinomial: prob_dist must be 1 or 2 dim, got 3-D");
  check_error([&] { multinomial(arange(3), 1); }, "multinomial: only supports floating-point dtypes for input, got int64");
}

TEST_CASE("repeat: leading dims added, values and gradient as torch, errors") {
  Tensor x = seq({2, 3}).requires_grad_();
  Tensor y = x.repeat({2, 1, 2});
  CHECK(y.sizes() == Shape{2, 2, 6});
  std::vector<double> r = {0.09983341664682815, 0.3894183423086505, 0.644217687237691, 0.09983341664682815, 0.3894183423086505,
                           0.644217687237691, 0.8414709848078964, 0.963558185417193, 0.9995736030415051, 0.8414709848078964,
                           0.963558185417193, 0.9995736030415051};
  r.insert(r.end(), r.begin(), r.end());
  check_close(y, f64(r, {2, 2, 6}), 0, 0);
  sum(mul(y, seq({2, 2, 6}, 0.2, 0.5))).backward();
  check_close(x.grad(), f64({1.2590990001900004, 1.119520394179681, 0.9353100429043151, -0.08083034599932226, -0.3538463175824167,
                             -0.6127555531101256},
                            {2, 3}));
  CHECK(repeat(seq({2, 3}), {0, 1}).sizes() == Shape{0, 3});
  check_error([] { repeat(seq({2, 3}), {2}); }, "repeat: number of dimensions of repeat dims can not be smaller");
}

TEST_CASE("tensor ops traced and compiled equal eager") {
  TracedFn fn = [](const Tensors& in) {
    Tensor att = masked_fill(in[0], gt(triu(ones_like(in[0]), 1), 0.5), -kInf);
    auto [v, i] = topk(softmax(att, -1), 2);
    return Tensors{v, i, tril(in[0], -1), in[0].repeat({1, 2})};
  };
  Function f = trace(fn, {seq({4, 4})});
  Function c = compile(f);
  for (int k = 0; k < 2; ++k) {
    Tensor x = seq({4, 4}, 0.37 + k, 0.1);
    Tensors want = fn({x});
    Tensors got = f({x}), got_c = c({x});
    for (size_t j = 0; j < want.size(); ++j) {
      check_close(got[j], want[j]);
      check_close(got_c[j], want[j]);
    }
  }
}

TEST_CASE("tensor ops in script: unknown shapes when lowering, equal to eager, compiled") {
  const char* src = "import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\nfrom typing import Tuple\n\n\n"
                    "def f(x: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:\n"
                    "    T = x.size(-1)\n"
                    "    m = torch.tril(torch.ones(T, T)) == 0\n"
                    "    a = x.masked_fill(m, float('-inf'))\n"
                    "    v, i = torch.topk(a, min(k, T))\n"
                    "    return a, torch.triu(x, 1), v, i, x.repeat(2, 1, 1)\n";
  ScriptFile sm = script_source(src, "ops.py");
  for (Shape s : {Shape{2, 4, 4}, Shape{3, 3}}) {
    CAPTURE(shape_str(s));
    Tensor x = seq(s, 0.77, 0.3).to(DType::Float32);
    const int64_t T = s.back();
    Tensor a = masked_fill(x, gt(triu(ones({T, T}), 1), 0.5), -kInf);
    auto [v, i] = topk(a, std::min<int64_t>(3, T));
    Tensors want = {a, triu(x, 1), v, i, x.repeat(s.size() == 3 ? Shape{2, 1, 1} : Shape{2, 1, 1})};
    auto flat = [](std::vector<IValue> r) { return r.size() == 1 && r[0].is_tuple() ? r[0].elements() : r; };
    std::vector<IValue> got = flat(sm.function("f").call({x, int64_t(3)}));
    std::vector<IValue> got_c = flat(compile(sm.function("f")).call({x, int64_t(3)}));
    REQUIRE(got.size() == want.size());
    REQUIRE(got_c.size() == want.size());
    for (size_t j = 0; j < want.size(); ++j) {
      check_close(got[j].to_tensor(), want[j]);
      check_close(got_c[j].to_tensor(), want[j]);
    }
  }
}

TEST_CASE("flip, roll, repeat_interleave: values as torch, gradients, errors") {
  Tensor x = seq({2, 3, 4});
  check_close(flip(x, {0, 2}), f64({-0.9936910036334644, -0.9161659367494549, -0.7568024953079282, -0.529836140908493,
                                    -0.46460217941375737, -0.7055403255703926, -0.8834546557201536, -0.9824526126243326,
                                    0.6569865987187884, 0.4048499206165975, 0.11654920485049276, -0.18216250427209588,
                                    0.8414709848078964, 0.644217687237691, 0.3894183423086505, 0.09983341664682815,
                                    0.8084964038195901, 0.9463000876874145, 0.9995736030415051, 0.963558185417193,
                                    -0.2555411020268312, 0.04158066243329049, 0.3349881501559051, 0.5984721441039565},
                                   {2, 3, 4}), 0, 0);
  check_close(roll(x, {1, -5}, {1, 2}),
              f64({0.3349881501559051, 0.04158066243329049, -0.2555411020268312, 0.5984721441039565, 0.3894183423086505,
                   0.644217687237691, 0.8414709848078964, 0.09983341664682815, 0.9995736030415051, 0.9463000876874145,
                   0.8084964038195901, 0.963558185417193, 0.11654920485049276, 0.4048499206165975, 0.6569865987187884,
                   -0.18216250427209588, -0.7568024953079282, -0.9161659367494549, -0.9936910036334644, -0.529836140908493,
                   -0.8834546557201536, -0.7055403255703926, -0.46460217941375737, -0.9824526126243326},
                  {2, 3, 4}), 0, 0);
  Tensor r7 = roll(x, {7});
  CHECK(r7.sizes() == x.sizes());
  CHECK(values(r7)[0] == -0.8834546557201536);
  CHECK(values(r7)[7] == 0.09983341664682815);
  check_close(repeat_interleave(seq({2, 2}), 2, -1),
              f64({0.09983341664682815, 0.09983341664682815, 0.3894183423086505, 0.3894183423086505, 0.644217687237691,
                   0.644217687237691, 0.8414709848078964, 0.8414709848078964}, {2, 4}), 0, 0);
  Tensor ri = repeat_interleave(seq({2, 2}), 3);
  CHECK(ri.sizes() == Shape{12});
  CHECK(values(ri)[5] == 0.3894183423086505);
  CHECK(flip(zeros({0, 3}), {0}).sizes() == Shape{0, 3});
  CHECK(gradcheck([](const Tensors& in) { return flip(in[0], {1}); }, {seq({2, 3}).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return roll(in[0], {2}, {0}); }, {seq({3, 2}).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return repeat_interleave(in[0], 2, 0); }, {seq({3, 2}).requires_grad_()}));
  check_error([] { flip(seq({2, 3}), {1, -1}); }, "flip: dim -1 appears multiple times in the list of dims");
  check_error([] { roll(seq({2, 3}), {1, 2}, {0}); }, "roll: shifts and dimensions must align. shifts: 2, dims: 1");
}

TEST_CASE("one_hot, pad, cumsum, cumprod: values and dtypes as torch, gradients, errors") {
  Tensor oh = one_hot(tensor(std::vector<int64_t>{2, 0, 1, 3}, {2, 2}), 5);
  CHECK(oh.dtype() == DType::Int64);
  CHECK(values(oh) == std::vector<double>{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0});
  CHECK(one_hot(tensor(std::vector<int64_t>{0, 2}, {2})).sizes() == Shape{2, 3});
  check_error([] { one_hot(seq({2}), 3); }, "one_hot: one_hot is only applicable to index tensor");
  Tensor p = seq({1, 2, 3});
  check_close(pad(p, {1, 2}), f64({0.0, 0.09983341664682815, 0.3894183423086505, 0.644217687237691, 0.0, 0.0, 0.0,
                                   0.8414709848078964, 0.963558185417193, 0.9995736030415051, 0.0, 0.0}, {1, 2, 6}), 0, 0);
  Tensor p2 = pad(p, {1, 2, 1, 0}, "constant", -1.0);
  CHECK(p2.sizes() == Shape{1, 3, 6});
  CHECK(values(p2)[7] == 0.09983341664682815);
  CHECK(values(p2)[5] == -1.0);
  check_close(pad(p, {2, 1}, "reflect"),
              f64({0.644217687237691, 0.3894183423086505, 0.09983341664682815, 0.3894183423086505, 0.644217687237691,
                   0.3894183423086505, 0.9995736030415051, 0.963558185417193, 0.8414709848078964, 0.963558185417193,
                   0.9995736030415051, 0.963558185417193}, {1, 2, 6}), 0, 0);
  check_close(pad(p, {2, 1}, "replicate"),
              f64({0.09983341664682815, 0.09983341664682815, 0.09983341664682815, 0.3894183423086505, 0.644217687237691,
                   0.644217687237691, 0.8414709848078964, 0.8414709848078964, 0.8414709848078964, 0.963558185417193,
                   0.9995736030415051, 0.9995736030415051}, {1, 2, 6}), 0, 0);
  check_close(pad(p, {-1, 1}), f64({0.3894183423086505, 0.644217687237691, 0.0, 0.963558185417193, 0.9995736030415051, 0.0},
                                  {1, 2, 3}), 0, 0);
  CHECK(gradcheck([](const Tensors& in) { return pad(in[0], {1, 2, 2, 1}, "reflect"); }, {seq({2, 3, 4}).requires_grad_()}));
  check_error([&] { pad(p, {3, 0}, "reflect"); }, "pad: padding size should be less than the corresponding input dimension");
  check_error([&] { pad(p, {1}); }, "pad: padding length must be divisible by 2");
  check_error([&] { pad(p, {1, 1}, "wrap"); }, "pad: mode 'wrap' is not supported");
  Tensor c = seq({2, 4}, 0.9, 0.4);
  check_close(cumsum(c, 1), f64({0.3894183423086505, 1.3529765277258434, 2.1614729315454335, 2.203053593978724,
                                 -0.7568024953079282, -1.7392551079322607, -2.2038572873460174, -1.799007366729419}, {2, 4}));
  check_close(cumprod(c, 0), f64({0.3894183423086505, 0.963558185417193, 0.8084964038195901, 0.04158066243329049,
                                  -0.29471277317786365, -0.9466502566786822, -0.37562919126276617, 0.016833927885303225}, {2, 4}));
  Tensor cb = cumsum(tensor(std::vector<int64_t>{1, 0, 1}, {3}, DType::Bool), 0);
  CHECK(cb.dtype() == DType::Int64);
  CHECK(values(cb) == std::vector<double>{1, 1, 2});
  CHECK(cumsum(zeros({0}), 0).sizes() == Shape{0});
  CHECK(gradcheck([](const Tensors& in) { return cumsum(in[0], 0); }, {seq({3, 2}).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return cumprod(in[0], 1); }, {add(seq({2, 3}), 2.0).requires_grad_()}));
}

TEST_CASE("repeat_interleave with a tensor of counts: values, gradient and errors as torch's") {
  auto counts = [](std::vector<int64_t> v, Shape s) { return tensor(v, s); };
  Tensor r = seq({2, 3}).requires_grad_();
  Tensor y = repeat_interleave(r, counts({1, 0, 3}, {3}), 1);
  check_close(y, f64({0.09983341664682815, 0.644217687237691, 0.644217687237691, 0.644217687237691, 0.8414709848078964,
                      0.9995736030415051, 0.9995736030415051, 0.9995736030415051}, {2, 4}));
  sum(mul(y, seq({2, 4}, 0.2, 0.5))).backward();
  check_close(r.grad(), f64({0.479425538604203, 0.0, 2.3187519569266097, 0.963558185417193, 0.0, 2.9354598847439375}, {2, 3}));
  check_close(repeat_interleave(seq({2, 3}), counts({2, 1}, {2}), -2),
              f64({0.09983341664682815, 0.3894183423086505, 0.644217687237691, 0.09983341664682815, 0.3894183423086505,
                   0.644217687237691, 0.8414709848078964, 0.963558185417193, 0.9995736030415051}, {3, 3}));
  check_close(repeat_interleave(seq({2, 3}), counts({2}, {})), repeat_interleave(seq({2, 3}), 2));
  check_close(repeat_interleave(seq({2, 3}), counts({2}, {1}), 1), repeat_interleave(seq({2, 3}), 2, 1));
  Tensor idx = repeat_interleave(counts({2, 0, 1}, {3}));
  CHECK(idx.dtype() == DType::Int64);
  CHECK(values(idx) == std::vector<double>{0, 0, 2});
  CHECK(gradcheck([](const Tensors& in) { return repeat_interleave(in[0], tensor(std::vector<int64_t>{3, 1}, {2}), 0); },
                  {seq({2, 3}).requires_grad_()}));
  check_error([] { repeat_interleave(seq({2, 3}), tensor(std::vector<int64_t>{1, 2}, {2}), 1); },
              "repeat_interleave: repeats must have the same size as input along dim, but got repeats.size(0) = 2 and input.size(1) = 3");
  check_error([] { repeat_interleave(seq({2, 3}), tensor(std::vector<int64_t>{1, 2}, {1, 2}), 0); },
              "repeat_interleave: repeats must be 0-dim or 1-dim tensor");
  check_error([] { repeat_interleave(seq({2, 3}), tensor(std::vector<int64_t>{1, -2}, {2}), 0); },
              "repeat_interleave: repeats can not be negative");
  check_error([] { repeat_interleave(seq({2, 3}), seq({2}), 0); }, "repeat_interleave: repeats has to be Long or Int tensor");
  check_error([] { repeat_interleave(tensor(std::vector<int64_t>{2}, {1, 1})); },
              "repeat_interleave: repeat_interleave only accept 1D vector as repeat");
}

TEST_CASE("cumprod's gradient over zeros: finite and as torch's") {
  Tensor z = f64({2.0, 0.0, 3.0, 0.0, 5.0, 0.5, 1.5, -2.0, 4.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0}, {3, 5});
  Tensor gz = seq({3, 5}, 0.4, 0.3);
  Tensor z1 = z.detach().requires_grad_();
  sum(mul(cumprod(z1, 1), gz)).backward();
  check_close(z1.grad(), f64({0.29552020666133955, 6.6356795348439945, 0.0, 0.0, 0.0, 5.471431777503032, 1.5752421884421037,
                              -1.0211641862438916, 0.5261748415344297, 4.126596955103842, -16.974000468317033, 0.0, 0.0, 0.0,
                              0.0}, {3, 5}));
  Tensor z0 = z.detach().requires_grad_();
  sum(mul(cumprod(z0, 0), gz)).backward();
  check_close(z0.grad(), f64({0.6683728127496997, -0.21459737875771578, 4.511304764505783, -8.872121830999127, 0.9463000876874144,
                              1.4914104243534405, 0.0, -5.4301461066665215, 0.0, -10.916364092524589, -0.9161659367494549, 0.0,
                              5.554888093966393, 0.0, 0.0}, {3, 5}));
  // one zero per row, away from the ends: the derivative is a polynomial there, so finite differences agree
  Tensor w = f64({1.5, 0.0, -2.0, 0.7, 0.0, 1.2, 0.9, 1.1}, {2, 4}).requires_grad_();
  CHECK(gradcheck([](const Tensors& in) { return cumprod(in[0], 1); }, {w}));
}

TEST_CASE("norms, normalize, addmm, baddbmm, bernoulli, where of numbers, clamp with tensor bounds") {
  Tensor c = seq({2, 4}, 0.9, 0.4);
  check_close(norm(c), scalar_tensor(1.911336758602328, DType::Float64));
  check_close(vector_norm(c, 3, {1}), f64({1.140174133919276, 1.156890677403324}, {2}));
  check_close(vector_norm(c, INFINITY, {0}), f64({0.7568024953079282, 0.9824526126243325, 0.8084964038195901, 0.4048499206165983}, {4}));
  check_close(normalize(c), f64({0.295600929477885, 0.7314208507148159, 0.6137160541327931, 0.03156318315854997,
                                 -0.5464994801452027, -0.7094451265624272, -0.3354968450792927, 0.29234876011313243}, {2, 4}));
  check_close(addmm(seq({2, 2}), seq({2, 3}), seq({3, 2}), 0.5, 2.0),
              f64({1.8130729496390217, 2.2157175599494847, 3.6578997961959496, 4.6960112506135685}, {2, 2}));
  check_close(baddbmm(seq({2, 2}).unsqueeze(0), seq({2, 3}).unsqueeze(0), seq({3, 2}).unsqueeze(0), 0.5, 2.0)[0],
              f64({1.8130729496390217, 2.2157175599494847, 3.6578997961959496, 4.6960112506135685}, {2, 2}));
  CHECK(gradcheck([](const Tensors& in) { return normalize(in[0], 2.0, 0); }, {seq({3, 2}).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return vector_norm(in[0], 3.0, {1}); }, {seq({3, 2}).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return addmm(in[0], in[1], in[2], 0.5, 2.0); },
                  {seq({2, 2}).requires_grad_(), seq({2, 3}).requires_grad_(), seq({3, 2}).requires_grad_()}));
  Tensor w = where(gt(c, 0.0), 1.0, 0.0);
  CHECK(w.dtype() == DType::Float32);
  CHECK(values(w) == std::vector<double>{1, 1, 1, 1, 0, 0, 0, 1});
  check_close(clamp(c, full({4}, -0.5, DType::Float64), full({2, 1}, 0.5, DType::Float64)), minimum(maximum(c, -0.5), 0.5));
  RestoreRngState keep;
  manual_seed(11);
  Tensor bits = bernoulli(full({4000}, 0.25));
  CHECK(bits.dtype() == DType::Float32);
  CHECK(values(sum(bits))[0] / 4000 == doctest::Approx(0.25).epsilon(0.15));
  check_error([] { addmm(seq({2}), seq({2}), seq({2})); }, "addmm: expected 2-D matrices");
}

TEST_CASE("einsum: the contractions model code writes, equal to matmul forms, gradients, errors") {
  Tensor q = seq({2, 3, 4, 5}), k = seq({2, 3, 6, 5}, 0.5, 0.2);
  check_close(einsum("bhid,bhjd->bhij", {q, k}), matmul(q, k.transpose(-1, -2)));
  check_close(einsum("ij,jk->ik", {seq({3, 4}), seq({4, 2}, 0.2)}), matmul(seq({3, 4}), seq({4, 2}, 0.2)));
  check_close(einsum("bij,bjk->bik", {seq({2, 3, 4}), seq({2, 4, 5}, 0.2)}), matmul(seq({2, 3, 4}), seq({2, 4, 5}, 0.2)));
  check_close(einsum("i,j->ij", {seq({3}), seq({4}, 0.2)}), mul(seq({3}).unsqueeze(1), seq({4}, 0.2).unsqueeze(0)));
  check_close(einsum("ij->ji", {seq({3, 4})}), seq({3, 4}).t());
  check_close(einsum("ij->i", {seq({3, 4})}), sum(seq({3, 4}), {1}));
  check_close(einsum("bhij,bhjd->bihd", {seq({2, 3, 4, 4}), seq({2, 3, 4, 5}, 0.2)}),
              matmul(seq({2, 3, 4, 4}), seq({2, 3, 4, 5}, 0.2)).permute({0, 2, 1, 3}));
  // groups of two indices each (flattened where the shapes are known)
  check_close(einsum("abij,ijc->abc", {seq({2, 3, 4, 5}), seq({4, 5, 2}, 0.2)}),
              matmul(seq({2, 3, 4, 5}).reshape({6, 20}), seq({4, 5, 2}, 0.2).reshape({20, 2})).reshape({2, 3, 2}));
  check_close(einsum("ij,jk", {seq({3, 4}), seq({4, 2}, 0.2)}), matmul(seq({3, 4}), seq({4, 2}, 0.2)));  // implicit output
  CHECK(gradcheck([](const Tensors& in) { return einsum("bij,bkj->bik", {in[0], in[1]}); },
                  {seq({2, 3, 4}).requires_grad_(), seq({2, 2, 4}, 0.4).requires_grad_()}));
  check_error([] { einsum("ij,jk->ik", {seq({3, 4})}); }, "einsum: the equation has 2 operand subscripts but 1 operands were given");
  check_error([] { einsum("ij,jk->ik", {seq({3, 4, 1}), seq({4, 2})}); },
              "einsum: the number of subscripts in the equation (2) does not match the number of dimensions (3) for operand 0");
  check_error([] { einsum("ii->i", {seq({3, 3})}); }, "einsum: repeated subscript 'i' within an operand");
}

TEST_CASE("einsum: three or more operands and '...' as torch, gradients, errors") {
  Tensor a = seq({3, 4}), b = seq({4, 2}, 0.2), c = seq({2, 5}, 0.7, 0.3);
  check_close(einsum("ij,jk,kl->il", {a, b, c}), matmul(matmul(a, b), c));
  check_close(einsum("ij,jk,kl", {a, b, c}), matmul(matmul(a, b), c));  // implicit output
  Tensor u = seq({4}), v = seq({4}, 0.2), w = seq({4}, 0.7, 0.3);
  check_close(einsum("i,i,i->", {u, v, w}), sum(mul(mul(u, v), w)));
  // an index shared by the first and the last operand only stays through the intermediate
  check_close(einsum("bi,bj,bk->bijk", {seq({2, 3}), seq({2, 2}, 0.2), seq({2, 4}, 0.7)}),
              mul(mul(seq({2, 3}).reshape({2, 3, 1, 1}), seq({2, 2}, 0.2).reshape({2, 1, 2, 1})), seq({2, 4}, 0.7).reshape({2, 1, 1, 4})));
  check_close(einsum("ij,jk,kl,lm->im", {a, b, c, seq({5, 3}, 0.1)}), matmul(matmul(matmul(a, b), c), seq({5, 3}, 0.1)));
  // '...': leading dims broadcast from the right, as matmul's batch dims
  Tensor x = seq({2, 1, 3, 4}), y = seq({5, 4, 2}, 0.2);
  check_close(einsum("...ij,...jk->...ik", {x, y}), matmul(x, y));
  check_close(einsum("...ij,jk", {x, b}), matmul(x, b));  // implicit: the ellipsis' dims first
  check_close(einsum("a...c,c->a...", {seq({2, 3, 4, 5}), seq({5}, 0.2)}), matmul(seq({2, 3, 4, 5}), seq({5}, 0.2)));
  check_close(einsum("i...->...", {seq({3, 2, 4})}), sum(seq({3, 2, 4}), {0}));
  check_close(einsum("...->...", {seq({2, 3})}), seq({2, 3}));
  // the third operand's '...' (3) broadcasts against the first's size-1 dim: [2, 3, 3]
  check_close(einsum("...ij,jk,...k->...i", {x, b, seq({3, 2}, 0.4)}),
              matmul(matmul(x, b), seq({3, 2}, 0.4).t()).reshape({2, 3, 3}).permute({0, 2, 1}));
  CHECK(gradcheck([](const Tensors& in) { return einsum("ij,jk,kl->il", {in[0], in[1], in[2]}); },
                  {seq({3, 4}).requires_grad_(), seq({4, 2}, 0.2).requires_grad_(), seq({2, 3}, 0.7).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& in) { return einsum("...ij,...jk->...ik", {in[0], in[1]}); },
                  {seq({2, 1, 3, 2}).requires_grad_(), seq({3, 2, 2}, 0.2).requires_grad_()}));
  check_error([] { einsum("...i...->i", {seq({2, 3, 4})}); }, "einsum: found '.' for operand 0 for which an ellipsis was already found");
  check_error([] { einsum("ijk...->i", {seq({2, 3})}); },
              "einsum: the number of subscripts in the equation (3) is more than the number of dimensions (2) for operand 0");
  check_error([] { einsum("ij,jk->ik", {seq({3, 4, 1}), seq({4, 2})}); },
              "einsum: the number of subscripts in the equation (2) does not match the number of dimensions (3) for operand 0 and no ellipsis was given");
  check_error([] { einsum("ij->", {}); }, "einsum: must provide at least one operand");
}

TEST_CASE("random tensor ops in script: multinomial, bernoulli, rand_like, randn_like from kiln's generator") {
  const char* src = "import torch\nfrom torch import Tensor\nfrom typing import Tuple\n\n\n"
                    "def f(p: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:\n"
                    "    return (torch.multinomial(p, 2), p.multinomial(50, replacement=True), torch.bernoulli(p),\n"
                    "            torch.rand_like(p), torch.randn_like(p))\n\n\n"
                    "def g(x: Tensor) -> Tensor:\n"
                    "    return torch.einsum('abij,ijc->abc', x, x)\n";
  RestoreRngState keep;
  ScriptFile sm = script_source(src, "draws.py");
  Tensor p = tensor({0.0, 0.5, 0.5, 0.0, 0.3, 0.7, 0.0, 0.0}, {2, 4});
  auto run = [&] {
    std::vector<IValue> r = sm.function("f").call({p});
    return r.size() == 1 && r[0].is_tuple() ? r[0].elements() : r;
  };
  manual_seed(5);
  std::vector<IValue> a = run();
  manual_seed(5);
  std::vector<IValue> b = run();
  for (size_t j = 0; j < a.size(); ++j) CHECK(values(a[j].to_tensor()) == values(b[j].to_tensor()));
  std::vector<double> wo = values(a[0].to_tensor()), w = values(a[1].to_tensor());
  CHECK(a[0].to_tensor().sizes() == Shape{2, 2});
  CHECK(std::set<double>(wo.begin(), wo.begin() + 2) == std::set<double>{1, 2});
  CHECK(std::set<double>(wo.begin() + 2, wo.end()) == std::set<double>{0, 1});
  CHECK(a[1].to_tensor().sizes() == Shape{2, 50});
  for (size_t j = 0; j < 50; ++j) CHECK((w[j] == 1 || w[j] == 2));
  for (size_t j = 50; j < 100; ++j) CHECK((w[j] == 0 || w[j] == 1));
  std::vector<double> bits = values(a[2].to_tensor());
  for (size_t j = 0; j < bits.size(); ++j)
    if (values(p)[j] == 0.0) CHECK(bits[j] == 0.0);
  for (double u : values(a[3].to_tensor())) CHECK((u >= 0.0 && u < 1.0));
  manual_seed(6);
  Tensor n = sm.function("f").call({full({20000}, 0.5)})[0].elements()[4].to_tensor();
  CHECK(values(mean(n))[0] == doctest::Approx(0.0).epsilon(0.05).scale(1.0));
  CHECK(values(kiln::std(n))[0] == doctest::Approx(1.0).epsilon(0.05));
  check_error([&] { sm.function("g").call({seq({2, 3, 2, 3})}); },
              "einsum: a script graph whose shapes are unknown when it is lowered takes at most one free index");
}

TEST_CASE("index_add: float rows along any dim, repeated and negative indices, a strided source, as the integer path") {
  Tensor self = arange(Scalar(0), Scalar(60)).reshape({3, 5, 4}).to(DType::Float32);
  for (int64_t d : {0, 1, 2}) {
    CAPTURE(d);
    Tensor i = tensor(std::vector<int64_t>{self.size(d) - 1, -1, 0, 2, 0}, {5});
    Shape s = self.sizes();
    s[size_t(d)] = 5;
    Tensor src = arange(Scalar(0), Scalar(s[0] * s[1] * s[2])).reshape({s[2], s[1], s[0]}).permute({2, 1, 0});  // strided
    Tensor want = index_add(self.to(DType::Int64), d, i, src);  // the general loop
    check_close(index_add(self, d, i, src.to(DType::Float32)), want.to(DType::Float32), 0, 0);
    check_close(index_add(self.to(DType::Float64), d, i, src.to(DType::Float64)), want.to(DType::Float64), 0, 0);
  }
}

TEST_CASE("median and kthvalue along a dim: values, indices, gradients to the index, keepdim, as PyTorch 1.13") {
  Picked m = picked([](const Tensor& x) { return median(x, 1); });
  check_close(m.v, f64({1.0, 2.0, -1.0}, {3}));
  check_indices(m.i, i64({3, 1, 3}, {3}));
  check_close(m.g, f64({0, 0, 0, 1, 0, -2, 0, 0, 0, 0, 0, 0.5}, {3, 4}));
  Picked m0 = picked([](const Tensor& x) { return x.median(0, true); });
  check_close(m0.v, f64({2.0, 1.0, 4.0, 1.0}, {1, 4}));
  check_indices(m0.i, i64({1, 0, 2, 0}, {1, 4}));
  check_close(m0.g, f64({0, -2, 0, 3, 1, 0, 0, 0, 0, 0, 0.5, 0}, {3, 4}));
  // kthvalue's tie index: torch 1.13's CPU quickselect picks an unspecified one of the tied elements (row 1:
  // index 0 of the three 2.0s); kiln the stable sort's k-th (index 1). Values agree; rows 0 and 2 as torch.
  Picked k2 = picked([](const Tensor& x) { return kthvalue(x, 2, 1); });
  check_close(k2.v, f64({1.0, 2.0, -1.0}, {3}));
  check_indices(k2.i, i64({3, 1, 3}, {3}));
  check_close(k2.g, f64({0, 0, 0, 1, 0, -2, 0, 0, 0, 0, 0, 0.5}, {3, 4}));
  Picked k3 = picked([](const Tensor& x) { return x.kthvalue(3, 0, true); });
  check_close(k3.v, f64({3.0, 2.0, 5.0, 2.0}, {1, 4}));
  check_indices(k3.i, i64({0, 1, 1, 1}, {1, 4}));
  check_close(k3.g, f64({1, 0, 0, 0, 0, -2, 0.5, 3, 0, 0, 0, 0}, {3, 4}));
  Picked k4 = picked([](const Tensor& x) { return kthvalue(x, 4); });
  check_close(k4.v, f64({3.0, 5.0, 4.0}, {3}));
  check_indices(k4.i, i64({0, 2, 2}, {3}));
  check_close(k4.g, f64({1, 0, 0, 0, 0, 0, -2, 0, 0, 0, 0.5, 0}, {3, 4}));
  CHECK(gradcheck([](const Tensors& a) { return median(a[0], -1).first; }, {seq({3, 5}, 0.9, 0.3).requires_grad_()}));
  CHECK(gradcheck([](const Tensors& a) { return kthvalue(a[0], 2, 0, true).first; }, {seq({3, 5}, 0.9, 0.3).requires_grad_()}));
}

TEST_CASE("median of all elements: the lower median, its gradient shared by the ties, NaN, integers, 0-d, empty") {
  Tensor x = ties().requires_grad_();
  Tensor m = median(x);
  CHECK(m.dim() == 0);
  CHECK(m.item<double>() == 2.0);
  mul(m, 3.0).backward();
  // four elements equal 2.0: torch's evenly_distribute_backward gives each a quarter
  check_close(x.grad(), f64({0, 0, 0.75, 0, 0.75, 0.75, 0, 0.75, 0, 0, 0, 0}, {3, 4}));
  CHECK(gradcheck([](const Tensors& a) { return a[0].median(); }, {seq({3, 5}, 0.9, 0.3).requires_grad_()}));
  // an infinite median shares its gradient too
  Tensor inf = f64({1.0, INFINITY, INFINITY, INFINITY}, {4}).requires_grad_();
  median(inf).backward();
  check_close(inf.grad(), f64({0, 1.0 / 3, 1.0 / 3, 1.0 / 3}, {4}));
  // NaN propagates (the first NaN's index along a dim); kthvalue counts it the largest
  Tensor n = f64({1.0, NAN, 2.0, NAN, 4.0, 3.0, 2.0, 1.0}, {2, 4});
  auto [nv, ni] = median(n, 1);
  CHECK(std::isnan(values(nv)[0]));
  CHECK(values(nv)[1] == 2.0);
  check_indices(ni, i64({1, 2}, {2}));
  auto [kv, ki] = kthvalue(n, 3, 1);
  CHECK(std::isnan(values(kv)[0]));
  CHECK(values(kv)[1] == 3.0);
  check_indices(ki, i64({1, 1}, {2}));
  CHECK(std::isnan(median(n).item<double>()));
  // a NaN median's gradient, as torch 1.13: median(x) shares it among the NaN elements (evenly_distribute_backward),
  // median(x, dim) gives it to the first NaN (the index it returns); the other elements get zeros, not NaN
  Tensor xn = f64({1.0, NAN, 3.0, NAN, 2.0}, {5}).requires_grad_();
  median(xn).backward();
  check_close(xn.grad(), f64({0, 0.5, 0, 0.5, 0}, {5}), 0, 0);
  Tensor xd = f64({1.0, NAN, 3.0, NAN, 2.0, 5.0, 4.0, NAN, 1.0, 2.0}, {2, 5}).requires_grad_();
  median(xd, 1).first.sum().backward();
  check_close(xd.grad(), f64({0, 1, 0, 0, 0, 0, 0, 1, 0, 0}, {2, 5}), 0, 0);
  Tensor xf = f64({1.0, NAN, 3.0}, {3}).to(DType::Float32).requires_grad_();
  Tensor mf = median(xf);
  CHECK(mf.dtype() == DType::Float32);
  mul(mf, 4.0).backward();
  check_close(xf.grad(), f64({0, 4, 0}, {3}).to(DType::Float32), 0, 0);
  auto [iv, ii] = median(i64({3, 1, 2, 2, 7, -5, 0, 9}, {2, 4}), 1);
  CHECK(iv.dtype() == DType::Int64);
  CHECK(values(iv) == std::vector<double>{2, 0});
  check_indices(ii, i64({2, 2}, {2}));
  CHECK(median(i64({4, 1, 3}, {3})).item<int64_t>() == 3);
  auto [sv, si] = median(full({}, 5.0), 0);
  CHECK(sv.dim() == 0);
  CHECK(sv.item<double>() == 5.0);
  CHECK(si.item<int64_t>() == 0);
  CHECK(kthvalue(full({}, 5.0), 1, -1).first.item<double>() == 5.0);
  CHECK(std::isnan(median(zeros({0})).item<float>()));  // torch 1.13 gives NaN, not an error
}

TEST_CASE("median and kthvalue: torch's errors") {
  check_error([] { kthvalue(zeros({2, 3}), 0, 1); }, "kthvalue(): selected number k out of range for dimension 1");
  check_error([] { kthvalue(zeros({2, 3}), 4, -1); }, "kthvalue(): selected number k out of range for dimension 1");
  check_error([] { kthvalue(full({}, 1.0), 2); }, "kthvalue(): selected number k out of range for dimension 0");
  check_error([] { kthvalue(zeros({2, 0}), 1, 1); }, "kthvalue(): Expected reduction dim 1 to have non-zero size");
  check_error([] { median(zeros({2, 0}), -1); }, "median(): Expected reduction dim 1 to have non-zero size");
  check_error([] { median(zeros({2, 3}), 2); }, "dim");
  check_error([] { median(zeros({0}, DType::Int64)); }, "median: an empty int64 tensor has no median");
}

TEST_CASE("median and kthvalue in script: eager's composites, shapes unknown when lowering, k read when it runs") {
  const char* src = "import torch\nfrom torch import Tensor\nfrom typing import Tuple\n\n\n"
                    "def f(x: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:\n"
                    "    m = torch.median(x, 1)\n"
                    "    v, i = x.kthvalue(min(k, x.size(0)), 0, keepdim=True)\n"
                    "    c, j = torch.kthvalue(x, 2, -1)\n"
                    "    return m.values, m.indices, v, i, x.median(), c, j\n";
  Function fn = script_source(src, "order.py").function("f");
  for (Shape s : {Shape{3, 4}, Shape{5, 2}}) {
    CAPTURE(shape_str(s));
    Tensor x0 = s == Shape{3, 4} ? ties() : seq(s, 0.9, 0.3);
    Tensor xe = x0.detach().requires_grad_(), xs = x0.detach().requires_grad_();
    auto [mv, mi] = median(xe, 1);
    auto [kv, ki] = kthvalue(xe, std::min<int64_t>(3, s[0]), 0, true);
    auto [cv, cj] = kthvalue(xe, 2, -1);
    Tensors want = {mv, mi, kv, ki, median(xe), cv, cj};
    Tensors got = test::flat(fn.call({xs, int64_t(3)}));
    REQUIRE(got.size() == want.size());
    for (size_t j = 0; j < want.size(); ++j) check_close(got[j], want[j]);
    // the same gradients, ties shared in median() as in eager
    Tensor we = add(add(sum(mul(mv, 2.0)), sum(mul(kv, 3.0))), add(mul(want[4], 5.0), sum(cv)));
    Tensor ws = add(add(sum(mul(got[0], 2.0)), sum(mul(got[2], 3.0))), add(mul(got[4], 5.0), sum(got[5])));
    we.backward();
    ws.backward();
    check_close(xs.grad(), xe.grad());
  }
  check_error([&] { fn.call({zeros({3, 4}), int64_t(0)}); }, "kthvalue(): selected number k out of range for dimension 0");
  check_error([&] { fn.call({zeros({3, 0}), int64_t(1)}); }, "median(): Expected reduction dim 1 to have non-zero size");
}
