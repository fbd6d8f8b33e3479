// matmul through BLAS: 1-D, 2-D and batched with broadcasting of the batch dims (torch.matmul).
#include "core/matmul_shape.h"
#include "eager/cpu/blas.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/matmul_bf16.h"
#include "eager/cpu/views.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

// A 2-D operand as BLAS sees it: row-major with a transpose flag, or a copy when neither stride is 1.
struct BlasMat {
  Tensor t;  // keeps a copy alive
  bool trans;
  int64_t ld;
};

BlasMat as_blas(const Tensor& m) {
  int64_t r = m.sizes()[0], c = m.sizes()[1];
  int64_t s0 = m.strides()[0], s1 = m.strides()[1];
  if ((s1 == 1 || c == 1) && s0 >= std::max<int64_t>(c, 1)) return {m, false, s0};
  if ((s0 == 1 || r == 1) && s1 >= std::max<int64_t>(r, 1)) return {m, true, s1};
  Tensor cm = cast_to(m, m.dtype());
  return {cm, false, std::max<int64_t>(c, 1)};
}

template <class T>
void gemm_naive(const Tensor& a, const Tensor& b, const Tensor& out) {
  int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  const T* A = static_cast<const T*>(a.raw_data());
  const T* B = static_cast<const T*>(b.raw_data());
  T* C = static_cast<T*>(out.raw_data());
  int64_t as0 = a.strides()[0], as1 = a.strides()[1], bs0 = b.strides()[0], bs1 = b.strides()[1];
  int64_t cs0 = out.strides()[0], cs1 = out.strides()[1];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * as0 + k * as1] * B[k * bs0 + j * bs1];
      C[i * cs0 + j * cs1] = acc;
    }
}

// out[M,N] = a[M,K] @ b[K,N]; out is a contiguous-row 2-D view.
void gemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  if (M == 0 || N == 0) return;
  DType t = a.dtype();
  if (t != DType::Float32 && t != DType::Float64 && t != DType::BFloat16) {
    visit_dtype(t, [&](auto v) {
      using T = decltype(v);
      if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) gemm_naive<T>(a, b, out);
      else fail("matmul: dtype {} is not supported", dtype_name(t));
    });
    return;
  }
  if (K == 0) {
    copy_into(out, Tensor::wrap_scalar(0.0));
    return;
  }
  BlasMat A = as_blas(a), B = as_blas(b);
  if (t == DType::BFloat16) {
    if (gemm_bf16(A.trans, B.trans, M, N, K, static_cast<const BFloat16*>(A.t.raw_data()), A.ld,
                  static_cast<const BFloat16*>(B.t.raw_data()), B.ld, static_cast<BFloat16*>(out.raw_data()),
                  out.strides()[0]))
      return;
    Tensor c = Tensor::empty({M, N}, DType::Float32);  // a layout oneDNN declined: float32
    gemm(cast_to(a, DType::Float32), cast_to(b, DType::Float32), c);
    copy_into(out, c);
    return;
  }
  if (t == DType::Float32 && A.trans && !B.trans && M > N && M * N * K >= (int64_t(1) << 20)) {
    // A^T·B (a weight's gradient, dY^T·X) with the longer side first runs slower in oneDNN's sgemm than its
    // transpose B^T·A with the shorter side first (1024x256 over 700 rows: 120 against 158 GFLOP/s on AVX-512;
    // 6 of 7 such shapes faster, the other 8 % slower): compute that and copy it back transposed.
    Tensor ct = Tensor::empty({N, M}, t);
    blas::gemm(true, false, N, M, K, static_cast<const float*>(B.t.raw_data()), B.ld, static_cast<const float*>(A.t.raw_data()),
               A.ld, 0.0f, static_cast<float*>(ct.raw_data()), M);
    copy_into(out, make_view(ct, {M, N}, {1, M}, 0));
    return;
  }
  if (t == DType::Float32)
    blas::gemm(A.trans, B.trans, M, N, K, static_cast<const float*>(A.t.raw_data()), A.ld,
               static_cast<const float*>(B.t.raw_data()), B.ld, 0.0f, static_cast<float*>(out.raw_data()),
               out.strides()[0]);
  else
    blas::gemm(A.trans, B.trans, M, N, K, static_cast<const double*>(A.t.raw_data()), A.ld,
               static_cast<const double*>(B.t.raw_data()), B.ld, 0.0, static_cast<double*>(out.raw_data()),
               out.strides()[0]);
}

}  // namespace

Tensors kernel_matmul(OpId, const Tensors& in, const Attrs&) {
  Tensor a = in.at(0), b = in.at(1);
  const Shape final_shape = matmul_shape(a.sizes(), b.sizes());  // raises torch's shape errors
  if (a.dtype() != b.dtype())
    fail("matmul: expected both inputs to have the same dtype, got {} and {}", dtype_name(a.dtype()),
         dtype_name(b.dtype()));
  DType t = a.dtype();
  if (t == DType::Bool) fail("matmul: dtype bool is not supported");
  // bf16 runs on oneDNN's bf16 kernels where this CPU has them; elsewhere, and for f16, in float32.
  if (t == DType::Float16 || (t == DType::BFloat16 && !bf16_gemm_available())) {
    Tensors r = kernel_matmul(OpId::Matmul, {cast_to(a, DType::Float32), cast_to(b, DType::Float32)}, {});
    return {cast_to(r[0], t)};
  }
  const Shape as = a.sizes(), bs = b.sizes();
  // 1-D operands become matrices and lose that dim again at the end (torch.matmul).
  bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  if (a1) a = make_view(a, {1, as[0]}, {0, a.strides()[0]}, a.storage_offset());
  if (b1) b = make_view(b, {bs[0], 1}, {b.strides()[0], 0}, b.storage_offset());
  int64_t M = a.sizes()[size_t(a.dim() - 2)], K = a.sizes()[size_t(a.dim() - 1)], N = b.sizes()[size_t(b.dim() - 1)];
  bool bbatched = b.dim() > 2;
  Shape batch(final_shape.begin(), final_shape.end() - (a1 ? 0 : 1) - (b1 ? 0 : 1));
  int64_t nb = numel_of(batch);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape, t);

  if (!bbatched && a.dim() > 2 && nb > 0 && view_strides(a, {nb * M, K})) {
    // A stack of rows times one matrix is a single GEMM.
    Tensor a2 = make_view(a, {nb * M, K}, *view_strides(a, {nb * M, K}), a.storage_offset());
    gemm(a2, b, make_view(out, {nb * M, N}, {N, 1}, 0));
  } else {
    Shape ea = batch, eb = batch;
    ea.insert(ea.end(), {M, K});
    eb.insert(eb.end(), {K, N});
    Tensor ax = kernel_expand(OpId::Expand, {a}, Attrs().set("shape", ea))[0];
    Tensor bx = kernel_expand(OpId::Expand, {b}, Attrs().set("shape", eb))[0];
    if (t == DType::BFloat16 && nb > 1 && M > 0 && N > 0 && K > 0) {
      // The whole stack in one oneDNN call (its matmul takes strided batch dims), where each matrix is
      // one GEMM reads in place.
      size_t nd = batch.size();
      BlasMat A = as_blas(make_view(ax, {M, K}, {ax.strides()[nd], ax.strides()[nd + 1]}, ax.storage_offset()));
      BlasMat B = as_blas(make_view(bx, {K, N}, {bx.strides()[nd], bx.strides()[nd + 1]}, bx.storage_offset()));
      Shape sa(ax.strides().begin(), ax.strides().begin() + long(nd)), sb(bx.strides().begin(), bx.strides().begin() + long(nd));
      if (A.t.raw_data() == ax.raw_data() && B.t.raw_data() == bx.raw_data() &&
          gemm_bf16_batched(batch, sa, sb, A.trans, B.trans, M, N, K, static_cast<const BFloat16*>(A.t.raw_data()),
                            A.ld, static_cast<const BFloat16*>(B.t.raw_data()), B.ld,
                            static_cast<BFloat16*>(out.raw_data()), N))
        return {make_view(out, final_shape, contiguous_strides(final_shape), 0)};
    }
    int64_t nd = int64_t(batch.size());
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rem = i, offa = ax.storage_offset(), offb = bx.storage_offset();
      for (int64_t d = nd - 1; d >= 0; --d) {
        int64_t idx = rem % batch[size_t(d)];
        rem /= batch[size_t(d)];
        offa += idx * ax.strides()[size_t(d)];
        offb += idx * bx.strides()[size_t(d)];
      }
      Tensor am = make_view(ax, {M, K}, {ax.strides()[size_t(nd)], ax.strides()[size_t(nd + 1)]}, offa);
      Tensor bm = make_view(bx, {K, N}, {bx.strides()[size_t(nd)], bx.strides()[size_t(nd + 1)]}, offb);
      gemm(am, bm, make_view(out, {M, N}, {N, 1}, i * M * N));
    }
  }
  return {make_view(out, final_shape, contiguous_strides(final_shape), 0)};
}

}  // namespace kiln::cpu
