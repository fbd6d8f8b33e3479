// kiln eager benchmarks: per-op dispatch overhead, memory-bound elementwise throughput, an 8-op eager
// chain, matmul against BLAS called directly, and a STREAM-style copy for the machine's bandwidth.
// Every benchmark takes its thread count as the argument (kiln::set_num_threads sets OpenMP and
// OpenBLAS threads). bench/compare runs this next to PyTorch and prints the ratios.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "eager/cpu/isa_kernels.h"
#include "kiln/kiln.h"

#if KILN_BENCH_HAVE_DNNL
#include <dnnl.h>
#endif

extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);

namespace {

constexpr int64_t kBig = int64_t(1) << 24;  // 16M float32 elements = 64 MiB per tensor
constexpr int64_t kMat = 1024;

void set_threads(benchmark::State& state) { kiln::set_num_threads(int(state.range(0))); }

// Bytes per second counters: `bytes_per_elem` is how many bytes one element moves by the stated
// convention (STREAM counts only explicit reads and writes, not write-allocate traffic).
void bandwidth(benchmark::State& state, const char* name, double bytes_per_elem, int64_t n) {
  state.counters[name] = benchmark::Counter(bytes_per_elem * double(n) * double(state.iterations()) / 1e9,
                                            benchmark::Counter::kIsRate);
}

// ---- dispatch overhead: 1-element float32 add, output allocated each call (the eager path) ----
void BM_DispatchAdd1(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor a = kiln::ones({1}), b = kiln::ones({1});
  for (auto _ : state) {
    kiln::Tensor c = a + b;
    benchmark::DoNotOptimize(c.impl());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(double(state.iterations()) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DispatchAdd1)->ArgName("threads")->Arg(1)->Arg(2);

// ---- elementwise add of 16M float32: c = a + b (eager: c is a fresh tensor each call) ----
void BM_Add16M(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor a = kiln::rand({kBig}), b = kiln::rand({kBig});
  { kiln::Tensor warm = a + b; }  // the caching allocator now holds a block for the output
  for (auto _ : state) {
    kiln::Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  bandwidth(state, "GBps_12B", 12, kBig);  // 2 reads + 1 write (STREAM "add" convention)
  bandwidth(state, "GBps_8B", 8, kBig);    // as the issue counts the chain: 1 read + 1 write
}
BENCHMARK(BM_Add16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same add written as a plain loop into a preallocated buffer: what the kernel could reach.
void BM_RawAdd16M(benchmark::State& state) {
  int threads = int(state.range(0));
  kiln::Tensor a = kiln::rand({kBig}), b = kiln::rand({kBig}), c = kiln::zeros({kBig});
  const float* __restrict pa = a.data_ptr<float>();
  const float* __restrict pb = b.data_ptr<float>();
  float* __restrict pc = c.data_ptr<float>();
  for (auto _ : state) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < kBig; ++i) pc[i] = pa[i] + pb[i];
    benchmark::ClobberMemory();
  }
  bandwidth(state, "GBps_12B", 12, kBig);
}
BENCHMARK(BM_RawAdd16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The plain loop again with non-temporal (streaming) stores: the output bypasses the cache, so the
// write-allocate read of c disappears (glibc's memcpy does the same for large copies). This is the
// ceiling a kernel with streaming stores for large outputs would reach.
__attribute__((target("avx512f"))) void BM_RawAddNT16M(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no avx512f");
    return;
  }
  int threads = int(state.range(0));
  kiln::Tensor a = kiln::rand({kBig}), b = kiln::rand({kBig}), c = kiln::zeros({kBig});
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* pc = c.data_ptr<float>();  // 64-byte aligned by the caching allocator
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < kBig; i += 16)
      _mm512_stream_ps(pc + i, _mm512_add_ps(_mm512_load_ps(pa + i), _mm512_load_ps(pb + i)));
    _mm_sfence();
    benchmark::ClobberMemory();
  }
  bandwidth(state, "GBps_12B", 12, kBig);
}
BENCHMARK(BM_RawAddNT16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- the 8-op chain y = sigmoid(tanh(x*1.5+0.5)*x) + exp(x)*0.1 - x on 16M float32 ----
kiln::Tensor chain(const kiln::Tensor& x) {
  return kiln::sigmoid(kiln::tanh(x * 1.5 + 0.5) * x) + kiln::exp(x) * 0.1 - x;
}

void BM_Chain16M(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor x = kiln::randn({kBig});
  { kiln::Tensor warm = chain(x); }
  for (auto _ : state) {
    kiln::Tensor y = chain(x);
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  bandwidth(state, "GBps_8B", 8, kBig);  // one read of x, one write of y
}
BENCHMARK(BM_Chain16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Each op of the chain alone (to see where the chain's time goes).
template <int Op>
void BM_ChainOp16M(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor x = kiln::randn({kBig}), z = kiln::randn({kBig});
  auto run = [&] {
    switch (Op) {
      case 0: return x * 1.5;
      case 1: return kiln::tanh(x);
      case 2: return kiln::sigmoid(x);
      case 3: return kiln::exp(x);
      default: return x * z;
    }
  };
  { kiln::Tensor warm = run(); }
  for (auto _ : state) {
    kiln::Tensor y = run();
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  bandwidth(state, "GBps_8B", 8, kBig);
}
BENCHMARK(BM_ChainOp16M<0>)->Name("BM_Op16M/mul_scalar")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainOp16M<1>)->Name("BM_Op16M/tanh")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainOp16M<2>)->Name("BM_Op16M/sigmoid")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainOp16M<3>)->Name("BM_Op16M/exp")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainOp16M<4>)->Name("BM_Op16M/mul_tensor")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- matmul 1024x1024x1024 float32 ----
void gflops(benchmark::State& state) {
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * double(kMat) * kMat * kMat * double(state.iterations()) / 1e9,
                                                benchmark::Counter::kIsRate);
}

void BM_Matmul1024(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor a = kiln::randn({kMat, kMat}), b = kiln::randn({kMat, kMat});
  { kiln::Tensor warm = kiln::matmul(a, b); }
  for (auto _ : state) {
    kiln::Tensor c = kiln::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  gflops(state);
}
BENCHMARK(BM_Matmul1024)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CblasSgemm1024(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor a = kiln::randn({kMat, kMat}), b = kiln::randn({kMat, kMat}), c = kiln::zeros({kMat, kMat});
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(kMat), int(kMat), int(kMat), 1.0f,
                a.data_ptr<float>(), int(kMat), b.data_ptr<float>(), int(kMat), 0.0f, c.data_ptr<float>(), int(kMat));
    benchmark::ClobberMemory();
  }
  gflops(state);
}
BENCHMARK(BM_CblasSgemm1024)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

#if KILN_BENCH_HAVE_DNNL
void BM_DnnlSgemm1024(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor a = kiln::randn({kMat, kMat}), b = kiln::randn({kMat, kMat}), c = kiln::zeros({kMat, kMat});
  for (auto _ : state) {
    dnnl_status_t st = dnnl_sgemm('N', 'N', kMat, kMat, kMat, 1.0f, a.data_ptr<float>(), kMat, b.data_ptr<float>(),
                                  kMat, 0.0f, c.data_ptr<float>(), kMat);
    if (st != dnnl_success) {
      state.SkipWithError("dnnl_sgemm failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  gflops(state);
}
BENCHMARK(BM_DnnlSgemm1024)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

// ---- fused attention at the GPT bench's shape (nanoGPT's CPU settings: batch 12, 4 heads, 64 positions, head
// dim 32, causal): the forward, and forward + backward as a training step runs them ----
void attention_flops(benchmark::State& state, double passes) {
  // q.k and p.v over the causal half of the [64, 64] scores, per head; the backward is 2.5 forwards
  const double fwd = 2.0 * 2.0 * 64 * 65 / 2 * 32 * 48;
  state.counters["GFLOPs"] = benchmark::Counter(passes * fwd * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_AttentionGpt(benchmark::State& state) {
  set_threads(state);
  kiln::NoGradGuard no_grad;
  kiln::Tensor q = kiln::randn({12, 4, 64, 32}), k = kiln::randn({12, 4, 64, 32}), v = kiln::randn({12, 4, 64, 32});
  for (auto _ : state) {
    kiln::Tensor y = kiln::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    benchmark::DoNotOptimize(y.raw_data());
  }
  attention_flops(state, 1.0);
}
BENCHMARK(BM_AttentionGpt)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_AttentionGptTrain(benchmark::State& state) {
  set_threads(state);
  kiln::Tensor q = kiln::randn({12, 4, 64, 32}).requires_grad_(), k = kiln::randn({12, 4, 64, 32}).requires_grad_(),
               v = kiln::randn({12, 4, 64, 32}).requires_grad_();
  kiln::Tensor g = kiln::randn({12, 4, 64, 32});
  for (auto _ : state) {
    kiln::Tensor y = kiln::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    kiln::Tensors d = kiln::grad({y}, {q, k, v}, {g});
    benchmark::DoNotOptimize(d[0].raw_data());
  }
  attention_flops(state, 3.5);
}
BENCHMARK(BM_AttentionGptTrain)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- STREAM-style copy: memcpy of 16M floats into a preallocated buffer, split across threads ----
void BM_Copy16M(benchmark::State& state) {
  int threads = int(state.range(0));
  kiln::Tensor src = kiln::rand({kBig}), dst = kiln::zeros({kBig});
  const char* s = static_cast<const char*>(src.raw_data());
  char* d = static_cast<char*>(dst.raw_data());
  const size_t bytes = size_t(kBig) * sizeof(float);
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      size_t b = (bytes * size_t(t) / size_t(nt)) & ~size_t(63);
      size_t e = t + 1 == nt ? bytes : (bytes * size_t(t + 1) / size_t(nt)) & ~size_t(63);
      std::memcpy(d + b, s + b, e - b);
    }
    benchmark::ClobberMemory();
  }
  bandwidth(state, "GBps_8B", 8, kBig);  // STREAM copy convention: 1 read + 1 write per element
}
BENCHMARK(BM_Copy16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- layout and dtype copies: x.t().contiguous() of 1024x1024 float32 (8x8 register tiles), and a
// ReLU gradient's g * (x > 0) on [64,16,8,8] (a bool mask cast to float32 in the multiply) ----
void BM_TransposeCopy1024(benchmark::State& state) {
  kiln::set_num_threads(int(state.range(0)));
  kiln::Tensor x = kiln::randn({kMat, kMat});
  for (auto _ : state) {
    kiln::Tensor y = x.t().contiguous();
    benchmark::DoNotOptimize(y.raw_data());
  }
  bandwidth(state, "GBps_8B", 8, kMat * kMat);
}
BENCHMARK(BM_TransposeCopy1024)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MaskMul64K(benchmark::State& state) {
  kiln::set_num_threads(int(state.range(0)));
  kiln::Tensor g = kiln::randn({64, 16, 8, 8}), x = kiln::randn({64, 16, 8, 8});
  for (auto _ : state) {
    kiln::Tensor y = g * (x > 0);
    benchmark::DoNotOptimize(y.raw_data());
  }
}
BENCHMARK(BM_MaskMul64K)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- eager training step: MLP 784-256-10, batch 64, cross_entropy, SGD (forward+backward+step) ----
void BM_MLPStep(benchmark::State& state) {
  set_threads(state);
  kiln::manual_seed(0);
  auto l1 = std::make_shared<kiln::nn::Linear>(784, 256), l2 = std::make_shared<kiln::nn::Linear>(256, 10);
  kiln::nn::Sequential mlp({l1, std::make_shared<kiln::nn::ReLU>(), l2});
  kiln::optim::SGD opt(mlp.parameters(), {0.01});
  kiln::Tensor x = kiln::randn({64, 784}), y = kiln::randint(0, 10, {64});
  for (auto _ : state) {
    kiln::Tensor loss = kiln::cross_entropy(mlp(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    benchmark::DoNotOptimize(loss.impl());
  }
}
BENCHMARK(BM_MLPStep)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("kiln_isa", std::string(kiln::cpu::isa_kernels().name));
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  const char* ct = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", ct ? ct : "(unset)");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
