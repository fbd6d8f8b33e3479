// The CUDA JIT backend: fusion groups rendered from ops.def, compiled by NVRTC to cubin for sm_80 and
// sm_90, the kernel cache's keys and its defence against damaged disk entries, the backend chosen by
// the inputs' device, and (on a machine with a GPU) fused kernels against the CPU's results.
#include "kiln_config.h"
#include "random_graphs.h"
#include "support.h"

#include "backends/fusion_backend.h"
#include "core/ir/parser.h"
#include "jit/compiled_function.h"
#include "jit/default_backend.h"
#include "jit/pass_manager.h"
#include "tracer/trace.h"

#if KILN_HAVE_NVRTC
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <fstream>

#include "backends/cuda/fusion_compiler.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/nvrtc_compile.h"
#include "backends/interp/interpreter.h"
#include "jit/group_kernel.h"
#endif

using namespace kiln;
using kiln::test::check_error;
using kiln::test::fake_cuda_tensor;


TEST_CASE("cuda jit: the backend follows the inputs' device") {
  const jit::Backend* cpu = jit::backend_for({Device::cpu()});
  if (cpu) CHECK(cpu->name() == "x86");
  const jit::Backend* gpu = jit::backend_for({Device::cpu(), Device::cuda(0)});
#if KILN_HAVE_NVRTC
  REQUIRE(gpu != nullptr);
  CHECK(gpu->name() == "cuda");
  CHECK(gpu->device_type() == Device::Type::CUDA);
  CHECK(jit::backend_for({Device::cuda(1)}) == gpu);
#else
  CHECK(gpu == nullptr);
#endif
  CHECK(jit::backend_for({}) == cpu);
}

#if KILN_HAVE_NVRTC

namespace {

// add-mul-relu with a bias broadcast over rows and a scalar constant copied in.
constexpr const char* kChain = R"(graph(%x : f32[4,8], %b : f32[8]):
  %k : f64[] = prim::Constant[value=[2.0], wrapped=true]()
  %0 : f32[4,8] = add(%x, %b)
  %1 : f32[4,8] = mul(%0, %k)
  %2 : f32[4,8] = relu(%1)
  return (%2)
)";
// A chain ending in a sum over the last dim, its last elementwise value an output too.
constexpr const char* kRowSum = R"(graph(%x : f32[4,8]):
  %0 : f32[4,8] = exp(%x)
  %1 : f32[4,8] = mul(%0, %x)
  %s : f32[4] = sum[dims=[1], keepdim=false](%1)
  return (%s, %1)
)";
// A row group: layer_norm's forward, its mean and rstd (one number per row) outputs too.
constexpr const char* kLayerNormRows = R"(graph(%x : f32[4,40], %w : f32[40]):
  %n : f64[] = prim::Constant[value=[40.0], wrapped=true]()
  %s : f32[4,1] = sum[dims=[1], keepdim=true](%x)
  %m : f32[4,1] = div(%s, %n)
  %d : f32[4,40] = sub(%x, %m)
  %q : f32[4,40] = mul(%d, %d)
  %v : f32[4,1] = sum[dims=[1], keepdim=true](%q)
  %vn : f32[4,1] = div(%v, %n)
  %e : f64[] = prim::Constant[value=[1e-05], wrapped=true]()
  %ve : f32[4,1] = add(%vn, %e)
  %r : f32[4,1] = rsqrt(%ve)
  %y0 : f32[4,40] = mul(%d, %r)
  %y : f32[4,40] = mul(%y0, %w)
  return (%y, %m, %r, %v)
)";
// Casts, a comparison, a mask and where across bf16, f32, bool and f16.
constexpr const char* kCastWhere = R"(graph(%x : f32[16], %y : bf16[16], %c : bool[16]):
  %0 : f32[16] = to[dtype=f32](%y)
  %1 : bool[16] = gt(%x, %0)
  %2 : bool[16] = logical_and(%1, %c)
  %3 : f32[16] = where(%2, %x, %0)
  %4 : f16[16] = to[dtype=f16](%3)
  return (%4)
)";

int count_groups(const ir::Graph& g) {
  int n = 0;
  for (const ir::Node* node : g.block()->nodes()) n += node->prim() == ir::Prim::FusionGroup;
  return n;
}

}  // namespace

TEST_CASE("cuda jit: fusion asks the backend what it can fuse") {
  // f16 and its casts are beyond the x86 kernels (bf16 and its casts to and from f32 are not) but within
  // the CUDA renderer: the same graph becomes one group of all five ops for CUDA, and for x86 one of the
  // four before the cast to f16.
  const jit::Backend* gpu = jit::backend_for({Device::cuda(0)});
  REQUIRE(gpu != nullptr);
  auto for_x86 = ir::parse_ir(kCastWhere);
  auto for_cuda = ir::parse_ir(kCastWhere);
  jit::PipelineOptions o;
  jit::run_pipeline(*for_x86, o);
  o.backend = gpu;
  jit::run_pipeline(*for_cuda, o);
  CHECK(count_groups(*for_x86) == 1);
  CHECK(count_groups(*for_cuda) == 1);
  auto members = [](const ir::Graph& g) {
    int k = 0;
    for (const ir::Node* n : g.block()->nodes())
      if (n->prim() == ir::Prim::FusionGroup)
        for (const ir::Node* m : n->blocks()[0]->nodes()) k += m->is_op();
    return k;
  };
  CHECK(members(*for_x86) == 4);
  CHECK(members(*for_cuda) == 5);
}

TEST_CASE("cuda jit: compile() on cuda inputs picks the cuda backend") {
  Function f = trace([](const Tensors& in) { return Tensors{relu(add(mul(in[0], 2.0f), in[0]))}; }, {randn({16})});
  Function c = compile(f);
  compiled_graph(c, {randn({16})});
  CHECK(compile_stats(c).backend == (jit::backend_for({Device::cpu()}) ? "x86" : ""));
  // Rendering needs no device: the entry for cuda:0 compiles here; its kernels would build for the
  // device's architecture when first launched.
  auto g = compiled_graph(c, {fake_cuda_tensor({16})});
  jit::CacheStats st = compile_stats(c);
  CHECK(st.misses == 2);
  CHECK(st.backend == "cuda");
  CHECK(st.last_miss_reason == "input 0 device changed cpu -> cuda:0");
  CHECK(count_groups(*g) == 1);
}

TEST_CASE("cuda jit: fusion groups render from ops.def and compile to cubin for sm_80 and sm_90") {
  const char* old = std::getenv("KILN_CUDA_CACHE_DIR");
  std::string saved = old ? old : "";
  auto dir = std::filesystem::temp_directory_path() / ("kiln-cuda-jit-test-" + std::to_string(getpid()));
  setenv("KILN_CUDA_CACHE_DIR", dir.c_str(), 1);

  auto chain = cuda::render_fusion(*ir::parse_ir(kChain), "chain");
  CHECK(chain.name == "kiln_chain");
  CHECK(chain.inputs == std::vector<DType>{DType::Float32, DType::Float32});
  CHECK(chain.ew_outputs == std::vector<DType>{DType::Float32});
  CHECK_FALSE(chain.reduces);
  for (OpId op : {OpId::Add, OpId::Mul, OpId::Relu})
    CHECK_MESSAGE(chain.source.find(std::string(op_info(op).expr)) != std::string::npos, op_name(op));

  auto rowsum = cuda::render_fusion(*ir::parse_ir(kRowSum), "rowsum");
  CHECK(rowsum.reduces);
  CHECK_FALSE(rowsum.reduce_all);
  CHECK(rowsum.out_slot == std::vector<int>{-1, 0});
  CHECK(rowsum.source.find("acc = acc + x;") != std::string::npos);

  auto cw = cuda::render_fusion(*ir::parse_ir(kCastWhere), "cast_where");
  CHECK(cw.inputs == std::vector<DType>{DType::Float32, DType::BFloat16, DType::Bool});
  CHECK(cw.ew_outputs == std::vector<DType>{DType::Float16});
  CHECK(cw.source.find("kcast<kf16>") != std::string::npos);

  auto ln = cuda::render_fusion(*ir::parse_ir(kLayerNormRows), "layer_norm_rows");
  CHECK(ln.rows);
  CHECK_FALSE(ln.reduces);
  CHECK(ln.row_outputs == std::vector<bool>{false, true, true, true});
  CHECK(ln.source.find("__shared__ float sred1[") != std::string::npos);  // a pass per reduction

  for (const auto* k : {&chain, &rowsum, &cw, &ln})
    for (int arch : {80, 90}) {
      CAPTURE(k->name);
      CAPTURE(arch);
      std::vector<char> cubin;
      try {
        cubin = cuda::compile_fusion(*k, arch);
      } catch (const Error& e) {
        FAIL(e.what());
      }
      REQUIRE(cubin.size() > 4);
      CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");  // cubin, not PTX text
      CHECK(std::string(cubin.data(), cubin.size()).find(k->name) != std::string::npos);
    }
  if (old) setenv("KILN_CUDA_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("KILN_CUDA_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST_CASE("cuda jit: row groups (softmax, log_softmax, layer_norm, cross_entropy, forward and backward) render as row kernels and compile for sm_80 and sm_90") {
  const char* old = std::getenv("KILN_CUDA_CACHE_DIR");
  std::string saved = old ? old : "";
  auto dir = std::filesystem::temp_directory_path() / ("kiln-cuda-rows-test-" + std::to_string(getpid()));
  setenv("KILN_CUDA_CACHE_DIR", dir.c_str(), 1);
  Tensor x = randn({6, 40}), w = randn({40}), b = randn({40});
  Tensor target = tensor(std::vector<int64_t>{0, 3, 39, 7, 1, 2}, {6});
  struct Case {
    std::string name;
    Function fn;
    Tensors in;
  };
  std::vector<Case> cases{
      {"softmax", trace([](const Tensors& in) { return Tensors{softmax(in[0], -1)}; }, {x}), {x}},
      {"log_softmax", trace([](const Tensors& in) { return Tensors{log_softmax(in[0], -1)}; }, {x}), {x}},
      {"layer_norm", trace([](const Tensors& in) { return Tensors{layer_norm(in[0], {40}, in[1], in[2])}; }, {x, w, b}),
       {x, w, b}},
      {"cross_entropy", trace([](const Tensors& in) { return Tensors{cross_entropy(in[0], in[1])}; }, {x, target}),
       {x, target}},
  };
  int rows = 0;
  auto render_groups = [&](const ir::Graph& g) {
    CAPTURE(g.str());
    for (const ir::Node* n : g.block()->nodes()) {
      if (n->prim() != ir::Prim::FusionGroup || n->attrs().has("kind")) continue;  // marked groups call libraries
      cuda::FusedKernelSource k = cuda::render_fusion(*jit::group_graph(*n), "rows");
      rows += k.rows;
      for (int arch : {80, 90}) {
        CAPTURE(arch);
        std::vector<char> cubin;
        try {
          cubin = cuda::compile_fusion(k, arch);
        } catch (const Error& e) {
          FAIL(e.what());
        }
        CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");
      }
    }
  };
  const jit::Backend* gpu = jit::backend_for({Device::cuda(0)});
  REQUIRE(gpu != nullptr);
  REQUIRE(gpu->row_groups());
  for (Case& c : cases) {
    CAPTURE(c.name);
    // the forward's groups as the cuda backend's rules make them (rendering needs no device)
    auto fwd = c.fn.graph().copy();
    jit::PipelineOptions o;
    o.backend = gpu;
    jit::run_pipeline(*fwd, o);
    render_groups(*fwd);
    // the backward's groups, made by the CPU's rules (the same row groups: both backends have them)
    Function compiled = compile(c.fn);
    std::vector<IValue> in;
    for (const Tensor& t : c.in) in.emplace_back(is_floating(t.dtype()) ? t.detach().clone().requires_grad_(true) : t);
    render_groups(*compiled_backward_graph(compiled, in));
  }
  // softmax, log_softmax, layer_norm and cross_entropy forward, and their backwards
  CHECK(rows >= 7);
  if (old) setenv("KILN_CUDA_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("KILN_CUDA_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST_CASE("cuda jit: groups the renderer does not know are declined with the reason") {
  const jit::Backend* gpu = jit::backend_for({Device::cuda(0)});
  REQUIRE(gpu != nullptr);
  auto g = ir::parse_ir("graph(%x : f32[4,8]):\n  %0 : f32[4,8] = exp(%x)\n  %s : f32[8] = sum[dims=[0], keepdim=false](%0)\n  return (%s)\n");
  std::string why;
  CHECK(gpu->compile(*g, "first_dim", &why) == nullptr);
  CHECK(why == "cuda fusion: sum of float32 over dims other than all or the last");
}

TEST_CASE("cuda jit: nvrtc errors quote the generated source line") {
  auto k = cuda::render_fusion(*ir::parse_ir(kChain), "broken_chain");
  std::string relu(op_info(OpId::Relu).expr);
  size_t at = k.source.find(relu);
  REQUIRE(at != std::string::npos);
  k.source.replace(at, relu.size(), "kiln_no_such_helper(x)");
  check_error([&] { cuda::nvrtc_compile(k.source, 90, k.name); }, "nvrtc: nvrtcCompileProgram failed for kiln_broken_chain on sm_90");
  try {
    cuda::nvrtc_compile(k.source, 90, k.name);
    FAIL("expected an nvrtc error");
  } catch (const Error& e) {
    std::string msg = e.what();
    CHECK(msg.find("generated line") != std::string::npos);
    CHECK(msg.find("kcast<float>(kiln_no_such_helper(x))") != std::string::npos);
  }
}

TEST_CASE("cuda jit: the cache key covers source, arch, nvrtc, driver and flags") {
  cuda::CacheKeyParts base{"src", 90, "13.0", 12040, "-G"};
  std::string k = cuda::cache_key(base);
  CHECK(k.size() == 16);
  CHECK(cuda::cache_key(base) == k);
  auto with = [&](auto change) {
    cuda::CacheKeyParts p = base;
    change(p);
    return cuda::cache_key(p);
  };
  CHECK(with([](auto& p) { p.source = "src2"; }) != k);
  CHECK(with([](auto& p) { p.arch = 80; }) != k);
  CHECK(with([](auto& p) { p.nvrtc = "12.4"; }) != k);
  CHECK(with([](auto& p) { p.driver = 0; }) != k);
  CHECK(with([](auto& p) { p.flags = ""; }) != k);
  CHECK(cuda::cache_key({"a", 1, "", 0, ""}) != cuda::cache_key({"", 11, "", 0, ""}));  // fields are separated
}

TEST_CASE("cuda jit: a corrupt, truncated or stale disk entry is rebuilt, never loaded") {
  const char* old = std::getenv("KILN_CUDA_CACHE_DIR");
  std::string saved = old ? old : "";
  auto dir = std::filesystem::temp_directory_path() / ("kiln-cuda-corrupt-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  setenv("KILN_CUDA_CACHE_DIR", dir.c_str(), 1);

  std::string src = "extern \"C\" __global__ void kiln_corrupt_probe_" + std::to_string(getpid()) +
                    "(float* p) { p[threadIdx.x] *= 2.0f; }\n";
  cuda::clear_memory_cache();  // each subcase runs this again, after the last one removed the directory
  std::vector<char> good = cuda::cubin_for(src, 80, "probe");
  std::string key = cuda::cache_key({src, 80, cuda::nvrtc_version(), cuda::driver_version(), ""});
  auto file = cuda::cache_path(key, 80);
  REQUIRE(std::filesystem::exists(file));
  CHECK(std::filesystem::file_size(file) > good.size());  // header + cubin

  auto damage = [&](const std::function<void(std::vector<char>&)>& how) {
    std::vector<char> bytes;
    {
      std::ifstream f(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(f), {});
    }
    how(bytes);
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
    cuda::clear_memory_cache();
    auto before = cuda::kernel_cache_stats();
    CHECK(cuda::cubin_for(src, 80, "probe") == good);
    auto after = cuda::kernel_cache_stats();
    CHECK(after.rejected == before.rejected + 1);
    CHECK(after.compiles == before.compiles + 1);
    CHECK(after.disk_hits == before.disk_hits);
  };
  SUBCASE("a flipped byte in the cubin") { damage([](auto& b) { b[b.size() / 2] ^= 0x5a; }); }
  SUBCASE("truncated") { damage([](auto& b) { b.resize(b.size() - 100); }); }
  SUBCASE("shorter than the header") { damage([](auto& b) { b.resize(10); }); }
  SUBCASE("another key's entry under this name") {
    damage([&](auto& b) {
      std::vector<char> payload(b.begin() + 48, b.end());
      b = cuda::encode_entry("0123456789abcdef", payload);
    });
  }
  // The rebuilt entry is intact again: a fresh process would read it from disk.
  cuda::clear_memory_cache();
  auto before = cuda::kernel_cache_stats();
  CHECK(cuda::cubin_for(src, 80, "probe") == good);
  CHECK(cuda::kernel_cache_stats().disk_hits == before.disk_hits + 1);

  std::string why;
  std::vector<char> out;
  CHECK(cuda::decode_entry(cuda::encode_entry(key, good), key, &out, &why));
  CHECK(out == good);
  CHECK_FALSE(cuda::decode_entry(std::vector<char>(64, 'x'), key, &out, &why));
  CHECK(why == "not a kiln cubin entry");

  if (old) setenv("KILN_CUDA_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("KILN_CUDA_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST_CASE("cuda jit: fused kernels on a gpu match the interpreter") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no cuda device (" << cuda::unavailable_reason() << ")");
    return;
  }
  const jit::Backend* gpu = jit::backend_for({Device::cuda(0)});
  REQUIRE(gpu != nullptr);
  // misaligned: each device input starts one element into its buffer, so no 16-byte vector path
  auto run_both = [&](const char* text, const Tensors& cpu_in, bool misaligned = false) {
    auto g = ir::parse_ir(text);
    std::string why;
    auto k = gpu->compile(*g, "device_check", &why);
    REQUIRE_MESSAGE(k != nullptr, why);
    Tensors dev_in;
    for (const Tensor& t : cpu_in) {
      if (!misaligned) {
        dev_in.push_back(t.cuda());
        continue;
      }
      Tensor buf = empty({t.numel() + 1}, {t.dtype(), Device::cuda(0)});
      Tensor view = buf.slice(0, 1, std::nullopt).reshape(t.sizes());
      view.copy_(t);
      dev_in.push_back(view);
    }
    Tensors got = k->run(dev_in);
    std::vector<IValue> iv(cpu_in.begin(), cpu_in.end());
    std::vector<IValue> want = interp::run(*g, iv);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      test::check_close(got[i].cpu().to(DType::Float64), want[i].to_tensor().to(DType::Float64), 1e-5, 1e-6);
  };
  run_both(kChain, {randn({4, 8}), randn({8})});
  run_both(kRowSum, {randn({4, 8})});
  run_both(kCastWhere, {randn({16}), randn({16}).to(DType::BFloat16), randn({16}) > 0});
  run_both(kLayerNormRows, {randn({4, 40}) * 3.0 + 1.0, randn({40})});
  run_both(kLayerNormRows, {randn({4, 40}), randn({40})}, true);
  // the vector kernel's tail (19 = 4 * 4 + 3), a broadcast scalar splat into it, and misaligned
  // operands that take the strided kernel
  run_both(kCastWhere, {randn({19}), randn({19}).to(DType::BFloat16), randn({19}) > 0});
  run_both(kChain, {randn({67}), randn({1})});
  run_both(kCastWhere, {randn({19}), randn({19}).to(DType::BFloat16), randn({19}) > 0}, true);
  run_both(kChain, {randn({3, 67}), randn({67})}, true);
}

TEST_CASE("cuda jit: compiled on cuda inputs == interpreted on the cpu, on random graphs") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no cuda device (" << cuda::unavailable_reason() << ")");
    return;
  }
  std::mt19937 rng(17);
  manual_seed(5);
  int kernels = 0;
  for (int iter = 0; iter < 300; ++iter) {
    DType dt = iter % 3 == 0 ? DType::Float64 : DType::Float32;
    test::RandomGraph r = test::random_graph(rng, dt);
    CAPTURE(r.graph->str());
    Function f(r.graph, "random");
    std::vector<IValue> want = f.call(r.inputs);
    std::vector<IValue> dev_in;
    for (const IValue& v : r.inputs) dev_in.push_back(v.is_tensor() ? IValue(v.to_tensor().cuda()) : v);
    Function c = compile(f);
    std::vector<IValue> got = c.call(dev_in);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      REQUIRE(got[i].to_tensor().device() == Device::cuda(0));
      // CUDA's libm and the CPU's differ by a few ulp; random chains amplify that through cancellation
      test::check_close(got[i].to_tensor().cpu(), want[i].to_tensor(), dt == DType::Float64 ? 1e-7 : 2e-3,
                        dt == DType::Float64 ? 1e-9 : 1e-4);
    }
    kernels += compile_stats(c).kernels;
  }
  CHECK(kernels > 100);  // the groups ran as CUDA kernels, not on the interpreter's eager fallback
}

TEST_CASE("cuda jit: device out of memory names the sizes after freeing the cache once") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no cuda device (" << cuda::unavailable_reason() << ")");
    return;
  }
  { Tensor t = empty({int64_t(1) << 20}, Device::cuda()); }  // leaves one cached block
  CHECK(memory_stats(Device::cuda()).cached_bytes > 0);
  check_error([] { empty({int64_t(1) << 48}, Device::cuda()); },
              "out of memory: cannot allocate 1125899906842624 bytes on cuda:0 (");
  check_error([] { empty({int64_t(1) << 48}, Device::cuda()); }, "bytes free of");
  CHECK(memory_stats(Device::cuda()).cached_bytes == 0);
}

#endif
