// Factories: zeros, ones, full, arange, linspace, eye, the random ones and tensor(values).
#include <cmath>
#include <mutex>
#include <random>
#include <cstring>
#include <type_traits>

#include "core/trace_hooks.h"
#include "eager/untraced.h"
#include "eager/cpu/copy.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {
namespace {

std::mutex g_rng_mu;
std::mt19937_64& rng() {
  static std::mt19937_64 gen(0x6b696c6eULL);
  return gen;
}

// The factories below build on the host (so a seed gives the same values on every device), then move.
// The host tensor is no graph value, so its move is part of making a constant, which a running trace keeps as
// such (a graph's arange on the device of its inputs), not a device move it refuses to record.
Tensor placed(const Tensor& t, TensorOptions opt) {
  if (opt.device.is_cpu()) return t;
  Untraced untraced;
  return t.to(opt.device);
}

// Fills a fresh float64 buffer from gen(rng) and converts it to the requested dtype.
template <class Gen>
Tensor random_tensor(const Shape& shape, TensorOptions opt, Gen gen) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  double* p = t.data_ptr<double>();
  {
    std::lock_guard<std::mutex> lock(g_rng_mu);
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = gen(rng());
  }
  return placed(opt.dtype == DType::Float64 ? t : cpu::cast_to(t, opt.dtype), opt);
}

void check_float(const char* op, DType d) {
  if (!is_floating(d)) fail("{}: expected a floating dtype, got {}", op, dtype_name(d));
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions opt) { return Tensor::empty(shape, opt.dtype, opt.device); }
Tensor full(const Shape& shape, Scalar value, TensorOptions opt) {
  Tensor t = empty(shape, opt);
  copy_into(t, Tensor::wrap_scalar(value));
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions opt) { return full(shape, 0, opt); }
Tensor ones(const Shape& shape, TensorOptions opt) { return full(shape, 1, opt); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), {t.dtype(), t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.sizes(), value, {t.dtype(), t.device()}); }

Tensor arange(Scalar end) { return arange(0, end, 1); }
Tensor arange(Scalar start, Scalar end, Scalar step) {
  bool ints = start.type != DType::Float64 && end.type != DType::Float64 && step.type != DType::Float64;
  return arange(start, end, step, ints ? DType::Int64 : default_dtype());
}
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions opt) {
  if (step.v == 0) fail("arange: step must be nonzero");
  if ((end.v - start.v) / step.v < 0)
    fail("arange: upper bound {} and lower bound {} inconsistent with step sign {}", end.v, start.v, step.v);
  int64_t n = int64_t(std::ceil((end.v - start.v) / step.v));
  if (is_integral(opt.dtype) && start.type != DType::Float64 && end.type != DType::Float64 &&
      step.type != DType::Float64) {
    // Integer arguments stay exact past 2^53: length and values in int64.
    int64_t span = end.i - start.i;
    n = span / step.i + (span % step.i != 0 ? 1 : 0);
    Tensor t = Tensor::empty({n}, DType::Int64);
    int64_t* p = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = start.i + i * step.i;
    return placed(cpu::cast_to(t, opt.dtype), opt);
  }
  Tensor t = Tensor::empty({n}, DType::Float64);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start.v + double(i) * step.v;
  return placed(opt.dtype == DType::Float64 ? t : cpu::cast_to(t, opt.dtype), opt);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opt) {
  if (steps < 0) fail("linspace: number of steps must be non-negative, got {}", steps);
  Tensor t = Tensor::empty({steps}, DType::Float64);
  double* p = t.data_ptr<double>();
  double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  if (steps == 1) end = start;  // a single step is the start, as torch
  // Fill from both ends, as torch does, so the last value is exactly `end`.
  for (int64_t i = 0; i < steps; ++i) p[i] = i < steps / 2 ? start + step * double(i) : end - step * double(steps - 1 - i);
  return placed(opt.dtype == DType::Float64 ? t : cpu::cast_to(t, opt.dtype), opt);
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions opt) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) fail("eye: sizes must be non-negative, got {} and {}", n, cols);
  Tensor t = zeros({n, cols}, DType::Float64);  // on the host
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < std::min(n, cols); ++i) p[i * cols + i] = 1.0;
  return placed(opt.dtype == DType::Float64 ? t : cpu::cast_to(t, opt.dtype), opt);
}

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_rng_mu);
  rng().seed(seed);
}

// The engine's bytes (a 2.5 KB copy, cheap enough to take before every compiled step).
static_assert(std::is_trivially_copyable_v<std::mt19937_64>);

RngState get_rng_state() {
  std::lock_guard<std::mutex> lock(g_rng_mu);
  return {std::string(reinterpret_cast<const char*>(&rng()), sizeof(std::mt19937_64))};
}

void set_rng_state(const RngState& state) {
  if (state.engine.size() != sizeof(std::mt19937_64))
    fail("set_rng_state: not a state from get_rng_state ({} bytes, expected {})", state.engine.size(),
         sizeof(std::mt19937_64));
  std::lock_guard<std::mutex> lock(g_rng_mu);
  std::memcpy(static_cast<void*>(&rng()), state.engine.data(), sizeof(std::mt19937_64));
}

namespace {

// U[0, 1) as k * 2^-digits with the target type's mantissa width, as torch: exact in that type, so
// rounding the draw can never produce 1.0.
Tensor uniform(const Shape& shape, TensorOptions opt) {
  check_float("rand", opt.dtype);
  int digits = opt.dtype == DType::Float64 ? 53 : opt.dtype == DType::Float32 ? 24 : opt.dtype == DType::Float16 ? 11 : 8;
  return random_tensor(shape, opt, [&](auto& g) { return std::ldexp(double(g() >> (64 - digits)), -digits); });
}

// Fresh random numbers, told to a trace (tracer/recorder.h records rand_like as a draw at each call).
Tensor reported(const char* factory, const Tensor* like, Tensor result) {
  if (TraceHooks* h = trace_hooks(); h && h->quiet == 0) h->on_random(factory, like, result);
  return result;
}

}  // namespace

Tensor rand(const Shape& shape, TensorOptions opt) { return reported("rand", nullptr, uniform(shape, opt)); }
Tensor randn(const Shape& shape, TensorOptions opt) {
  check_float("randn", opt.dtype);
  std::normal_distribution<double> nd(0.0, 1.0);
  return reported("randn", nullptr, random_tensor(shape, opt, [&](auto& g) { return nd(g); }));
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opt) {
  if (high <= low) fail("randint: expected low < high, got low={} and high={}", low, high);
  std::uniform_int_distribution<int64_t> u(low, high - 1);
  return reported("randint", nullptr, random_tensor(shape, opt, [&](auto& g) { return double(u(g)); }));
}
Tensor rand_like(const Tensor& t) {
  Tensor r;
  {
    QuietTraceReads quiet;  // a traced rand_like reads the shape at each call: nothing is specialised
    r = uniform(t.sizes(), {t.dtype(), t.device()});
  }
  return reported("rand_like", &t, r);
}
Tensor randn_like(const Tensor& t) { return randn(t.sizes(), {t.dtype(), t.device()}); }

namespace {
template <class T>
Tensor tensor_from(const std::vector<T>& values, const Shape& shape, TensorOptions opt) {
  Shape s = shape.empty() ? Shape{int64_t(values.size())} : shape;
  if (numel_of(s) != int64_t(values.size()))
    fail("tensor: {} values cannot fill shape {}", values.size(), shape_str(s));
  Tensor src = Tensor::from_blob(const_cast<T*>(values.data()), s, dtype_of<T>());
  return placed(cpu::cast_to(src, opt.dtype), opt);
}
}  // namespace

Tensor tensor(const std::vector<double>& v, const Shape& s, TensorOptions o) { return tensor_from(v, s, o); }
Tensor tensor(std::initializer_list<double> v, const Shape& s, TensorOptions o) {
  return tensor_from(std::vector<double>(v), s, o);
}
Tensor tensor(const std::vector<float>& v, const Shape& s, TensorOptions o) { return tensor_from(v, s, o); }
Tensor tensor(const std::vector<int64_t>& v, const Shape& s, TensorOptions o) { return tensor_from(v, s, o); }
Tensor tensor(const std::vector<int>& v, const Shape& s, TensorOptions o) {
  return tensor_from(std::vector<int64_t>(v.begin(), v.end()), s, o);
}
Tensor scalar_tensor(Scalar s, TensorOptions opt) { return full({}, s, opt); }

}  // namespace kiln
