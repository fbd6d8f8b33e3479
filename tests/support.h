#pragma once
// Shared test helpers: values out of tensors, closeness against a float64 reference, error text checks.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "backends/x86/isa.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <functional>
#include <string>
#include <vector>

namespace kiln::test {

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

// Same dtype, shape and bits (NaN included), without doctest: worker threads may not use its macros.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), size_t(ca.numel()) * ca.element_size()) == 0;
}

// Same dtype, shape and bit-identical values (NaN included).
inline void check_bit_identical(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(a.sizes() == b.sizes());
  CHECK(same_bits(a, b));
}

// A file path in this process's scratch directory for `prefix`, which is removed at exit.
inline std::string scratch_path(const std::string& prefix, const std::string& name) {
  struct Scratch {
    std::filesystem::path dir;
    explicit Scratch(std::filesystem::path d) : dir(std::move(d)) { std::filesystem::create_directories(dir); }
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static std::map<std::string, std::unique_ptr<Scratch>> dirs;
  auto& s = dirs[prefix];
  if (!s) s = std::make_unique<Scratch>(std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid())));
  return (s->dir / name).string();
}

// Every element, in logical (row-major) order, as double.
inline std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::Float64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

// Checks shape and |a-b| <= atol + rtol*|b| elementwise (NaNs must match NaNs); reports the worst element.
inline void check_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-6) {
  REQUIRE_MESSAGE(actual.sizes() == expected.sizes(),
                  "shape " << shape_str(actual.sizes()) << " vs expected " << shape_str(expected.sizes()));
  auto a = values(actual), b = values(expected);
  double worst = 0;
  int64_t worst_i = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i]) || std::isnan(a[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) { worst_i = int64_t(i); worst = INFINITY; break; }
      continue;
    }
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      if (a[i] != b[i]) { worst_i = int64_t(i); worst = INFINITY; break; }
      continue;
    }
    double excess = std::fabs(a[i] - b[i]) - (atol + rtol * std::fabs(b[i]));
    if (excess > worst) { worst = excess; worst_i = int64_t(i); }
  }
  CHECK_MESSAGE(worst_i < 0, "element " << worst_i << ": got " << (worst_i >= 0 ? a[size_t(worst_i)] : 0)
                                        << ", expected " << (worst_i >= 0 ? b[size_t(worst_i)] : 0));
}

// x_i = sin(a*i + b) in row-major order: deterministic inputs that PyTorch scripts can reproduce.
#ifdef KILN_TEST_DATA
// A fixture file's tensors whose key starts with `prefix`, the prefix removed.
inline std::map<std::string, Tensor> with_prefix(const std::map<std::string, Tensor>& all, const std::string& prefix) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : all)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
  return out;
}

// The 8x8 digits .ci/setup.sh writes for the samples (1797 images, 64 features, labels 0-9).
inline std::pair<Tensor, Tensor> digits() {
  std::string dir = std::string(KILN_TEST_DATA) + "/../../samples/data";
  try {
    return {load_npy(dir + "/digits_x.npy"), load_npy(dir + "/digits_y.npy")};
  } catch (const Error& e) {
    FAIL("the digits data is missing (bash .ci/setup.sh makes it): " << std::string(e.what()));
    throw;
  }
}
#endif

inline Tensor seq(const Shape& shape, double a = 0.3, double b = 0.1, DType dtype = DType::Float64) {
  std::vector<double> v(size_t(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b);
  return tensor(v, shape, DType::Float64).to(dtype);
}

// Runs fn and checks it throws kiln::Error whose message contains `needle`.
// The tensors of a module's outputs, tuples flattened in order ((out, (h, c)) → out, h, c).
inline Tensors flat(const std::vector<IValue>& vs) {
  Tensors r;
  for (const IValue& v : vs) {
    if (v.is_tuple()) {
      Tensors inner = flat(v.elements());
      r.insert(r.end(), inner.begin(), inner.end());
    } else {
      r.push_back(v.to_tensor());
    }
  }
  return r;
}

inline void check_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    FAIL("expected kiln::Error containing '" << needle << "', nothing was thrown");
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos,
                  "message '" << std::string(e.what()) << "' lacks '" << needle << "'");
  }
}

// Whether compiled graphs get the x86 JIT's fused kernels here: it needs AVX2 or AVX-512, and
// KILN_X86_ISA=none turns it off (tests/run_matrix.sh's baseline entry, a CPU without AVX2). Without it a
// compiled graph runs its optimised graph on the eager kernels: the same values, other kernel counts.
// Detached copies of inputs, the floating ones requiring grad: leaves a run can differentiate.
inline std::vector<Tensor> fresh_leaves(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    Tensor l = t.detach().clone();
    if (is_floating(t.dtype())) l.requires_grad_(true);
    leaves.push_back(l);
  }
  return leaves;
}

inline bool x86_jit_on() { return x86::best_isa() != x86::Isa::None; }

// The x86 kernel ISAs this CPU can run (AVX-512 first, then AVX2 forced through the cap).
inline std::vector<x86::Isa> x86_isas() {
  std::vector<x86::Isa> v;
  if (x86::cpu_isa() == x86::Isa::Avx512) v.push_back(x86::Isa::Avx512);
  if (x86::cpu_isa() != x86::Isa::None) v.push_back(x86::Isa::Avx2);
  return v;
}
// Caps the x86 JIT's ISA for a scope.
struct IsaCap {
  explicit IsaCap(x86::Isa i) { x86::set_isa_cap(i); }
  ~IsaCap() { x86::set_isa_cap(x86::Isa::None); }
};

// Sets the intra-op (OpenMP and BLAS) thread count for a scope and restores the count it found: a test
// that depends on the count sets it, so the suite's order does not matter.
struct NumThreads {
  int saved = get_num_threads();
  explicit NumThreads(int n) { set_num_threads(n); }
  ~NumThreads() { set_num_threads(saved); }
  NumThreads(const NumThreads&) = delete;
  NumThreads& operator=(const NumThreads&) = delete;
};

// The same for the inter-op thread count (how many independent steps of a graph run at once).
struct NumInteropThreads {
  int saved = get_num_interop_threads();
  explicit NumInteropThreads(int n) { set_num_interop_threads(n); }
  ~NumInteropThreads() { set_num_interop_threads(saved); }
  NumInteropThreads(const NumInteropThreads&) = delete;
  NumInteropThreads& operator=(const NumInteropThreads&) = delete;
};

// A tensor that claims to live on cuda:0 without touching a device: enough for checks that fail
// before any kernel runs (device checks, the JIT's choice of backend).
inline Tensor fake_cuda_tensor(const Shape& shape, DType dtype = DType::Float32) {
  auto st = std::make_shared<Storage>();
  st->owned = false;
  st->device = Device::cuda(0);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = st;
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

}  // namespace kiln::test
