#pragma once
// The elementwise kernels compiled once per instruction set (baseline, AVX2, AVX-512) from one source,
// elementwise_isa.cpp; isa_kernels() picks the best the CPU supports, once.
#include <string_view>

#include "core/dtype.h"
#include "core/op.h"
#include "eager/cpu/attention.h"
#include "eager/cpu/rnn_cell.h"
#include "eager/cpu/strided_loop.h"

namespace kiln::optim {
struct SGDStep;
struct AdamStep;
}  // namespace kiln::optim

namespace kiln::cpu {

struct IsaKernels {
  std::string_view name;
  // operand 0: output; dtypes are the compute type (inputs already converted to it)
  void (*unary)(OpId op, DType t, const StridedLoop& loop);
  void (*binary)(OpId op, DType t, const StridedLoop& loop);
  void (*where)(DType t, const StridedLoop& loop);  // operands: out, cond (bool), a, b
  void (*cast)(DType to, DType from, const StridedLoop& loop);
  // The optimizers' single-pass updates over contiguous float32/float64 (eager/optim/fused_update_isa.cpp).
  void (*fused_sgd)(DType t, void* p, const void* g, void* buf, int64_t n, const optim::SGDStep& s);
  void (*fused_adam)(DType t, void* p, const void* g, void* m, void* v, int64_t n, const optim::AdamStep& s);
  // The fused attention's forward and backward over float32 or float64 (eager/cpu/attention_isa.cpp).
  void (*attention_forward)(DType t, const AttentionProblem& p);
  void (*attention_backward)(DType t, const AttentionProblem& p, const AttentionGrads& g);
  // An LSTM step's gate arithmetic for one row, float32 or float64 (eager/cpu/rnn_cell_isa.cpp).
  void (*lstm_forward_row)(DType t, const LstmForwardRow& r);
  void (*lstm_backward_row)(DType t, const LstmBackwardRow& r);
};

const IsaKernels& isa_kernels();

#define KILN_DECLARE_ISA(isa)                                                                             \
  namespace isa {                                                                                         \
  extern const IsaKernels kernels;                                                                        \
  void fused_sgd(DType t, void* p, const void* g, void* buf, int64_t n, const optim::SGDStep& s);           \
  void fused_adam(DType t, void* p, const void* g, void* m, void* v, int64_t n, const optim::AdamStep& s);  \
  void attention_forward(DType t, const AttentionProblem& p);                                               \
  void attention_backward(DType t, const AttentionProblem& p, const AttentionGrads& g);                     \
  void lstm_forward_row(DType t, const LstmForwardRow& r);                                                  \
  void lstm_backward_row(DType t, const LstmBackwardRow& r);                                                \
  }
KILN_DECLARE_ISA(baseline)
KILN_DECLARE_ISA(avx2)
KILN_DECLARE_ISA(avx512)
#undef KILN_DECLARE_ISA

}  // namespace kiln::cpu
