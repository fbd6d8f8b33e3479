#pragma once
// The fused attention kernels' problem (flash-attention style: the [L,S] scores of a head are computed a tile
// at a time and never stored). kernel_flash_attention / kernel_flash_attention_backward (attention.cpp) lay
// out the tensors; the loops are in attention_isa.cpp, built once per instruction set.
#include <cstdint>

namespace kiln::cpu {

enum class AttentionMask : int { None, Bool, Float };

// T is float or double. Batch index b (the flattened broadcast batch dims) reads q + q_off[b] (rows of E with
// row stride q_row, unit stride along a row), likewise k, v, and the mask's [L,S] at mask + m_off[b] with
// strides m_row, m_col (0 where broadcast). Output and statistics are dense: out [batch, L, Ev], lse [batch, L].
struct AttentionProblem {
  int64_t batch = 0, L = 0, S = 0, E = 0, Ev = 0;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  const int64_t *q_off = nullptr, *k_off = nullptr, *v_off = nullptr, *m_off = nullptr;
  int64_t q_row = 0, k_row = 0, v_row = 0, m_row = 0, m_col = 0;
  AttentionMask mask_kind = AttentionMask::None;
  bool causal = false;  // position i attends to keys j <= i (torch's tril of ones(L, S))
  // float only: q, k, v (and the backward's grad and out) are bf16, as are out and dq, dk, dv; the loops widen
  // a head's rows into float tiles and round its results back, so no whole tensor is copied in float
  bool bf16 = false;
  double scale = 1;
  void *out = nullptr, *lse = nullptr;
};

// The backward's extra operands, dense: grad [batch, L, Ev], the forward's out and lse, the gradient of lse
// (null: none), and the results dq [batch, L, E], dk [batch, S, E], dv [batch, S, Ev].
struct AttentionGrads {
  const void *grad = nullptr, *out = nullptr, *lse = nullptr, *grad_lse = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

}  // namespace kiln::cpu
