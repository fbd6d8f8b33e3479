// matmul on CUDA through cuBLAS: 1-D, 2-D and batched with broadcast batch dims (torch.matmul), as
// one strided-batched GEMM. cuBLAS is column-major, so row-major C = A @ B runs as C^T = B^T @ A^T.

#include <mutex>
#include <vector>

#include "backends/cuda/kernels.h"
#include "core/matmul_shape.h"
#include "backends/cuda/runtime.h"
#include "backends/cuda/toolkit_api.h"
#include "eager/cpu/views.h"
#include "eager/kernels.h"

namespace kiln::cuda {
namespace {

void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cublas: {} failed: {}", call, cublas().cublasGetStatusName(s));
}

cublasHandle_t handle(int index) {
  static std::mutex mu;
  static std::vector<cublasHandle_t> handles;  // one per device, never destroyed
  DeviceState& s = device_state(index);       // makes the device's context current for cuBLAS
  std::lock_guard<std::mutex> lock(mu);
  if (handles.size() <= size_t(index)) handles.resize(size_t(index) + 1, nullptr);
  if (!handles[size_t(index)]) {
    check(cublas().cublasCreate(&handles[size_t(index)]), "cublasCreate");
    check(cublas().cublasSetStream(handles[size_t(index)], reinterpret_cast<cudaStream_t>(s.stream)), "cublasSetStream");
  }
  return handles[size_t(index)];
}

// A [batch, rows, cols] operand as cuBLAS takes it: row-major (op N on the transpose) or column-major,
// with a leading dimension and a batch stride; copied when neither inner stride is 1.
struct BlasMat {
  Tensor t;
  bool trans;  // stored column-major
  int64_t ld, batch_stride;
};

BlasMat as_blas(Tensor m) {
  int64_t r = m.sizes()[1], c = m.sizes()[2];
  int64_t s0 = m.strides()[0], s1 = m.strides()[1], s2 = m.strides()[2];
  if ((s2 == 1 || c == 1) && s1 >= std::max<int64_t>(c, 1)) return {m, false, s1, s0};
  if ((s1 == 1 || r == 1) && s2 >= std::max<int64_t>(r, 1)) return {m, true, s2, s0};
  Tensor cm = m.contiguous();
  return {cm, false, std::max<int64_t>(c, 1), r * c};
}

// An expanded [batch..., rows, cols] operand as [nb, rows, cols] (a view when strides allow).
Tensor batched(const Tensor& x, int64_t nb) {
  Shape s{nb, x.sizes()[size_t(x.dim() - 2)], x.sizes()[size_t(x.dim() - 1)]};
  if (auto st = cpu::view_strides(x, s)) return cpu::make_view(x, s, *st, x.storage_offset());
  Tensor c = x.contiguous();
  return cpu::make_view(c, s, contiguous_strides(s), c.storage_offset());
}

}  // namespace

Tensor cublas_matmul(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  const Shape final_shape = matmul_shape(a.sizes(), b.sizes());  // raises torch's shape errors
  if (a.dtype() != b.dtype())
    fail("matmul: expected both inputs to have the same dtype, got {} and {}", dtype_name(a.dtype()),
         dtype_name(b.dtype()));
  DType t = a.dtype();
  if (t == DType::BFloat16 || t == DType::Float16)
    return cublas_matmul(a.to(DType::Float32), b.to(DType::Float32)).to(t);
  if (t != DType::Float32 && t != DType::Float64) fail("matmul: dtype {} has no cuda kernel", dtype_name(t));
  const Shape as = a.sizes(), bs = b.sizes();
  bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  if (a1) a = cpu::make_view(a, {1, as[0]}, {0, a.strides()[0]}, a.storage_offset());
  if (b1) b = cpu::make_view(b, {bs[0], 1}, {b.strides()[0], 0}, b.storage_offset());
  int64_t M = a.sizes()[size_t(a.dim() - 2)], K = a.sizes()[size_t(a.dim() - 1)], N = b.sizes()[size_t(b.dim() - 1)];
  Shape batch(final_shape.begin(), final_shape.end() - (a1 ? 0 : 1) - (b1 ? 0 : 1));
  int64_t nb = numel_of(batch);
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {M, N});
  Tensor out = Tensor::empty(out_shape, t, a.device());
  if (nb > 0 && M > 0 && N > 0) {
    if (K == 0) {
      copy_into(out, Tensor::wrap_scalar(0.0));
    } else {
      Shape ea = batch, eb = batch;
      ea.insert(ea.end(), {M, K});
      eb.insert(eb.end(), {K, N});
      BlasMat A = as_blas(batched(cpu::kernel_expand(OpId::Expand, {a}, Attrs().set("shape", ea))[0], nb));
      BlasMat B = as_blas(batched(cpu::kernel_expand(OpId::Expand, {b}, Attrs().set("shape", eb))[0], nb));
      cublasHandle_t h = handle(a.device().index);
      cublasOperation_t opA = A.trans ? CUBLAS_OP_T : CUBLAS_OP_N, opB = B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
      if (t == DType::Float32) {
        const float one = 1.0f, zero = 0.0f;
        check(cublas().cublasSgemmStridedBatched(h, opB, opA, int(N), int(M), int(K), &one,
                                        static_cast<const float*>(B.t.raw_data()), int(B.ld), B.batch_stride,
                                        static_cast<const float*>(A.t.raw_data()), int(A.ld), A.batch_stride, &zero,
                                        static_cast<float*>(out.raw_data()), int(N), M * N, int(nb)),
              "cublasSgemmStridedBatched");
      } else {
        const double one = 1.0, zero = 0.0;
        check(cublas().cublasDgemmStridedBatched(h, opB, opA, int(N), int(M), int(K), &one,
                                        static_cast<const double*>(B.t.raw_data()), int(B.ld), B.batch_stride,
                                        static_cast<const double*>(A.t.raw_data()), int(A.ld), A.batch_stride, &zero,
                                        static_cast<double*>(out.raw_data()), int(N), M * N, int(nb)),
              "cublasDgemmStridedBatched");
      }
    }
  }
  return cpu::make_view(out, final_shape, contiguous_strides(final_shape), 0);
}

}  // namespace kiln::cuda
