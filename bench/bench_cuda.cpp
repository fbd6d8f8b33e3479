// CUDA eager throughput and overhead (Google Benchmark): add and an 8-op elementwise chain on 2^26
// float32 against a device-to-device copy's bandwidth, the per-op launch overhead, and matmul against
// cuBLAS called directly. Exits with a line saying it skipped where no GPU is usable.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <kiln/kiln.h>

#include <unistd.h>

#include <chrono>
#include <iostream>

#include "backends/cuda/driver_api.h"
#include "backends/cuda/fusion_compiler.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/launch_params.h"
#include "backends/cuda/nvrtc_compile.h"
#include "backends/cuda/runtime.h"
#include "core/ir/parser.h"

using namespace kiln;

namespace {

const Device kCuda = Device::cuda(0);
constexpr int64_t kBig = int64_t(1) << 26;

// Times the body with the device drained on both ends, so GPU work is measured rather than queued.
template <class F>
void timed(benchmark::State& state, F&& body) {
  for (auto _ : state) {
    cuda::synchronize();
    auto t0 = std::chrono::steady_clock::now();
    body();
    cuda::synchronize();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

void BM_CudaAdd(benchmark::State& state) {
  Tensor a = rand({kBig}, kCuda), b = rand({kBig}, kCuda);
  add(a, b);  // compile outside the timing
  timed(state, [&] { benchmark::DoNotOptimize(add(a, b)); });
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 3);  // two reads, one write
}
BENCHMARK(BM_CudaAdd)->UseManualTime()->Unit(benchmark::kMillisecond);

// Eight eager kernels, each reading and writing the whole tensor (what fusion will later save).
Tensor chain(const Tensor& x) {
  Tensor y = mul(x, 1.5f);
  y = add(y, 0.25f);
  y = relu(y);
  y = exp(neg(y));
  y = sigmoid(y);
  y = sub(y, x);
  return tanh(y);
}

void BM_CudaChain8(benchmark::State& state) {
  Tensor x = rand({kBig}, kCuda);
  chain(x);
  timed(state, [&] { benchmark::DoNotOptimize(chain(x)); });
  state.SetBytesProcessed(state.iterations() * kBig * 4 * (8 * 2 + 1));  // 8 ops read and write, sub reads twice
}
BENCHMARK(BM_CudaChain8)->UseManualTime()->Unit(benchmark::kMillisecond);

// The same chain compiled: one fused kernel (backends/cuda/fusion_compiler.h) reading x and writing
// the result once, against the eight eager kernels above.
void BM_CudaChain8Compiled(benchmark::State& state) {
  Function f = compile(trace([](const Tensors& in) { return Tensors{chain(in[0])}; }, {rand({16})}));
  Tensor x = rand({kBig}, kCuda);
  f({x});  // trace specialisation, render and NVRTC outside the timing
  timed(state, [&] { benchmark::DoNotOptimize(f({x})); });
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 2);
  state.counters["fused_kernels"] = double(compile_stats(f).kernels);
}
BENCHMARK(BM_CudaChain8Compiled)->UseManualTime()->Unit(benchmark::kMillisecond);

// What a fusion group costs the first time: NVRTC to cubin (cold, a fresh source each iteration so no
// cache answers), and the warm path a new process takes, the disk cache's read and check.
const char* kChainGroup = R"(graph(%x : f32[N], %b : f32[N]):
  %0 : f32[N] = add(%x, %b)
  %1 : f32[N] = mul(%0, %x)
  %2 : f32[N] = relu(%1)
  %3 : f32[N] = exp(%2)
  return (%3)
)";

void BM_CudaFusionColdCompile(benchmark::State& state) {
  auto g = ir::parse_ir(kChainGroup);
  int arch = cuda::device_state(0).arch();
  int64_t i = 0;
  for (auto _ : state) {
    auto k = cuda::render_fusion(*g, "bench_cold_" + std::to_string(i++) + "_" + std::to_string(getpid()));
    benchmark::DoNotOptimize(cuda::nvrtc_compile(k.source, arch, k.name));
  }
}
BENCHMARK(BM_CudaFusionColdCompile)->Unit(benchmark::kMillisecond);

void BM_CudaFusionDiskCacheLoad(benchmark::State& state) {
  auto k = cuda::render_fusion(*ir::parse_ir(kChainGroup), "bench_warm");
  int arch = cuda::device_state(0).arch();
  cuda::compile_fusion(k, arch);  // fills memory and disk
  for (auto _ : state) {
    cuda::clear_memory_cache();
    benchmark::DoNotOptimize(cuda::compile_fusion(k, arch));
  }
}
BENCHMARK(BM_CudaFusionDiskCacheLoad)->Unit(benchmark::kMicrosecond);

// The bandwidth roof: the driver's device-to-device copy, and kiln's copy kernel (clone).
void BM_CudaMemcpyDtoD(benchmark::State& state) {
  Tensor a = rand({kBig}, kCuda), b = empty({kBig}, kCuda);
  auto& dev = cuda::device_state(0);
  timed(state, [&] {
    KILN_CU(cuMemcpyDtoDAsync, reinterpret_cast<CUdeviceptr>(b.raw_data()), reinterpret_cast<CUdeviceptr>(a.raw_data()),
            size_t(kBig) * 4, dev.stream);
  });
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 2);
}
BENCHMARK(BM_CudaMemcpyDtoD)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_CudaClone(benchmark::State& state) {
  Tensor a = rand({kBig}, kCuda);
  a.clone();
  timed(state, [&] { benchmark::DoNotOptimize(a.clone()); });
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 2);
}
BENCHMARK(BM_CudaClone)->UseManualTime()->Unit(benchmark::kMillisecond);

// Per-op cost on the host: dispatch, allocation and launch of a one-element add, queued without waits.
void BM_CudaLaunchOverhead(benchmark::State& state) {
  Tensor a = ones({1}, kCuda), b = ones({1}, kCuda);
  add(a, b);
  cuda::synchronize();
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  cuda::synchronize();
}
BENCHMARK(BM_CudaLaunchOverhead)->Unit(benchmark::kMicrosecond);

// The driver's own floor under that: cuLaunchKernel of an empty kernel, no kiln in between.
void BM_CudaLaunchDriverOnly(benchmark::State& state) {
  auto& dev = cuda::device_state(0);
  CUfunction fn = cuda::function_for(0, "extern \"C\" __global__ void kiln_bench_nop(int) {}", "kiln_bench_nop");
  int arg = 0;
  void* args[] = {&arg};
  for (auto _ : state) KILN_CU(cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, dev.stream, args, nullptr);
  cuda::synchronize();
}
BENCHMARK(BM_CudaLaunchDriverOnly)->Unit(benchmark::kMicrosecond);

// The same with an elementwise kernel's parameter block (LoopParams, 704 bytes) passed by value.
void BM_CudaLaunchDriverOnlyLoopParams(benchmark::State& state) {
  auto& dev = cuda::device_state(0);
  CUfunction fn = cuda::function_for(0, "struct P { char b[704]; };\nextern \"C\" __global__ void kiln_bench_nop_big(const P) {}",
                                     "kiln_bench_nop_big");
  cuda::LoopParams p{};
  void* args[] = {&p};
  for (auto _ : state) KILN_CU(cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, dev.stream, args, nullptr);
  cuda::synchronize();
}
BENCHMARK(BM_CudaLaunchDriverOnlyLoopParams)->Unit(benchmark::kMicrosecond);

// kiln's share of a launch, by part: a cached device allocation and the CPU dispatch of the same add.
void BM_CudaEmptyOneElement(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(empty({1}, kCuda));
}
BENCHMARK(BM_CudaEmptyOneElement)->Unit(benchmark::kMicrosecond);

void BM_CpuAddOneElement(benchmark::State& state) {
  Tensor a = ones({1}), b = ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
}
BENCHMARK(BM_CpuAddOneElement)->Unit(benchmark::kMicrosecond);

void BM_CudaMatmul(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = rand({n, n}, kCuda), b = rand({n, n}, kCuda);
  matmul(a, b);
  timed(state, [&] { benchmark::DoNotOptimize(matmul(a, b)); });
  state.counters["TFLOP/s"] = benchmark::Counter(double(state.iterations()) * 2.0 * double(n * n * n) / 1e12,
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CudaMatmul)->Arg(1024)->Arg(4096)->UseManualTime()->Unit(benchmark::kMillisecond);

// The same GEMM through cuBLAS with no kiln in between: the floor kiln's matmul is held to.
void BM_CublasDirect(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = rand({n, n}, kCuda), b = rand({n, n}, kCuda), c = empty({n, n}, kCuda);
  auto& dev = cuda::device_state(0);
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, reinterpret_cast<cudaStream_t>(dev.stream));
  const float one = 1.0f, zero = 0.0f;
  int ni = int(n);
  auto gemm = [&] {
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<const float*>(b.raw_data()), ni,
                static_cast<const float*>(a.raw_data()), ni, &zero, static_cast<float*>(c.raw_data()), ni);
  };
  gemm();
  timed(state, gemm);
  state.counters["TFLOP/s"] = benchmark::Counter(double(state.iterations()) * 2.0 * double(n * n * n) / 1e12,
                                                  benchmark::Counter::kIsRate);
  cublasDestroy(h);
}
BENCHMARK(BM_CublasDirect)->Arg(1024)->Arg(4096)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (!cuda::is_available()) {
    std::cout << "bench_cuda: skipped: " << cuda::unavailable_reason() << "\n";
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
