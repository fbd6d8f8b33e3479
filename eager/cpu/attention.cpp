// flash_attention and its backward (core/ops.def): the tensors' layout for the tiled loops of
// attention_isa.cpp. q, k and v are read in place wherever a row is contiguous (the heads of nanoGPT's
// split-and-transpose are strided views of one projection); broadcast batch dims cost no copy.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/shape.h"
#include "eager/cpu/attention.h"
#include "eager/cpu/attention_shapes.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

struct Layout {
  Shape batch;  // the broadcast batch dims
  int64_t count = 1;
  DType compute = DType::Float32;
};

Shape lead(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

// Each batch index's element offset into t (its last two dims excluded), broadcast dims reading offset 0.
std::vector<int64_t> batch_offsets(const Tensor& t, const Layout& lay) {
  const int64_t nb = int64_t(lay.batch.size()), extra = nb - (t.dim() - 2);
  std::vector<int64_t> off(size_t(lay.count), 0);
  for (int64_t b = 0; b < lay.count; ++b) {
    int64_t rem = b, o = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      const int64_t idx = rem % lay.batch[size_t(d)];
      rem /= lay.batch[size_t(d)];
      if (d >= extra && t.size(d - extra) != 1) o += idx * t.stride(d - extra);
    }
    off[size_t(b)] = o;
  }
  return off;
}

// The dtype the loops read and write: bf16 stays bf16 (widened a head at a time), others compute in `compute`.
DType stored_dtype(DType in, DType compute) { return in == DType::BFloat16 ? in : compute; }

// In the stored dtype, with unit stride along a row.
Tensor rows_of(const Tensor& t, DType compute) {
  const DType dt = stored_dtype(t.dtype(), compute);
  if (t.dtype() != dt) return cast_to(t, dt);
  return t.size(-1) > 1 && t.stride(-1) != 1 ? cast_to(t, dt) : t;
}

// The checks torch's scaled_dot_product_attention makes, and the layout; inputs q, k, v, scale[, mask].
Layout check(const char* op, const Tensors& in) {
  if (in.size() < 4 || in.size() > 5) fail("{}: expected query, key, value, scale and an optional mask, got {} inputs", op, in.size());
  const char* names[] = {"query", "key", "value"};
  for (int i = 0; i < 3; ++i) {
    if (in[size_t(i)].dim() < 2) fail("{}: {} must be at least 2-D, got {}-D", op, names[i], in[size_t(i)].dim());
    if (!is_floating(in[size_t(i)].dtype()))
      fail("{}: {} must be a floating tensor, got {}", op, names[i], dtype_name(in[size_t(i)].dtype()));
    if (in[size_t(i)].dtype() != in[0].dtype())
      fail("{}: query, key and value must have one dtype, got {} and {}", op, dtype_name(in[0].dtype()),
           dtype_name(in[size_t(i)].dtype()));
  }
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  if (q.size(-1) != k.size(-1))
    fail("{}: query's last dim ({}) must equal key's ({}), got query {} and key {}", op, q.size(-1), k.size(-1),
         shape_str(q.sizes()), shape_str(k.sizes()));
  if (k.size(-2) != v.size(-2))
    fail("{}: key and value must have the same sequence length, got key {} and value {}", op, shape_str(k.sizes()),
         shape_str(v.sizes()));
  if (in[3].numel() != 1) fail("{}: scale must hold one value, got shape {}", op, shape_str(in[3].sizes()));
  Layout lay;
  lay.batch = broadcast_shapes(op, broadcast_shapes(op, lead(q), lead(k)), lead(v));
  if (in.size() == 5) {
    const Tensor& m = in[4];
    Shape want = lay.batch;
    want.push_back(q.size(-2));
    want.push_back(k.size(-2));
    bool fits = m.dim() <= int64_t(want.size());
    for (int64_t i = 1; fits && i <= m.dim(); ++i) fits = m.size(-i) == 1 || m.size(-i) == want[want.size() - size_t(i)];
    if (!fits)
      fail("{}: attn_mask of shape {} does not broadcast to the attention's shape {}", op, shape_str(m.sizes()), shape_str(want));
  }
  for (int64_t d : lay.batch) lay.count *= d;
  lay.compute = q.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  return lay;
}

// A bool mask shared by every head that keeps exactly the keys j <= i (a GPT's tril buffer, sliced and
// compared): checked in L*S reads, a head's worth of scores, so the loops generate it and skip the keys
// above the diagonal instead of reading it.
bool is_causal_mask(const AttentionProblem& p, const std::vector<int64_t>& m_off) {
  if (p.mask_kind != AttentionMask::Bool) return false;
  for (int64_t o : m_off)
    if (o != m_off[0]) return false;
  const bool* m = static_cast<const bool*>(p.mask) + (m_off.empty() ? 0 : m_off[0]);
  for (int64_t i = 0; i < p.L; ++i)
    for (int64_t j = 0; j < p.S; ++j)
      if (m[i * p.m_row + j * p.m_col] != (j <= i)) return false;
  return true;
}

// The problem over the inputs as given (held in `keep`, converted where the loops need it).
AttentionProblem problem(const Tensors& in, const Attrs& attrs, const Layout& lay, Tensors& keep,
                         std::vector<std::vector<int64_t>>& offsets) {
  AttentionProblem p;
  for (int i = 0; i < 3; ++i) keep.push_back(rows_of(in[size_t(i)], lay.compute));
  const Tensor &q = keep[0], &k = keep[1], &v = keep[2];
  p.batch = lay.count;
  p.L = q.size(-2);
  p.S = k.size(-2);
  p.E = q.size(-1);
  p.Ev = v.size(-1);
  p.q = q.raw_data();
  p.k = k.raw_data();
  p.v = v.raw_data();
  p.q_row = q.stride(-2);
  p.k_row = k.stride(-2);
  p.v_row = v.stride(-2);
  for (int i = 0; i < 3; ++i) offsets.push_back(batch_offsets(keep[size_t(i)], lay));
  p.causal = attrs.b_or("causal", false);
  p.bf16 = q.dtype() == DType::BFloat16;
  p.scale = in[3].item_double();
  if (in.size() == 5) {
    Tensor m = in[4];
    if (m.dtype() != DType::Bool && m.dtype() != lay.compute) m = cast_to(m, lay.compute);
    while (m.dim() < 2) m = m.unsqueeze(0);
    keep.push_back(m);
    p.mask = m.raw_data();
    p.mask_kind = m.dtype() == DType::Bool ? AttentionMask::Bool : AttentionMask::Float;
    p.m_row = m.size(-2) == 1 ? 0 : m.stride(-2);
    p.m_col = m.size(-1) == 1 ? 0 : m.stride(-1);
    offsets.push_back(batch_offsets(m, lay));
    p.m_off = offsets[3].data();
    if (is_causal_mask(p, offsets[3])) {
      p.causal = true;
      p.mask_kind = AttentionMask::None;
    }
  }
  p.q_off = offsets[0].data();
  p.k_off = offsets[1].data();
  p.v_off = offsets[2].data();
  return p;
}

Shape with_tail(Shape s, int64_t a, int64_t b) {
  s.push_back(a);
  if (b >= 0) s.push_back(b);
  return s;
}

Tensor to_dtype(const Tensor& t, DType dt) { return t.dtype() == dt ? t : cast_to(t, dt); }

// Dense strides in `like`'s memory order, as torch's empty_like keeps it: a GPT's heads are views of one
// [B, T, C] projection, so an output laid out [B, T, H, D] makes the transpose and view that follow it free
// (torch's CPU flash attention lays its output out so). The last dim stays innermost; size-1 dims and ties
// keep their order.
Tensor empty_in_order_of(const Tensor& like, const Shape& sizes, DType dt) {
  const size_t r = sizes.size();
  if (like.dim() != int64_t(r) || r < 3) return Tensor::empty(sizes, dt);
  std::vector<int64_t> order(r - 1);
  std::iota(order.begin(), order.end(), int64_t(0));
  auto key = [&](int64_t d) { return like.size(d) == 1 ? std::numeric_limits<int64_t>::max() : like.stride(d); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) > key(b); });
  order.push_back(int64_t(r) - 1);
  Shape mem(r);
  for (size_t k = 0; k < r; ++k) mem[k] = sizes[size_t(order[k])];
  // restrided in place, not through permute: a kernel's output is no op of its own (the profiler, a trace)
  Tensor t = Tensor::empty(mem, dt);
  const Shape dense = t.impl()->strides;
  t.impl()->sizes = sizes;
  for (size_t k = 0; k < r; ++k) t.impl()->strides[size_t(order[k])] = dense[k];
  return t;
}

// t's rows per batch index, the offsets kept in `store` (whose elements' buffers do not move)
AttentionRows rows_layout(const Tensor& t, const Layout& lay, std::vector<std::vector<int64_t>>& store) {
  store.push_back(batch_offsets(t, lay));
  return {store.back().data(), t.stride(-2)};
}

// The backward's checks: inputs grad (of out), grad_lse (empty: none), out, lse, then flash_attention's inputs.
Layout check_backward(const Tensors& in) {
  const char* op = "flash_attention_backward";
  if (in.size() < 8) fail("{}: expected grad, grad_lse, out, lse, query, key, value, scale[, mask], got {} inputs", op, in.size());
  Layout lay = check(op, Tensors(in.begin() + 4, in.end()));
  const Shape out_shape = with_tail(lay.batch, in[4].size(-2), in[6].size(-1)), lse_shape = with_tail(lay.batch, in[4].size(-2), -1);
  const bool has_glse = in[1].numel() > 0;
  if (in[0].sizes() != out_shape || in[2].sizes() != out_shape || in[3].sizes() != lse_shape ||
      (has_glse && in[1].sizes() != lse_shape))
    fail("{}: expected grad and out of shape {} and lse of shape {}, got grad {}, grad_lse {}, out {}, lse {}", op,
         shape_str(out_shape), shape_str(lse_shape), shape_str(in[0].sizes()), shape_str(in[1].sizes()),
         shape_str(in[2].sizes()), shape_str(in[3].sizes()));
  return lay;
}


}  // namespace

Tensors kernel_flash_attention(OpId, const Tensors& in, const Attrs& attrs) {
  Layout lay = check("flash_attention", in);
  Tensors keep;
  std::vector<std::vector<int64_t>> offsets;
  AttentionProblem p = problem(in, attrs, lay, keep, offsets);
  Tensor out = empty_in_order_of(keep[0], with_tail(lay.batch, p.L, p.Ev), stored_dtype(in[0].dtype(), lay.compute));
  Tensor lse = Tensor::empty(with_tail(lay.batch, p.L, -1), lay.compute);
  p.out = out.raw_data();
  p.out_rows = rows_layout(out, lay, offsets);
  p.lse = lse.raw_data();
  if (p.S == 0) {  // no keys: the empty softmax times an empty v is zeros, as torch's matmul
    auto fill = [&](auto zero) {
      using T = decltype(zero);
      std::fill_n(static_cast<T*>(p.lse), lse.numel(), -std::numeric_limits<T>::infinity());
    };
    std::memset(out.raw_data(), 0, size_t(out.numel()) * itemsize(out.dtype()));  // 0 in any float type
    if (lay.compute == DType::Float64) fill(double(0));
    else fill(float(0));
  } else if (p.batch * p.L * p.Ev > 0) {
    isa_kernels().attention_forward(lay.compute, p);
  }
  return {to_dtype(out, in[0].dtype()), lse};
}

std::vector<std::pair<Shape, DType>> flash_attention_outputs(OpId op, const Tensors& in) {
  if (op == OpId::FlashAttention) {
    Layout lay = check("flash_attention", in);
    const int64_t L = in[0].size(-2);
    return {{with_tail(lay.batch, L, in[2].size(-1)), in[0].dtype()}, {with_tail(lay.batch, L, -1), lay.compute}};
  }
  if (op != OpId::FlashAttentionBackward) fail("flash_attention_outputs: {} is not a flash attention op", op_name(op));
  Layout lay = check_backward(in);
  const int64_t L = in[4].size(-2), S = in[5].size(-2), E = in[4].size(-1), Ev = in[6].size(-1);
  const DType dt = in[4].dtype();
  return {{with_tail(lay.batch, L, E), dt}, {with_tail(lay.batch, S, E), dt}, {with_tail(lay.batch, S, Ev), dt}};
}

Tensors kernel_flash_attention_backward(OpId, const Tensors& in, const Attrs& attrs) {
  Layout lay = check_backward(in);
  Tensors fwd(in.begin() + 4, in.end());
  Tensors keep;
  std::vector<std::vector<int64_t>> offsets;
  AttentionProblem p = problem(fwd, attrs, lay, keep, offsets);
  const bool has_glse = in[1].numel() > 0;
  // grad and out as q is stored (bf16 or the compute dtype), lse and its gradient in the compute dtype
  const DType stored = stored_dtype(fwd[0].dtype(), lay.compute);
  auto dense = [&](const Tensor& t, DType dt) { return t.dtype() == dt && t.is_contiguous() ? t : cast_to(t, dt); };
  // grad and out read by rows where they are (a head-split view of [B, T, C] needs no copy)
  Tensor g = rows_of(in[0], lay.compute), out = rows_of(in[2], lay.compute), lse = dense(in[3], lay.compute);
  Tensor glse = has_glse ? dense(in[1], lay.compute) : Tensor();
  // each gradient in its operand's memory order
  Tensor dq = empty_in_order_of(keep[0], with_tail(lay.batch, p.L, p.E), stored);
  Tensor dk = empty_in_order_of(keep[1], with_tail(lay.batch, p.S, p.E), stored);
  Tensor dv = empty_in_order_of(keep[2], with_tail(lay.batch, p.S, p.Ev), stored);
  AttentionGrads gr;
  gr.grad = g.raw_data();
  gr.out = out.raw_data();
  gr.lse = lse.raw_data();
  gr.grad_lse = has_glse ? glse.raw_data() : nullptr;
  gr.dq = dq.raw_data();
  gr.dk = dk.raw_data();
  gr.dv = dv.raw_data();
  gr.grad_rows = rows_layout(g, lay, offsets);
  gr.out_rows = rows_layout(out, lay, offsets);
  gr.dq_rows = rows_layout(dq, lay, offsets);
  gr.dk_rows = rows_layout(dk, lay, offsets);
  gr.dv_rows = rows_layout(dv, lay, offsets);
  if (p.batch > 0) isa_kernels().attention_backward(lay.compute, p, gr);
  const DType dt = fwd[0].dtype();
  return {to_dtype(dq, dt), to_dtype(dk, dt), to_dtype(dv, dt)};
}

}  // namespace kiln::cpu
