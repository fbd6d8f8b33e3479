#pragma once
// conv2d and its gradients where the output is one pixel (ResNet-18's last stage on 32x32 images: 3x3 convs,
// padding 1, over 1x1 maps, and the stride-2 convs into it from 2x2 maps). Each input pixel then meets at
// most one tap of the kernel, so the conv is a GEMM with those taps' [out, in * pixels] slice of the weight
// and the other taps' weight gradient is zero. oneDNN's direct kernels run all taps over the padding and read and write the
// weights in their blocked layout: at 512 channels, batch 32, its weight gradient alone took ~2.5 ms
// and each weight reorder ~0.9 ms, against ~0.4 ms for a pass over the plain weights here.
#include <optional>

#include "core/attrs.h"
#include "core/tensor.h"
#include "eager/cpu/conv_backward.h"

namespace kiln::cpu {

// conv2d(x, w[, b]) with conv2d's attrs; nothing unless float32 or bf16 (all alike) on the cpu, 4-D, groups 1,
// a 1x1 output reading some input pixel.
std::optional<Tensor> one_pixel_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Attrs& attrs);

// As cpu::conv2d_backward (same arguments, same results up to the order of the sums), on the convs
// one_pixel_conv2d takes; nothing on others.
std::optional<ConvGrads> one_pixel_conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& w,
                                                   const Shape& input_shape, const Shape& weight_shape,
                                                   const Attrs& attrs, bool need_input, bool need_weight,
                                                   bool need_bias);

}  // namespace kiln::cpu
