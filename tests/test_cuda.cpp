// The CUDA backend's checks that need no GPU: every kernel the table can launch renders and compiles
// with NVRTC for sm_80 and sm_90, the kernel cache's keys and disk cache, and the error texts. Tests
// that run kernels are in test_cuda_device.cpp.
#include "kiln_config.h"
#include "support.h"

#if KILN_HAVE_NVRTC
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <set>

#include <fmt/format.h>

#include "backends/cuda/attention.h"
#include "backends/cuda/driver_api.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/nvrtc_compile.h"
#include "backends/cuda/source_render.h"
#include "backends/cuda/toolkit_api.h"
#endif

using namespace kiln;
using kiln::test::check_error;
using kiln::test::fake_cuda_tensor;

TEST_CASE("cuda: ops on tensors of different devices raise") {
  Tensor c = fake_cuda_tensor({3});
  check_error([&] { add(ones({3}), c); }, "add: expected all tensors on one device, got cpu and cuda:0");
  check_error([&] { mul(c, ones({3})); }, "mul: expected all tensors on one device, got cuda:0 and cpu");
  check_error([&] { where(ones({3}) > 0, c, ones({3})); }, "where: expected all tensors on one device");
}

TEST_CASE("cuda: device names and options") {
  CHECK(Device::cuda(1).str() == "cuda:1");
  CHECK(Device::cpu().str() == "cpu");
  TensorOptions o(DType::Float64, Device::cuda());
  CHECK(o.dtype == DType::Float64);
  CHECK(o.device == Device::cuda(0));
  Tensor x = ones({2});
  CHECK(x.cpu().is_same(x));  // already there: no copy
  CHECK(memory_stats(Device::cpu()).current_bytes == memory_stats().current_bytes);
}

#if !KILN_HAVE_NVRTC

TEST_CASE("cuda: a build without the toolkit says so") {
  CHECK_FALSE(cuda::is_available());
  CHECK(cuda::device_count() == 0);
  check_error([] { ones({2}).cuda(); }, "cuda: kiln was built without the cuda toolkit");
  check_error([] { zeros({2}, Device::cuda()); }, "cuda: kiln was built without the cuda toolkit");
}

#else

TEST_CASE("cuda: nvrtc and cublas open on first use with every entry point kiln calls") {
  // The loader raises naming the first symbol it cannot resolve (a cublas_v2.h rename, a newer soname).
  const cuda::NvrtcApi& n = cuda::nvrtc();
  CHECK(bool(n.nvrtcCompileProgram));
  int major = 0, minor = 0;
  CHECK(n.nvrtcVersion(&major, &minor) == NVRTC_SUCCESS);
  CHECK(major * 1000 + minor * 10 == CUDA_VERSION);
  CHECK(bool(cuda::cublas().cublasSgemmStridedBatched));
}

TEST_CASE("cuda: a missing driver is reported by name") {
  check_error([] { cuda::load_driver("libcuda-kiln-missing.so.1"); }, "cuda: no driver found (libcuda-kiln-missing.so.1)");
  if (cuda::is_available()) return;
  std::string why = cuda::unavailable_reason();
  MESSAGE("cuda unavailable here: " << why);
  CHECK(cuda::device_count() == 0);
  check_error([] { ones({2}).cuda(); }, why);
  check_error([] { randn({2}, Device::cuda()); }, why);
  check_error([] { memory_stats(Device::cuda()); }, why);
  // The machine this suite runs on in CI has no driver at all: the exact text users see there.
  if (why.find("no driver") != std::string::npos) CHECK(why == "cuda: no driver found (libcuda.so.1)");
}

TEST_CASE("cuda: kernels are rendered from the op table's expressions") {
  std::string relu = cuda::render(cuda::unary_spec(OpId::Relu, DType::Float32, DType::Float32, DType::Float32));
  CHECK(relu.find(std::string(op_info(OpId::Relu).expr)) != std::string::npos);
  CHECK(relu.find("kiln_relu_f32_f32_f32_s") != std::string::npos);
  CHECK(relu.find("kiln_relu_f32_f32_f32_v") != std::string::npos);
  std::string pw = cuda::render(cuda::binary_spec(OpId::Pow, DType::Int64, DType::Int64, DType::Int64, DType::Int64));
  CHECK(pw.find("kpow(a, b)") != std::string::npos);
  // every unary and binary row of ops.def has kernels in the set CI compiles
  std::set<std::string> names;
  for (const auto& s : cuda::every_elementwise_spec()) names.insert(s.name);
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(OpId(i));
    if (info.kind != OpKind::Unary && info.kind != OpKind::Binary) continue;
    bool found = false;
    for (const auto& n : names) found = found || n.rfind("kiln_" + std::string(info.name) + "_", 0) == 0;
    CHECK_MESSAGE(found, "no cuda kernel rendered for " << info.name);
  }
}

// NVRTC compiles `src` for both architectures CI covers, in parallel; each cubin at least min_bytes.
static void compiles_for_sm80_and_sm90(const std::string& src, const char* what, const std::vector<std::string>& flags,
                                size_t min_bytes) {
  auto build = [&](int arch) {
    try {
      return std::make_pair(cuda::nvrtc_compile(src, arch, what, flags), std::string());
    } catch (const Error& e) {
      return std::make_pair(std::vector<char>(), std::string(e.what()));
    }
  };
  auto sm80 = std::async(std::launch::async, build, 80);
  auto sm90 = build(90);
  for (auto [arch, r] : {std::make_pair(80, sm80.get()), std::make_pair(90, sm90)}) {
    CAPTURE(arch);
    CHECK_MESSAGE(r.second.empty(), r.second);
    CHECK(r.first.size() > min_bytes);
  }
}

TEST_CASE("cuda: every kernel compiles with nvrtc for sm_80 and sm_90") {
  // One module holds them all, so NVRTC's fixed cost is paid once per architecture. -G compiles without
  // the optimiser (front end, codegen and ptxas all run; optimising ~360 kernels takes minutes); the two
  // architectures compile in parallel.
  compiles_for_sm80_and_sm90(cuda::render_module(cuda::every_elementwise_spec(), cuda::every_reduce_spec()),
                             "every_kernel", {"-G"}, 100000);
}

TEST_CASE("cuda: the float32 kernels compile optimised, as at run time") {
  std::vector<cuda::ElementwiseSpec> f32;
  for (auto& s : cuda::every_elementwise_spec())
    if (s.compute == DType::Float32 &&
        std::all_of(s.in.begin(), s.in.end(), [](DType t) { return t == DType::Float32 || t == DType::Bool; }))
      f32.push_back(s);
  std::vector<cuda::ReduceSpec> r32;
  for (auto& s : cuda::every_reduce_spec())
    if (s.in == DType::Float32) r32.push_back(s);
  std::vector<char> cubin;
  try {
    cubin = cuda::nvrtc_compile(cuda::render_module(f32, r32), 90, "float32_kernels");
  } catch (const Error& e) {
    FAIL(e.what());
  }
  CHECK(cubin.size() > 10000);
}

TEST_CASE("cuda: flash attention's kernels compile optimised for sm_80 and sm_90, every dtype and head width") {
  // the options run time uses (kernel_cache's cubin_for): these kernels are what F.scaled_dot_product_attention
  // and the compiled GPT's fused attention launch on a GPU
  std::vector<std::pair<DType, int>> variants = cuda::attention_variants();
  CHECK(variants.size() == 16);
  std::string src = cuda::render_attention(variants);
  for (auto [dt, per_lane] : variants)
    for (const char* k : {"_fwd(", "_bwd_q(", "_bwd_kv("})
      CHECK_MESSAGE(src.find(fmt::format("kiln_att_{}_{}{}", cuda::dtype_tag(dt), per_lane, k)) != std::string::npos,
                    dtype_name(dt) << " " << per_lane << k);
  compiles_for_sm80_and_sm90(src, "flash_attention", {}, 10000);
}

TEST_CASE("cuda: a kernel that does not compile raises with nvrtc's log") {
  check_error([] { cuda::nvrtc_compile("extern \"C\" __global__ void k() { undefined_thing(); }", 90, "broken"); },
              "nvrtc: nvrtcCompileProgram failed for broken on sm_90");
  check_error([] { cuda::nvrtc_compile("extern \"C\" __global__ void k() { undefined_thing(); }", 90, "broken"); },
              "undefined_thing");
}

TEST_CASE("cuda: the kernel cache keys and the disk cache") {
  // (the key's components: test_cuda_jit.cpp)
  const char* old = std::getenv("KILN_CUDA_CACHE_DIR");
  std::string saved = old ? old : "";
  auto dir = std::filesystem::temp_directory_path() / ("kiln-cuda-cache-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  setenv("KILN_CUDA_CACHE_DIR", dir.c_str(), 1);
  CHECK(cuda::cache_dir() == dir);

  // A source nobody else compiles, so the first request must run NVRTC.
  std::string src = "extern \"C\" __global__ void kiln_cache_probe_" + std::to_string(getpid()) +
                    "(float* p) { p[threadIdx.x] += 1.0f; }\n";
  auto before = cuda::kernel_cache_stats();
  std::vector<char> first = cuda::cubin_for(src, 90, "probe");
  auto after_compile = cuda::kernel_cache_stats();
  CHECK(after_compile.compiles == before.compiles + 1);
  auto key = [&](int arch) { return cuda::cache_key({src, arch, cuda::nvrtc_version(), cuda::driver_version(), ""}); };
  auto file = cuda::cache_path(key(90), 90);
  CHECK(file == dir / (key(90) + ".sm_90.cubin"));
  CHECK(std::filesystem::exists(file));
  CHECK(std::filesystem::file_size(file) > first.size());  // a header, then the cubin

  CHECK(cuda::cubin_for(src, 90, "probe") == first);  // from memory
  CHECK(cuda::kernel_cache_stats().memory_hits == after_compile.memory_hits + 1);

  cuda::clear_memory_cache();
  CHECK(cuda::cubin_for(src, 90, "probe") == first);  // from disk, as a new process would
  auto after_disk = cuda::kernel_cache_stats();
  CHECK(after_disk.disk_hits == after_compile.disk_hits + 1);
  CHECK(after_disk.compiles == after_compile.compiles);

  // Another architecture is another entry.
  cuda::cubin_for(src, 80, "probe");
  CHECK(cuda::kernel_cache_stats().compiles == after_disk.compiles + 1);
  CHECK(std::filesystem::exists(cuda::cache_path(key(80), 80)));

  if (old) setenv("KILN_CUDA_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("KILN_CUDA_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

#endif

TEST_CASE("cuda: moving a module to the cpu is a no-op, to a missing gpu raises") {
  nn::Linear lin(3, 2);
  Tensor w = lin.weight;
  lin.to(Device::cpu());
  CHECK(lin.weight.is_same(w));
  CHECK(lin.weight.device() == Device::cpu());
  if (cuda::is_available()) return;
  check_error([&] { lin.to(Device::cuda()); }, "cuda:");
  CHECK(lin.weight.device() == Device::cpu());  // left as it was
}
