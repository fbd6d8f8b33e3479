// flash_attention's CUDA kernels (backends/cuda/attention_kernels.cuh) compiled for the CPU, a warp emulated by 32
// threads that meet at each shuffle: the kernels' indexing, masks, online softmax and gradients are checked
// against the CPU kernel on machines without a GPU (test_cuda_device.cpp runs the real thing where one is lent).
#include <barrier>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "support.h"

namespace emulated {

struct Dim3 {
  unsigned x = 0;
};
thread_local Dim3 threadIdx, blockIdx;
const Dim3 blockDim{128};  // attention.cpp's four warps a block

// One warp's exchange: each lane writes its value, all meet, each reads its partner's, all meet again.
std::barrier<>* g_warp = nullptr;
double g_lanes[32];
template <class A>
A exchange(A x, int from) {
  const int lane = int(threadIdx.x & 31);
  g_warp->arrive_and_wait();
  g_lanes[lane] = double(x);  // float and double both round-trip through double exactly
  g_warp->arrive_and_wait();
  const A r = A(g_lanes[from < 0 ? lane ^ -from : from]);
  g_warp->arrive_and_wait();
  return r;
}
template <class A>
A __shfl_xor_sync(unsigned, A x, int lane_mask) { return exchange(x, -lane_mask); }
template <class A>
A __shfl_sync(unsigned, A x, int src) { return exchange(x, src); }
template <class T>
T klowest() { return -std::numeric_limits<T>::infinity(); }
using std::exp;
using std::log;

#define __device__
#define __forceinline__ inline
#define KILN_UNROLL
#include "backends/cuda/attention_kernels.cuh"
#undef KILN_UNROLL
#undef __device__
#undef __forceinline__

// Runs kernel() for every warp of a launch over `rows` warps, four to a block, 32 lanes as threads.
template <class F>
void launch(long long rows, F kernel) {
  const long long warps = (rows + 3) / 4 * 4;
  std::barrier<> warp(32);
  g_warp = &warp;
  std::vector<std::thread> lanes;
  for (int lane = 0; lane < 32; ++lane)
    lanes.emplace_back([&, lane] {
      for (long long w = 0; w < warps; ++w) {
        blockIdx.x = unsigned(w / 4);
        threadIdx.x = unsigned((w % 4) * 32 + lane);
        kernel();
        warp.arrive_and_wait();  // the next warp's lanes start together
      }
    });
  for (auto& t : lanes) t.join();
}

}  // namespace emulated

using namespace kiln;
using kiln::test::check_close;
using kiln::test::seq;

namespace {

const char* ptr(const Tensor& t) { return static_cast<const char*>(t.raw_data()); }
char* ptr(Tensor& t) { return static_cast<char*>(t.raw_data()); }

// q, k, v [B, H, rows, width] float32 (k and v may have B = 1: broadcast), q's rows strided; a mask [B, 1, L, S]
// (bool or float) or none.
Tensors run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal, double scale,
            const Tensor& grad) {
  emulated::AttnParams p{};
  const int64_t B = q.size(0), H = q.size(1);
  p.q = ptr(q), p.k = ptr(k), p.v = ptr(v);
  p.L = q.size(2), p.S = k.size(2), p.E = q.size(3), p.Ev = v.size(3);
  p.q_row = q.stride(2), p.k_row = k.stride(2), p.v_row = v.stride(2);
  p.nb = 2, p.bsize[0] = B, p.bsize[1] = H;
  p.qb[0] = q.stride(0), p.qb[1] = q.stride(1);
  p.kb[0] = k.size(0) == 1 ? 0 : k.stride(0), p.kb[1] = k.stride(1);
  p.vb[0] = v.size(0) == 1 ? 0 : v.stride(0), p.vb[1] = v.stride(1);
  p.causal = causal, p.scale = scale;
  if (mask.defined()) {
    p.mask = ptr(mask), p.mask_kind = mask.dtype() == DType::Bool ? 1 : 2;
    p.m_row = mask.stride(2), p.m_col = 1, p.mb[0] = mask.stride(0), p.mb[1] = 0;
  }
  Tensor out = empty({B, H, p.L, p.Ev}), lse = empty({B, H, p.L}), delta = empty({B, H, p.L});
  Tensor dq = empty({B, H, p.L, p.E}), dk = empty({B, H, p.S, p.E}), dv = empty({B, H, p.S, p.Ev});
  Tensor g = grad.contiguous();
  const int wide = std::max(p.E, p.Ev) > 32;  // two elements a lane, else one
  p.out = ptr(out), p.lse = ptr(lse), p.rows = B * H * p.L;
  emulated::launch(p.rows, [&] {
    wide ? emulated::kiln_att_fwd<float, float, 2>(p) : emulated::kiln_att_fwd<float, float, 1>(p);
  });
  p.grad = ptr(g), p.out_in = ptr(out), p.lse_in = ptr(lse), p.delta = ptr(delta);
  p.dq = ptr(dq), p.dk = ptr(dk), p.dv = ptr(dv);
  emulated::launch(p.rows, [&] {
    wide ? emulated::kiln_att_bwd_q<float, float, 2>(p) : emulated::kiln_att_bwd_q<float, float, 1>(p);
  });
  p.rows = B * H * p.S;
  emulated::launch(p.rows, [&] {
    wide ? emulated::kiln_att_bwd_kv<float, float, 2>(p) : emulated::kiln_att_bwd_kv<float, float, 1>(p);
  });
  return {out, lse, dq, dk, dv};
}

}  // namespace

TEST_CASE("cuda attention kernels, emulated on the cpu: forward, lse and gradients equal the cpu kernel") {
  struct Case {
    Shape q, k, v;
    int mask = 0;  // 0 none, 1 bool, 2 float
    bool causal = false;
  };
  const Case cases[] = {
      {{2, 2, 7, 16}, {2, 2, 7, 16}, {2, 2, 7, 16}, 0, true},    // a GPT's causal heads
      {{1, 2, 5, 40}, {1, 2, 9, 40}, {1, 2, 9, 24}, 0, false},   // L != S, Ev != E, a row past one lane
      {{2, 2, 5, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}, 1, false},      // k, v broadcast over batch; a bool mask per batch
      {{1, 3, 6, 8}, {1, 3, 6, 8}, {1, 3, 6, 8}, 2, false},      // a float mask added to the scores
      {{1, 1, 9, 12}, {1, 1, 4, 12}, {1, 1, 4, 12}, 0, true},    // causal with more queries than keys
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.q));
    CAPTURE(c.mask);
    // q's rows strided: a slice of wider rows, as the heads of a fused qkv projection are
    Shape wide_q = c.q;
    wide_q.back() += 3;
    Tensor q = seq(wide_q, 0.31, 0.2, DType::Float32).slice(3, 0, c.q.back());
    Tensor k = seq(c.k, 0.17, -0.4, DType::Float32), v = seq(c.v, 0.23, 0.1, DType::Float32);
    Tensor mask;
    const Shape ms{c.q[0], 1, c.q[2], c.k[2]};
    if (c.mask == 1) mask = logical_or(gt(seq(ms, 0.7, 0.3), -0.6), eq(arange(c.k[2]), 0.0));  // no row all masked
    if (c.mask == 2) mask = seq(ms, 0.5, -0.2, DType::Float32);
    const double scale = 0.37;
    Tensor qr = q.detach().requires_grad_(), kr = k.clone().requires_grad_(), vr = v.clone().requires_grad_();
    Tensor out = scaled_dot_product_attention(qr, kr, vr, mask, 0.0, c.causal, scale);
    Tensor grad = seq(out.sizes(), 0.13, 0.3, DType::Float32);
    sum(mul(out, grad)).backward();
    Tensors em = run(q, k, v, mask, c.causal, scale, grad);
    check_close(em[0], out.detach(), 1e-5, 1e-6);
    check_close(em[2], qr.grad(), 1e-4, 1e-5);
    // the kernels give dk and dv per batch index; autograd sums them over the dims k and v broadcast
    check_close(c.k[0] == 1 ? sum(em[3], {0}, true) : em[3], kr.grad(), 1e-4, 1e-5);
    check_close(c.k[0] == 1 ? sum(em[4], {0}, true) : em[4], vr.grad(), 1e-4, 1e-5);
    // lse: log of the masked, scaled scores' exp summed over the keys
    Tensor scores = mul(matmul(q, k.transpose(-2, -1)), scale);
    if (c.causal) scores = where(tril(ones({c.q[2], c.k[2]}, DType::Bool)), scores, -INFINITY);
    if (c.mask == 1) scores = where(mask, scores, -INFINITY);
    if (c.mask == 2) scores = add(scores, mask);
    check_close(em[1], logsumexp(scores, {-1}), 1e-5, 1e-6);
  }
}
