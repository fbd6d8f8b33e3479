// The x86 JIT backend: compile latency of a typical 8-op fusion group, and the 8-op chain
// y = sigmoid(tanh(x*1.5+0.5)*x) + exp(x)*0.1 - x on 16M float32 as one generated kernel next to the
// same chain written by hand as one fused loop (bench/chain_reference.cpp, g++ -O3 -march=native
// -ffast-math -fopenmp, libmvec) and a STREAM-like copy (the bandwidth floor: 8 bytes per element).
// Run: build-x86/bench/bench_x86 --benchmark_min_time=0.5
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>

#include "backends/x86/isa.h"
#include "backends/x86/kernel.h"
#include "core/ir/parser.h"
#include "kiln/kiln.h"

void kiln_chain_reference(const float* x, float* y, int64_t n);
void kiln_chain_reference_avx2(const float* x, float* y, int64_t n);

namespace {

constexpr int64_t kBig = int64_t(1) << 24;

const char* kChain =
    "graph(%x : f32[N]):\n"
    "  %c1 : f32[] = prim::Constant[value=[1.5]]()\n"
    "  %c2 : f32[] = prim::Constant[value=[0.5]]()\n"
    "  %c3 : f32[] = prim::Constant[value=[0.1]]()\n"
    "  %0 : f32[N] = mul(%x, %c1)\n"
    "  %1 : f32[N] = add(%0, %c2)\n"
    "  %2 : f32[N] = tanh(%1)\n"
    "  %3 : f32[N] = mul(%2, %x)\n"
    "  %4 : f32[N] = sigmoid(%3)\n"
    "  %5 : f32[N] = exp(%x)\n"
    "  %6 : f32[N] = mul(%5, %c3)\n"
    "  %7 : f32[N] = add(%4, %6)\n"
    "  %8 : f32[N] = sub(%7, %x)\n"
    "  return (%8)\n";

void bandwidth(benchmark::State& state, double bytes_per_elem, int64_t n) {
  state.counters["GBps_8B"] = benchmark::Counter(bytes_per_elem * double(n) * double(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

bool have_isa(benchmark::State& state) {
  if (kiln::x86::best_isa() != kiln::x86::Isa::None) return true;
  state.SkipWithError("no AVX2");
  return false;
}

// Compile latency: lowering + code generation of the 8-op group (the graph is parsed once).
void BM_X86Compile8Op(benchmark::State& state) {
  if (!have_isa(state)) return;
  auto g = kiln::ir::parse_ir(kChain);
  for (auto _ : state) {
    auto k = kiln::x86::compile(*g, "kiln_fused_chain");
    benchmark::DoNotOptimize(k.get());
  }
}
BENCHMARK(BM_X86Compile8Op)->Unit(benchmark::kMicrosecond)->Repetitions(10)->ReportAggregatesOnly(true);

template <bool kAvx2>
void BM_X86Chain16M(benchmark::State& state) {
  if (!have_isa(state)) return;
  if (kAvx2) kiln::x86::set_isa_cap(kiln::x86::Isa::Avx2);
  kiln::set_num_threads(int(state.range(0)));
  auto g = kiln::ir::parse_ir(kChain);
  auto k = kiln::x86::compile(*g, "kiln_fused_chain");
  kiln::Tensor x = kiln::randn({kBig});
  { kiln::Tensors warm = k->run({x}); }
  for (auto _ : state) {
    kiln::Tensors y = k->run({x});
    benchmark::DoNotOptimize(y[0].raw_data());
    benchmark::ClobberMemory();
  }
  bandwidth(state, 8, kBig);
  state.SetLabel(std::string(kiln::x86::isa_name(k->isa())));
  kiln::x86::set_isa_cap(kiln::x86::Isa::None);
}
BENCHMARK(BM_X86Chain16M<false>)->Name("BM_X86Chain16M")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_X86Chain16M<true>)->Name("BM_X86Chain16M_avx2")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

template <bool kAvx2>
void BM_ChainReference16M(benchmark::State& state) {
  auto ref = kAvx2 ? kiln_chain_reference_avx2 : kiln_chain_reference;
  int threads = int(state.range(0));
  omp_set_num_threads(threads);
  kiln::Tensor x = kiln::randn({kBig}), y = kiln::zeros({kBig});
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  ref(xp, yp, kBig);
  for (auto _ : state) {
    ref(xp, yp, kBig);
    benchmark::ClobberMemory();
  }
  bandwidth(state, 8, kBig);
}
BENCHMARK(BM_ChainReference16M<false>)->Name("BM_ChainReference16M")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainReference16M<true>)->Name("BM_ChainReference16M_avx2")->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_X86Copy16M(benchmark::State& state) {
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
  bandwidth(state, 8, kBig);
}
BENCHMARK(BM_X86Copy16M)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
