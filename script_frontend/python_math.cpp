#include "script_frontend/python_math.h"

#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

namespace kiln::script {
namespace {

using F1 = double (*)(double);
using F2 = double (*)(double, double);
using Domain = bool (*)(double);

struct Unary {
  F1 f;
  Domain ok;  // Python's ValueError("math domain error") outside it
};

bool any(double) { return true; }

const std::map<std::string, Unary>& unary() {
  static const std::map<std::string, Unary> fns = {
      {"sqrt", {[](double x) { return std::sqrt(x); }, [](double x) { return x >= 0; }}},
      {"exp", {[](double x) { return std::exp(x); }, any}},
      {"expm1", {[](double x) { return std::expm1(x); }, any}},
      {"log2", {[](double x) { return std::log2(x); }, [](double x) { return x > 0; }}},
      {"log10", {[](double x) { return std::log10(x); }, [](double x) { return x > 0; }}},
      {"log1p", {[](double x) { return std::log1p(x); }, [](double x) { return x > -1; }}},
      {"sin", {[](double x) { return std::sin(x); }, [](double x) { return !std::isinf(x); }}},
      {"cos", {[](double x) { return std::cos(x); }, [](double x) { return !std::isinf(x); }}},
      {"tan", {[](double x) { return std::tan(x); }, [](double x) { return !std::isinf(x); }}},
      {"asin", {[](double x) { return std::asin(x); }, [](double x) { return x >= -1 && x <= 1; }}},
      {"acos", {[](double x) { return std::acos(x); }, [](double x) { return x >= -1 && x <= 1; }}},
      {"atan", {[](double x) { return std::atan(x); }, any}},
      {"sinh", {[](double x) { return std::sinh(x); }, any}},
      {"cosh", {[](double x) { return std::cosh(x); }, any}},
      {"tanh", {[](double x) { return std::tanh(x); }, any}},
      {"asinh", {[](double x) { return std::asinh(x); }, any}},
      {"acosh", {[](double x) { return std::acosh(x); }, [](double x) { return x >= 1; }}},
      {"atanh", {[](double x) { return std::atanh(x); }, [](double x) { return x > -1 && x < 1; }}},
      {"erf", {[](double x) { return std::erf(x); }, any}},
      {"erfc", {[](double x) { return std::erfc(x); }, any}},
      {"gamma", {[](double x) { return std::tgamma(x); }, [](double x) { return !(x <= 0 && x == std::floor(x)); }}},
      {"lgamma", {[](double x) { return std::lgamma(x); }, [](double x) { return !(x <= 0 && x == std::floor(x)); }}},
      {"fabs", {[](double x) { return std::fabs(x); }, any}},
      {"degrees", {[](double x) { return x * 180.0 / M_PI; }, any}},
      {"radians", {[](double x) { return x * M_PI / 180.0; }, any}},
  };
  return fns;
}

const std::map<std::string, F2>& binary() {
  static const std::map<std::string, F2> fns = {
      {"atan2", [](double y, double x) { return std::atan2(y, x); }},
      {"pow", [](double x, double y) { return std::pow(x, y); }},
      {"hypot", [](double x, double y) { return std::hypot(x, y); }},
      {"copysign", [](double x, double y) { return std::copysign(x, y); }},
      {"fmod", [](double x, double y) { return std::fmod(x, y); }},
  };
  return fns;
}

}  // namespace

std::optional<MathNumber> python_math(const std::string& name, const std::vector<MathNumber>& a,
                                      const std::function<void(const std::string&)>& error) {
  auto count = [&](size_t lo, size_t hi) {
    if (a.size() < lo || a.size() > hi)
      error(lo == hi ? fmt::format("TypeError: math.{}() takes exactly {} argument{} ({} given)", name, lo, lo == 1 ? "" : "s", a.size())
                     : fmt::format("TypeError: math.{}() takes {} to {} arguments ({} given)", name, lo, hi, a.size()));
  };
  auto domain = [&] { error("ValueError: math domain error"); };
  auto integer = [&](const MathNumber& x) {
    if (x.kind == MathNumber::Kind::Float) error(fmt::format("TypeError: math.{}() takes integers, got a float", name));
    return x.i;
  };
  if (auto it = unary().find(name); it != unary().end()) {
    count(1, 1);
    if (!it->second.ok(a[0].f)) domain();
    return MathNumber::of_float(it->second.f(a[0].f));
  }
  if (auto it = binary().find(name); it != binary().end()) {
    count(2, 2);
    if ((name == "fmod" && a[1].f == 0) || (name == "pow" && a[0].f == 0 && a[1].f < 0) ||
        (name == "pow" && a[0].f < 0 && a[1].f != std::floor(a[1].f)))
      domain();
    return MathNumber::of_float(it->second(a[0].f, a[1].f));
  }
  if (name == "log") {  // log(x[, base])
    count(1, 2);
    if (a[0].f <= 0 || (a.size() == 2 && (a[1].f <= 0 || a[1].f == 1))) domain();
    return MathNumber::of_float(a.size() == 2 ? std::log(a[0].f) / std::log(a[1].f) : std::log(a[0].f));
  }
  if (name == "floor" || name == "ceil" || name == "trunc") {  // ints, as Python's
    count(1, 1);
    if (a[0].kind != MathNumber::Kind::Float) return MathNumber::of_int(a[0].i);
    if (!std::isfinite(a[0].f)) error(fmt::format("{}: cannot convert float {} to integer", std::isnan(a[0].f) ? "ValueError" : "OverflowError", a[0].f));
    double r = name == "floor" ? std::floor(a[0].f) : name == "ceil" ? std::ceil(a[0].f) : std::trunc(a[0].f);
    return MathNumber::of_int(int64_t(r));
  }
  if (name == "isqrt") {
    count(1, 1);
    int64_t n = integer(a[0]);
    if (n < 0) error("ValueError: isqrt() argument must be nonnegative");
    int64_t r = int64_t(std::sqrt(double(n)));
    while (r * r > n) --r;
    while ((r + 1) * (r + 1) <= n) ++r;
    return MathNumber::of_int(r);
  }
  if (name == "factorial") {
    count(1, 1);
    int64_t n = integer(a[0]);
    if (n < 0) error("ValueError: factorial() not defined for negative values");
    if (n > 20) error("OverflowError: factorial() of a number above 20 does not fit kiln's 64-bit integers");
    int64_t r = 1;
    for (int64_t k = 2; k <= n; ++k) r *= k;
    return MathNumber::of_int(r);
  }
  if (name == "gcd") {
    int64_t g = 0;
    for (const MathNumber& x : a) g = std::gcd(g, integer(x));
    return MathNumber::of_int(g);
  }
  if (name == "isfinite" || name == "isinf" || name == "isnan") {
    count(1, 1);
    double x = a[0].f;
    return MathNumber::of_bool(name == "isfinite" ? std::isfinite(x) : name == "isinf" ? std::isinf(x) : std::isnan(x));
  }
  return std::nullopt;
}

}  // namespace kiln::script
