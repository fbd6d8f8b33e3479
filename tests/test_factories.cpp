// Factories: filled tensors, torch's arange/linspace/eye rules, random tensors by their statistics and
// reproducibility under manual_seed, and tensor(values, shape).
#include <algorithm>
#include <cmath>
#include <set>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {
struct Stats {
  double mean, var, min, max;
};
// Computed by hand: the reductions are not what this file tests.
Stats stats(const Tensor& t) {
  std::vector<double> v = values(t);
  double s = 0, mn = INFINITY, mx = -INFINITY;
  for (double x : v) {
    s += x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  double mean = s / double(v.size()), ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, ss / double(v.size() - 1), mn, mx};
}
}  // namespace

TEST_CASE("factories: zeros, ones, full and the _like forms") {
  Tensor z = zeros({2, 3});
  CHECK(z.dtype() == DType::Float32);
  CHECK(z.sizes() == Shape{2, 3});
  CHECK(z.is_contiguous());
  CHECK(values(z) == std::vector<double>(6, 0.0));
  CHECK(values(ones({4}, DType::Int32)) == std::vector<double>(4, 1.0));
  CHECK(ones({4}, DType::Int32).dtype() == DType::Int32);
  CHECK(values(full({2, 2}, 2.5, DType::Float64)) == std::vector<double>(4, 2.5));
  CHECK(values(full({3}, true, DType::Bool)) == std::vector<double>(3, 1.0));
  CHECK(values(full({2}, -7, DType::BFloat16)) == std::vector<double>(2, -7.0));
  int64_t big = (int64_t(1) << 60) + 3;
  CHECK(full({2}, big, DType::Int64)[1].item<int64_t>() == big);
  CHECK(zeros({}).dim() == 0);
  CHECK(zeros({0, 5}).numel() == 0);
  CHECK(scalar_tensor(4).dim() == 0);
  CHECK(scalar_tensor(4).item<float>() == 4);
  CHECK(scalar_tensor(4, DType::Int64).dtype() == DType::Int64);
  Tensor x = kiln::arange(6).reshape({2, 3}).to(DType::Int32);
  for (const Tensor& t : {zeros_like(x), ones_like(x), empty_like(x), full_like(x, 9)}) {
    CHECK(t.sizes() == x.sizes());
    CHECK(t.dtype() == DType::Int32);
    CHECK(t.storage() != x.storage());
  }
  CHECK(values(full_like(x, 9)) == std::vector<double>(6, 9.0));
  CHECK(values(ones_like(x.t())) == std::vector<double>(6, 1.0));
  check_error([] { zeros({2, -1}); }, "empty: negative dimension in shape [2,-1]");
}

TEST_CASE("factories: arange picks int64 or float32 and torch's length") {
  Tensor a = kiln::arange(5);
  CHECK(a.dtype() == DType::Int64);
  CHECK(values(a) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(kiln::arange(5.0).dtype() == DType::Float32);
  CHECK(values(kiln::arange(1, 10, 3)) == std::vector<double>{1, 4, 7});
  CHECK(values(kiln::arange(0, -5, -2)) == std::vector<double>{0, -2, -4});
  Tensor f = kiln::arange(0.5, 3);
  CHECK(f.dtype() == DType::Float32);
  CHECK(values(f) == std::vector<double>{0.5, 1.5, 2.5});
  CHECK(kiln::arange(0, 1, 0.1).numel() == 10);  // ceil((end - start) / step)
  CHECK(kiln::arange(-1.0, 1.0, 0.3).numel() == 7);
  CHECK(values(kiln::arange(1, 2.5, 0.5)) == std::vector<double>{1, 1.5, 2});
  CHECK(kiln::arange(3, 3).numel() == 0);
  CHECK(kiln::arange(0, 10, 3).numel() == 4);
  CHECK(kiln::arange(0, 5, 1, DType::Float64).dtype() == DType::Float64);
  CHECK(values(kiln::arange(0, 5, 2, DType::Int32)) == std::vector<double>{0, 2, 4});
  int64_t big = (int64_t(1) << 62);
  Tensor b = kiln::arange(big, big + 3);
  CHECK(b[1].item<int64_t>() == big + 1);  // integer arguments stay exact
  check_error([] { kiln::arange(0, 5, 0); }, "arange: step must be nonzero");
  check_error([] { kiln::arange(0, 5, -1); }, "arange: upper bound 5 and lower bound 0 inconsistent with step sign -1");
}

TEST_CASE("factories: linspace and eye") {
  CHECK(values(kiln::linspace(0, 1, 5)) == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  CHECK(kiln::linspace(0, 1, 5).dtype() == DType::Float32);
  CHECK(values(kiln::linspace(-1, 1, 1)) == std::vector<double>{-1});
  CHECK(kiln::linspace(0, 1, 0).numel() == 0);
  CHECK(values(kiln::linspace(0, 10, 4, DType::Int64)) == std::vector<double>{0, 3, 6, 10});  // truncated, as torch
  Tensor l = kiln::linspace(0, 0.3, 7, DType::Float64);
  CHECK(values(l).back() == 0.3);  // filled from both ends: the end is exact
  CHECK(values(l).front() == 0.0);
  check_close(l, kiln::tensor({0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3}, {}, DType::Float64), 1e-15, 1e-15);
  CHECK(values(kiln::linspace(5, -5, 3)) == std::vector<double>{5, 0, -5});
  check_error([] { kiln::linspace(0, 1, -1); }, "linspace: number of steps must be non-negative, got -1");
  CHECK(values(kiln::eye(2, 3)) == std::vector<double>{1, 0, 0, 0, 1, 0});
  CHECK(values(kiln::eye(3, 2)) == std::vector<double>{1, 0, 0, 1, 0, 0});
  CHECK(values(kiln::eye(2)) == std::vector<double>{1, 0, 0, 1});
  CHECK(kiln::eye(3, std::nullopt, DType::Int64).dtype() == DType::Int64);
  CHECK(kiln::eye(0).sizes() == Shape{0, 0});
  check_error([] { kiln::eye(-1); }, "eye: sizes must be non-negative, got -1 and -1");
}

TEST_CASE("factories: rand and randn statistics") {
  manual_seed(123);
  Tensor u = kiln::rand({200000});
  CHECK(u.dtype() == DType::Float32);
  Stats su = stats(u);
  CHECK(su.min >= 0.0);
  CHECK(su.max < 1.0);
  CHECK(std::fabs(su.mean - 0.5) < 5e-3);        // standard error 6e-4
  CHECK(std::fabs(su.var - 1.0 / 12) < 2e-3);    // standard error 2e-4
  Tensor n = kiln::randn({200000}, DType::Float64);
  CHECK(n.dtype() == DType::Float64);
  Stats sn = stats(n);
  CHECK(std::fabs(sn.mean) < 0.02);      // standard error 2e-3
  CHECK(std::fabs(sn.var - 1.0) < 0.03);  // standard error 3e-3
  std::vector<double> nv = values(n);
  double within = double(std::count_if(nv.begin(), nv.end(), [](double x) { return std::fabs(x) < 1; })) / double(nv.size());
  CHECK(std::fabs(within - 0.682689) < 0.01);
  CHECK(kiln::rand({3, 4}).sizes() == Shape{3, 4});
  CHECK(kiln::rand_like(zeros({2}, DType::Float64)).dtype() == DType::Float64);
  CHECK(kiln::randn_like(zeros({2, 5})).sizes() == Shape{2, 5});
  check_error([] { kiln::rand({2}, DType::Int64); }, "rand: expected a floating dtype, got int64");
  check_error([] { kiln::randn({2}, DType::Bool); }, "randn: expected a floating dtype, got bool");
}

TEST_CASE("factories: rand stays below 1 in every floating dtype") {
  // Drawn at the target type's precision: a float64 draw rounded to bf16 reaches 1.0 about once in 500.
  manual_seed(7);
  for (DType dt : {DType::BFloat16, DType::Float16, DType::Float32, DType::Float64}) {
    CAPTURE(dtype_name(dt));
    Stats s = stats(kiln::rand({100000}, dt));
    CHECK(s.min >= 0.0);
    CHECK(s.max < 1.0);
    CHECK(std::fabs(s.mean - 0.5) < 0.01);
  }
}

TEST_CASE("factories: randint range and dtype") {
  manual_seed(5);
  Tensor r = kiln::randint(-3, 4, {20000});
  CHECK(r.dtype() == DType::Int64);
  std::vector<double> v = values(r);
  std::set<double> seen(v.begin(), v.end());
  CHECK(seen == std::set<double>{-3, -2, -1, 0, 1, 2, 3});  // high is exclusive, every value drawn
  Stats s = stats(r);
  CHECK(std::fabs(s.mean) < 0.05);
  Tensor rf = kiln::randint(0, 2, {100}, DType::Float32);
  CHECK(rf.dtype() == DType::Float32);
  for (double x : values(rf)) CHECK((x == 0 || x == 1));
  check_error([] { kiln::randint(3, 3, {2}); }, "randint: expected low < high, got low=3 and high=3");
}

TEST_CASE("factories: manual_seed makes draws reproducible") {
  manual_seed(42);
  Tensor a = kiln::rand({50}), b = kiln::randn({50}), c = kiln::randint(0, 1000, {50});
  manual_seed(42);
  Tensor a2 = kiln::rand({50}), b2 = kiln::randn({50}), c2 = kiln::randint(0, 1000, {50});
  CHECK(values(a) == values(a2));
  CHECK(values(b) == values(b2));
  CHECK(values(c) == values(c2));
  manual_seed(43);
  CHECK(values(kiln::rand({50})) != values(a));
  Tensor d = kiln::rand({50});
  CHECK(values(d) != values(kiln::rand({50})));  // the stream advances
}

TEST_CASE("factories: tensor(values, shape)") {
  Tensor t = kiln::tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.sizes() == Shape{2, 3});
  CHECK(t[1][0].item<float>() == 4);
  CHECK(kiln::tensor({1.5f, 2.5f}).sizes() == Shape{2});
  CHECK(kiln::tensor(std::vector<int>{1, 2}).dtype() == DType::Int64);
  CHECK(kiln::tensor(std::vector<int64_t>{1, 2}, {2, 1}).sizes() == Shape{2, 1});
  CHECK(kiln::tensor({1.0, 2.0}, {}, DType::Float64).dtype() == DType::Float64);
  CHECK(kiln::tensor(std::vector<double>{}).sizes() == Shape{0});
  CHECK(kiln::tensor(std::vector<double>{}, {0, 3}).sizes() == Shape{0, 3});
  int64_t big = (int64_t(1) << 61) + 1;
  CHECK(kiln::tensor(std::vector<int64_t>{big})[0].item<int64_t>() == big);
  check_error([] { kiln::tensor({1.0, 2.0, 3.0, 4.0, 5.0}, {2, 3}); }, "tensor: 5 values cannot fill shape [2,3]");
  check_error([] { kiln::tensor(std::vector<int>{1, 2, 3}, {2, 2}); }, "tensor: 3 values cannot fill shape [2,2]");
}

TEST_CASE("factories: get_rng_state / set_rng_state replay the same draws") {
  auto same = [](const Tensor& p, const Tensor& q) { return max(abs(p - q)).item<double>() == 0.0; };
  manual_seed(21);
  rand({5});
  RngState s = get_rng_state();
  Tensor a = randn({7}), b = rand({3});
  set_rng_state(s);
  CHECK(same(randn({7}), a));
  CHECK(same(rand({3}), b));
  set_rng_state(s);
  {
    RestoreRngState keep;  // draws inside the scope leave the stream where it was
    rand({1000});
  }
  CHECK(same(randn({7}), a));
  check_error([] { set_rng_state(RngState{"not a state"}); }, "set_rng_state: not a state from get_rng_state (11 bytes, expected 2504)");
}
