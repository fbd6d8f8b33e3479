#pragma once
// conv2d and its gradients through oneDNN's convolution primitives in the layouts they choose
// (blocked, jit:avx2 / avx512 kernels): eager's conv2d, conv2d_backward_input and
// conv2d_backward_weight kernels, and the JIT's conv-backward groups (backends/cpu/conv_backward_group.cpp),
// which ask for all three gradients in one call. On the digits CNN's second conv (16 -> 32 channels
// of 4x4, batch 64, 1 thread) the forward takes ~120 us and backward data and weights + bias ~240 us,
// against ~340 and ~600 us for kiln's im2col + sgemm path; with one input channel they are slower, so
// convs with few input channels decline and take that path. The gradient and the operands are
// reordered into the primitives' layouts and the results back, in buffers from kiln's allocator
// (oneDNN's own scratchpad is not counted by memory_stats()). Primitives are cached per geometry.
// bf16 operands (autocast's convs, a model in bf16) run oneDNN's bf16 convolutions (f32 accumulation,
// brg:avx512_core_amx / jit:avx512_core_bf16) where oneDNN has more than its reference kernel for them;
// elsewhere (AVX2-only CPUs) these decline and the caller widens to float32 (eager/cpu/copy.h).
#include <optional>
#include <string>

#include "core/attrs.h"
#include "core/tensor.h"
#include "eager/cpu/conv_backward.h"

namespace kiln::cpu {

// conv2d(x, w[, b]) with conv2d's attrs; nothing when oneDNN is absent or off (onednn_gemm_enabled()),
// or the conv is not one it takes here: float32 or bf16 (all operands one dtype) on the cpu, 4-D, groups 1,
// at least 8 input channels.
std::optional<Tensor> onednn_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Attrs& attrs);

// As cpu::conv2d_backward (same arguments, same results up to the order of the sums); nothing when
// oneDNN is absent or off (onednn_gemm_enabled()), or the conv is not one it takes here: float32 or
// bf16 on the cpu, 4-D, groups 1, at least 8 input channels.
std::optional<ConvGrads> onednn_conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& w,
                                                     const Shape& input_shape, const Shape& weight_shape,
                                                     const Attrs& attrs, bool need_input, bool need_weight,
                                                     bool need_bias);

// The implementation oneDNN's forward conv of this geometry and dtype gets here ("brg:avx512_core_amx",
// "jit:avx2", ...), or why onednn_conv2d declines it ("none: ref:any" where only the reference kernel exists).
std::string onednn_conv2d_impl(const Shape& input_shape, const Shape& weight_shape, const Attrs& attrs, DType dtype);

}  // namespace kiln::cpu
