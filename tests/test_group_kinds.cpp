// Marked fusion groups' kernels per device type (backends/fusion_backend.h compile_kind): every kind a
// JIT pass marks has CPU kernels, also where the CPU has no code generator; a kind a device has no
// kernels for runs on the interpreter.
#include "backends/fusion_backend.h"
#include "jit/compiled_graph.h"
#include "jit/group_kinds.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

const char* kGemmGroup =
    "graph(%x : f32[3,4], %w : f32[4,5], %b : f32[5]):\n"
    "  %y : f32[3,5] = prim::FusionGroup[name=\"gemm_matmul_add_relu\", kind=\"gemm\"](%x, %w, %b)\n"
    "    block0(%0 : f32[3,4], %1 : f32[4,5], %2 : f32[5]):\n"
    "      %3 : f32[3,5] = matmul(%0, %1)\n"
    "      %4 : f32[3,5] = add(%3, %2)\n"
    "      %5 : f32[3,5] = relu(%4)\n"
    "      -> (%5)\n"
    "  return (%y)\n";

}  // namespace

TEST_CASE("group kinds: every kind a pass marks has CPU kernels and no CUDA ones") {
  CHECK(jit::group_kinds().size() == 3);
  for (const jit::GroupKind& k : jit::group_kinds()) {
    CAPTURE(k.name);
    CHECK(backends::compiles_kind(Device::Type::CPU, k.name));
    CHECK_FALSE(backends::compiles_kind(Device::Type::CUDA, k.name));
  }
  CHECK_FALSE(backends::compiles_kind(Device::Type::CPU, "winograd"));
  auto g = ir::parse_ir(kGemmGroup, "gemm.ir");
  const ir::Node* group = *g->block()->nodes().begin();
  auto block = jit::group_graph(*group);
  std::string why;
  CHECK(backends::compile_kind(Device::Type::CPU, "winograd", *block, "w", {}, &why) == nullptr);
  CHECK(why == "no cpu kernel runs groups of kind winograd");
  CHECK(backends::compile_kind(Device::Type::CUDA, jit::kGemmKind, *block, "g", {}, &why) == nullptr);
  CHECK(why == "no cuda kernel runs groups of kind gemm");
  CHECK(backends::compile_kind(Device::Type::CPU, jit::kGemmKind, *block, "g", {}, &why) != nullptr);
}

TEST_CASE("group kinds: the device type picks a marked group's kernels, with or without a code generator") {
  Tensor x = randn({3, 4}), w = randn({4, 5}), b = randn({5});
  Tensor want = relu(matmul(x, w) + b);
  // No code generator (a CPU without AVX2): the gemm group still runs on the CPU's GEMM kernel.
  jit::GroupCompileStats cpu;
  auto on_cpu = jit::compile_graph(ir::parse_ir(kGemmGroup, "gemm.ir"), "k", {}, Device::Type::CPU, {}, cpu);
  CHECK(cpu.gemm_kernels == 1);
  CHECK(cpu.kernels == 0);
  CHECK(cpu.interpreted_groups == 0);
  check_close(on_cpu->run({x, w, b}).at(0).to_tensor(), want, 1e-5, 1e-6);
  // A device without kernels for the kind: the group is interpreted, and counted so.
  jit::GroupCompileStats cuda;
  auto on_cuda = jit::compile_graph(ir::parse_ir(kGemmGroup, "gemm.ir"), "k", {}, Device::Type::CUDA, {}, cuda);
  CHECK(cuda.gemm_kernels == 0);
  CHECK(cuda.interpreted_groups == 1);
  CHECK(on_cuda->kernels.empty());
  check_close(on_cuda->run({x, w, b}).at(0).to_tensor(), want, 1e-5, 1e-6);
}
