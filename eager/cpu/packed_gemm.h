#pragma once
// A GEMM whose B is read by many calls of one shape: a recurrent layer's W_hh, once per step. B is reordered
// once into oneDNN's blocked layout and each call runs a matmul primitive on it; dnnl_sgemm repacks B on every
// call, which at a step's small M (the batch) costs as much as the arithmetic ([20,256]·[256,1024]: 43 µs
// against 67 on an AVX-512 EPYC). Without oneDNN, switched off (onednn_switch.h), or in double, each call is
// blas::gemm.
#include <cstdint>
#include <memory>

namespace kiln::cpu {

template <class T>  // float or double
class PackedGemm {
 public:
  // For C [M,N] = A [M,K]·op(B) + beta·C, A and C contiguous rows; op(B) = B^T with B stored [N,K] when tb,
  // else B stored [K,N]; ldb is B's row stride. B must stay alive and unchanged while this object is used.
  PackedGemm(bool tb, int64_t M, int64_t N, int64_t K, const T* B, int64_t ldb, T beta);
  ~PackedGemm();
  PackedGemm(const PackedGemm&) = delete;
  PackedGemm& operator=(const PackedGemm&) = delete;
  // C = A·op(B) + beta·C over the first `rows` rows of A and C (rows ≤ M: a packed sequence's steps run
  // fewer rows as its sequences end; those calls take blas::gemm).
  void operator()(const T* A, T* C, int64_t rows) const;
  void operator()(const T* A, T* C) const { (*this)(A, C, M_); }

 private:
  bool tb_;
  int64_t M_, N_, K_, ldb_;
  const T* B_;
  T beta_;
  struct Packed;
  std::unique_ptr<Packed> packed_;  // null: blas::gemm each call
};

}  // namespace kiln::cpu
