#pragma once
// The CUDA kernel table and the launch helpers its families share.
#include <vector>

#include "backends/cuda/source_render.h"
#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"
#include "eager/kernel_type.h"

namespace kiln::cuda {

// The kernel of a row of ops.def on CUDA; rows without one raise `conv2d: no cuda kernel`.
Kernel kernel_for(OpId op);

// Runs an elementwise kernel over out's shape with the inputs broadcast to it (all on out's device).
void run_elementwise(const ElementwiseSpec& spec, const Tensor& out, const std::vector<const Tensor*>& inputs,
                     int64_t extra0 = 0, int64_t extra1 = 0);
// dst = src broadcast and converted, both on one CUDA device (src may be a 0-d CPU tensor).
void copy_into(const Tensor& dst, const Tensor& src);
// A 0-d CPU tensor (a C++ scalar) copied to `device`; any other tensor as it is.
Tensor on_device(const Tensor& t, Device device);

// Every kernel the table can launch, for every dtype its op accepts: what CI compiles with NVRTC.
std::vector<ElementwiseSpec> every_elementwise_spec();
std::vector<ReduceSpec> every_reduce_spec();

// A row run by its CPU kernel on host copies of the inputs, its outputs moved back to the inputs' device.
Tensors on_host(OpId op, const Tensors& in, const Attrs& attrs);

// matmul through cuBLAS (cublas.cpp).
Tensor cublas_matmul(const Tensor& a, const Tensor& b);

}  // namespace kiln::cuda
