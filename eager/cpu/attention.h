#pragma once
// The fused attention kernels' problem (flash-attention style: the [L,S] scores of a head are computed a tile
// at a time and never stored). kernel_flash_attention / kernel_flash_attention_backward (attention.cpp) lay
// out the tensors; the loops are in attention_isa.cpp, built once per instruction set.
#include <cstdint>

namespace kiln::cpu {

enum class AttentionMask : int { None, Bool, Float };

// Rows of a tensor per batch index b (the flattened broadcast batch dims): row i at base + off[b] + i * row,
// unit stride along a row.
struct AttentionRows {
  const int64_t* off = nullptr;
  int64_t row = 0;
};

// T is float or double. Batch index b reads q + q_off[b] (rows of E with row stride q_row, unit stride along a
// row), likewise k, v, and the mask's [L,S] at mask + m_off[b] with strides m_row, m_col (0 where broadcast).
// out [batch, L, Ev] is written by rows at out_rows (a head-split layout keeps its memory order); lse
// [batch, L] is dense.
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
  AttentionRows out_rows;
};

// The backward's extra operands: grad [batch, L, Ev] and the forward's out, read by rows; lse and the gradient
// of lse (null: none) dense; the results dq [batch, L, E], dk [batch, S, E], dv [batch, S, Ev] written by rows.
struct AttentionGrads {
  const void *grad = nullptr, *out = nullptr, *lse = nullptr, *grad_lse = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  AttentionRows grad_rows, out_rows, dq_rows, dk_rows, dv_rows;
};

}  // namespace kiln::cpu
