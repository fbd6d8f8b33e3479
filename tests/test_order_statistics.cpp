// torch.median / torch.kthvalue (eager/composites_tensor_ops.h, written once and scripted from it) and index_put
// with a tuple of index tensors and accumulate=True: values, indices and gradients PyTorch 1.13 printed
// (tests/gen_order_statistics_values.py, over the same inputs), torch's errors, and the script equal to eager.
#include <cmath>

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

// ties in every row and column
Tensor ties() { return f64({3.0, 1.0, 2.0, 1.0, 2.0, 2.0, 5.0, 2.0, 0.5, -1.0, 4.0, -1.0}, {3, 4}); }

void check_indices(const Tensor& got, const Tensor& want) {
  CHECK(got.dtype() == DType::Int64);
  CHECK(got.sizes() == want.sizes());
  CHECK(values(got) == values(want));
}

// (values, indices) of fn(x) and the gradient of sum(values * w[:n]) (w[0] for a 0-d result)
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

TEST_CASE("index_put with a tuple of indices and accumulate=True: repeated pairs add up, broadcast, gradients as PyTorch 1.13") {
  Tensor x = arange(12).to(DType::Float32).reshape({3, 4}).requires_grad_();
  Tensor v = tensor(std::vector<float>{1, 2, 3, 4, 5}, {5}).requires_grad_();
  Tensor i0 = i64({0, 2, 0, -1, 1}, {5}), i1 = i64({1, 3, 1, 3, -4}, {5});
  Tensor y = index_put(x, {i0, i1}, v, true);
  check_close(y, tensor(std::vector<float>{0, 5, 2, 3, 9, 5, 6, 7, 8, 9, 10, 17}, {3, 4}));
  Tensor wy = sub(mul(arange(12).to(DType::Float32).reshape({3, 4}), 0.5), 2.0);
  sum(mul(y, wy)).backward();
  check_close(x.grad(), wy);
  check_close(v.grad(), tensor(std::vector<float>{-1.5, 3.5, -1.5, 3.5, 0.0}, {5}));
  // indices (2, 1) and (3,) broadcast to (2, 3) over the first two of three dims; v (3, 1) broadcast to (2, 3, 4)
  Tensor x3 = arange(24).to(DType::Float64).reshape({2, 3, 4}).requires_grad_();
  Tensor v3 = f64({10, 20, 30}, {3, 1}).requires_grad_();
  Tensor y3 = index_put(x3, {i64({1, 1}, {2, 1}), i64({0, 2, 0}, {3})}, v3, true);
  std::vector<double> want3(24);
  for (int64_t k = 0; k < 24; ++k) want3[size_t(k)] = double(k);
  for (int64_t c = 0; c < 4; ++c) {
    want3[size_t(12 + c)] += 2 * (10 + 30);
    want3[size_t(20 + c)] += 2 * 20;
  }
  check_close(y3, f64(want3, {2, 3, 4}));
  std::vector<double> lin(24);  // torch.linspace(-1, 1, 24)
  for (int64_t k = 0; k < 24; ++k) lin[size_t(k)] = -1.0 + 2.0 * double(k) / 23.0;
  Tensor w3 = f64(lin, {2, 3, 4});
  sum(mul(y3, w3)).backward();
  check_close(v3.grad(), f64({1.3913043478260871, 6.956521739130435, 1.3913043478260871}, {3, 1}));
  check_close(x3.grad(), w3);
  CHECK(gradcheck([&](const Tensors& a) { return index_put(a[0], {i0, i1}, a[1], true); },
                  {seq({3, 4}).requires_grad_(), seq({5}, 0.7).requires_grad_()}));
  // without accumulate: a plain write
  Tensor put = index_put(zeros({3, 4}), {i64({2, 0}, {2}), i64({1, 3}, {2})}, tensor(std::vector<float>{7, 8}, {2}));
  check_close(put, tensor(std::vector<float>{0, 0, 0, 8, 0, 0, 0, 0, 0, 7, 0, 0}, {3, 4}));
  check_error([] { index_put(zeros({3, 4}), {i64({3}, {1}), i64({0}, {1})}, ones({1}), true); },
              "index 3 is out of bounds for dimension 0 with size 3");
  check_error([] { index_put(zeros({3, 4}), {i64({0, 1}, {2}), i64({0, 1, 2}, {3})}, ones({1}), true); },
              "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
  check_error([] { index_put(zeros({3, 4}), {i64({0}, {1}), i64({0}, {1}), i64({0}, {1})}, ones({1}), true); },
              "index_put: too many indices for tensor of dimension 2 (got 3)");
  // in a script: index_put_ on a clone and index_put, eager's composite, compiled too
  const char* src =
      "import torch\nfrom torch import Tensor\n\n\ndef f(x: Tensor, i: Tensor, j: Tensor, v: Tensor) -> Tensor:\n"
      "    y = x.clone()\n    y.index_put_((i, j), v, accumulate=True)\n    return y + x.index_put([i, j], v, True)\n";
  Function fn = script_source(src, "put2.py").function("f");
  Tensor xs = x.detach().requires_grad_(), vs = v.detach().requires_grad_();
  Tensor got = fn.call({xs, i0, i1, vs})[0].to_tensor();
  check_close(got, mul(y.detach(), 2.0));
  sum(mul(got, wy)).backward();
  check_close(xs.grad(), mul(wy, 2.0));
  check_close(vs.grad(), mul(v.grad(), 2.0));
  check_close(compile(fn).call({x.detach(), i0, i1, v.detach()})[0].to_tensor(), got.detach());
}
