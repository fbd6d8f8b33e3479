// The CUDA backend on a GPU: every op against the CPU kernels, autograd through an MLP, memory after
// many steps. Each case is skipped (and reported as skipped) where no driver or GPU is present.
#include "kiln_config.h"
#include "ir_samples.h"
#include "support.h"
#include "jit/compiled_function.h"
#include "script_frontend/script.h"

#include <cmath>
#include <limits>

#if KILN_HAVE_NVRTC
#include "backends/cuda/kernel_cache.h"
#endif

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;

namespace {

const bool kNoGpu = !cuda::is_available();
const Device kCuda = Device::cuda(0);

// The CUDA result, brought back, against the CPU one.
void same(const Tensor& gpu, const Tensor& cpu, double rtol = 1e-5, double atol = 1e-6) {
  REQUIRE(gpu.device() == kCuda);
  REQUIRE(gpu.dtype() == cpu.dtype());
  check_close(gpu.detach().cpu(), cpu, rtol, atol);
}

Tensor on_gpu(const Tensor& t) { return t.detach().cuda(); }

constexpr DType kAll[] = {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16, DType::Float16, DType::Float32,
                          DType::Float64};

// Values every dtype holds exactly and every op accepts: small integers and halves, both signs.
Tensor sample(const Shape& shape, DType t, double shift = 0) {
  Tensor x = mul(seq(shape, 0.37, 0.2 + shift, DType::Float64), 4.0);
  x = where(gt(abs(x), 0.5), x, 0.75);  // no zeros: log, div and reciprocal stay finite
  if (!is_floating(t)) x = t == DType::Bool ? gt(x, 0.0) : x.to(DType::Int64).to(DType::Float64);
  return x.to(t);
}

double tolerance(DType t) { return t == DType::BFloat16 ? 2e-2 : t == DType::Float16 ? 2e-3 : t == DType::Float32 ? 2e-5 : 1e-10; }

}  // namespace

TEST_CASE("cuda device: every unary op equals the cpu, for every dtype and layout" * doctest::skip(kNoGpu)) {
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = OpId(i);
    if (op_info(op).kind != OpKind::Unary) continue;
    for (DType t : kAll) {
      if (op == OpId::Neg && t == DType::Bool) continue;
      CAPTURE(op_name(op));
      CAPTURE(dtype_name(t));
      Tensor x = sample({6, 35}, t);
      Tensor g = on_gpu(x);
      double tol = tolerance(t == DType::Bool || !is_floating(t) ? DType::Float32 : t);
      same(dispatch1(op, {g}), dispatch1(op, {x}), tol, tol);                        // contiguous: vector path
      same(dispatch1(op, {g.t()}), dispatch1(op, {x.t()}), tol, tol);                // strided
      same(dispatch1(op, {g.slice(1, 1, std::nullopt)}), dispatch1(op, {x.slice(1, 1, std::nullopt)}), tol, tol);  // unaligned rows
    }
  }
}

TEST_CASE("cuda device: every binary op equals the cpu, with broadcasting and scalars" * doctest::skip(kNoGpu)) {
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = OpId(i);
    if (op_info(op).kind != OpKind::Binary) continue;
    for (DType t : kAll) {
      if ((op == OpId::Sub || op == OpId::FloorDivide) && t == DType::Bool) continue;  // both refuse bool, as torch
      CAPTURE(op_name(op));
      CAPTURE(dtype_name(t));
      Tensor a = sample({4, 1, 9}, t), b = sample({5, 9}, t, 1.0);
      if (op == OpId::Pow && !is_floating(t)) b = abs(b);  // integer powers: non-negative exponents
      if (op == OpId::FloorDivide && !is_floating(t)) b = where(ne(b, 0), b, 1);  // an integer zero divisor raises
      double tol = tolerance(is_floating(t) ? t : DType::Float32);
      same(dispatch1(op, {on_gpu(a), on_gpu(b)}), dispatch1(op, {a, b}), tol, tol);
      same(dispatch1(op, {on_gpu(a), Tensor::wrap_scalar(2)}), dispatch1(op, {a, Tensor::wrap_scalar(2)}), tol, tol);
      same(dispatch1(op, {Tensor::wrap_scalar(1.5), on_gpu(b)}), dispatch1(op, {Tensor::wrap_scalar(1.5), b}), tol, tol);
    }
    // an int tensor meets a float one
    Tensor a = sample({3, 8}, DType::Int64), b = sample({3, 8}, DType::Float32, 2.0);
    same(dispatch1(op, {on_gpu(a), on_gpu(b)}), dispatch1(op, {a, b}), 2e-5, 2e-5);
  }
}

TEST_CASE("cuda device: where, casts and copies" * doctest::skip(kNoGpu)) {
  Tensor c = sample({5, 7}, DType::Bool);
  for (DType t : kAll) {
    CAPTURE(dtype_name(t));
    Tensor a = sample({5, 7}, t), b = sample({7}, t, 3.0);
    same(where(on_gpu(c), on_gpu(a), on_gpu(b)), where(c, a, b));
    same(where(on_gpu(c), on_gpu(a), 0), where(c, a, 0));
    for (DType u : kAll) {
      CAPTURE(dtype_name(u));
      same(on_gpu(a).to(u), a.to(u));
      same(on_gpu(a).t().to(u), a.t().to(u));
    }
  }
  Tensor x = seq({6, 10});
  Tensor g = on_gpu(x);
  same(g.t().contiguous(), x.t().contiguous());
  same(g.slice(1, 1, 9, 3).clone(), x.slice(1, 1, 9, 3).clone());
  same(g.narrow(0, 1, 1).expand({4, 10}).contiguous(), x.narrow(0, 1, 1).expand({4, 10}).contiguous());
  same(g.t().reshape({60}), x.t().reshape({60}));
  same(cat({g, g.slice(0, 2, std::nullopt)}, 0), cat({x, x.slice(0, 2, std::nullopt)}, 0));
  same(stack({g, g}, 1), stack({x, x}, 1));
  // copy_ and fill_ into views, across devices
  Tensor d = zeros({6, 10}, kCuda).to(DType::Float64);
  d.slice(1, 0, 5).copy_(x.slice(1, 5, std::nullopt));  // host → device, into a strided view
  Tensor e = zeros({6, 10}, DType::Float64);
  e.slice(1, 0, 5).copy_(x.slice(1, 5, std::nullopt));
  same(d, e);
  d.select(0, 2).fill_(7.5);
  e.select(0, 2).fill_(7.5);
  same(d, e);
  Tensor h = zeros({6, 10}, DType::Float64);
  h.copy_(d.t().t());  // device → host
  check_close(h, e);
  CHECK(g.t().cpu().strides() == contiguous_strides({10, 6}));  // the host copy is dense
}

TEST_CASE("cuda device: reductions equal the cpu" * doctest::skip(kNoGpu)) {
  for (DType t : kAll) {
    CAPTURE(dtype_name(t));
    Tensor x = sample({4, 6, 5}, t);
    Tensor g = on_gpu(x);
    double tol = tolerance(is_floating(t) ? t : DType::Float64);
    for (Shape dims : {Shape{}, Shape{0}, Shape{1}, Shape{2}, Shape{0, 2}, Shape{-1, -2}})
      for (bool keep : {false, true}) {
        CAPTURE(shape_str(dims));
        same(sum(g, dims, keep), sum(x, dims, keep), tol, tol);
        same(amax(g, dims, keep), amax(x, dims, keep));
        same(amin(g.transpose(0, 2), dims, keep), amin(x.transpose(0, 2), dims, keep));
        if (t != DType::Bool) same(prod(g.slice(1, 0, 2), dims, keep), prod(x.slice(1, 0, 2), dims, keep), tol, tol);
      }
    same(argmax(g), argmax(x));
    same(argmin(g.transpose(0, 1)), argmin(x.transpose(0, 1)));
    for (int64_t d : {0, 1, 2}) {
      same(argmax(g, d, true), argmax(x, d, true));
      same(argmin(g, d), argmin(x, d));
    }
  }
  // NaN wins max, and is the first extreme for argmax
  Tensor n = tensor({1.0, NAN, 3.0, NAN}, {4});
  same(amax(on_gpu(n)), amax(n));
  same(argmax(on_gpu(n)), argmax(n));
  // long rows: every thread of a block folds
  Tensor big = seq({3, 100000}, 0.001);
  same(sum(on_gpu(big), {1}), sum(big, {1}), 1e-9, 1e-9);
  same(sum(on_gpu(big).to(DType::Float32)), sum(big.to(DType::Float32)), 1e-5, 1e-3);
  same(argmax(on_gpu(big), 1), argmax(big, 1));
  // composites of the primitives
  Tensor y = seq({7, 9}, 0.7, 0.3, DType::Float32);
  Tensor gy = on_gpu(y);
  same(mean(gy, {1}), mean(y, {1}));
  same(var(gy, {0}), var(y, {0}), 1e-4, 1e-5);
  same(kiln::std(gy), kiln::std(y), 1e-4, 1e-5);
  same(logsumexp(gy, {1}), logsumexp(y, {1}), 1e-5, 1e-5);
  same(softmax(gy, 1), softmax(y, 1), 1e-5, 1e-6);
  same(log_softmax(gy, 0), log_softmax(y, 0), 1e-5, 1e-5);
  same(layer_norm(gy, {9}, on_gpu(ones({9})), on_gpu(zeros({9})), 1e-5), layer_norm(y, {9}, ones({9}), zeros({9}), 1e-5),
       1e-4, 1e-5);
  Tensor target = tensor(std::vector<int64_t>{0, 3, 8, 1, 2, 5, 4}, {7});
  same(cross_entropy(gy, on_gpu(target)), cross_entropy(y, target), 1e-5, 1e-6);
  same(mse_loss(gy, on_gpu(y) * 0.5), mse_loss(y, y * 0.5));
}

TEST_CASE("cuda device: matmul and linear through cublas equal the cpu" * doctest::skip(kNoGpu)) {
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16}) {
    CAPTURE(dtype_name(t));
    double tol = t == DType::BFloat16 ? 2e-2 : t == DType::Float32 ? 1e-4 : 1e-10;
    auto check = [&](const Tensor& a, const Tensor& b) {
      CAPTURE(shape_str(a.sizes()));
      CAPTURE(shape_str(b.sizes()));
      same(matmul(on_gpu(a), on_gpu(b)), matmul(a, b), tol, tol);
    };
    Tensor a = seq({5, 7}, 0.3, 0.1, t), b = seq({7, 3}, 0.7, 0.2, t);
    check(a, b);
    check(seq({7, 5}, 0.3, 0.1, t).t(), b);            // column-major operand
    check(a, seq({3, 7}, 0.5, 0.1, t).t());
    check(a.slice(1, 0, 7, 2), seq({4, 3}, 0.5, 0.1, t));  // neither stride 1: copied
    check(seq({2, 5, 7}, 0.3, 0.1, t), b);             // batch times one matrix
    check(seq({2, 1, 5, 7}, 0.3, 0.1, t), seq({3, 7, 4}, 0.2, 0.4, t));  // broadcast batch dims
    check(seq({7}, 0.3, 0.1, t), b);                   // 1-D on the left
    check(a, seq({7}, 0.3, 0.1, t));                   // 1-D on the right
    check(seq({7}, 0.3, 0.1, t), seq({7}, 0.9, 0.1, t));  // dot
    check(seq({4, 0}, 0.3, 0.1, t), seq({0, 3}, 0.3, 0.1, t));  // K = 0: zeros
  }
  Tensor x = seq({8, 6}, 0.3, 0.1, DType::Float32), w = seq({4, 6}, 0.2, 0.3, DType::Float32), b = seq({4});
  same(linear(on_gpu(x), on_gpu(w), on_gpu(b.to(DType::Float32))), linear(x, w, b.to(DType::Float32)), 1e-5, 1e-5);
  check_error([&] { matmul(on_gpu(ones({2, 2}, DType::Int64)), on_gpu(ones({2, 2}, DType::Int64))); },
              "matmul: dtype int64 has no cuda kernel");
}

TEST_CASE("cuda device: flash attention forward and backward equal the cpu (causal, masks, broadcast batch, strided heads, dtypes)" *
          doctest::skip(kNoGpu)) {
  struct Case {
    Shape q, k, v, mask;
    bool causal = false, bool_mask = true;
  };
  const Case cases[] = {
      {{2, 3, 7, 16}, {2, 3, 7, 16}, {2, 3, 7, 16}, {}, true},        // a GPT's causal heads
      {{2, 3, 5, 40}, {2, 3, 9, 40}, {2, 3, 9, 24}, {}},              // L != S, Ev != E, rows past one lane each
      {{2, 3, 5, 8}, {1, 3, 6, 8}, {3, 6, 8}, {2, 1, 5, 6}},          // k, v and a bool mask broadcast over batch
      {{4, 6, 8}, {4, 6, 8}, {4, 6, 8}, {6, 6}, false, false},       // a float mask added to the scores
      {{1, 2, 4, 300}, {1, 2, 3, 300}, {1, 2, 3, 300}, {}, true},     // wider than the kernels: the cpu kernel
  };
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    CAPTURE(dtype_name(t));
    const double tol = t == DType::BFloat16 ? 3e-2 : t == DType::Float16 ? 3e-3 : t == DType::Float32 ? 2e-5 : 1e-10;
    for (const Case& c : cases) {
      CAPTURE(shape_str(c.q));
      Tensor q = seq(c.q, 0.31, 0.2, t), k = seq(c.k, 0.17, -0.4, t), v = seq(c.v, 0.23, 0.1, t);
      Tensor mask;
      if (!c.mask.empty())
        mask = c.bool_mask ? gt(seq(c.mask, 0.7, 0.3), -0.6) : seq(c.mask, 0.5, -0.2, t);
      auto run = [&](auto dev) {
        Tensor qd = dev(q).requires_grad_(), kd = dev(k).requires_grad_(), vd = dev(v).requires_grad_();
        Tensor out = scaled_dot_product_attention(qd, kd, vd, mask.defined() ? dev(mask) : Tensor(), 0.0, c.causal);
        Tensor w = dev(seq(out.sizes(), 0.13, 0.3, t));
        sum(mul(out, w)).backward();
        return Tensors{out.detach(), qd.grad(), kd.grad(), vd.grad()};
      };
      Tensors gpu = run([](const Tensor& x) { return x.detach().cuda(); });
      Tensors cpu = run([](const Tensor& x) { return x.detach().clone(); });
      for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        same(gpu[i], cpu[i], tol, tol);
      }
    }
  }
  // strided heads, as nanoGPT's split then transpose gives them
  Tensor qkv = seq({2, 7, 3 * 32}, 0.11, 0.2, DType::Float32);
  auto heads = [](const Tensor& x, int64_t i) { return x.slice(2, i * 32, (i + 1) * 32).reshape({2, 7, 2, 16}).transpose(1, 2); };
  same(scaled_dot_product_attention(heads(on_gpu(qkv), 0), heads(on_gpu(qkv), 1), heads(on_gpu(qkv), 2), {}, 0.0, true),
       scaled_dot_product_attention(heads(qkv, 0), heads(qkv, 1), heads(qkv, 2), {}, 0.0, true), 2e-5, 2e-5);
  check_error([] { scaled_dot_product_attention(on_gpu(ones({2, 4, 8})), on_gpu(ones({2, 4, 6})), on_gpu(ones({2, 4, 8}))); },
              "query's last dim (8) must equal key's (6)");
}

TEST_CASE("cuda device: factories, printing, errors" * doctest::skip(kNoGpu)) {
  same(zeros({3, 2}, kCuda), zeros({3, 2}));
  same(ones({3}, TensorOptions(DType::Int64, kCuda)), ones({3}, DType::Int64));
  same(full({2, 2}, 2.5, kCuda), full({2, 2}, 2.5));
  same(arange(0, 10, 3, TensorOptions(DType::Int64, kCuda)), arange(0, 10, 3));
  same(eye(3, std::nullopt, kCuda), eye(3));
  manual_seed(7);
  Tensor r = randn({4, 4}, kCuda);
  manual_seed(7);
  same(r, randn({4, 4}));  // the same draws as the cpu
  same(zeros_like(r), zeros({4, 4}));
  CHECK(ones_like(r).device() == kCuda);

  Tensor p = tensor({1.0, 2.5}, {2}, kCuda);
  CHECK(p.str() == "tensor([1.0000, 2.5000], device='cuda:0')");
  CHECK(p.sum().item<double>() == 3.5);
  CHECK(p.device().str() == "cuda:0");
  check_error([&] { add(ones({2}), p); }, "add: expected all tensors on one device, got cpu and cuda:0");
  check_error([&] { conv2d(on_gpu(ones({1, 1, 3, 3})), on_gpu(ones({1, 1, 2, 2}))); }, "conv2d: no cuda kernel");
  check_error([&] { max_pool2d(on_gpu(ones({1, 1, 4, 4})), {2, 2}); }, "max_pool2d: no cuda kernel");
  check_error([] { ones({2}).to(Device::cuda(99)); }, "cuda: device index 99 is out of range");
  Tensor leaf = ones({2}).requires_grad_();
  check_error([&] { leaf.cuda(); }, "to: moving a tensor that requires grad from cpu to cuda:0 is not recorded");
  // a 0-d CPU tensor joins a device op, as in torch
  same(mul(on_gpu(seq({3})), scalar_tensor(2.0, DType::Float64)), mul(seq({3}), 2.0));
}

TEST_CASE("cuda device: gather and scatter_add, forward and backward" * doctest::skip(kNoGpu)) {
  Tensor x = seq({4, 5}, 0.3, 0.1, DType::Float32);
  Tensor idx = tensor(std::vector<int64_t>{0, 4, 4, 1, 2, 3, 0, 0}, {4, 2});
  same(gather(on_gpu(x), 1, on_gpu(idx)), gather(x, 1, idx));
  Tensor src = seq({4, 2}, 0.9, 0.4, DType::Float32);
  same(scatter_add(on_gpu(x), 1, on_gpu(idx), on_gpu(src)), scatter_add(x, 1, idx, src), 1e-5, 1e-6);
  Tensor xg = on_gpu(x).requires_grad_();
  gather(xg, 1, on_gpu(idx)).sum().backward();
  Tensor xc = x.clone().requires_grad_();
  gather(xc, 1, idx).sum().backward();
  same(xg.grad(), xc.grad());
}

TEST_CASE("cuda device: index_select, embedding, index_add, argsort, topk and cumsum equal the cpu" * doctest::skip(kNoGpu)) {
  Tensor x = seq({6, 5}, 0.3, 0.1, DType::Float32);
  Tensor idx = tensor(std::vector<int64_t>{5, 0, 0, 2}, {4});
  same(index_select(on_gpu(x), 0, on_gpu(idx)), index_select(x, 0, idx));
  same(index_select(on_gpu(x), 1, on_gpu(idx.slice(0, 1, 4))), index_select(x, 1, idx.slice(0, 1, 4)));
  same(index_select(on_gpu(x.t()), 1, on_gpu(idx)), index_select(x.t(), 1, idx));  // a strided input
  Tensor src = seq({4, 5}, 0.9, 0.4, DType::Float32);
  same(index_add(on_gpu(x), 0, on_gpu(idx), on_gpu(src)), index_add(x, 0, idx, src));  // repeated index 0 adds twice
  // the embedding's gradient is an index_add: rows picked twice get both gradients
  Tensor wg = on_gpu(x).requires_grad_(), wc = x.clone().requires_grad_();
  Tensor tokens = tensor(std::vector<int64_t>{1, 1, 4, 0, 5, 1}, {2, 3});
  mul(embedding(wg, on_gpu(tokens)), on_gpu(seq({2, 3, 5}, 0.1, 0.2, DType::Float32))).sum().backward();
  mul(embedding(wc, tokens), seq({2, 3, 5}, 0.1, 0.2, DType::Float32)).sum().backward();
  same(wg.grad(), wc.grad());
  check_error([&] { index_select(on_gpu(x), 0, on_gpu(tensor(std::vector<int64_t>{6}, {1}))); },
              "index_select: index 6 is out of bounds for dimension 0 with size 6");
  Tensor r = seq({3, 7}, 0.77, 0.3, DType::Float32);
  same(argsort(on_gpu(r), -1, true), argsort(r, -1, true));
  auto [vg, ig] = topk(on_gpu(r), 3);
  auto [vc, ic] = topk(r, 3);
  same(vg, vc);
  same(ig, ic);
  same(cumsum(on_gpu(r), 1), cumsum(r, 1));
}

TEST_CASE("cuda device: a scripted graph makes its factories' tensors on the device its inputs are on" * doctest::skip(kNoGpu)) {
  const char* src =
      "import torch\nfrom torch import Tensor\n\n\n"
      "def f(w: Tensor, x: Tensor) -> Tensor:\n"
      "    pos = torch.arange(0, x.size(1), dtype=torch.long, device=x.device)\n"
      "    return w[pos] + torch.zeros(x.size(1), 1) + x.t()\n";
  Function f = script_source(src, "factories.py").function("f");
  Tensor w = seq({5, 3}, 0.2, 0.1, DType::Float32), x = seq({3, 4}, 0.5, 0.3, DType::Float32);
  Tensor want = f.call({w, x})[0].to_tensor();
  Tensor got = f.call({on_gpu(w), on_gpu(x)})[0].to_tensor();
  same(got, want);
  same(compile(f).call({on_gpu(w), on_gpu(x)})[0].to_tensor(), want);
  // Traced through the interpreter (as a compiled training step traces a scripted model): the factories'
  // tensors become the trace's constants on the device, not device moves it refuses to record.
  Function traced = trace([&](const Tensors& in) { return Tensors{f.call({in[0], in[1]})[0].to_tensor()}; },
                          {on_gpu(w), on_gpu(x)});
  same(traced.call({on_gpu(w), on_gpu(x)})[0].to_tensor(), want);
}

TEST_CASE("cuda device: autograd through an MLP equals the cpu" * doctest::skip(kNoGpu)) {
  manual_seed(3);
  Tensor x = randn({32, 20}), target = randint(0, 5, {32});
  std::vector<Tensor> cpu_params = {mul(randn({20, 64}), 0.2), zeros({64}), mul(randn({64, 5}), 0.2), zeros({5})};
  std::vector<Tensor> gpu_params;
  for (Tensor& p : cpu_params) {
    gpu_params.push_back(on_gpu(p).requires_grad_());
    p.requires_grad_();
  }
  auto forward = [](const Tensor& in, const std::vector<Tensor>& w, const Tensor& y) {
    Tensor h = gelu(add(matmul(in, w[0]), w[1]));
    return cross_entropy(add(matmul(h, w[2]), w[3]), y);
  };
  Tensor lc = forward(x, cpu_params, target);
  Tensor lg = forward(on_gpu(x), gpu_params, on_gpu(target));
  same(lg, lc, 1e-5, 1e-6);
  lc.backward();
  lg.backward();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    CAPTURE(i);
    same(gpu_params[i].grad(), cpu_params[i].grad(), 1e-4, 1e-6);
  }
  // second order: the backward graph runs on the device too
  Tensor w = on_gpu(seq({6}, 0.3, 0.1, DType::Float32)).requires_grad_();
  Tensor gw = kiln::grad({sum(mul(mul(w, w), w))}, {w}, {}, false, true)[0];
  Tensor ggw = kiln::grad({sum(gw)}, {w})[0];
  same(ggw, mul(seq({6}, 0.3, 0.1, DType::Float32), 6.0), 1e-5, 1e-6);
}

TEST_CASE("cuda device: 1000 training steps leak no device memory" * doctest::skip(kNoGpu)) {
  manual_seed(5);
  Tensor x = randn({64, 32}, kCuda), target = randint(0, 10, {64}, TensorOptions(DType::Int64, kCuda));
  Tensor w1 = mul(randn({32, 64}, kCuda), 0.1).requires_grad_(), w2 = mul(randn({64, 10}, kCuda), 0.1).requires_grad_();
  optim::SGD opt({w1, w2}, optim::SGDOptions{0.05, 0.9});
  double first_loss = 0, last_loss = 0;
  int64_t after_warmup = 0;
  for (int step = 0; step < 1000; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(matmul(relu(matmul(x, w1)), w2), target);
    loss.backward();
    opt.step();
    if (step == 0) first_loss = loss.item<double>();
    if (step == 10) after_warmup = memory_stats(kCuda).current_bytes;
    if (step == 999) last_loss = loss.item<double>();
  }
  CHECK(last_loss < first_loss);
  CHECK(memory_stats(kCuda).current_bytes <= after_warmup);
  MemoryStats s = memory_stats(kCuda);
  CHECK(s.cache_hits > s.alloc_count / 2);  // the caching allocator serves the loop
  empty_cache(kCuda);
  CHECK(memory_stats(kCuda).cached_bytes == 0);
}

#if KILN_HAVE_NVRTC
TEST_CASE("cuda device: a kernel compiles once, then comes from the cache" * doctest::skip(kNoGpu)) {
  Tensor g = on_gpu(seq({100}));
  exp(g);
  cuda::synchronize();
  auto before = cuda::kernel_cache_stats();
  for (int i = 0; i < 10; ++i) exp(g);
  cuda::synchronize();
  CHECK(cuda::kernel_cache_stats().compiles == before.compiles);
  CHECK(cuda::device_count() >= 1);
}
#endif

TEST_CASE("cuda device: an nn module moved to the gpu trains as on the cpu" * doctest::skip(kNoGpu)) {
  manual_seed(11);
  nn::Sequential cpu_net;
  cpu_net.add(std::make_shared<nn::Linear>(12, 16));
  cpu_net.add(std::make_shared<nn::ReLU>());
  cpu_net.add(std::make_shared<nn::Linear>(16, 3));
  manual_seed(11);
  nn::Sequential gpu_net;
  gpu_net.add(std::make_shared<nn::Linear>(12, 16));
  gpu_net.add(std::make_shared<nn::ReLU>());
  gpu_net.add(std::make_shared<nn::Linear>(16, 3));
  gpu_net.to(kCuda);
  for (auto& [n, p] : gpu_net.named_parameters()) {
    CAPTURE(n);
    CHECK(p.device() == kCuda);
    CHECK(p.requires_grad());
  }
  Tensor x = seq({8, 12}, 0.3, 0.1, DType::Float32), y = tensor(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1}, {8});
  optim::SGD cpu_opt(cpu_net.parameters(), optim::SGDOptions{0.1});
  optim::SGD gpu_opt(gpu_net.parameters(), optim::SGDOptions{0.1});
  for (int step = 0; step < 5; ++step) {
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    cross_entropy(cpu_net(x), y).backward();
    cross_entropy(gpu_net(on_gpu(x)), on_gpu(y)).backward();
    cpu_opt.step();
    gpu_opt.step();
  }
  auto cp = cpu_net.parameters(), gp = gpu_net.parameters();
  for (size_t i = 0; i < cp.size(); ++i) same(gp[i], cp[i], 1e-4, 1e-5);
}

TEST_CASE("cuda device: reductions over an outer dim (one thread per output)" * doctest::skip(kNoGpu)) {
  Tensor wide = seq({8, 5000}, 0.013);
  Tensor g = on_gpu(wide);
  same(sum(g, {0}), sum(wide, {0}), 1e-12, 1e-12);
  same(amax(g, {0}, true), amax(wide, {0}, true));
  same(argmin(g, 0), argmin(wide, 0));
  same(sum(g.to(DType::Float32).t(), {1}), sum(wide.to(DType::Float32).t(), {1}), 1e-6, 1e-6);
}

// The checklist's end-to-end case: the samples' training step, compiled, on CUDA tensors. The CNN has no
// CUDA convolution yet, so it must stop with the op named, never run wrong.
TEST_CASE("cuda device: the digits MLP's compiled training step on the gpu follows the cpu's over 20 Adam steps" *
          doctest::skip(kNoGpu)) {
  auto [x, y] = test::digits();
  manual_seed(5);
  auto mc = test::digits_mlp();
  manual_seed(5);
  auto mg = test::digits_mlp();
  mg->to(kCuda);
  optim::Adam oc(mc->parameters(), optim::AdamOptions{3e-3}), og(mg->parameters(), optim::AdamOptions{3e-3});
  using Tensors = std::vector<Tensor>;
  CompiledTrainStep cpu_step(*mc, [&](const Tensors& b) { return cross_entropy((*mc)(b[0]), b[1]); }, oc);
  CompiledTrainStep gpu_step(*mg, [&](const Tensors& b) { return cross_entropy((*mg)(b[0]), b[1]); }, og);
  for (int s = 0; s < 20; ++s) {
    CAPTURE(s);
    Tensor xb = x.slice(0, s * 32, s * 32 + 32), yb = y.slice(0, s * 32, s * 32 + 32);
    double lc = cpu_step({xb, yb}).item<double>();
    Tensor lg = gpu_step({on_gpu(xb), on_gpu(yb)});
    CHECK(lg.device() == kCuda);
    CHECK(std::abs(lg.cpu().item<double>() - lc) <= 1e-4 * std::max(1.0, std::abs(lc)));
  }
  CHECK(gpu_step.traces() == 1);
  auto pc = mc->parameters(), pg = mg->parameters();
  for (size_t i = 0; i < pc.size(); ++i) same(pg[i], pc[i], 1e-3, 1e-4);

  auto cnn = test::digits_cnn();
  cnn->to(kCuda);
  Tensor img = on_gpu(x.slice(0, 0, 4).reshape({4, 1, 8, 8}));
  check_error([&] { (*cnn)(img); }, "conv2d");
}
