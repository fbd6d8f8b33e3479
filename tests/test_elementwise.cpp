// Every elementwise row of core/ops.def against a float64 reference computed here with <cmath>, over the
// layouts the strided loop tells apart (contiguous, transposed, stepped slices, broadcast, 0-d, size-1
// dims, large enough for the OpenMP path), special values, torch.result_type promotion and in-place ops.
// The rows are enumerated with the ops.def X-macro; each row's reference, sampling domain and torch dtypes
// are its tests/op_cases.cpp entry.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "core/op.h"
#include "eager/cpu/isa_kernels.h"
#include "op_cases.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {

using UnaryFn = Tensor (*)(const Tensor&);
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using BinaryTS = Tensor (*)(const Tensor&, Scalar);
using BinaryST = Tensor (*)(Scalar, const Tensor&);

struct UnaryRow {
  OpId id;
  std::string_view name;
  DTypeRule rule;
  UnaryFn fn;
};
struct BinaryRow {
  OpId id;
  std::string_view name;
  DTypeRule rule;
  BinaryFn fn;
  BinaryTS fn_ts;
  BinaryST fn_st;
};

const std::vector<UnaryRow> kUnaryRows = {
#define KILN_UNARY(Id, name, rule, expr) {OpId::Id, #name, DTypeRule::rule, static_cast<UnaryFn>(&kiln::name)},
#include "core/ops.def"
};
const std::vector<BinaryRow> kBinaryRows = {
#define KILN_BINARY(Id, name, rule, expr)                                                          \
  {OpId::Id, #name, DTypeRule::rule, static_cast<BinaryFn>(&kiln::name), static_cast<BinaryTS>(&kiln::name), \
   static_cast<BinaryST>(&kiln::name)},
#include "core/ops.def"
};

// ---- the float64 references (tests/op_cases.cpp), by row name ----
using Ref1 = double (*)(double);
using Ref2 = double (*)(double, double);
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::map<std::string_view, Ref1> kUnaryRef = [] {
  std::map<std::string_view, Ref1> m;
  for (const UnaryRow& r : kUnaryRows) m[r.name] = test::elementwise_case(r.id).ref1;
  return m;
}();
const std::map<std::string_view, Ref2> kBinaryRef = [] {
  std::map<std::string_view, Ref2> m;
  for (const BinaryRow& r : kBinaryRows) m[r.name] = test::elementwise_case(r.id).ref2;
  return m;
}();

test::ElementwiseCase case_named(std::string_view name) {
  for (const UnaryRow& r : kUnaryRows)
    if (r.name == name) return test::elementwise_case(r.id);
  for (const BinaryRow& r : kBinaryRows)
    if (r.name == name) return test::elementwise_case(r.id);
  FAIL("no ops.def row named " << name);
  return {};
}

Ref1 unary_ref(std::string_view name) {
  auto it = kUnaryRef.find(name);
  REQUIRE_MESSAGE(it != kUnaryRef.end(), "ops.def row '" << name << "' has no reference in test_elementwise.cpp");
  return it->second;
}
Ref2 binary_ref(std::string_view name) {
  auto it = kBinaryRef.find(name);
  REQUIRE_MESSAGE(it != kBinaryRef.end(), "ops.def row '" << name << "' has no reference in test_elementwise.cpp");
  return it->second;
}

// A tensor of `shape` holding vals (row-major), including 0-d.
Tensor make(const std::vector<double>& vals, const Shape& shape, DType dt) {
  if (shape.empty()) return kiln::tensor(vals, {1}, dt).reshape({});
  return kiln::tensor(vals, shape, dt);
}

// Inputs inside each op's domain, so the comparison is against numbers, not only against NaN.
std::vector<double> sample(std::string_view op, int64_t n, uint32_t seed, bool rhs = false) {
  std::mt19937 gen(seed);
  std::vector<double> v(static_cast<size_t>(n));
  test::ElementwiseCase c = case_named(op);
  bool positive = c.positive && !rhs;
  bool quantized = c.quantized;
  std::uniform_real_distribution<double> u(positive ? 0.05 : -4.0, 4.0);
  std::uniform_int_distribution<int> q(-4, 4);
  for (auto& x : v) x = quantized ? 0.5 * q(gen) : u(gen);  // ties and zeros for comparisons
  return v;
}

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType t) {
  switch (t) {
    case DType::Float64: return {1e-12, 1e-14};
    case DType::Float32: return {1e-5, 1e-6};
    case DType::BFloat16: return {1.0 / 128, 1e-5};   // one bf16 ulp: the kernel rounds twice (f32, then bf16)
    case DType::Float16: return {1.0 / 1024, 1e-7};   // one f16 ulp
    default: return {0, 0};
  }
}

DType unary_result(DTypeRule rule, DType in) {
  if (rule == DTypeRule::Logical) return DType::Bool;
  if (rule == DTypeRule::Float && !is_floating(in)) return DType::Float32;
  return in;
}
DType binary_result(DTypeRule rule, DType promoted) {
  if (rule == DTypeRule::Compare || rule == DTypeRule::Logical) return DType::Bool;
  if (rule == DTypeRule::Float && !is_floating(promoted)) return DType::Float32;
  return promoted;
}

void check_unary(const UnaryRow& row, const Tensor& x, const std::string& what) {
  CAPTURE(row.name);
  CAPTURE(what);
  CAPTURE(dtype_name(x.dtype()));
  Ref1 ref = unary_ref(row.name);
  std::vector<double> e = values(x);
  for (double& v : e) v = ref(v);
  DType out_t = unary_result(row.rule, x.dtype());
  Tensor y = row.fn(x);
  CHECK(y.dtype() == out_t);
  Tol t = tol_for(out_t);
  check_close(y, make(e, x.sizes(), out_t), t.rtol, t.atol);
}

void check_binary(const BinaryRow& row, const Tensor& a, const Tensor& b, const std::string& what) {
  CAPTURE(row.name);
  CAPTURE(what);
  CAPTURE(dtype_name(a.dtype()));
  Ref2 ref = binary_ref(row.name);
  Shape shape = broadcast_shapes("test", a.sizes(), b.sizes());
  std::vector<double> av = values(a.expand(shape)), bv = values(b.expand(shape)), e(av.size());
  for (size_t i = 0; i < e.size(); ++i) e[i] = ref(av[i], bv[i]);
  DType out_t = binary_result(row.rule, result_type(a, b));
  Tensor y = row.fn(a, b);
  CHECK(y.dtype() == out_t);
  Tol t = tol_for(out_t);
  check_close(y, make(e, shape, out_t), t.rtol, t.atol);
}

struct Case {
  std::string what;
  Tensor x;
};
// Every layout the strided loop treats differently; large ones split across OpenMP threads.
std::vector<Case> unary_layouts(std::string_view op, DType dt) {
  auto m = [&](const Shape& s, uint32_t seed) { return make(sample(op, numel_of(s), seed), s, dt); };
  return {
      {"contiguous [37,41]", m({37, 41}, 1)},
      {"transposed [41,37].t()", m({41, 37}, 2).t()},
      {"stepped slice [80,90][3::2, 1::3]", m({80, 90}, 3).slice(0, 3, std::nullopt, 2).slice(1, 1, std::nullopt, 3)},
      {"0-d", m({}, 4)},
      {"size-1 dims [1,5,1]", m({1, 5, 1}, 5)},
      {"expanded [1,7] -> [5,7]", m({1, 7}, 6).expand({5, 7})},
      {"large contiguous [300,401]", m({300, 401}, 7)},
      {"large transposed [401,300].t()", m({401, 300}, 8).t()},
      {"large stepped [700,401][::2]", m({700, 401}, 9).slice(0, 0, std::nullopt, 2)},
      {"empty [0,3]", m({0, 3}, 10)},
  };
}

struct Pair {
  std::string what;
  Tensor a, b;
};
std::vector<Pair> binary_layouts(std::string_view op, DType dt) {
  auto ma = [&](const Shape& s, uint32_t seed) { return make(sample(op, numel_of(s), seed), s, dt); };
  auto mb = [&](const Shape& s, uint32_t seed) { return make(sample(op, numel_of(s), seed, true), s, dt); };
  return {
      {"contiguous [37,41] x [37,41]", ma({37, 41}, 11), mb({37, 41}, 12)},
      {"transposed x contiguous", ma({41, 37}, 13).t(), mb({37, 41}, 14)},
      {"stepped slice x transposed", ma({80, 90}, 15).slice(0, 0, 74, 2).slice(1, 2, 84, 2), mb({41, 37}, 16).t()},
      {"broadcast [5,1,7] x [3,1]", ma({5, 1, 7}, 17), mb({3, 1}, 18)},
      {"ranks [4,6] x [6]", ma({4, 6}, 19), mb({6}, 20)},
      {"ranks [6] x [4,6]", ma({6}, 21), mb({4, 6}, 22)},
      {"tensor x 0-d", ma({4, 6}, 23), mb({}, 24)},
      {"0-d x tensor", ma({}, 25), mb({4, 6}, 26)},
      {"0-d x 0-d", ma({}, 27), mb({}, 28)},
      {"size-1 dims [1,5,1] x [1,1,1]", ma({1, 5, 1}, 29), mb({1, 1, 1}, 30)},
      {"expanded both", ma({1, 7}, 31).expand({4, 7}), mb({4, 1}, 32).expand({4, 7})},
      {"large [300,401] x [401]", ma({300, 401}, 33), mb({401}, 34)},
      {"large [300,1] x [300,401]", ma({300, 1}, 35), mb({300, 401}, 36)},
      {"large transposed x contiguous", ma({401, 300}, 37).t(), mb({300, 401}, 38)},
      {"empty [0,3] x [3]", ma({0, 3}, 39), mb({3}, 40)},
  };
}

// Values where IEEE and libm corner cases live: NaN, infinities, signed zeros, denormals, huge magnitudes.
std::vector<double> specials(DType dt) {
  bool f32 = dt == DType::Float32;
  double tiny = f32 ? double(std::numeric_limits<float>::denorm_min()) : std::numeric_limits<double>::denorm_min();
  double small_normal = f32 ? double(std::numeric_limits<float>::min()) : std::numeric_limits<double>::min();
  double huge = f32 ? 3.0e38 : 1.0e300;
  double inf = std::numeric_limits<double>::infinity();
  return {kNaN, inf, -inf, 0.0, -0.0, tiny, -tiny, 3 * tiny, small_normal, -small_normal, huge, -huge,
          1e30, -1e30, 88.5, -88.5, 710.0, -710.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-3};
}

}  // namespace

TEST_CASE("elementwise: KILN_CPU_ISA picks the kernel build the suite runs on") {
  // Run the suite once per value (baseline, avx2, avx512) to cover every build of the kernels.
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  const char* cap = std::getenv("KILN_CPU_ISA");
  std::string_view want = avx512 ? "avx512" : avx2 ? "avx2" : "baseline";
  if (cap && std::string_view(cap) == "baseline") want = "baseline";
  if (cap && std::string_view(cap) == "avx2") want = avx2 ? "avx2" : "baseline";
  std::string_view chosen = cpu::isa_kernels().name;
  MESSAGE("elementwise kernels: " << chosen);
  CHECK(chosen == want);
}

TEST_CASE("elementwise: every ops.def row has a reference") {
  for (const UnaryRow& r : kUnaryRows) CHECK_MESSAGE(kUnaryRef.count(r.name) == 1, "no reference for " << r.name);
  for (const BinaryRow& r : kBinaryRows) CHECK_MESSAGE(kBinaryRef.count(r.name) == 1, "no reference for " << r.name);
  CHECK(kUnaryRows.size() == kUnaryRef.size());
  CHECK(kBinaryRows.size() == kBinaryRef.size());
}

TEST_CASE("elementwise: unary rows on float32 and float64 over every layout") {
  for (DType dt : {DType::Float32, DType::Float64})
    for (const UnaryRow& row : kUnaryRows)
      for (const Case& c : unary_layouts(row.name, dt)) check_unary(row, c.x, c.what);
}

TEST_CASE("elementwise: unary rows on special values") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = make(specials(dt), {int64_t(specials(dt).size())}, dt);
    for (const UnaryRow& row : kUnaryRows) check_unary(row, x, "specials");
  }
}

TEST_CASE("elementwise: signed zeros") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor z = make({0.0, -0.0}, {2}, dt);
    auto n = values(kiln::neg(z)), a = values(kiln::abs(z)), r = values(kiln::relu(z)), s = values(kiln::sign(z));
    CHECK(std::signbit(n[0]));
    CHECK(!std::signbit(n[1]));
    CHECK(!std::signbit(a[1]));  // abs(-0.0) is +0.0
    CHECK(std::signbit(r[1]));   // relu(-0.0) stays -0.0, as torch
    CHECK(std::signbit(s[1]));
    auto rc = values(kiln::reciprocal(z));
    CHECK(rc[0] == INFINITY);
    CHECK(rc[1] == -INFINITY);
  }
}

TEST_CASE("elementwise: unary rows on bfloat16 and float16 return the half type") {
  for (DType dt : {DType::BFloat16, DType::Float16})
    for (const UnaryRow& row : kUnaryRows) {
      Tensor x = make(sample(row.name, 6 * 7, 50), {6, 7}, dt);
      check_unary(row, x, "contiguous");
      check_unary(row, x.t(), "transposed");
    }
}

TEST_CASE("elementwise: unary rows on integer and bool tensors") {
  for (DType dt : {DType::Int32, DType::Int64, DType::Bool})
    for (const UnaryRow& row : kUnaryRows) {
      if (dt == DType::Bool && row.name == "neg") continue;  // an error, checked below
      std::vector<double> v(64);
      for (size_t i = 0; i < v.size(); ++i) v[i] = dt == DType::Bool ? double(i % 3 == 0) : double(int(i) - 20);
      if (row.name == "log" || row.name == "sqrt" || row.name == "rsqrt" || row.name == "log1p")
        for (double& x : v) x = std::fabs(x);
      Tensor x = make(v, {8, 8}, dt);
      check_unary(row, x, "contiguous");
      check_unary(row, x.t(), "transposed");
    }
  check_error([] { kiln::neg(kiln::tensor({1.0, 0.0}, {}, DType::Bool)); },
              "neg: negation of a bool tensor is not supported");
}

TEST_CASE("elementwise: binary rows on float32 and float64 over every layout") {
  for (DType dt : {DType::Float32, DType::Float64})
    for (const BinaryRow& row : kBinaryRows)
      for (const Pair& p : binary_layouts(row.name, dt)) check_binary(row, p.a, p.b, p.what);
}

TEST_CASE("elementwise: binary rows on special values, every pair") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<double> s = specials(dt);
    int64_t n = int64_t(s.size());
    Tensor a = make(s, {n, 1}, dt), b = make(s, {1, n}, dt);
    for (const BinaryRow& row : kBinaryRows) check_binary(row, a, b, "specials [n,1] x [1,n]");
  }
}

TEST_CASE("elementwise: binary rows with a C++ scalar on either side") {
  for (DType dt : {DType::Float32, DType::Float64})
    for (const BinaryRow& row : kBinaryRows) {
      Ref2 ref = binary_ref(row.name);
      Tensor x = make(sample(row.name, 5 * 9, 60), {5, 9}, dt).t();
      std::vector<double> xv = values(x);
      DType out_t = binary_result(row.rule, dt);
      Tol t = tol_for(out_t);
      for (Scalar s : {Scalar(2.5), Scalar(-1.5), Scalar(2), Scalar(0), Scalar(true)}) {
        CAPTURE(row.name);
        CAPTURE(s.v);
        if (row.name == "sub" && s.type == DType::Bool) {  // refused, as torch
          CHECK_THROWS_AS(row.fn_ts(x, s), Error);
          CHECK_THROWS_AS(row.fn_st(s, x), Error);
          continue;
        }
        std::vector<double> e1(xv.size()), e2(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) {
          e1[i] = ref(xv[i], s.v);
          e2[i] = ref(s.v, xv[i]);
        }
        Tensor y1 = row.fn_ts(x, s), y2 = row.fn_st(s, x);
        CHECK(y1.dtype() == out_t);  // a C++ scalar never widens a float tensor
        CHECK(y2.dtype() == out_t);
        check_close(y1, make(e1, x.sizes(), out_t), t.rtol, t.atol);
        check_close(y2, make(e2, x.sizes(), out_t), t.rtol, t.atol);
      }
    }
}

TEST_CASE("elementwise: binary rows on bfloat16 and float16 return the half type") {
  for (DType dt : {DType::BFloat16, DType::Float16})
    for (const BinaryRow& row : kBinaryRows) {
      Tensor a = make(sample(row.name, 6 * 7, 70), {6, 7}, dt);
      Tensor b = make(sample(row.name, 7, 71, true), {7}, dt);
      check_binary(row, a, b, "broadcast [6,7] x [7]");
      check_binary(row, a.t(), a.t(), "transposed, same tensor");
    }
}

TEST_CASE("elementwise: binary rows on integer tensors are exact") {
  for (DType dt : {DType::Int32, DType::Int64})
    for (const BinaryRow& row : kBinaryRows) {
      std::mt19937 gen(80);
      std::uniform_int_distribution<int> u(-20, 20), base(-6, 6), expo(0, 6);
      std::vector<double> av(12 * 9), bv(9);
      for (double& v : av) v = row.name == "pow" ? base(gen) : u(gen);
      for (double& v : bv) v = row.name == "pow" ? expo(gen) : u(gen);
      if (row.name == "floor_divide") {  // an integer division by zero raises (tests/test_composites.cpp)
        for (double& v : av) v = v == 0 ? 7 : v;
        for (double& v : bv) v = v == 0 ? 7 : v;
      }
      Tensor a = make(av, {12, 9}, dt), b = make(bv, {9}, dt);
      check_binary(row, a, b, "[12,9] x [9]");
      check_binary(row, a.t(), a.t(), "transposed, same tensor");
      Tensor big = make(std::vector<double>(300 * 400, 3.0), {300, 400}, dt);
      check_binary(row, big, b.slice(0, 0, 1).expand({400}), "large, broadcast");
    }
}

TEST_CASE("elementwise: bool tensors") {
  Tensor t = kiln::tensor({1.0, 1.0, 0.0, 0.0}, {}, DType::Bool);
  Tensor f = kiln::tensor({1.0, 0.0, 1.0, 0.0}, {}, DType::Bool);
  Tensor s = kiln::add(t, f);
  CHECK(s.dtype() == DType::Bool);  // True + True is True, as torch
  CHECK(values(s) == std::vector<double>{1, 1, 1, 0});
  CHECK(values(kiln::mul(t, f)) == std::vector<double>{1, 0, 0, 0});
  CHECK(kiln::div(t, f).dtype() == DType::Float32);
  CHECK(values(kiln::logical_and(t, f)) == std::vector<double>{1, 0, 0, 0});
  CHECK(values(kiln::maximum(t, f)) == std::vector<double>{1, 1, 1, 0});
  CHECK(kiln::add(t, 1).dtype() == DType::Int64);
  CHECK(kiln::add(t, 1.5).dtype() == DType::Float32);
  // torch refuses sub when either operand is bool, tensor or scalar
  check_error([&] { kiln::sub(t, f); }, "sub: subtraction with a bool tensor is not supported");
  check_error([&] { kiln::sub(kiln::arange(4), t); }, "sub: subtraction with a bool tensor is not supported");
  check_error([&] { kiln::sub(kiln::arange(4), true); }, "sub: subtraction with a bool tensor is not supported");
  check_error([&] { kiln::sub(t, 1); }, "sub: subtraction with a bool tensor is not supported");
}

TEST_CASE("elementwise: casts to and from bool over runs longer than a vector") {
  // 43 values so that the vectorised body of the byte-wise bool loops and their tails both run.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> pattern{0.0, -0.0, 0.5, -2.0, nan, 1e-300, inf, 3.0, 0.0};
  std::vector<double> v;
  for (int i = 0; i < 43; ++i) v.push_back(pattern[size_t(i) % pattern.size()]);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64}) {
    CAPTURE(dtype_name(dt));
    std::vector<double> src = v;
    if (dt == DType::Int32 || dt == DType::Int64)
      for (double& x : src) x = std::isfinite(x) ? std::trunc(x) : 7.0;
    Tensor x = kiln::tensor(src, {}, dt);
    std::vector<double> expect;  // torch: nonzero (NaN included) is True; 1e-300 is 0 once stored as a float
    for (double e : values(x)) expect.push_back(e != 0.0 || std::isnan(e) ? 1.0 : 0.0);
    Tensor b = x.to(DType::Bool);
    CHECK(values(b) == expect);
    CHECK(values(b.to(dt)) == expect);
  }
}

TEST_CASE("elementwise: integer pow and division follow torch") {
  Tensor b = kiln::tensor(std::vector<int64_t>{2, 0, 1, -1, -1, 3, -2});
  Tensor e = kiln::tensor(std::vector<int64_t>{-1, -1, -2, -3, -2, 3, 5});
  // negative exponents: 1 and -1 stay exact, every other base gives 0 (torch's integer pow)
  CHECK(values(kiln::pow(b, e)) == std::vector<double>{0, 0, 1, -1, 1, 27, -32});
  Tensor big = kiln::tensor(std::vector<int64_t>{3});
  CHECK(kiln::pow(big, 39).item<int64_t>() == 4052555153018976267LL);  // exact past 2^53
  Tensor q = kiln::div(kiln::tensor(std::vector<int64_t>{1, -1, 0, 7}), kiln::tensor(std::vector<int64_t>{0, 0, 0, 2}));
  CHECK(q.dtype() == DType::Float32);
  auto qv = values(q);
  CHECK(qv[0] == INFINITY);
  CHECK(qv[1] == -INFINITY);
  CHECK(std::isnan(qv[2]));
  CHECK(qv[3] == 3.5);
}

TEST_CASE("elementwise: broadcast errors carry both shapes") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  check_error([&] { kiln::add(a, b); }, "add: shapes [2,3] and [4] cannot be broadcast");
  check_error([&] { kiln::mul(zeros({2, 1, 3}), zeros({4, 2})); }, "mul: shapes [2,1,3] and [4,2] cannot be broadcast");
  check_error([&] { kiln::eq(a, zeros({3, 2})); }, "eq: shapes [2,3] and [3,2] cannot be broadcast");
}

TEST_CASE("elementwise: operators forward to the ops") {
  Tensor a = kiln::tensor({1.0, 2.0, 3.0}), b = kiln::tensor({3.0, 2.0, 1.0});
  CHECK(values(a + b) == std::vector<double>{4, 4, 4});
  CHECK(values(a - 1) == std::vector<double>{0, 1, 2});
  CHECK(values(2 * a) == std::vector<double>{2, 4, 6});
  CHECK(values(6 / a) == std::vector<double>{6, 3, 2});
  CHECK(values(a < b) == std::vector<double>{1, 0, 0});
  CHECK(values(a == 2) == std::vector<double>{0, 1, 0});
  CHECK(values(-a) == std::vector<double>{-1, -2, -3});
  CHECK(values(!(a > 1)) == std::vector<double>{1, 0, 0});
  CHECK(values(kiln::where(a > 1, a, 0.0)) == std::vector<double>{0, 2, 3});
  CHECK(values(kiln::clamp(a, 1.5, 2.5)) == std::vector<double>{1.5, 2, 2.5});
  CHECK(values(kiln::square(a)) == std::vector<double>{1, 4, 9});
  check_close(kiln::gelu(a, "tanh"), kiln::gelu_tanh(a));
  check_error([&] { kiln::gelu(a, "fast"); }, "gelu: approximate must be 'none' or 'tanh', got 'fast'");
}

// ---- type promotion, as torch.result_type ----
namespace {

DType code_dtype(char c) {
  switch (c) {
    case 'b': return DType::Bool;
    case 'i': return DType::Int32;
    case 'l': return DType::Int64;
    case 'B': return DType::BFloat16;
    case 'h': return DType::Float16;
    case 'f': return DType::Float32;
    default: return DType::Float64;
  }
}
const DType kAllDTypes[] = {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16,
                            DType::Float16, DType::Float32, DType::Float64};

// Each row's codes are its tests/op_cases.cpp entry, generated with torch 1.13 (/usr/bin/python3): the result dtype code (b i l B h f d, x = torch
// raises) of tensor∘tensor, tensor∘0-d, 0-d∘tensor, 0-d∘0-d (49 = lhs dtype major, order bool int32 int64
// bf16 f16 f32 f64), then tensor∘scalar and scalar∘tensor (7 dtypes × bool, int, float scalar).
struct PromotionRow {
  const char* op;
  const char *tt, *t0, *zt, *zz, *ts, *st;
};
const std::vector<PromotionRow> kPromotion = [] {
  std::vector<PromotionRow> rows;
  for (const BinaryRow& r : kBinaryRows) {
    test::ElementwiseCase c = test::elementwise_case(r.id);
    rows.push_back({r.name.data(), c.tt, c.t0, c.zt, c.zz, c.ts, c.st});
  }
  return rows;
}();

// torch 1.13 per input dtype (same order). Its 'x' cells are missing CPU kernels, not type rules; kiln's
// answer there follows the ops.def rule: float16 stays float16, ints go to float32 for Float rows, and
// bool is kept by abs/relu. Only neg(bool) is an error in both.
struct UnaryPromotionRow {
  const char* op;
  const char* torch;
};
const std::vector<UnaryPromotionRow> kUnaryPromotion = [] {
  std::vector<UnaryPromotionRow> rows;
  for (const UnaryRow& r : kUnaryRows) rows.push_back({r.name.data(), test::elementwise_case(r.id).torch_unary});
  return rows;
}();

Tensor operand(DType d, bool zero_dim) { return zero_dim ? kiln::ones({}, d) : kiln::ones({2}, d); }

}  // namespace

TEST_CASE("elementwise: binary result dtypes match torch.result_type for every dtype pair") {
  for (const BinaryRow& row : kBinaryRows) {
    const PromotionRow* pr = nullptr;
    for (const PromotionRow& p : kPromotion)
      if (row.name == p.op) pr = &p;
    REQUIRE_MESSAGE(pr != nullptr, "no torch promotion row for " << row.name);
    struct Shape2 {
      const char* codes;
      bool za, zb;
    };
    for (Shape2 s : {Shape2{pr->tt, false, false}, Shape2{pr->t0, false, true}, Shape2{pr->zt, true, false},
                     Shape2{pr->zz, true, true}})
      for (int i = 0; i < 7; ++i)
        for (int j = 0; j < 7; ++j) {
          char c = s.codes[i * 7 + j];
          CAPTURE(row.name);
          CAPTURE(dtype_name(kAllDTypes[i]));
          CAPTURE(dtype_name(kAllDTypes[j]));
          CAPTURE(s.za);
          CAPTURE(s.zb);
          Tensor a = operand(kAllDTypes[i], s.za), b = operand(kAllDTypes[j], s.zb);
          if (c == 'x') {
            if (row.name == "sub" || row.name == "floor_divide") CHECK_THROWS_AS(row.fn(a, b), Error);
            continue;  // bool ** bool has no torch kernel; kiln computes it
          }
          CHECK(row.fn(a, b).dtype() == code_dtype(c));
          if (row.rule == DTypeRule::Promote && row.name != "pow") CHECK(result_type(a, b) == code_dtype(c));
        }
    const Scalar scalars[] = {Scalar(true), Scalar(1), Scalar(1.0)};
    for (int i = 0; i < 7; ++i)
      for (int k = 0; k < 3; ++k) {
        CAPTURE(row.name);
        CAPTURE(dtype_name(kAllDTypes[i]));
        CAPTURE(k);
        Tensor a = operand(kAllDTypes[i], false);
        char c1 = pr->ts[i * 3 + k], c2 = pr->st[i * 3 + k];
        // maximum/minimum/logical_* have no scalar overload in torch; kiln's follow the same promotion as add
        bool refused = row.name == "sub" || row.name == "floor_divide";  // as torch
        if (c1 == 'x' && !refused && row.name != "pow") c1 = row.rule == DTypeRule::Logical ? 'b' : kPromotion[0].ts[i * 3 + k];
        if (c2 == 'x' && !refused && row.name != "pow") c2 = row.rule == DTypeRule::Logical ? 'b' : kPromotion[0].st[i * 3 + k];
        if (c1 == 'x') {
          if (refused) CHECK_THROWS_AS(row.fn_ts(a, scalars[k]), Error);
        } else {
          CHECK(row.fn_ts(a, scalars[k]).dtype() == code_dtype(c1));
        }
        if (c2 == 'x') {
          if (refused) CHECK_THROWS_AS(row.fn_st(scalars[k], a), Error);
        } else {
          CHECK(row.fn_st(scalars[k], a).dtype() == code_dtype(c2));
        }
      }
  }
}

TEST_CASE("elementwise: unary result dtypes match torch") {
  for (const UnaryRow& row : kUnaryRows) {
    const UnaryPromotionRow* pr = nullptr;
    for (const UnaryPromotionRow& p : kUnaryPromotion)
      if (row.name == p.op) pr = &p;
    REQUIRE_MESSAGE(pr != nullptr, "no torch promotion row for " << row.name);
    for (int i = 0; i < 7; ++i) {
      CAPTURE(row.name);
      CAPTURE(dtype_name(kAllDTypes[i]));
      Tensor x = operand(kAllDTypes[i], false);
      if (row.name == "neg" && kAllDTypes[i] == DType::Bool) {
        CHECK_THROWS_AS(row.fn(x), Error);
        continue;
      }
      DType want = pr->torch[i] == 'x' ? unary_result(row.rule, kAllDTypes[i]) : code_dtype(pr->torch[i]);
      CHECK(row.fn(x).dtype() == want);
    }
  }
}

TEST_CASE("elementwise: named promotion cases") {
  Tensor i64 = kiln::arange(3), i32 = i64.to(DType::Int32), f32 = zeros({3}), f64 = zeros({3}, DType::Float64);
  CHECK(kiln::add(i64, 2.5).dtype() == DType::Float32);                            // int tensor + float scalar
  CHECK(kiln::add(i32, i64).dtype() == DType::Int64);                              // int32 + int64 tensors
  CHECK(kiln::add(f32, kiln::zeros({}, DType::Float64)).dtype() == DType::Float32);  // 0-d does not widen
  CHECK(kiln::add(i64, kiln::zeros({}, DType::Float64)).dtype() == DType::Float64);  // ... unless of a higher kind
  CHECK(kiln::add(f32, f64).dtype() == DType::Float64);
  CHECK(kiln::add(ones({2}, DType::Bool), ones({2}, DType::Bool)).dtype() == DType::Bool);
  CHECK(kiln::div(i64, i64).dtype() == DType::Float32);  // true division
  CHECK(kiln::div(i32, 2).dtype() == DType::Float32);
  CHECK(kiln::lt(f64, 1).dtype() == DType::Bool);
  CHECK(kiln::add(ones({2}, DType::BFloat16), ones({2}, DType::Float16)).dtype() == DType::Float32);
  CHECK(kiln::mul(ones({2}, DType::Float16), 3.5).dtype() == DType::Float16);
  CHECK(kiln::add(ones({2}, DType::Float16), ones({2}, DType::Float16)).dtype() == DType::Float16);
  CHECK(kiln::add(i32, 7).dtype() == DType::Int32);  // an int scalar does not widen int32
  CHECK(kiln::add(2, f32).dtype() == DType::Float32);
  CHECK(kiln::add(Scalar(2.5), i32).dtype() == DType::Float32);
}

// ---- in-place ops ----
TEST_CASE("elementwise: in-place arithmetic writes into self and bumps the version") {
  Tensor x = kiln::tensor({1.0, 2.0, 3.0, 4.0}, {2, 2});
  const void* p = x.raw_data();
  uint64_t v0 = x.version();
  x.add_(1);
  CHECK(values(x) == std::vector<double>{2, 3, 4, 5});
  x.sub_(kiln::tensor({1.0, 2.0}));  // broadcast other
  CHECK(values(x) == std::vector<double>{1, 1, 3, 3});
  x.mul_(2.5);
  CHECK(values(x) == std::vector<double>{2.5, 2.5, 7.5, 7.5});
  x.div_(kiln::tensor({2.5}, {1, 1}));
  CHECK(values(x) == std::vector<double>{1, 1, 3, 3});
  x.zero_();
  CHECK(values(x) == std::vector<double>{0, 0, 0, 0});
  x.fill_(7);
  CHECK(values(x) == std::vector<double>{7, 7, 7, 7});
  x.copy_(kiln::tensor({1.0, 2.0}));
  CHECK(values(x) == std::vector<double>{1, 2, 1, 2});
  CHECK(x.raw_data() == p);  // in place: no new storage
  CHECK(x.dtype() == DType::Float32);
  CHECK(x.version() == v0 + 7);
}

TEST_CASE("elementwise: in-place through views changes the base") {
  Tensor base = zeros({4, 5});
  uint64_t v0 = base.version();
  Tensor row = base[1];
  row.add_(3);
  Tensor col = base.select(1, -1);
  col.fill_(9);
  Tensor stepped = base.slice(1, 0, std::nullopt, 2);  // columns 0, 2, 4
  stepped.mul_(2);
  Tensor tr = base.t();
  tr.slice(0, 1, 2).sub_(1);  // column 1 through the transpose
  std::vector<double> want = {0, -1, 0, 0, 18, 6, 2, 6, 3, 18, 0, -1, 0, 0, 18, 0, -1, 0, 0, 18};
  CHECK(values(base) == want);
  CHECK(base.version() == v0 + 4);  // views share the storage's counter
  CHECK(row.version() == base.version());
}

TEST_CASE("elementwise: in-place with mixed dtypes casts like torch") {
  Tensor f = zeros({3});
  f.add_(kiln::ones({3}, DType::Float64));  // float64 result is cast down to float32
  CHECK(f.dtype() == DType::Float32);
  CHECK(values(f) == std::vector<double>{1, 1, 1});
  f.mul_(kiln::tensor(std::vector<int64_t>{2, 3, 4}));
  CHECK(values(f) == std::vector<double>{2, 3, 4});
  Tensor i = kiln::zeros({3}, DType::Int32);
  i.add_(kiln::arange(3));  // int64 into int32
  CHECK(i.dtype() == DType::Int32);
  CHECK(values(i) == std::vector<double>{0, 1, 2});
  i.add_(true);
  CHECK(values(i) == std::vector<double>{1, 2, 3});
  Tensor h = kiln::ones({3}, DType::BFloat16);
  h.add_(0.5);
  CHECK(h.dtype() == DType::BFloat16);
  CHECK(values(h) == std::vector<double>{1.5, 1.5, 1.5});
  Tensor hf = kiln::ones({3}, DType::Float16);
  hf.div_(kiln::full({3}, 4.0, DType::Float64));
  CHECK(values(hf) == std::vector<double>{0.25, 0.25, 0.25});
}

TEST_CASE("elementwise: in-place errors") {
  check_error([] { kiln::arange(3).add_(2.5); }, "add_: result type float32 can't be cast to the desired output type int64");
  check_error([] { kiln::arange(3).div_(2); }, "div_: result type float32 can't be cast to the desired output type int64");
  check_error([] { kiln::ones({3}, DType::Bool).add_(1); }, "add_: result type int64 can't be cast to the desired output type bool");
  check_error([] { kiln::arange(3).to(DType::Int32).mul_(zeros({3})); },
              "mul_: result type float32 can't be cast to the desired output type int32");
  check_error([] { zeros({3}).add_(zeros({2, 3})); }, "add_: output with shape [3] doesn't match the broadcast shape [2,3]");
  check_error([] { zeros({2, 3}).sub_(zeros({4})); }, "sub: shapes [2,3] and [4] cannot be broadcast");
  check_error([] { zeros({3}).copy_(zeros({2, 3})); }, "copy_: source of shape [2,3] cannot be broadcast to destination of shape [3]");
  Tensor x = kiln::arange(3);
  uint64_t v = x.version();
  CHECK_THROWS_AS(x.add_(2.5), Error);
  CHECK(x.version() == v);  // a failed op leaves the counter alone
  CHECK(values(x) == std::vector<double>{0, 1, 2});
}

TEST_CASE("elementwise: in-place with an operand overlapping self") {
  // The operand is read as it was before the op, as if cloned first.
  Tensor x = kiln::arange(4).to(DType::Float32).reshape({2, 2});
  x.add_(x.t());
  CHECK(values(x) == std::vector<double>{0, 3, 3, 6});
  Tensor y = kiln::arange(5).to(DType::Float64);
  y.slice(0, 1, 5).add_(y.slice(0, 0, 4));
  CHECK(values(y) == std::vector<double>{0, 1, 3, 5, 7});
  Tensor z = kiln::arange(6).to(DType::Float32).reshape({3, 2});
  z.mul_(z[0]);  // row 0 is part of self and is broadcast over every row
  CHECK(values(z) == std::vector<double>{0, 1, 0, 3, 0, 5});
  Tensor w = kiln::arange(4).to(DType::Float32);
  w.mul_(w);  // exact alias is fine element by element
  CHECK(values(w) == std::vector<double>{0, 1, 4, 9});
  Tensor c = kiln::arange(5).to(DType::Float32);
  c.slice(0, 1, 5).copy_(c.slice(0, 0, 4));
  CHECK(values(c) == std::vector<double>{0, 0, 1, 2, 3});
}

TEST_CASE("elementwise: large in-place runs on every thread") {
  Tensor x = kiln::full({700, 401}, 1.0);
  Tensor xt = x.t();
  xt.mul_(kiln::arange(700).to(DType::Float32));  // column j of xt (row j of x) scaled by j
  auto v = values(x);
  bool ok = true;
  for (int64_t i = 0; i < 700 && ok; ++i)
    for (int64_t j = 0; j < 401 && ok; ++j) ok = v[size_t(i * 401 + j)] == double(i);
  CHECK(ok);
}
