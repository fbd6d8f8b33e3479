// Autocast (bf16 on the CPU): the op policy of eager/autocast/policy.def inside and outside a scope,
// nesting and switching off, bf16 matmul and conv against float32, gradients' dtypes and values,
// float32 <-> bf16 conversion against a scalar reference, GradScaler, and digits training accuracy.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "eager/cpu/bf16_convert.h"
#include "samples/digits_models.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::seq;

namespace {

Tensor f32(const Shape& s, double a = 0.3, double b = 0.1) { return seq(s, a, b, DType::Float32); }

uint16_t bits_of(float f) {
  BFloat16 h(f);
  return h.bits;
}
float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST_CASE("autocast: scope state nests, restores and switches off") {
  CHECK_FALSE(autocast_enabled());
  {
    AutocastGuard outer(DType::BFloat16);
    CHECK(autocast_enabled());
    CHECK(autocast_dtype() == DType::BFloat16);
    {
      AutocastGuard off(false);
      CHECK_FALSE(autocast_enabled());
      CHECK(matmul(f32({2, 3}), f32({3, 4})).dtype() == DType::Float32);
      {
        AutocastGuard inner(DType::Float16);
        CHECK(autocast_enabled());
        CHECK(autocast_dtype() == DType::Float16);
        CHECK(matmul(f32({2, 3}), f32({3, 4})).dtype() == DType::Float16);
      }
      CHECK_FALSE(autocast_enabled());
    }
    CHECK(autocast_enabled());
    CHECK(autocast_dtype() == DType::BFloat16);
  }
  CHECK_FALSE(autocast_enabled());
  check_error([] { AutocastGuard g(DType::Float64); }, "autocast: dtype must be bfloat16 or float16");
  CHECK_FALSE(autocast_enabled());
}

TEST_CASE("autocast: the scope is per thread, and mixed dtypes outside it still raise") {
  AutocastGuard ac;
  bool other_thread_enabled = true;
  std::thread t([&] { other_thread_enabled = autocast_enabled(); });
  t.join();
  CHECK_FALSE(other_thread_enabled);
  AutocastGuard off(false);
  check_error([] { matmul(f32({2, 3}).to(DType::BFloat16), f32({3, 4})); },
              "matmul: expected both inputs to have the same dtype, got bfloat16 and float32");
}

TEST_CASE("autocast: policy table rows") {
  CHECK(autocast_policy(OpId::Matmul) == AutocastPolicy::LowerPrecision);
  CHECK(autocast_policy(OpId::Conv2d) == AutocastPolicy::LowerPrecision);
  CHECK(autocast_policy(OpId::Exp) == AutocastPolicy::Fp32);
  CHECK(autocast_policy(OpId::Sum) == AutocastPolicy::Fp32);
  CHECK(autocast_policy(OpId::Cat) == AutocastPolicy::Promote);
  CHECK(autocast_policy(OpId::Relu) == AutocastPolicy::None);
  CHECK(autocast_policy("linear") == AutocastPolicy::LowerPrecision);
  CHECK(autocast_policy("cross_entropy") == AutocastPolicy::Fp32);
  CHECK(autocast_policy("prelu") == AutocastPolicy::LowerPrecision);
  CHECK(autocast_policy("no_such_fn") == AutocastPolicy::None);
  CHECK(autocast_policy_name(AutocastPolicy::Fp32) == "fp32");
}

TEST_CASE("autocast: output dtypes per op inside and outside the scope") {
  Tensor a = f32({4, 8}), w = f32({16, 8}, 0.7), b = f32({16}, 0.2);
  Tensor img = f32({2, 3, 6, 6}), k = f32({4, 3, 3, 3}, 0.5), kb = f32({4}, 0.9);
  Tensor h = a.to(DType::BFloat16);
  Tensor target = tensor(std::vector<int64_t>{1, 0, 3, 2});
  auto check_outside = [&] {
    CHECK(matmul(a, w.t()).dtype() == DType::Float32);
    CHECK(linear(a, w, b).dtype() == DType::Float32);
    CHECK(conv2d(img, k, kb).dtype() == DType::Float32);
    CHECK(exp(h).dtype() == DType::BFloat16);
    CHECK(sum(h).dtype() == DType::BFloat16);
    CHECK(softmax(h, 1).dtype() == DType::BFloat16);
  };
  check_outside();
  {
    AutocastGuard ac;
    // lower precision
    CHECK(matmul(a, w.t()).dtype() == DType::BFloat16);
    CHECK(mm(a, w.t()).dtype() == DType::BFloat16);
    CHECK(linear(a, w, b).dtype() == DType::BFloat16);
    CHECK(linear(a, w).dtype() == DType::BFloat16);
    CHECK(conv2d(img, k, kb).dtype() == DType::BFloat16);
    CHECK(prelu(img, full({3}, 0.25)).dtype() == DType::BFloat16);  // torch 2.x: F.prelu and nn.PReLU in bf16
    CHECK(prelu(img.to(DType::Float64), full({3}, 0.25, TensorOptions(DType::Float64))).dtype() == DType::Float64);
    CHECK(matmul(a.to(DType::Float64), w.t().to(DType::Float64)).dtype() == DType::Float64);  // f64 untouched
    // float32
    CHECK(exp(h).dtype() == DType::Float32);
    CHECK(log(h.abs() + 1).dtype() == DType::Float32);
    CHECK(pow(h, 2.0).dtype() == DType::Float32);
    CHECK(sum(h).dtype() == DType::Float32);
    CHECK(mean(h).dtype() == DType::Float32);
    CHECK(softmax(h, 1).dtype() == DType::Float32);
    CHECK(log_softmax(h, 1).dtype() == DType::Float32);
    CHECK(cross_entropy(h, target).dtype() == DType::Float32);
    CHECK(nll_loss(log_softmax(h, 1), target).dtype() == DType::Float32);
    CHECK(mse_loss(h, a).dtype() == DType::Float32);
    CHECK(layer_norm(h, {8}).dtype() == DType::Float32);
    Tensor rm = zeros({3}), rv = ones({3});
    CHECK(batch_norm(img.to(DType::BFloat16), rm, rv, {}, {}, true).dtype() == DType::Float32);
    CHECK(rm.dtype() == DType::Float32);  // running stats are updated in place, never cast
    CHECK(rm.abs().sum().item<double>() > 0);
    // promote: the widest floating input
    CHECK(cat({h, a}, 0).dtype() == DType::Float32);
    CHECK(stack({h, a}, 0).dtype() == DType::Float32);
    CHECK(where(a > 0, h, a).dtype() == DType::Float32);
    CHECK(add(h, a).dtype() == DType::Float32);  // binary ops promote as always
    // untouched
    CHECK(relu(h).dtype() == DType::BFloat16);
    CHECK(relu(a).dtype() == DType::Float32);
    CHECK(max_pool2d(conv2d(img, k), {2, 2}).dtype() == DType::BFloat16);
    CHECK(argmax(h, 1).dtype() == DType::Int64);
  }
  check_outside();
}

TEST_CASE("autocast: bf16 matmul and conv2d agree with float32 within bf16 tolerance") {
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {7, 13, 5}, {64, 784, 256}, {33, 128, 10}}) {
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    Tensor a = f32({m, k}, 0.37), b = f32({k, n}, 0.11, 0.4);
    Tensor ref = matmul(a, b);
    Tensor got;
    {
      AutocastGuard ac;
      got = matmul(a, b);
    }
    REQUIRE(got.dtype() == DType::BFloat16);
    // Inputs rounded to 8 bits of mantissa: relative error ~2^-8 per product, summed over k terms.
    check_close(got, ref, 2e-2, 2e-2 * std::sqrt(double(k)));
  }
  // transposed and batched operands take the same kernels
  Tensor a = f32({3, 9, 17}), b = f32({3, 11, 17}, 0.21);
  Tensor ref = matmul(a, b.transpose(1, 2));
  Tensor got;
  {
    AutocastGuard ac;
    got = matmul(a, b.transpose(1, 2));
  }
  check_close(got, ref, 2e-2, 1e-1);
  // attention's layout, one oneDNN call for the whole stack: heads split off [B, T, H, hs] and transposed
  // (batch dims [B, H] that no one stride spans), the other operand broadcast along H
  Tensor q = f32({2, 5, 3, 4}).to(DType::BFloat16).transpose(1, 2);
  Tensor kt = f32({2, 1, 6, 4}, 0.23).to(DType::BFloat16).transpose(2, 3);
  Tensor heads = matmul(q, kt);
  REQUIRE(heads.dtype() == DType::BFloat16);
  REQUIRE(heads.sizes() == Shape{2, 3, 5, 6});
  check_close(heads, matmul(q.to(DType::Float32), kt.to(DType::Float32)), 1e-2, 1e-2);
  Tensor img = f32({2, 3, 8, 8}), k = f32({5, 3, 3, 3}, 0.5), kb = f32({5}, 0.9);
  Tensor cref = conv2d(img, k, kb, {1, 1}, {1, 1});
  Tensor cgot;
  {
    AutocastGuard ac;
    cgot = conv2d(img, k, kb, {1, 1}, {1, 1});
  }
  REQUIRE(cgot.dtype() == DType::BFloat16);
  check_close(cgot, cref, 2e-2, 1e-1);
}

TEST_CASE("autocast: gradients come back in each parameter's dtype, close to float32's") {
  Tensor x = f32({6, 8});
  Tensor w = f32({5, 8}, 0.7).requires_grad_(), b = f32({5}, 0.2).requires_grad_();
  Tensor target = tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 0});
  Tensor loss32 = cross_entropy(linear(x, w, b), target);
  loss32.backward();
  Tensor gw32 = w.grad(), gb32 = b.grad();
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  Tensor loss16;
  {
    AutocastGuard ac;
    loss16 = cross_entropy(linear(x, w, b), target);
  }
  CHECK(loss16.dtype() == DType::Float32);
  loss16.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::Float32);
  CHECK(b.grad().dtype() == DType::Float32);
  check_close(loss16, loss32, 2e-2, 2e-2);
  check_close(w.grad(), gw32, 5e-2, 2e-2);
  check_close(b.grad(), gb32, 5e-2, 2e-2);

  // a bf16 parameter gets a bf16 gradient
  Tensor wh = f32({5, 8}, 0.7).to(DType::BFloat16).requires_grad_();
  {
    AutocastGuard ac;
    Tensor l = sum(linear(x, wh));
    l.backward();
  }
  CHECK(wh.grad().dtype() == DType::BFloat16);

  // conv2d + max_pool2d (scatter_add of bf16 gradients) train through autocast
  Tensor img = f32({2, 1, 8, 8});
  Tensor k = f32({4, 1, 3, 3}, 0.5).requires_grad_();
  Tensor l32 = sum(max_pool2d(relu(conv2d(img, k, {}, {1, 1}, {1, 1})), {2, 2}));
  l32.backward();
  Tensor gk32 = k.grad();
  k.set_grad(Tensor());
  {
    AutocastGuard ac;
    Tensor l = sum(max_pool2d(relu(conv2d(img, k, {}, {1, 1}, {1, 1})), {2, 2}));
    l.backward();
  }
  CHECK(k.grad().dtype() == DType::Float32);
  check_close(k.grad(), gk32, 5e-2, 1e-1);
}

TEST_CASE("autocast: checkpoint recomputes under the forward's autocast state") {
  Tensor x = f32({4, 8}).requires_grad_();
  Tensor w = f32({3, 8}, 0.7).requires_grad_();
  Tensor seen_dtype_in_recompute;
  int calls = 0;
  auto fn = [&](const Tensors& in) {
    Tensor y = linear(in[0], w);
    if (++calls == 2) seen_dtype_in_recompute = y;
    return Tensors{y};
  };
  Tensor y;
  {
    AutocastGuard ac;
    y = checkpoint(fn, {x})[0];
  }
  CHECK(y.dtype() == DType::BFloat16);
  sum(y.to(DType::Float32)).backward();
  REQUIRE(calls == 2);
  CHECK(seen_dtype_in_recompute.dtype() == DType::BFloat16);
  CHECK(x.grad().dtype() == DType::Float32);
  CHECK(w.grad().dtype() == DType::Float32);
}

TEST_CASE("autocast: float32 -> bf16 rounds to nearest even; NaN and inf as the scalar reference") {
  std::vector<float> in = {0.0f,
                           -0.0f,
                           1.0f,
                           float_of_bits(0x3f808000u),  // 1 + half an ulp: a tie, rounds to even (1.0)
                           float_of_bits(0x3f818000u),  // tie above an odd mantissa: rounds up
                           float_of_bits(0x3f808001u),  // just above the tie: rounds up
                           float_of_bits(0x3f807fffu),  // just below the tie: rounds down
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           -std::numeric_limits<float>::quiet_NaN(),
                           float_of_bits(0x7f800001u),  // signalling NaN: quieted
                           std::numeric_limits<float>::max(),  // rounds up to inf, as RNE does
                           std::numeric_limits<float>::denorm_min(),
                           3.14159265f,
                           float_of_bits(0x80400000u)};  // a denormal: vcvtne2ps2bf16 flushes it to -0
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-1e4f, 1e4f);
  for (int i = 0; i < 1000; ++i) in.push_back(u(gen));
  std::vector<uint16_t> fast(in.size()), ref(in.size());
  cpu::f32_to_bf16(in.data(), fast.data(), int64_t(in.size()));
  cpu::f32_to_bf16_reference(in.data(), ref.data(), int64_t(in.size()));
  CHECK(ref[3] == 0x3f80);
  CHECK(ref[4] == 0x3f82);
  CHECK(ref[5] == 0x3f81);
  CHECK(ref[6] == 0x3f80);
  CHECK(ref[7] == 0x7f80);
  CHECK(ref[8] == 0xff80);
  CHECK(ref[12] == 0x7f80);
  for (size_t i = 0; i < in.size(); ++i) {
    CAPTURE(i);
    CAPTURE(in[i]);
    float fv = 0, rv = 0;
    uint32_t fu = uint32_t(fast[i]) << 16, ru = uint32_t(ref[i]) << 16;
    std::memcpy(&fv, &fu, 4);
    std::memcpy(&rv, &ru, 4);
    if (std::isnan(in[i])) {
      CHECK(std::isnan(fv));
      CHECK(std::isnan(rv));
      CHECK(std::isnan(float(BFloat16(in[i]))));
      continue;
    }
    if (std::fpclassify(in[i]) == FP_SUBNORMAL)
      CHECK((fast[i] == ref[i] || fast[i] == (std::signbit(in[i]) ? 0x8000 : 0x0000)));
    else
      CHECK(fast[i] == ref[i]);
    CHECK(ref[i] == bits_of(in[i]));  // the scalar BFloat16(float) of core/dtype.h
  }
  // back to float32 is exact, and the tensor cast takes the same path
  std::vector<float> back(in.size());
  cpu::bf16_to_f32(fast.data(), back.data(), int64_t(in.size()));
  for (size_t i = 16; i < in.size(); ++i) CHECK(back[i] == float(BFloat16(in[i])));
  Tensor t = tensor(std::vector<float>(in.begin() + 16, in.end()));
  Tensor h = t.to(DType::BFloat16);
  const BFloat16* hp = h.data_ptr<BFloat16>();
  for (int64_t i = 0; i < h.numel(); ++i) CHECK(hp[i].bits == ref[size_t(16 + i)]);
  // odd lengths exercise the vector loop's tail
  for (int64_t n : {1, 15, 16, 17, 31, 33}) {
    std::vector<uint16_t> f2(static_cast<size_t>(n)), r2(static_cast<size_t>(n));
    cpu::f32_to_bf16(in.data() + 16, f2.data(), n);
    cpu::f32_to_bf16_reference(in.data() + 16, r2.data(), n);
    CHECK(f2 == r2);
  }
  MESSAGE("AVX512_BF16 on this CPU: " << std::string(cpu::cpu_has_avx512_bf16() ? "yes" : "no (reference loop tested twice)"));
}

TEST_CASE("grad_scaler: scale, unscale, skip steps with inf/nan grads, update the scale") {
  Tensor p = tensor({1.0, 2.0}).requires_grad_();
  optim::SGD opt({p}, {.lr = 0.25});
  GradScaler scaler({.init_scale = 8.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2});
  CHECK(scaler.get_scale() == 8.0);

  // a clean step: grads are divided back, the optimizer steps
  Tensor loss = sum(p * p);
  Tensor scaled = scaler.scale(loss);
  CHECK(scaled.item<double>() == doctest::Approx(5.0 * 8));
  scaled.backward();
  CHECK(p.grad().to(DType::Float64).data_ptr<double>()[1] == doctest::Approx(4.0 * 8));
  CHECK(scaler.step(opt));
  CHECK_FALSE(scaler.found_inf());
  check_close(p.detach(), tensor({1.0 - 0.25 * 2.0, 2.0 - 0.25 * 4.0}));
  scaler.update();
  CHECK(scaler.get_scale() == 8.0);
  CHECK(scaler.growth_tracker() == 1);

  // an injected inf: the step is skipped, the scale backs off, the tracker restarts
  opt.zero_grad();
  Tensor before = p.detach().clone();
  scaler.scale(sum(p * p)).backward();
  p.grad().mul_(tensor({std::numeric_limits<double>::infinity(), 1.0}, {2}, DType::Float32));
  CHECK_FALSE(scaler.step(opt));
  CHECK(scaler.found_inf());
  check_close(p.detach(), before);
  scaler.update();
  CHECK(scaler.get_scale() == 4.0);
  CHECK(scaler.growth_tracker() == 0);

  // an injected nan through unscale_: same outcome
  opt.zero_grad();
  scaler.scale(sum(p * p)).backward();
  p.grad().mul_(tensor({1.0, std::nan("")}, {2}, DType::Float32));
  scaler.unscale_(opt);
  check_error([&] { scaler.unscale_(opt); }, "grad_scaler: unscale_() has already been called");
  CHECK_FALSE(scaler.step(opt));
  check_close(p.detach(), before);
  scaler.update();
  CHECK(scaler.get_scale() == 2.0);

  // growth after growth_interval clean steps
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    scaler.scale(sum(p * p)).backward();
    CHECK(scaler.step(opt));
    scaler.update();
  }
  CHECK(scaler.get_scale() == 4.0);
  CHECK(scaler.growth_tracker() == 0);
  scaler.update(1024.0);
  CHECK(scaler.get_scale() == 1024.0);

  // f16 loss: scaled in float32 so 2^16 * loss does not overflow half
  GradScaler big;
  Tensor l16 = tensor({1000.0}, {1}, DType::Float16);
  CHECK(std::isfinite(big.scale(l16).item<double>()));

  // disabled: a pass-through
  GradScaler off({.enabled = false});
  CHECK(off.scale(loss).is_same(loss));
  check_error([] { GradScaler g({.init_scale = -1}); }, "grad_scaler: init_scale must be a positive finite number");
  check_error([] { GradScaler g({.backoff_factor = 1.5}); }, "grad_scaler: backoff_factor must be in (0, 1)");
}

TEST_CASE("autocast: traced graphs record the casts, and calls run the graph as recorded") {
  Tensor x = f32({4, 8}), w = f32({3, 8}, 0.7);
  auto fn = [&](const Tensors& in) { return Tensors{relu(linear(in[0], w))}; };
  Function traced;
  {
    AutocastGuard ac;
    traced = trace(fn, {x});
  }
  std::string ir = traced.graph().str();
  CAPTURE(ir);
  CHECK(ir.find("bf16") != std::string::npos);
  Tensor eager;
  {
    AutocastGuard ac;
    eager = fn({x})[0];
  }
  Tensor out = traced({x})[0];
  CHECK(out.dtype() == DType::BFloat16);
  check_close(out, eager, 0, 0);
  Function compiled = compile(traced);
  check_close(compiled({x})[0], eager, 1e-2, 1e-2);
  // traced without autocast, called inside a scope: still float32 (the graph as recorded)
  Function plain = trace(fn, {x});
  AutocastGuard ac;
  CHECK(plain({x})[0].dtype() == DType::Float32);
  CHECK(compile(plain)({x})[0].dtype() == DType::Float32);
}

namespace {

// 300 Adam steps of batch 32 on the first 1500 digits; test accuracy on the other 297.
double train_digits_mlp(bool bf16) {
  auto [x, y] = test::digits();
  int64_t n_train = 1500;
  Tensor xt = x.slice(0, 0, n_train), yt = y.slice(0, 0, n_train);
  manual_seed(5);
  auto model = kiln::samples::digits_mlp();
  optim::Adam opt(model->parameters(), {3e-3});
  for (int s = 0; s < 300; ++s) {
    int64_t at = (s * 32) % (n_train - 32);
    Tensor xb = xt.slice(0, at, at + 32), yb = yt.slice(0, at, at + 32);
    Tensor loss;
    {
      AutocastGuard ac(DType::BFloat16, bf16);
      loss = cross_entropy((*model)(xb), yb);
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  NoGradGuard ng;
  AutocastGuard ac(DType::BFloat16, bf16);
  Tensor pred = argmax((*model)(x.slice(0, n_train, x.size(0))), 1);
  return sum(pred == y.slice(0, n_train, y.size(0))).item<double>() / double(x.size(0) - n_train);
}

}  // namespace

TEST_CASE("autocast: digits MLP trained 300 steps under bf16 autocast matches float32 accuracy within 1%") {
  double a32 = train_digits_mlp(false), a16 = train_digits_mlp(true);
  MESSAGE("digits MLP test accuracy: float32 " << a32 * 100 << "%, bf16 autocast " << a16 * 100 << "%");
  CHECK(a32 > 0.9);
  CHECK(std::fabs(a16 - a32) <= 0.01);
}

TEST_CASE("autocast: the weight cache casts a parameter once per outermost scope, as torch's") {
  Tensor x = f32({4, 8}), w0 = f32({3, 8}, 0.7);
  auto grads = [&](bool cache, size_t* cached) {
    Tensor w = w0.clone().requires_grad_(true);
    {
      AutocastGuard ac(DType::BFloat16, true, cache);
      Tensor y = linear(x, w) + linear(x * 2.0, w);  // the weight read twice
      if (cached) *cached = autocast_cached_casts();
      sum(y.to(DType::Float32)).backward();
    }
    CHECK(autocast_cached_casts() == 0);  // emptied when the outermost guard dies
    return w.grad();
  };
  size_t with_cache = 0, without = 0;
  Tensor g1 = grads(true, &with_cache), g0 = grads(false, &without);
  CHECK(with_cache == 1);
  CHECK(without == 0);
  // One cast node feeding both uses: its two incoming gradients add in bf16 before the cast back, where
  // two casts each convert first and add in float32 (torch's cache does the same): bf16-close.
  check_close(g1, g0, 1e-2, 1e-2);

  Tensor w = w0.clone().requires_grad_(true);
  AutocastGuard outer;
  Tensor a = linear(x, w);
  {
    AutocastGuard inner(false);  // a nested guard's end keeps the cache
  }
  CHECK(autocast_cached_casts() == 1);
  {
    NoGradGuard ng;
    w.mul_(2.0);  // written in place: the next read casts again
  }
  Tensor b = linear(x, w);
  check_close(b.to(DType::Float32), (a.to(DType::Float32)) * 2.0, 2e-2, 2e-2);
  {
    NoGradGuard ng;  // no autograd node: not cached, so a later recording op still reaches w
    (void)linear(x, w.detach().requires_grad_(true));
  }
  CHECK(autocast_cached_casts() == 1);
  // Tracing never reads the cache: a cast made before the trace began would enter the graph as a
  // constant, and the traced model would not see its weight change.
  manual_seed(2);
  auto lin = std::make_shared<nn::Linear>(8, 3);
  (void)(*lin)(x);  // the weight's cast is cached now
  Function traced = trace_module(*lin, [&](const Tensors& in) { return Tensors{(*lin)(in[0])}; }, {x});
  {
    NoGradGuard ng;
    lin->weight.mul_(-1.0);
  }
  check_close(traced({x})[0].to(DType::Float32), (*lin)(x).to(DType::Float32), 0, 0);
}

// A compiled eval forward keeps its parameters' casts (jit/compiled_graph.h's ParamCastCache): the same bits
// as casting on every call, a parameter written in place is cast again, and a data input is never kept. The
// bias's cast runs inside the fused bias add + relu (rounded in registers on every call, no buffer).
TEST_CASE("autocast: a compiled eval forward casts a parameter once per version, a data input every call") {
  manual_seed(3);
  Tensor x = f32({4, 8});
  auto lin = std::make_shared<nn::Linear>(8, 3);
  Function traced = trace_module(
      *lin,
      [&](const Tensors& in) {
        AutocastGuard ac;
        return Tensors{relu((*lin)(in[0]))};
      },
      {x});
  Function compiled = compile(traced);
  NoGradGuard ng;
  Tensor first = compiled({x})[0];
  int64_t allocs = memory_stats().alloc_count;
  Tensor kept = compiled({x})[0];
  const int64_t kept_allocs = memory_stats().alloc_count - allocs;
  check_close(kept, first, 0, 0);
  check_close(kept, traced({x})[0], 0, 0);  // the interpreter casts on every call
  lin->weight.mul_(-1.0);
  lin->bias.mul_(-1.0);
  allocs = memory_stats().alloc_count;
  Tensor recast = compiled({x})[0];
  CHECK(memory_stats().alloc_count - allocs == kept_allocs + 1);  // the weight's cast again
  check_close(recast, traced({x})[0], 0, 0);
  CHECK(sum(ne(recast, kept)).item<double>() > 0);
  x.data_ptr<float>()[0] += 100.0f;  // behind the version counter: a data input is cast anew anyway
  check_close(compiled({x})[0], traced({x})[0], 0, 0);
}

TEST_CASE("autocast: a compiled training step traced under autocast trains like eager autocast") {
  auto [x, y] = test::digits();
  auto run = [&](bool compiled, bool bf16 = true) {
    manual_seed(11);
    auto model = kiln::samples::digits_mlp();
    optim::Adam opt(model->parameters(), {3e-3});
    auto loss_fn = [&](const Tensors& b) {
      std::optional<AutocastGuard> ac;  // as `with torch.autocast("cpu"):` around forward and loss
      if (bf16) ac.emplace();
      return cross_entropy((*model)(b[0]), b[1]);
    };
    CompiledTrainStep step(*model, loss_fn, opt);
    std::vector<double> losses;
    for (int s = 0; s < 20; ++s) {
      Tensors b{x.slice(0, s * 32, s * 32 + 32), y.slice(0, s * 32, s * 32 + 32)};
      if (compiled) {
        losses.push_back(step(b).item<double>());
      } else {
        Tensor loss = loss_fn(b);
        opt.zero_grad();
        loss.backward();
        opt.step();
        losses.push_back(loss.item<double>());
      }
    }
    if (compiled) {
      CHECK(step.traces() == 1);
      CHECK_FALSE(step.running_eagerly());
      std::string ir = step.function().graph().str();
      CHECK(ir.find("bf16") != std::string::npos);  // the casts were recorded
    }
    for (const Tensor& p : model->parameters()) {
      CHECK(p.dtype() == DType::Float32);
      CHECK(p.grad().dtype() == DType::Float32);
    }
    return losses;
  };
  std::vector<double> eager = run(false), comp = run(true), exact = run(false, false);
  CAPTURE(eager.back());
  CAPTURE(comp.back());
  CHECK(comp.back() < comp.front());
  // A fusion group holds its bf16 values in float32 registers and rounds only what it writes (as Inductor
  // does), eager rounds after every op: the two drift apart by bf16 noise, both as far from float32 training.
  auto drift = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
    return worst;
  };
  const double worst = drift(comp, eager), we = drift(eager, exact), wc = drift(comp, exact);
  MESSAGE("autocast losses over 20 Adam steps, max relative difference: compiled vs eager " << worst
          << ", vs float32 training: eager " << we << ", compiled " << wc);
  CHECK(worst <= 1e-3);
  CHECK(wc <= 2 * we + 1e-4);
}

TEST_CASE("grad_scaler: float16 autocast training backs off from an overflowing scale, then steps") {
  manual_seed(3);
  Tensor x = randn({32, 16});
  Tensor y = argmax(matmul(x, randn({16, 4})), 1);  // a learnable labelling
  nn::Linear model(16, 4);
  optim::SGD opt(model.parameters(), {.lr = 0.5});
  // 2^24 times a gradient of the f16 logits overflows float16 (max 65504): the first steps must be skipped.
  GradScaler scaler({.init_scale = double(1 << 24), .growth_interval = 1000});
  auto loss_now = [&] {
    AutocastGuard ac(DType::Float16);
    return cross_entropy(model(x), y);
  };
  double first = loss_now().item<double>();
  int skipped = 0, stepped = 0;
  bool first_skipped = false;
  for (int s = 0; s < 40; ++s) {
    Tensor loss = loss_now();
    CHECK(loss.dtype() == DType::Float32);
    opt.zero_grad();
    scaler.scale(loss).backward();
    REQUIRE(model.weight.grad().dtype() == DType::Float32);
    bool did = scaler.step(opt);
    if (s == 0) first_skipped = !did;
    (did ? stepped : skipped) += 1;
    scaler.update();
  }
  MESSAGE("float16 + GradScaler: " << skipped << " skipped, " << stepped << " stepped, final scale "
                                   << scaler.get_scale());
  CHECK(first_skipped);
  CHECK(skipped >= 1);
  CHECK(stepped >= 20);
  CHECK(scaler.get_scale() < double(1 << 24));
  CHECK(loss_now().item<double>() < first * 0.7);
}
