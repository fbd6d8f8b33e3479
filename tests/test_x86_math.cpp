// The x86 JIT's vector math (backends/x86/vec_math.h) against the std:: functions evaluated in double,
// on millions of values per function, dtype and ISA: wide random ranges, log-uniform magnitudes up to
// the type's limits, +-inf, NaN, denormals. The bounds are the ones documented in vec_math.h.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/x86/isa.h"
#include "backends/x86/kernel.h"
#include "core/ir/parser.h"
#include "support.h"

using namespace kiln;

namespace {

template <class T>
double ulp_of(double ref) {
  T a = T(std::fabs(ref));
  if (!(a < std::numeric_limits<T>::max())) a = std::numeric_limits<T>::max();
  T next = std::nextafter(a, std::numeric_limits<T>::infinity());
  return double(next) - double(a);
}

struct Stats {
  double max_ulp = 0, max_abs = 0, worst_x = 0;
  int64_t bad_special = 0;
  double bad_x = 0;
};

template <class T>
std::vector<T> make_inputs(int64_t n, double lo, double hi, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::uniform_real_distribution<double> e(std::log(double(std::numeric_limits<T>::denorm_min())),
                                           std::log(double(std::numeric_limits<T>::max())));
  std::vector<T> v(static_cast<size_t>(n));
  const T inf = std::numeric_limits<T>::infinity();
  const T sp[] = {T(0), T(-0.0), inf, -inf, std::numeric_limits<T>::quiet_NaN(),
                  std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min(),
                  std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(),
                  T(1), T(-1), T(0.5), T(0.625), T(-0.625), T(88.7), T(-87.5), T(-103.5), T(709.7), T(-745)};
  for (size_t i = 0; i < v.size(); ++i) {
    if (i < sizeof(sp) / sizeof(sp[0])) v[i] = sp[i];
    else if (i % 4 == 3) v[i] = T((rng() & 1 ? -1 : 1) * std::exp(e(rng)));  // any magnitude
    else v[i] = T(u(rng));
  }
  return v;
}

template <class T>
Stats measure(const std::string& op, double (*ref)(double), double lo, double hi, int64_t n) {
  const char* dt = std::is_same_v<T, double> ? "f64" : "f32";
  auto g = ir::parse_ir(std::string("graph(%x : ") + dt + "[N]):\n  %0 : " + dt + "[N] = " + op +
                        "(%x)\n  return (%0)\n");
  auto k = x86::compile(*g, "math_" + op);
  std::vector<T> in = make_inputs<T>(n, lo, hi, 1234);
  Tensor x = Tensor::empty({n}, std::is_same_v<T, double> ? DType::Float64 : DType::Float32);
  std::memcpy(x.raw_data(), in.data(), in.size() * sizeof(T));
  Tensor y = k->run({x})[0];
  const T* got = static_cast<const T*>(y.raw_data());
  Stats s;
  for (int64_t i = 0; i < n; ++i) {
    double r = ref(double(in[size_t(i)]));
    double gv = double(got[i]);
    if (std::isnan(r) || std::isinf(r) || std::isinf(double(T(r)))) {
      bool ok = std::isnan(r) ? std::isnan(gv) : gv == double(T(r));
      if (!ok && !s.bad_special) s.bad_x = double(in[size_t(i)]);
      s.bad_special += !ok;
      continue;
    }
    if (std::isnan(gv)) {
      if (!s.bad_special) s.bad_x = double(in[size_t(i)]);
      ++s.bad_special;
      continue;
    }
    double err = std::fabs(gv - r);
    if (std::fabs(r) < double(std::numeric_limits<T>::min()) * 0x1p24) {
      // results at the edge of underflow (denormal, or where the float-typed expression's exp
      // overflows first, as for silu(-90)): absolute error within 2^24 smallest normals
      if (err > double(std::numeric_limits<T>::min()) * 0x1p24) {
        if (!s.bad_special) s.bad_x = double(in[size_t(i)]);
        ++s.bad_special;
      }
      continue;
    }
    double u = err / ulp_of<T>(r);
    if (u > s.max_ulp) {
      s.max_ulp = u;
      s.worst_x = double(in[size_t(i)]);
    }
    s.max_abs = std::max(s.max_abs, err);
  }
  return s;
}

double sigmoid_d(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu_d(double x) { return x / (1.0 + std::exp(-x)); }
double exp_d(double x) { return std::exp(x); }
double log_d(double x) { return std::log(x); }
double log1p_d(double x) { return std::log1p(x); }
double tanh_d(double x) { return std::tanh(x); }
double erf_d(double x) { return std::erf(x); }
double sin_d(double x) { return std::sin(x); }
double cos_d(double x) { return std::cos(x); }

struct Case {
  const char* op;
  double (*ref)(double);
  double lo, hi;
  double ulp32, ulp64;  // max ulp error allowed
  double abs32;         // or absolute error (0: ulp only)
};

}  // namespace

TEST_CASE("x86 math: vector approximations against std:: in double on millions of values") {
  if (x86::cpu_isa() == x86::Isa::None) {
    MESSAGE("skipped: this CPU has no AVX2 (the x86 JIT needs AVX2 or AVX-512)");
    return;
  }
  const Case cases[] = {
      {"exp", exp_d, -110, 110, 2, 2, 0},
      {"log", log_d, 0, 1e6, 3, 2, 0},
      {"log1p", log1p_d, -1, 10, 5, 5, 0},
      {"tanh", tanh_d, -12, 12, 4, 8, 0},
      {"sigmoid", sigmoid_d, -110, 110, 4, 4, 0},
      {"silu", silu_d, -110, 110, 5, 5, 0},
      {"erf", erf_d, -6, 6, 0, 1, 3e-7},
      {"sin", sin_d, -1e4, 1e4, 3, 3, 0},
      {"cos", cos_d, -1e4, 1e4, 3, 3, 0},
  };
  std::vector<x86::Isa> isas;
  if (x86::cpu_isa() == x86::Isa::Avx512) isas.push_back(x86::Isa::Avx512);
  isas.push_back(x86::Isa::Avx2);
  struct ClearCap {  // also when a check throws: the suite's order must not matter
    ~ClearCap() { x86::set_isa_cap(x86::Isa::None); }
  } clear_cap;
  for (x86::Isa isa : isas) {
    x86::set_isa_cap(isa);
    for (const Case& c : cases) {
      CAPTURE(std::string(c.op));
      CAPTURE(x86::isa_name(isa));
      Stats s32 = measure<float>(c.op, c.ref, c.lo, c.hi, 2'000'000);
      Stats s64 = measure<double>(c.op, c.ref, c.lo, c.hi, 1'000'000);
      MESSAGE(x86::isa_name(isa) << " " << std::string(c.op) << ": f32 max " << s32.max_ulp << " ulp (x=" << s32.worst_x
                                 << ", abs " << s32.max_abs << "), f64 max " << s64.max_ulp << " ulp (x="
                                 << s64.worst_x << ")");
      CHECK_MESSAGE(s32.bad_special == 0, "f32 special-value mismatches: " << s32.bad_special << " e.g. x=" << s32.bad_x);
      CHECK_MESSAGE(s64.bad_special == 0, "f64 special-value mismatches: " << s64.bad_special << " e.g. x=" << s64.bad_x);
      if (c.abs32 > 0) CHECK(s32.max_abs <= c.abs32);
      else CHECK(s32.max_ulp <= c.ulp32);
      CHECK(s64.max_ulp <= c.ulp64);
    }
  }
}
