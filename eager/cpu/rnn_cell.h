#pragma once
// One row of one step of an LSTM layer's gate arithmetic, over a slice of its hidden units, in one pass, built
// per instruction set (rnn_cell_isa.cpp) so that it vectorises at the CPU's width and calls libmvec's exp and
// tanh: the forward from the step's GEMM result to the gates, c, tanh(c) and h; the backward from dh to the
// gates' gradient and dc. eager/cpu/rnn.cpp walks the rows and steps. Pointers are the row's, float or double.
#include <cstdint>

namespace kiln::cpu {

struct LstmForwardRow {
  int64_t H = 0, j0 = 0, j1 = 0;  // the units [j0, j1) of H
  // h·W_hh^T of gate k, unit j at pre[k * pre_gate + j - j0]
  const void* pre = nullptr;
  int64_t pre_gate = 0;
  const void* x = nullptr;       // the input projection [4H]
  const void* b = nullptr;       // b_hh [4H], or null
  const void* c_prev = nullptr;  // [H]
  void* gates = nullptr;         // i, f, g, o activated [4H]
  void* c = nullptr;             // [H]
  void* tanh_c = nullptr;        // [H]
  void* h = nullptr;             // [H]
};

struct LstmBackwardRow {
  int64_t H = 0, j0 = 0, j1 = 0;
  void* dh = nullptr;              // dh from the next step at dh[j - j0]: read, then zeroed for the GEMM's sum
  const void* gy = nullptr;        // the step's output gradient [H]
  const void* gates = nullptr;     // [4H] as the forward kept them
  const void* tanh_c = nullptr;    // [H]
  const void* c_prev = nullptr;    // [H]
  void* dc = nullptr;              // [H]: dc from the next step in, this step's out
  void* dpre = nullptr;            // the gates' pre-activation gradient [4H]
};

}  // namespace kiln::cpu
