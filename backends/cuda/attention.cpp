#include "backends/cuda/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "backends/cuda/attention_kernels_source.h"
#include "backends/cuda/driver_api.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/runtime.h"
#include "core/error.h"
#include "core/shape.h"
#include "eager/cpu/attention_shapes.h"

namespace kiln::cuda {
namespace {

constexpr int kBatchDims = 8;  // attention_kernels.cuh's KILN_ATT_NB
constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 8;  // rows up to 256 wide; wider heads run the CPU kernel

// attention_kernels.cuh's AttnParams, field for field. Offsets and strides count elements.
struct AttnParams {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  const void *grad = nullptr, *out_in = nullptr, *lse_in = nullptr, *grad_lse = nullptr;
  void *out = nullptr, *lse = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *delta = nullptr;
  long long rows = 0, L = 0, S = 0, E = 0, Ev = 0;
  long long q_row = 0, k_row = 0, v_row = 0, m_row = 0, m_col = 0;
  long long bsize[kBatchDims] = {}, qb[kBatchDims] = {}, kb[kBatchDims] = {}, vb[kBatchDims] = {}, mb[kBatchDims] = {};
  int nb = 0, mask_kind = 0, causal = 0, pad = 0;
  double scale = 1;
};

constexpr const char* kWrappers = R"(
extern "C" __global__ void @NAME@_fwd(const AttnParams p) { kiln_att_fwd<@T@, @A@, @KD@>(p); }
extern "C" __global__ void @NAME@_bwd_q(const AttnParams p) { kiln_att_bwd_q<@T@, @A@, @KD@>(p); }
extern "C" __global__ void @NAME@_bwd_kv(const AttnParams p) { kiln_att_bwd_kv<@T@, @A@, @KD@>(p); }
)";

DType compute_of(DType stored) { return stored == DType::Float64 ? DType::Float64 : DType::Float32; }

std::string kernel_base(DType stored, int per_lane) { return fmt::format("kiln_att_{}_{}", dtype_tag(stored), per_lane); }

// The smallest power of two of elements per lane covering a row of q, k and v; 0 when wider than the kernels take.
int per_lane_for(int64_t width) {
  int kd = 1;
  while (int64_t(kd) * 32 < width) kd *= 2;
  return kd <= kMaxPerLane ? kd : 0;
}

CUfunction attention_function(int device, DType stored, int per_lane, const char* which) {
  thread_local std::unordered_map<std::string, CUfunction> loaded;
  const std::string name = kernel_base(stored, per_lane) + which;
  CUfunction& fn = loaded[fmt::format("{}/{}", device, name)];
  if (!fn) fn = function_for(device, render_attention({{stored, per_lane}}), name);
  return fn;
}

void launch(const Tensor& on, DType stored, int per_lane, const char* which, AttnParams& p) {
  if (p.rows == 0) return;
  const int device = on.device().index;
  CUfunction fn = attention_function(device, stored, per_lane, which);
  const long long blocks = (p.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  void* args[] = {&p};
  KILN_CU(cuLaunchKernel, fn, unsigned(blocks), 1, 1, unsigned(32 * kWarpsPerBlock), 1, 1, 0,
          device_state(device).stream, args, nullptr);
}

// A row operand with unit stride along its rows (the kernels read a row's elements at consecutive addresses).
Tensor rows_of(const Tensor& t) { return t.size(-1) > 1 && t.stride(-1) != 1 ? t.contiguous() : t; }

Tensor dense(const Tensor& t, DType dt) {
  Tensor r = t.dtype() == dt ? t : t.to(dt);
  return r.is_contiguous() ? r : r.contiguous();
}

// Element strides of t's leading dims (all but `tail`) aligned right to `batch`: 0 where t lacks or broadcasts one.
void batch_strides(const Tensor& t, int64_t tail, const Shape& batch, long long* out) {
  const int64_t nb = int64_t(batch.size()), extra = nb - (t.dim() - tail);
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t td = d - extra;
    out[d] = td >= 0 && t.size(td) != 1 ? t.stride(td) : 0;
  }
}

// The problem over flash_attention's inputs q, k, v, scale[, mask], laid out for the kernels; `keep` holds
// what was converted. `batch` is the broadcast batch shape (the output's leading dims).
AttnParams problem(const Tensors& in, const Attrs& attrs, const Shape& batch, Tensors& keep) {
  if (batch.size() > size_t(kBatchDims))
    fail("flash_attention: at most {} batch dims on cuda, got {}", kBatchDims, batch.size());
  AttnParams p;
  for (int i = 0; i < 3; ++i) keep.push_back(rows_of(in[size_t(i)]));
  const Tensor &q = keep[0], &k = keep[1], &v = keep[2];
  p.q = q.raw_data();
  p.k = k.raw_data();
  p.v = v.raw_data();
  p.L = q.size(-2);
  p.S = k.size(-2);
  p.E = q.size(-1);
  p.Ev = v.size(-1);
  p.q_row = q.stride(-2);
  p.k_row = k.stride(-2);
  p.v_row = v.stride(-2);
  p.nb = int(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) p.bsize[d] = batch[d];
  batch_strides(q, 2, batch, p.qb);
  batch_strides(k, 2, batch, p.kb);
  batch_strides(v, 2, batch, p.vb);
  p.causal = attrs.b_or("causal", false) ? 1 : 0;
  p.scale = in[3].item_double();
  if (in.size() == 5) {
    Tensor m = in[4];
    if (m.dtype() != DType::Bool) m = dense(m, compute_of(q.dtype()));
    while (m.dim() < 2) m = m.unsqueeze(0);
    keep.push_back(m);
    p.mask = m.raw_data();
    p.mask_kind = m.dtype() == DType::Bool ? 1 : 2;
    p.m_row = m.size(-2) == 1 ? 0 : m.stride(-2);
    p.m_col = m.size(-1) == 1 ? 0 : m.stride(-1);
    batch_strides(m, 2, batch, p.mb);
  }
  return p;
}

}  // namespace

std::string render_attention(const std::vector<std::pair<DType, int>>& variants) {
  std::string src = render_prelude() + kAttentionKernelsSource;
  for (auto [stored, per_lane] : variants)
    src += subst(kWrappers, {{"NAME", kernel_base(stored, per_lane)},
                             {"T", cuda_type(stored)},
                             {"A", cuda_type(compute_of(stored))},
                             {"KD", std::to_string(per_lane)}});
  return src;
}

std::vector<std::pair<DType, int>> attention_variants() {
  std::vector<std::pair<DType, int>> v;
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16})
    for (int kd = 1; kd <= kMaxPerLane; kd *= 2) v.push_back({t, kd});
  return v;
}

Tensors flash_attention(OpId op, const Tensors& in, const Attrs& attrs) {
  const auto shapes = cpu::flash_attention_outputs(OpId::FlashAttention, in);  // the CPU kernel's checks
  const DType stored = in[0].dtype(), compute = compute_of(stored);
  const int per_lane = per_lane_for(std::max(in[0].size(-1), in[2].size(-1)));
  if (per_lane == 0) return on_host(op, in, attrs);
  const Shape& out_shape = shapes[0].first;
  const Shape batch(out_shape.begin(), out_shape.end() - 2);
  Tensors keep;
  AttnParams p = problem(in, attrs, batch, keep);
  Tensor out = Tensor::empty(out_shape, stored, in[0].device());
  Tensor lse = Tensor::empty(shapes[1].first, compute, in[0].device());
  p.out = out.raw_data();
  p.lse = lse.raw_data();
  p.rows = numel_of(batch) * p.L;
  launch(out, stored, per_lane, "_fwd", p);
  return {out, lse};
}

Tensors flash_attention_backward(OpId op, const Tensors& in, const Attrs& attrs) {
  // inputs grad, grad_lse (empty: none), out, lse, then flash_attention's q, k, v, scale[, mask]
  const auto shapes = cpu::flash_attention_outputs(OpId::FlashAttentionBackward, in);
  const DType stored = in[4].dtype(), compute = compute_of(stored);
  const int per_lane = per_lane_for(std::max(in[4].size(-1), in[6].size(-1)));
  if (per_lane == 0) return on_host(op, in, attrs);
  const Shape& dq_shape = shapes[0].first;
  const Shape batch(dq_shape.begin(), dq_shape.end() - 2);
  Tensors keep;
  AttnParams p = problem(Tensors(in.begin() + 4, in.end()), attrs, batch, keep);
  const Device dev = in[4].device();
  Tensor g = dense(in[0], stored), o = dense(in[2], stored), lse = dense(in[3], compute);
  Tensor glse = in[1].numel() > 0 ? dense(in[1], compute) : Tensor();
  Tensor delta = Tensor::empty(lse.sizes(), compute, dev);
  Tensor dq = Tensor::empty(shapes[0].first, stored, dev), dk = Tensor::empty(shapes[1].first, stored, dev),
         dv = Tensor::empty(shapes[2].first, stored, dev);
  p.grad = g.raw_data();
  p.out_in = o.raw_data();
  p.lse_in = lse.raw_data();
  p.grad_lse = glse.defined() ? glse.raw_data() : nullptr;
  p.delta = delta.raw_data();
  p.dq = dq.raw_data();
  p.dk = dk.raw_data();
  p.dv = dv.raw_data();
  const int64_t nbatch = numel_of(batch);
  p.rows = nbatch * p.L;
  launch(dq, stored, per_lane, "_bwd_q", p);  // writes delta, which the key rows read: one stream orders them
  p.rows = nbatch * p.S;
  launch(dq, stored, per_lane, "_bwd_kv", p);
  return {dq, dk, dv};
}

}  // namespace kiln::cuda
