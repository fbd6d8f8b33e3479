// The fused attention row (flash_attention, eager/cpu/attention.cpp) against the unfused maths in float64:
// values and the gradients of q, k, v and a float mask, over sizes that end inside a tile (the kernel's tiles are
// 32 queries by 64 keys) and head dims 16/32/64/80, causal, bool and float masks; the written-out attention of
// GPT code rewritten by the fuse_attention pass, compiled == eager; the outputs a recording from shapes gives
// without running the kernels equal theirs. tests/test_attention.cpp compares
// F.scaled_dot_product_attention, which runs the row, with PyTorch 1.13's values of the written-out maths.
#include <array>
#include <cmath>

#include "core/allocator.h"
#include "eager/autocast/autocast.h"
#include "eager/autograd/engine.h"
#include "eager/autograd/graph.h"
#include "eager/cpu/attention_shapes.h"
#include "eager/cpu/attention_amx.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/dispatch.h"
#include "eager/ops.h"
#include "jit/compiled_function.h"
#include "script_frontend/script.h"
#include "tracer/trace.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

enum class Mask { None, Causal, Bool, Float };

// softmax(q @ k^T * scale, masked) @ v in float64, each step its own op
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, Mask kind, double scale) {
  Tensor s = matmul(q.to(DType::Float64), k.to(DType::Float64).transpose(-2, -1)) * scale;
  const int64_t L = q.size(-2), S = k.size(-2);
  if (kind == Mask::Causal) {
    Tensor keep = ge(arange(Scalar(0), Scalar(L), Scalar(1), DType::Int64).unsqueeze(1), arange(Scalar(0), Scalar(S), Scalar(1), DType::Int64));
    s = where(keep, s, Scalar(-INFINITY));
  }
  if (kind == Mask::Bool) s = where(mask, s, Scalar(-INFINITY));
  if (kind == Mask::Float) s = s + mask.to(DType::Float64);
  return matmul(softmax(s, -1), v.to(DType::Float64));
}

}  // namespace

TEST_CASE("flash_attention: values and gradients equal the unfused maths, tiles cut anywhere, head dims 16-80") {
  manual_seed(7);
  struct Size {
    int64_t L, S;
  };
  for (int64_t E : {16, 32, 64, 80})
    for (Size sz : {Size{37, 37}, Size{70, 70}, Size{5, 9}, Size{66, 131}})
      for (Mask kind : {Mask::None, Mask::Causal, Mask::Bool, Mask::Float}) {
        CAPTURE(E);
        CAPTURE(sz.L);
        CAPTURE(sz.S);
        CAPTURE(int(kind));
        const int64_t Ev = E == 80 ? 24 : E;  // v's width need not be q's
        Tensors in = kiln::test::fresh_leaves({randn({2, 2, sz.L, E}), randn({2, 2, sz.S, E}), randn({2, 2, sz.S, Ev})});
        Tensor mask;
        if (kind == Mask::Bool) {  // shared by the batch, every query keeping key 0
          mask = logical_or(gt(rand({2, 1, sz.L, sz.S}), 0.4), eq(arange(Scalar(0), Scalar(sz.S), Scalar(1)), 0));
        } else if (kind == Mask::Float) {
          mask = (randn({sz.L, sz.S}) * 0.5).requires_grad_();
        }
        const double scale = 1.0 / std::sqrt(double(E));
        Tensor y = scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, kind == Mask::Causal);
        Tensor want = unfused(in[0], in[1], in[2], mask, kind, scale);
        check_close(y, want.to(DType::Float32), 1e-4, 1e-5);
        Tensor w = randn(y.sizes());
        Tensors wrt = in;
        if (kind == Mask::Float) wrt.push_back(mask);
        Tensors got = grad({sum(y * w)}, wrt), expect = grad({sum(want * w.to(DType::Float64))}, wrt);
        for (size_t i = 0; i < wrt.size(); ++i) {
          CAPTURE(i);
          check_close(got[i], expect[i], 1e-3, 1e-4);
        }
      }
}

TEST_CASE("flash_attention: the row's own outputs and errors") {
  manual_seed(3);
  Tensor q = randn({3, 5, 8}), k = randn({3, 7, 8}), v = randn({3, 7, 4});
  Tensors r = dispatch(OpId::FlashAttention, {q, k, v, full({}, 0.25)}, Attrs().set("causal", true));
  REQUIRE(r.size() == 2);
  CHECK(r[0].sizes() == Shape{3, 5, 4});
  // the log-sum-exp of each query row's scores, the statistics the backward reads
  Tensor s = matmul(q, k.transpose(-2, -1)) * 0.25;
  Tensor keep = ge(arange(Scalar(0), Scalar(5), Scalar(1), DType::Int64).unsqueeze(1), arange(Scalar(0), Scalar(7), Scalar(1), DType::Int64));
  check_close(r[1], log(sum(exp(where(keep, s, Scalar(-INFINITY))), {-1})), 1e-5, 1e-6);
  // a tril mask shared by every head runs as is_causal: the same values
  Tensor tril_mask = keep.unsqueeze(0);
  check_close(dispatch(OpId::FlashAttention, {q, k, v, full({}, 0.25), tril_mask})[0], r[0], 1e-6, 1e-7);
  // float64 stays float64; broadcast batch dims
  Tensor y64 = dispatch1(OpId::FlashAttention, {q.to(DType::Float64).unsqueeze(0), k.to(DType::Float64), v.to(DType::Float64), full({}, 0.25)});
  CHECK(y64.dtype() == DType::Float64);
  CHECK(y64.sizes() == Shape{1, 3, 5, 4});
  // no keys: zeros, as torch's empty softmax times an empty value
  check_close(dispatch1(OpId::FlashAttention, {q, randn({3, 0, 8}), randn({3, 0, 4}), full({}, 0.25)}), zeros({3, 5, 4}));
  // a row that attends nowhere is NaN, as softmax of all -inf
  Tensor none = zeros({5, 7}, DType::Bool);
  CHECK(std::isnan(dispatch1(OpId::FlashAttention, {q, k, v, full({}, 0.25), none}).select(0, 0).select(0, 0).select(0, 0).item<float>()));
  check_error([&] { dispatch(OpId::FlashAttention, {q, randn({3, 7, 6}), v, full({}, 0.25)}); },
              "flash_attention: query's last dim (8) must equal key's (6)");
  check_error([&] { dispatch(OpId::FlashAttention, {q, k, randn({3, 6, 4}), full({}, 0.25)}); },
              "flash_attention: key and value must have the same sequence length");
  check_error([&] { dispatch(OpId::FlashAttention, {q, k, v, full({}, 0.25), randn({4, 7})}); },
              "flash_attention: attn_mask of shape [4,7] does not broadcast to the attention's shape [3,5,7]");
  check_error([&] { dispatch(OpId::FlashAttention, {q, k, v, full({2}, 0.25)}); }, "flash_attention: scale must hold one value");
  // no double backward: the first one's graph raises when differentiated again
  Tensors in = kiln::test::fresh_leaves({q, k, v});
  Tensor y = scaled_dot_product_attention(in[0], in[1], in[2]);
  Tensors g = grad({sum(y * y)}, in, {}, false, true);
  check_error([&] { grad({sum(g[0])}, in); }, "flash_attention_backward: double backward through the fused attention is not supported");
}

TEST_CASE("flash_attention: a shapes-only recording's outputs are the kernels' own, and so are its errors") {
  manual_seed(4);
  auto same = [](OpId op, const Tensors& in, const Attrs& attrs = {}) {
    Tensors ran = dispatch(op, in, attrs);
    std::vector<std::pair<Shape, DType>> given = cpu::flash_attention_outputs(op, in);
    REQUIRE(given.size() == ran.size());
    for (size_t i = 0; i < ran.size(); ++i) {
      CAPTURE(i);
      CHECK(given[i].first == ran[i].sizes());
      CHECK(given[i].second == ran[i].dtype());
    }
    return ran;
  };
  // broadcast batch dims, a mask, bfloat16 (its lse float32) and float64
  Tensor q = randn({2, 3, 5, 8}), k = randn({3, 7, 8}), v = randn({1, 3, 7, 4}), scale = full({}, 0.25);
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float64}) {
    CAPTURE(dtype_name(dt));
    Tensors in{q.to(dt), k.to(dt), v.to(dt), scale, gt(rand({5, 7}), 0.3)};
    Tensors fwd = same(OpId::FlashAttention, in);
    Tensors bwd_in{randn(fwd[0].sizes()).to(dt), Tensor::empty({0}, fwd[1].dtype()), fwd[0], fwd[1]};
    bwd_in.insert(bwd_in.end(), in.begin(), in.end());
    same(OpId::FlashAttentionBackward, bwd_in);
  }
  auto error_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const Tensors& bad : {Tensors{q, randn({3, 7, 6}), v, scale}, Tensors{q, k, randn({3, 6, 4}), scale},
                             Tensors{q, k, v, scale, randn({4, 7})}, Tensors{q, k, v}}) {
    std::string kernel = error_of([&] { dispatch(OpId::FlashAttention, bad); });
    REQUIRE(!kernel.empty());
    CHECK(error_of([&] { cpu::flash_attention_outputs(OpId::FlashAttention, bad); }) == kernel);
  }
  Tensors fwd = dispatch(OpId::FlashAttention, {q, k, v, scale});
  Tensors wrong{randn({2, 3, 5, 5}), Tensor::empty({0}), fwd[0], fwd[1], q, k, v, scale};
  std::string kernel = error_of([&] { dispatch(OpId::FlashAttentionBackward, wrong); });
  CHECK(kernel.find("flash_attention_backward: expected grad and out of shape [2,3,5,4]") != std::string::npos);
  CHECK(error_of([&] { cpu::flash_attention_outputs(OpId::FlashAttentionBackward, wrong); }) == kernel);
}

TEST_CASE("flash_attention: bf16 heads run on AMX or widened a head at a time, near the float kernel's values, no float copy of a tensor") {
  manual_seed(11);
  const DType bf = DType::BFloat16, f32 = DType::Float32;
  // where the CPU has AMX and the AVX-512 kernels run, the tile products take bf16 (probabilities and score
  // gradients rounded to bf16, as torch's CPU flash attention): within two bf16 ulps of the float kernel's
  // rounded result, or 1/128 of the tensor's largest value; elsewhere (and with KILN_CPU_AMX=0) q, k, v are
  // widened and the results are the float kernel's rounded once, bit for bit
  const bool pairs = cpu::amx_bf16::available() && cpu::isa_kernels().name == "avx512";
  Tensor scale = full({}, 0.25);
  auto near = [&](const Tensor& got, const Tensor& want_f32) {
    REQUIRE(got.dtype() == bf);
    if (!pairs) return check_close(got, want_f32.to(bf), 0, 0);
    const double top = max(abs(want_f32)).item_double();
    check_close(got.to(f32), want_f32, 1.0 / 64, top / 128);
    // and not the widened kernel's result by accident: some element differs (the rounded probabilities)
    CHECK(max(abs(got.to(f32) - want_f32.to(bf).to(f32))).item_double() > 0);
  };
  // L = S = 37: two query tiles, an odd tail of queries and of causal keys; k and v strided heads of one
  // [B, T, H, E] buffer (row stride 3 * 16), v wider than q and k. L = 70, S = 90, E = 64: two key tiles,
  // q.k over two AMX steps
  for (auto [L, S, E, Ev] : {std::array<int64_t, 4>{37, 37, 16, 32}, std::array<int64_t, 4>{70, 90, 64, 32}}) {
  CAPTURE(S);
  Tensor q = randn({2, 3, L, E}).to(bf);
  Tensor k = randn({2, S, 3, E}).to(bf).permute({0, 2, 1, 3}), v = (randn({2, S, 3, Ev}) * 2.0).to(bf).permute({0, 2, 1, 3});
  Tensor g = randn({2, 3, L, Ev}).to(bf);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    const Attrs attrs = Attrs().set("causal", causal);
    reset_peak_memory_stats();
    const int64_t before = memory_stats().current_bytes;
    Tensors fwd = dispatch(OpId::FlashAttention, {q, k, v, scale}, attrs);
    const int64_t grown = memory_stats().peak_bytes - before;
    Tensors want = dispatch(OpId::FlashAttention, {q.to(f32), k.to(f32), v.to(f32), scale}, attrs);
    near(fwd[0], want[0]);
    check_close(fwd[1], want[1], pairs ? 1e-5 : 0, pairs ? 1e-5 : 0);
    // the results alone (bf16 out, float lse; the allocator's size classes add up to a quarter), where widening
    // q, k and v and the result took 3.5x more
    CHECK(grown <= (fwd[0].numel() * 2 + fwd[1].numel() * 4) * 5 / 4 + 1024);

    // the second shape with a gradient of lse too (a loss reading it)
    Tensor glse = S == 90 ? randn(fwd[1].sizes()) : Tensor::empty({0});
    Tensors in{g, glse, fwd[0], fwd[1], q, k, v, scale};
    reset_peak_memory_stats();
    const int64_t before_b = memory_stats().current_bytes;
    Tensors grads = dispatch(OpId::FlashAttentionBackward, in, attrs);
    const int64_t grown_b = memory_stats().peak_bytes - before_b;
    Tensors want_g = dispatch(OpId::FlashAttentionBackward, {g.to(f32), glse, fwd[0].to(f32), fwd[1], q.to(f32),
                                                             k.to(f32), v.to(f32), scale}, attrs);
    int64_t result_bytes = 0;
    for (int i = 0; i < 3; ++i) {
      CAPTURE(i);
      near(grads[size_t(i)], want_g[size_t(i)]);
      result_bytes += grads[size_t(i)].numel() * 2;
    }
    CHECK(grown_b <= result_bytes * 5 / 4 + 1024);
  }
  }
}

// Attention as nanoGPT writes it, a causal mask sliced from a buffer.
const char* const kAttendSrc =
    "import math\nimport torch\nimport torch.nn as nn\nfrom torch.nn import functional as F\n\n\n"
    "class Attend(nn.Module):\n"
    "    def __init__(self, block):\n"
    "        super().__init__()\n"
    "        self.register_buffer('bias', torch.tril(torch.ones(block, block)).view(1, 1, block, block))\n\n"
    "    def forward(self, q, k, v):\n"
    "        T = q.size(-2)\n"
    "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
    "        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))\n"
    "        att = F.softmax(att, dim=-1)\n"
    "        return att @ v\n";

TEST_CASE("fuse_attention: GPT's written-out attention runs the fused row compiled, values and gradients == eager") {
  auto net = script_source(kAttendSrc, "attend.py").module("Attend", {IValue(int64_t(16))});
  Function f = net->method("forward");
  Function fc = compile(f);
  manual_seed(5);
  auto count = [](const ir::Graph& g, OpId op) {
    int n = 0;
    for (const ir::Node* node : g.block()->nodes()) n += node->is_op(op) ? 1 : 0;
    return n;
  };
  for (int64_t T : {11, 16}) {  // the buffer sliced to the sequence: causal either way
    CAPTURE(T);
    Tensors x = {randn({2, 3, T, 8}), randn({2, 3, T, 8}), randn({2, 3, T, 8})};
    Tensor want = f.call({x[0], x[1], x[2]})[0].to_tensor();
    {
      NoGradGuard ng;
      check_close(fc.call({x[0], x[1], x[2]})[0].to_tensor(), want, 1e-5, 1e-6);
      std::vector<IValue> args{x[0], x[1], x[2]};
      auto g = compiled_graph(fc, args);
      CHECK(count(*g, OpId::FlashAttention) == 1);
      CHECK(count(*g, OpId::Exp) == 0);
    }
    // training: the script graph reads math.sqrt(k.size(-1)) as a number, so the step is traced (as
    // CompiledTrainStep does) and the trace compiled
    Function tr = trace([&](const Tensors& in) { return Tensors{net->call({in[0], in[1], in[2]}).at(0).to_tensor()}; }, x);
    Function tc = compile(tr);
    Tensors le = kiln::test::fresh_leaves(x), lc = kiln::test::fresh_leaves(x);
    Tensor w = randn(want.sizes());
    Tensors ge_ = grad({sum(f.call({le[0], le[1], le[2]})[0].to_tensor() * w)}, le);
    Tensors gc = grad({sum(tc.call({lc[0], lc[1], lc[2]})[0].to_tensor() * w)}, lc);
    for (size_t i = 0; i < 3; ++i) check_close(gc[i], ge_[i], 1e-4, 1e-5);
    std::vector<IValue> args{lc[0], lc[1], lc[2]};
    CHECK(count(*compiled_graph(tc, args), OpId::FlashAttention) == 1);
    CHECK(count(*compiled_backward_graph(tc, args), OpId::FlashAttentionBackward) == 1);
  }
}

TEST_CASE("fuse_attention: the written-out attention traced under bf16 autocast (softmax in f32 between casts) runs the fused row") {
  auto net = script_source(kAttendSrc, "attend.py").module("Attend", {IValue(int64_t(16))});
  manual_seed(6);
  Tensors x = {randn({2, 3, 13, 8}), randn({2, 3, 13, 8}), randn({2, 3, 13, 8})};
  auto count = [](const ir::Graph& g, OpId op) {
    int n = 0;
    for (const ir::Node* node : g.block()->nodes()) n += node->is_op(op) ? 1 : 0;
    return n;
  };
  AutocastGuard autocast(DType::BFloat16);
  Function tr = trace([&](const Tensors& in) { return Tensors{net->call({in[0], in[1], in[2]}).at(0).to_tensor()}; }, x);
  Function tc = compile(tr);
  Tensor want = tr.call({x[0], x[1], x[2]})[0].to_tensor();
  REQUIRE(want.dtype() == DType::BFloat16);
  {
    NoGradGuard ng;
    Tensor got = tc.call({x[0], x[1], x[2]})[0].to_tensor();
    CHECK(got.dtype() == DType::BFloat16);
    // eager rounds the scores and the probabilities to bf16, the row keeps them in f32
    check_close(got, want, 3e-2, 3e-2);
    check_close(got, unfused(x[0], x[1], x[2], {}, Mask::Causal, 1.0 / std::sqrt(8.0)).to(DType::Float32), 2e-2, 2e-2);
    std::vector<IValue> args{x[0], x[1], x[2]};
    auto g = compiled_graph(tc, args);
    CHECK(count(*g, OpId::FlashAttention) == 1);
    CHECK(count(*g, OpId::Exp) == 0);
  }
  Tensors lc = kiln::test::fresh_leaves(x);
  Tensors le = kiln::test::fresh_leaves(x);
  Tensor w = randn(want.sizes());
  Tensors gc = grad({sum(tc.call({lc[0], lc[1], lc[2]})[0].to_tensor().to(DType::Float32) * w)}, lc);
  Tensors ge_ = grad({sum(tr.call({le[0], le[1], le[2]})[0].to_tensor().to(DType::Float32) * w)}, le);
  for (size_t i = 0; i < 3; ++i) check_close(gc[i], ge_[i], 5e-2, 5e-2);
  std::vector<IValue> args{lc[0], lc[1], lc[2]};
  CHECK(count(*compiled_backward_graph(tc, args), OpId::FlashAttentionBackward) == 1);
}

// nanoGPT's heads: q, k, v split from [B, T, C] and transposed; without a gradient k's permute has one use,
// so simplify folds the heads' permute and k's transpose into one permute ([0, 2, 3, 1]) before
// fuse_attention, which must still see k^T in it
const char* const kHeadsSrc =
    "import math\nimport torch\nimport torch.nn as nn\nfrom torch.nn import functional as F\n\n\n"
    "class Heads(nn.Module):\n"
    "    def __init__(self, block, n_head):\n"
    "        super().__init__()\n"
    "        self.n_head = n_head\n"
    "        self.register_buffer('bias', torch.tril(torch.ones(block, block)).view(1, 1, block, block))\n\n"
    "    def forward(self, q, k, v):\n"
    "        B, T, C = q.size()\n"
    "        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)\n"
    "        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)\n"
    "        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)\n"
    "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
    "        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))\n"
    "        att = F.softmax(att, dim=-1)\n"
    "        y = att @ v\n"
    "        return y.transpose(1, 2).contiguous().view(B, T, C)\n";

TEST_CASE("fuse_attention: heads split from [B, T, C] and traced without a gradient (k's permutes folded) run the fused row, f32 and bf16") {
  auto net = script_source(kHeadsSrc, "heads.py").module("Heads", {IValue(int64_t(16)), IValue(int64_t(3))});
  manual_seed(7);
  Tensors x = {randn({2, 13, 24}), randn({2, 13, 24}), randn({2, 13, 24})};
  for (bool bf16 : {false, true}) {
    CAPTURE(bf16);
    NoGradGuard ng;
    AutocastGuard autocast(DType::BFloat16, bf16);
    Function tr = trace([&](const Tensors& in) { return Tensors{net->call({in[0], in[1], in[2]}).at(0).to_tensor()}; }, x);
    Function tc = compile(tr);
    Tensor want = tr.call({x[0], x[1], x[2]})[0].to_tensor();
    Tensor got = tc.call({x[0], x[1], x[2]})[0].to_tensor();
    CHECK(got.dtype() == want.dtype());
    // the unfused maths on the same heads, in f32
    auto heads = [](const Tensor& t) { return t.view({2, 13, 3, 8}).transpose(1, 2); };
    Tensor ref = unfused(heads(x[0]), heads(x[1]), heads(x[2]), {}, Mask::Causal, 1.0 / std::sqrt(8.0))
                     .transpose(1, 2)
                     .contiguous()
                     .view({2, 13, 24});
    check_close(got.to(DType::Float32), ref, bf16 ? 2e-2 : 1e-5, bf16 ? 2e-2 : 1e-6);
    check_close(got.to(DType::Float32), want.to(DType::Float32), bf16 ? 3e-2 : 1e-5, bf16 ? 3e-2 : 1e-6);
    std::vector<IValue> args{x[0], x[1], x[2]};
    auto g = compiled_graph(tc, args);
    int flash = 0, exps = 0;
    for (const ir::Node* node : g->block()->nodes()) {
      flash += node->is_op(OpId::FlashAttention) ? 1 : 0;
      exps += node->is_op(OpId::Exp) ? 1 : 0;
    }
    CHECK(flash == 1);
    CHECK(exps == 0);
  }
}
