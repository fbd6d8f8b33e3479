// Reductions against a float64 reference folded by hand in row-major order: every dims/keepdim combo,
// non-contiguous, sliced and broadcast inputs, sizes that take the threaded paths, dtype rules, NaN,
// empty tensors and the text of every error. A few expectations are literals computed with torch 1.13.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Fold { Sum, Prod, Max, Min, Mean, ArgMax, ArgMin };

Tensor make(const std::vector<double>& v, const Shape& shape, DType dt = DType::Float64) {
  return kiln::tensor(v, {int64_t(v.size())}, DType::Float64).reshape(shape).to(dt);
}

bool better(double x, double best, bool is_max) {
  if (std::isnan(best)) return false;
  if (std::isnan(x)) return true;
  return is_max ? x > best : x < best;
}

// The reference: walks x in row-major order and folds each element into its output slot in float64.
// For ArgMax/ArgMin `dims` must hold one dim; the index is the position along it.
Tensor reference(const Tensor& x, const Shape& dims, bool keepdim, Fold f) {
  auto v = values(x);
  const int64_t nd = x.dim();
  std::vector<bool> mask(size_t(nd), dims.empty());
  for (int64_t d : dims) mask[size_t(d < 0 ? d + nd : d)] = true;
  Shape kshape = x.sizes(), oshape;
  for (int64_t d = 0; d < nd; ++d) {
    if (mask[size_t(d)]) kshape[size_t(d)] = 1;
    if (!mask[size_t(d)] || keepdim) oshape.push_back(kshape[size_t(d)]);
  }
  std::vector<double> acc(size_t(numel_of(kshape)), f == Fold::Prod ? 1.0 : 0.0);
  std::vector<double> best(acc.size(), kNaN);
  std::vector<bool> seen(acc.size(), false);
  std::vector<int64_t> count(acc.size(), 0);
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t rem = i, o = 0, ostride = 1, along = 0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      int64_t idx = rem % x.sizes()[size_t(d)];
      rem /= x.sizes()[size_t(d)];
      if (!mask[size_t(d)]) o += idx * ostride;
      else along = idx;
      ostride *= kshape[size_t(d)];
    }
    double e = v[size_t(i)];
    double& a = acc[size_t(o)];
    switch (f) {
      case Fold::Sum:
      case Fold::Mean: a += e; break;
      case Fold::Prod: a *= e; break;
      case Fold::Max:
      case Fold::Min:
        if (!seen[size_t(o)] || better(e, a, f == Fold::Max)) a = e;
        break;
      case Fold::ArgMax:
      case Fold::ArgMin:
        if (!seen[size_t(o)] || better(e, best[size_t(o)], f == Fold::ArgMax)) {
          best[size_t(o)] = e;
          a = double(along);
        }
        break;
    }
    seen[size_t(o)] = true;
    ++count[size_t(o)];
  }
  if (f == Fold::Mean)
    for (size_t o = 0; o < acc.size(); ++o) acc[o] /= double(count[o]);
  return make(acc, oshape);
}

// Every dims list worth trying for a rank-3 tensor.
const std::vector<Shape> kDims3 = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {1, 2}, {0, 1}, {0, 1, 2}, {-3, -2}};

// Checks sum, prod, amax, amin and mean of x against the reference for every dims list and keepdim.
void check_all_folds(const Tensor& x, double rtol = 1e-5) {
  for (const Shape& dims : kDims3) {
    for (bool keepdim : {false, true}) {
      CAPTURE(shape_str(x.sizes()));
      CAPTURE(shape_str(dims));
      CAPTURE(keepdim);
      check_close(kiln::sum(x, dims, keepdim), reference(x, dims, keepdim, Fold::Sum), rtol, 1e-4);
      check_close(kiln::prod(x, dims, keepdim), reference(x, dims, keepdim, Fold::Prod), rtol, 1e-30);
      check_close(kiln::amax(x, dims, keepdim), reference(x, dims, keepdim, Fold::Max), 0, 0);
      check_close(kiln::amin(x, dims, keepdim), reference(x, dims, keepdim, Fold::Min), 0, 0);
      check_close(kiln::mean(x, dims, keepdim), reference(x, dims, keepdim, Fold::Mean), rtol, 1e-6);
    }
  }
}

void check_arg_folds(const Tensor& x) {
  for (int64_t d = -x.dim(); d < x.dim(); ++d) {
    for (bool keepdim : {false, true}) {
      CAPTURE(shape_str(x.sizes()));
      CAPTURE(d);
      CAPTURE(keepdim);
      Tensor am = kiln::argmax(x, d, keepdim), an = kiln::argmin(x, d, keepdim);
      CHECK(am.dtype() == DType::Int64);
      check_close(am, reference(x, {d}, keepdim, Fold::ArgMax), 0, 0);
      check_close(an, reference(x, {d}, keepdim, Fold::ArgMin), 0, 0);
      auto [mv, mi] = kiln::max(x, d, keepdim);
      check_close(mv, reference(x, {d}, keepdim, Fold::Max), 0, 0);
      check_close(mi, am, 0, 0);
      auto [nv, ni] = kiln::min(x, d, keepdim);
      check_close(nv, reference(x, {d}, keepdim, Fold::Min), 0, 0);
      check_close(ni, an, 0, 0);
    }
  }
}

Tensor flat_index(int64_t i) { return make({double(i)}, {}); }

}  // namespace

TEST_CASE("reductions: every fold matches the float64 reference over dims and keepdim") {
  manual_seed(7);
  Tensor x = kiln::rand({3, 4, 5}) + 0.5;  // near 1, so products stay in range
  check_all_folds(x);
  check_all_folds(x.to(DType::Float64), 1e-12);
  check_arg_folds(x);
  check_all_folds(kiln::rand({1, 7, 1}) + 0.5);  // size-1 dims reduced and kept
}

TEST_CASE("reductions: non-contiguous, sliced and broadcast inputs") {
  manual_seed(11);
  Tensor base = kiln::rand({6, 5, 8}) + 0.5;
  Tensor permuted = base.permute({2, 0, 1});                 // innermost reduced dim strided
  Tensor stepped = base.slice(2, 1, std::nullopt, 3).slice(0, 0, 6, 2);  // steps in two dims
  Tensor expanded = (kiln::rand({1, 5, 1}) + 0.5).expand({4, 5, 3});    // stride-0 dims
  Tensor offset = base.slice(1, 2, 5).transpose(0, 1);       // nonzero storage offset
  for (const Tensor& t : {permuted, stepped, expanded, offset}) {
    check_all_folds(t);
    check_arg_folds(t);
  }
  // sums of a broadcast input are exact multiples
  Tensor row = make({1, 2, 3}, {1, 3}, DType::Float32);
  check_close(kiln::sum(row.expand({4, 3}), {0}), make({4, 8, 12}, {3}));
  check_close(kiln::sum(row.expand({4, 3})), make({24}, {}));
  check_close(kiln::sum(make({7}, {}).expand({1000, 1000})), make({7e6}, {}));
  // flattened argmax numbers elements in row-major order of the view, not of memory
  Tensor y = make({5, 1, 9, 2, 9, 0}, {2, 3});
  check_close(kiln::argmax(y.t()), flat_index(3));  // y.t() = [[5,2],[1,9],[9,0]]: first 9 at [1,1]
  check_close(kiln::argmin(y.t()), flat_index(5));
}

TEST_CASE("reductions: large inputs through the threaded and column paths") {
  manual_seed(3);
  // rows of a contiguous matrix, columns of it, its transpose, a tall-thin and a short-wide shape, and a
  // strided reduction dim: each lands in a different layout / split
  for (Shape shape : {Shape{512, 700}, Shape{70000, 3}, Shape{3, 70000}, Shape{2, 300, 257}}) {
    Tensor x = kiln::randn(shape);
    for (const Tensor& t : {x, x.transpose(0, -1)}) {
      for (int64_t d = 0; d < t.dim(); ++d) {
        CAPTURE(shape_str(t.sizes()));
        CAPTURE(d);
        check_close(kiln::sum(t, {d}), reference(t, {d}, false, Fold::Sum), 1e-5, 1e-3);
        check_close(kiln::amax(t, {d}), reference(t, {d}, false, Fold::Max), 0, 0);
        check_close(kiln::amin(t, {d}, true), reference(t, {d}, true, Fold::Min), 0, 0);
        check_close(kiln::argmax(t, d), reference(t, {d}, false, Fold::ArgMax), 0, 0);
        check_close(kiln::argmin(t, d), reference(t, {d}, false, Fold::ArgMin), 0, 0);
      }
      check_close(kiln::sum(t), reference(t, {}, false, Fold::Sum), 1e-5, 1e-3);
      check_close(kiln::amax(t), reference(t, {}, false, Fold::Max), 0, 0);
      // argmax over the flattened tensor, compared with the reference's one dim over a flat copy
      Tensor flat = t.contiguous().reshape({-1});
      check_close(kiln::argmax(t), reference(flat, {0}, false, Fold::ArgMax), 0, 0);
      check_close(kiln::argmin(t), reference(flat, {0}, false, Fold::ArgMin), 0, 0);
    }
  }
}

TEST_CASE("reductions: float32 sums stay within 1e-6 of float64") {
  manual_seed(5);
  Tensor x = kiln::rand({int64_t(1) << 24});
  double exact = kiln::sum(x.to(DType::Float64)).item<double>();
  double got = kiln::sum(x).item<double>();
  CHECK(std::fabs(got - exact) <= 1e-6 * std::fabs(exact));
  // the same along the outer dim of a tall matrix (column accumulation) and a strided full sum
  Tensor tall = x.reshape({int64_t(1) << 22, 4});
  auto exact_cols = values(kiln::sum(tall.to(DType::Float64), {0}));
  auto got_cols = values(kiln::sum(tall, {0}));
  for (size_t j = 0; j < 4; ++j) CHECK(std::fabs(got_cols[j] - exact_cols[j]) <= 1e-6 * std::fabs(exact_cols[j]));
  double got_strided = kiln::sum(tall.t()).item<double>();
  CHECK(std::fabs(got_strided - exact) <= 1e-6 * std::fabs(exact));
  check_close(kiln::mean(x), make({exact / double(x.numel())}, {}), 1e-6, 0);
}

TEST_CASE("reductions: result dtypes follow torch") {
  Tensor i32 = make({1, 2, 3, 4}, {2, 2}, DType::Int32);
  Tensor b = make({1, 0, 1, 1}, {2, 2}, DType::Bool);
  CHECK(kiln::sum(i32).dtype() == DType::Int64);
  CHECK(kiln::sum(b).dtype() == DType::Int64);
  CHECK(kiln::prod(i32).dtype() == DType::Int64);
  CHECK(kiln::prod(b).dtype() == DType::Int64);
  CHECK(kiln::amax(i32).dtype() == DType::Int32);
  CHECK(kiln::amax(b).dtype() == DType::Bool);
  CHECK(kiln::sum(i32.to(DType::Float64)).dtype() == DType::Float64);
  CHECK(kiln::sum(i32.to(DType::BFloat16)).dtype() == DType::BFloat16);
  CHECK(kiln::prod(i32.to(DType::Float16), {1}).dtype() == DType::Float16);
  CHECK(kiln::amin(i32.to(DType::BFloat16)).dtype() == DType::BFloat16);
  CHECK(kiln::mean(i32.to(DType::Float16)).dtype() == DType::Float16);
  CHECK(kiln::argmax(b).dtype() == DType::Int64);
  check_close(kiln::sum(b, {0}), make({2, 1}, {2}));
  check_close(kiln::sum(b, {1}, true), make({1, 2}, {2, 1}));
  check_close(kiln::prod(b, {1}), make({0, 1}, {2}));
  check_close(kiln::prod(i32, {0}), make({3, 8}, {2}));
  check_close(kiln::amax(b, {1}), make({1, 1}, {2}));
  check_close(kiln::amin(b, {1}), make({0, 1}, {2}));
  check_close(kiln::argmin(b, 1), make({1, 0}, {2}));
  check_close(kiln::sum(i32.to(DType::BFloat16), {1}), make({3, 7}, {2}));
  check_close(kiln::mean(i32.to(DType::Float16), {0}), make({2, 3}, {2}));
  // int64 sums are exact past float64's 2^53
  Tensor big = kiln::full({3}, int64_t(1) << 60, DType::Int64);
  CHECK(kiln::sum(big).item_double() == double((int64_t(1) << 60) * 3));
  CHECK(kiln::sum(big).data_ptr<int64_t>()[0] == (int64_t(1) << 60) * 3);
  Tensor ar = kiln::arange(100000);
  CHECK(kiln::sum(ar).data_ptr<int64_t>()[0] == int64_t(100000) * 99999 / 2);
  CHECK(kiln::amax(ar).data_ptr<int64_t>()[0] == 99999);
  check_close(kiln::argmax(ar.to(DType::Int32)), flat_index(99999));
  // int32 amax/amin keep extreme values exactly
  Tensor ext = make({-2147483648.0, 2147483647.0, 0}, {3}, DType::Int32);
  CHECK(kiln::amin(ext).data_ptr<int32_t>()[0] == std::numeric_limits<int32_t>::min());
  CHECK(kiln::amax(ext).data_ptr<int32_t>()[0] == std::numeric_limits<int32_t>::max());
}

TEST_CASE("reductions: 0-d tensors") {
  Tensor s = make({2.5}, {});
  CHECK(kiln::sum(s).sizes() == Shape{});
  check_close(kiln::sum(s), s);
  check_close(kiln::sum(s, {0}), s);
  check_close(kiln::sum(s, {-1}, true), s);
  check_close(kiln::amax(s), s);
  check_close(kiln::prod(s), s);
  check_close(kiln::mean(s), s);
  check_close(kiln::argmax(s), flat_index(0));
  check_close(kiln::argmax(s, 0), flat_index(0));
  check_close(kiln::argmin(s, -1, true), flat_index(0));
  auto [v, i] = kiln::max(s, 0);
  check_close(v, s);
  check_close(i, flat_index(0));
  check_close(kiln::logsumexp(s, {}), s);
}

TEST_CASE("reductions: nan propagates and counts as the extreme") {
  Tensor x = make({1, kNaN, 3, 2, 5, 4, kNaN, 0, kNaN}, {3, 3});
  check_close(kiln::amax(x, {1}), make({kNaN, 5, kNaN}, {3}));
  check_close(kiln::amin(x, {0}), make({kNaN, kNaN, kNaN}, {3}));
  check_close(kiln::amin(x, {1}), make({kNaN, 2, kNaN}, {3}));
  check_close(kiln::amax(x), make({kNaN}, {}));
  check_close(kiln::sum(x, {1}), make({kNaN, 11, kNaN}, {3}));
  check_close(kiln::argmax(x, 1), make({1, 1, 0}, {3}));
  check_close(kiln::argmin(x, 1), make({1, 0, 0}, {3}));
  check_close(kiln::argmax(x), flat_index(1));  // the first nan
  check_close(kiln::argmin(x.t()), flat_index(2));  // x.t() flattened: 1, 2, nan, ...
  // a nan after long runs of lanes still wins, and so does the first of several
  std::vector<double> v(1000, 1.0);
  v[700] = kNaN;
  v[900] = kNaN;
  v[10] = 2;
  Tensor long_row = make(v, {1000}, DType::Float32);
  check_close(kiln::argmax(long_row), flat_index(700));
  check_close(kiln::argmin(long_row), flat_index(700));
  check_close(kiln::amax(long_row), make({kNaN}, {}));
  std::vector<double> col_min(10, 1.0);
  col_min[0] = kNaN;  // elements 700 and 900 are both in column 0
  check_close(kiln::amin(long_row.reshape({100, 10}), {0}), make(col_min, {10}));
  check_close(kiln::argmax(long_row.reshape({100, 10}), 0), make({70, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {10}));
}

TEST_CASE("reductions: empty tensors") {
  Tensor e = kiln::zeros({0, 3});
  check_close(kiln::sum(e, {0}), kiln::zeros({3}));
  check_close(kiln::sum(e), make({0}, {}));
  check_close(kiln::prod(e, {0}), kiln::ones({3}));
  CHECK(kiln::sum(e, {1}).sizes() == Shape{0});
  CHECK(kiln::amax(e, {1}).sizes() == Shape{0});
  CHECK(kiln::argmax(e, 1).sizes() == Shape{0});
  CHECK(kiln::sum(e, {0}, true).sizes() == Shape{1, 3});
  CHECK(std::isnan(kiln::mean(e).item<double>()));
  check_close(kiln::mean(e, {0}), make({kNaN, kNaN, kNaN}, {3}));
  check_close(kiln::sum(kiln::zeros({0, 3}, DType::Int32), {0}), make({0, 0, 0}, {3}));
  check_close(kiln::logsumexp(e, {0}), make({-kInf, -kInf, -kInf}, {3}));
}

TEST_CASE("reductions: errors name the op and the facts") {
  Tensor x = kiln::zeros({2, 3});
  check_error([&] { kiln::sum(x, {1, 1}); }, "sum: dim 1 appears multiple times in the list of dims [1,1]");
  check_error([&] { kiln::amax(x, {0, -2}); }, "amax: dim 0 appears multiple times in the list of dims [0,-2]");
  check_error([&] { kiln::prod(x, {2}); }, "prod: dim 2 is out of range for a tensor of rank 2");
  check_error([&] { kiln::argmax(x, -3); }, "argmax: dim -3 is out of range for a tensor of rank 2");
  check_error([&] { kiln::mean(x, {0, 0}); }, "mean: dim 0 appears multiple times");
  check_error([&] { kiln::amax(kiln::zeros({2, 0}), {1}); },
              "amax: cannot reduce over a zero-size dimension: dim 1 of input shape [2,0]");
  check_error([&] { kiln::amin(kiln::zeros({0, 3})); },
              "amin: cannot reduce over a zero-size dimension: dim 0 of input shape [0,3]");
  check_error([&] { kiln::argmin(kiln::zeros({2, 0}), 1); },
              "argmin: cannot reduce over a zero-size dimension: dim 1 of input shape [2,0]");
  check_error([&] { kiln::argmax(kiln::zeros({0})); },
              "argmax: expected reduction dim to be specified for an input with no elements, got shape [0]");
  check_error([&] { kiln::max(kiln::zeros({3, 0})); },
              "max: expected reduction dim to be specified for an input with no elements, got shape [3,0]");
  check_error([&] { kiln::min(kiln::zeros({0})); }, "min: expected reduction dim to be specified");
  check_error([&] { kiln::max(kiln::zeros({0, 2}), 0); }, "amax: cannot reduce over a zero-size dimension");
  check_error([&] { kiln::mean(kiln::arange(4)); },
              "mean: could not infer output dtype. input dtype must be floating point, got int64");
  check_error([&] { kiln::mean(x.to(DType::Bool)); }, "got bool");
  check_error([&] { kiln::var(kiln::arange(4)); }, "var: std and var only support floating point dtypes, got int64");
  check_error([&] { kiln::std(kiln::arange(4).to(DType::Int32)); }, "std: std and var only support floating point dtypes, got int32");
  check_error([&] { kiln::logsumexp(x, {3}); }, "logsumexp: dim 3 is out of range");
}

TEST_CASE("reductions: var and std against the reference and torch") {
  manual_seed(9);
  Tensor x = kiln::randn({4, 5, 6}, DType::Float64);
  for (const Shape& dims : kDims3) {
    for (int64_t correction : {0, 1, 2}) {
      for (bool keepdim : {false, true}) {
        CAPTURE(shape_str(dims));
        CAPTURE(correction);
        Tensor mu = reference(x, dims, true, Fold::Mean);
        Tensor dev = (x - mu) * (x - mu);
        double n = double(x.numel()) / double(mu.numel());
        Tensor expect = reference(dev, dims, keepdim, Fold::Sum) / (n - double(correction));
        check_close(kiln::var(x, dims, correction, keepdim), expect, 1e-10, 1e-12);
        check_close(kiln::std(x, dims, correction, keepdim), kiln::sqrt(expect), 1e-10, 1e-12);
      }
    }
  }
  // strided float32 input, and the Tensor methods
  Tensor t = x.to(DType::Float32).permute({2, 0, 1}).slice(0, 0, 6, 2);
  check_close(t.var({1}), kiln::var(t.to(DType::Float64), {1}), 1e-5, 1e-6);
  check_close(t.std(), kiln::std(t.to(DType::Float64)), 1e-5, 1e-6);
  // one element with correction 1 divides by zero: nan, as torch
  CHECK(std::isnan(kiln::var(make({3}, {1})).item<double>()));
  CHECK(std::isnan(kiln::var(kiln::zeros({0})).item<double>()));
  // torch 1.13: x = (arange(24).reshape(2,3,4) * 0.37 - 3.1).sin() * 4
  Tensor tx = kiln::sin(kiln::arange(24).to(DType::Float64).reshape({2, 3, 4}) * 0.37 - 3.1) * 4;
  check_close(kiln::var(tx, {0, 2}, 1), make({9.918779892059932, 3.3050024057328384, 8.717670568154585}, {3}), 1e-12, 0);
  check_close(kiln::std(tx, {1}, 0, true).flatten(),
              make({1.7200261682829345, 1.923418602052226, 2.457872213831036, 2.9594725546818035,
                    3.1330176777931347, 3.2497824781773046, 3.052523475995088, 2.595477754789846},
                   {8}),
              1e-12, 0);
  CHECK(kiln::std(tx, {1}, 0, true).sizes() == Shape{2, 1, 4});
  check_close(kiln::prod(tx, {1}).flatten(),
              make({-0.37089746427692033, 5.539449384800471, 19.619447322417674, 23.540660813528827,
                    -18.041697366939488, 3.064148905458739, 21.496999769386065, 22.185642628169468},
                   {8}),
              1e-12, 0);
  check_close(kiln::argmax(tx, 1).flatten(), make({0, 2, 2, 2, 0, 0, 0, 0}, {8}), 0, 0);
  check_close(kiln::argmin(tx.transpose(0, 2), 0).flatten(), make({3, 3, 0, 3, 0, 1}, {6}), 0, 0);
  check_close(kiln::argmax(tx.transpose(0, 2)), flat_index(7));
  check_close(kiln::argmin(tx.transpose(1, 2)), flat_index(17));
}

TEST_CASE("reductions: logsumexp is stable and handles infinities") {
  Tensor tx = kiln::sin(kiln::arange(24).to(DType::Float64).reshape({2, 3, 4}) * 0.37 - 3.1) * 4;
  // torch 1.13
  check_close(kiln::logsumexp(tx, {2}),
              make({0.12597722596296734, -1.4758728060128257, 3.682130926702495, 4.992604137880407,
                    1.5304281069567618, -2.17787650315679},
                   {2, 3}),
              1e-12, 0);
  check_close(kiln::logsumexp(tx, {0, 1}),
              make({3.9909743823462143, 4.0268100118622225, 3.755686199549681, 3.6937162229108886}, {4}), 1e-12, 0);
  CHECK(kiln::logsumexp(tx, {0, 1}, true).sizes() == Shape{1, 1, 4});
  check_close(kiln::logsumexp(tx, {}), make({std::log(values(kiln::exp(tx).sum())[0])}, {}), 1e-12, 0);
  // large values would overflow exp without the shift
  Tensor big = make({1000, 1000, -1000}, {3}, DType::Float32);
  check_close(kiln::logsumexp(big, {0}), make({1000 + std::log(2.0)}, {}), 1e-6, 0);
  // +inf anywhere gives +inf, an all -inf slice gives -inf, nan stays nan
  Tensor inf = make({1, kInf, -kInf, -kInf, 2, kNaN}, {3, 2});
  check_close(kiln::logsumexp(inf, {1}), make({kInf, -kInf, kNaN}, {3}));
  check_close(kiln::logsumexp(inf, {1}, true), make({kInf, -kInf, kNaN}, {3, 1}));
  // integer inputs compute in float32 (torch)
  Tensor li = kiln::logsumexp(make({1, 2}, {2}, DType::Int64), {0});
  CHECK(li.dtype() == DType::Float32);
  check_close(li, make({2 + std::log1p(std::exp(-1.0))}, {}), 1e-6, 0);
  // strided input
  check_close(kiln::logsumexp(tx.transpose(0, 2), {1}), kiln::logsumexp(tx.transpose(0, 2).contiguous(), {1}), 1e-12, 0);
}

TEST_CASE("reductions: Tensor methods forward to the free functions") {
  Tensor x = make({3, 1, 4, 1, 5, 9}, {2, 3});
  check_close(x.sum(), make({23}, {}));
  check_close(x.sum(1), make({8, 15}, {2}));
  check_close(x.mean(0, true), make({2, 3, 6.5}, {1, 3}));
  check_close(x.max(), make({9}, {}));
  check_close(x.min(), make({1}, {}));
  check_close(x.argmax(), flat_index(5));
  check_close(x.argmin(1, true), make({1, 0}, {2, 1}));
  check_close(x.prod(1), make({12, 45}, {2}));
  auto [v, i] = x.max(0);
  check_close(v, make({3, 5, 9}, {3}));
  check_close(i, make({0, 1, 1}, {3}));
  // ties go to the first index
  auto [mv, mi] = make({2, 7, 7, 1, 1, 1}, {2, 3}).min(1);
  check_close(mv, make({2, 1}, {2}));
  check_close(mi, make({0, 0}, {2}));
  check_close(kiln::argmax(make({7, 7, 7}, {3})), flat_index(0));
}
