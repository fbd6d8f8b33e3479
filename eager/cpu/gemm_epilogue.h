#pragma once
// A float32 (or bf16) GEMM with its elementwise epilogue in one call: oneDNN's matmul primitive with post-ops
// (binary add for a bias or a residual, eltwise relu / gelu_erf), so each tile of the product is
// finished while it is in cache. The JIT's gemm groups (backends/cpu/gemm_group.h) run on it; without oneDNN
// (meson option dnnl) or with it switched off, gemm_epilogue() declines and the caller runs the
// matmul and the epilogue apart (cpu::onednn_gemm_enabled(), eager/cpu/onednn_switch.h, shared with the
// convolutions).
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "eager/cpu/onednn_switch.h"

namespace kiln::cpu {

// One step of the epilogue, applied in order to the product.
enum class GemmPostOp : uint8_t {
  Add,   // + an addend: [N] or [1,N] (a bias, the same for every row) or [M,N] (a residual)
  Relu,
  Gelu,  // erf form, ops.def's gelu
  Mul,   // * a factor of the result's shape (a backward's gradient times the saved derivative of an activation)
};

// The steps that read an operand (an addend or a factor), one each, in order.
inline bool reads_operand(GemmPostOp op) { return op == GemmPostOp::Add || op == GemmPostOp::Mul; }


// epilogue(a @ b) for a [M,K] and b [K,N] on the cpu, one addend per Add or Mul in `ops`. Any strides with
// one of the two unit-stride: a transposed view of a weight is read in place, not copied (the
// memory descriptor carries its strides); others are copied first. The primitive is created once per
// (shapes, strides, post-op list, thread count) and cached. Returns nothing, so the caller falls
// back, when oneDNN is off or absent, or the operands do not fit: not float32 (or bf16 where oneDNN has a fast
// bf16 kernel: the epilogue is applied to the float32 accumulator, the result is bf16, or float32 when the
// addends are), not on the cpu, a
// dim of 0, an addend of another shape, more than kMaxGemmPostOps steps.
constexpr size_t kMaxGemmPostOps = 4;
std::optional<Tensor> gemm_epilogue(const Tensor& a, const Tensor& b, const std::vector<GemmPostOp>& ops,
                                    const Tensors& addends);

// Counters since the process started, for tests: calls that ran on oneDNN, and primitives created
// (cache misses; a second call with the same layout creates none).
struct GemmEpilogueStats {
  int64_t runs = 0;
  int64_t primitives_created = 0;
};
GemmEpilogueStats gemm_epilogue_stats();

}  // namespace kiln::cpu
