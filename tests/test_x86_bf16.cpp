// bf16 in the x86 fused kernels: bf16 tensors load into f32 registers and store rounded to nearest
// even, alone or mixed with f32 (autocast's chains), elementwise groups and row groups, on both ISAs.
// A stored bf16 must carry eager's bits for the same f32 value (ties, subnormals, NaN, overflow, tails
// and broadcast lanes); a compiled bf16 chain rounds once at its end where eager rounds after every op,
// so it equals eager within a few bf16 ulps, and it runs compiled, not interpreted.
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "backends/x86/isa.h"
#include "backends/x86/kernel.h"
#include "core/ir/parser.h"
#include "eager/cpu/bf16_convert.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

using test::IsaCap;
std::vector<x86::Isa> isas() { return test::x86_isas(); }

Tensors run_ir(const std::string& text, const Tensors& in) {
  auto g = ir::parse_ir(text);
  std::string why;
  REQUIRE_MESSAGE(x86::supported(*g, &why), why);
  return x86::compile(*g, "bf16_test")->run(in);
}

// f32 values whose rounding to bf16 is a decision: ties to even (down and up), just above a tie,
// subnormals, the largest float (rounds to inf), inf, NaN of both signs; then random values.
Tensor rounding_cases(int64_t n, uint32_t seed) {
  const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0xbf818000u, 0x00008000u, 0x00018000u,
                           0x0000ffffu, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffc00000u,
                           0x80000000u, 0x00000000u, 0x477fe000u, 0x3eaaaaabu};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i < std::size(bits) ? std::bit_cast<float>(bits[i]) : u(rng);
  std::shuffle(v.begin(), v.end(), rng);
  Tensor t = Tensor::empty({n}, DType::Float32);
  std::copy(v.begin(), v.end(), t.data_ptr<float>());
  return t;
}

// Bit equality with `want`, element by element.
void check_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == DType::BFloat16);
  REQUIRE(got.sizes() == want.sizes());
  const auto* g = got.contiguous().data_ptr<BFloat16>();
  const auto* w = want.contiguous().data_ptr<BFloat16>();
  int64_t bad = -1;
  for (int64_t i = 0; i < got.numel() && bad < 0; ++i)
    if (g[i].bits != w[i].bits) bad = i;
  CHECK_MESSAGE(bad < 0, "element " << bad << ": bits " << (bad >= 0 ? g[bad].bits : 0) << ", expected "
                                    << (bad >= 0 ? w[bad].bits : 0));
}

// f32 values rounded as the kernel on `isa` rounds them: eager's cast (vcvtneps2bf16 where the CPU has
// AVX512_BF16, else the integer loop), except that the AVX2 kernels always take the integer loop.
Tensor to_bf16(const Tensor& x, x86::Isa isa) {
  if (isa == x86::Isa::Avx512 || !x86::cpu_avx512_bf16()) return x.to(DType::BFloat16);
  Tensor c = x.contiguous(), out = Tensor::empty(x.sizes(), DType::BFloat16);
  cpu::f32_to_bf16_reference(c.data_ptr<float>(), reinterpret_cast<uint16_t*>(out.data_ptr<BFloat16>()), c.numel());
  return out;
}

}  // namespace

TEST_CASE("x86 bf16: loads and rounded stores equal eager's bits, tails and broadcast lanes, both ISAs") {
  if (!test::x86_jit_on()) return;
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 517}) {
      CAPTURE(n);
      Tensor x = rounding_cases(n, uint32_t(n));
      Tensor y = (arange(0.0, double(n), 1.0) * 0.37 - 2.0).to(DType::BFloat16);
      const std::string N = std::to_string(n);
      // an f32 value stored as bf16, a bf16 input read back (x * 1 keeps x's bits), a bf16 input's lanes
      // through arithmetic to an f32 output
      std::string text = "graph(%x : f32[" + N + "], %y : bf16[" + N + "]):\n  %z : f32[] = prim::Constant[value=[1.0]]()\n"
                         "  %0 : bf16[" + N + "] = mul(%x, %z)\n  %1 : f32[" + N + "] = mul(%y, %x)\n"
                         "  %2 : bf16[" + N + "] = sub(%y, %x)\n  return (%0, %1, %2, %y)\n";
      Tensors got = run_ir(text, {x, y});
      Tensor yf = y.to(DType::Float32);
      check_bits(got[0], to_bf16(x, isa));
      check_close(got[1], yf * x, 0, 0);
      check_bits(got[2], to_bf16(yf - x, isa));
      check_bits(got[3], y);
    }
    // a bf16 operand broadcast along the row ([7,1] against [7,61]) and a 0-d one, into bf16 outputs
    Tensor x = rounding_cases(7 * 61, 5).reshape({7, 61});
    Tensor c = (arange(0.0, 7.0, 1.0).reshape({7, 1}) * 1.3 - 4.0).to(DType::BFloat16);
    Tensor s = tensor({0.75}, {}, DType::Float32).to(DType::BFloat16);
    std::string text = "graph(%x : f32[7,61], %c : bf16[7,1], %s : bf16[]):\n  %0 : f32[7,61] = mul(%x, %c)\n"
                       "  %1 : bf16[7,61] = add(%0, %s)\n  return (%1)\n";
    Tensor want = to_bf16(x * c.to(DType::Float32) + s.to(DType::Float32), isa);
    check_bits(run_ir(text, {x, c, s})[0], want);
    // a bf16 reduction is folded in f32 and rounded once
    Tensor r = (arange(0.0, 300.0, 1.0).reshape({3, 100}) * 0.01).to(DType::BFloat16);
    std::string t2 = "graph(%r : bf16[3,100]):\n  %0 : bf16[3] = sum[dims=[-1], keepdim=false](%r)\n  return (%0)\n";
    Tensor rs = run_ir(t2, {r})[0];
    CHECK(rs.dtype() == DType::BFloat16);
    check_close(rs, sum(r.to(DType::Float32), {-1}).to(DType::BFloat16), 0, 0);
  }
}

TEST_CASE("x86 bf16: compiled bf16 and mixed bf16/f32 chains are fused kernels, == eager within bf16 rounding") {
  if (!test::x86_jit_on()) return;
  manual_seed(3);
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    Tensor a = (randn({4, 37}) * 1.5).to(DType::BFloat16), b = randn({4, 37}).to(DType::BFloat16);
    Tensor h = randn({37});  // an f32 operand, as autocast leaves a bias or a norm's output
    Function f = trace([](const Tensors& in) {
      Tensor t = gelu(in[0] * in[1] + in[0], "none") * exp(-in[1]);
      return Tensors{t, t + in[2]};
    }, {a, b, h});
    Function cf = compile(f);
    Tensors want = f({a, b, h}), got = cf({a, b, h});
    CHECK(got[0].dtype() == DType::BFloat16);
    CHECK(got[1].dtype() == DType::Float32);
    // eager rounds each of the five ops' results, the kernel only the stored one: a few bf16 ulps (2^-8)
    check_close(got[0], want[0], 3e-2, 2e-2);
    check_close(got[1], want[1], 3e-2, 2e-2);
    jit::CacheStats st = compile_stats(cf);
    CHECK(st.kernels >= 1);
    CHECK(st.interpreted_groups == 0);
  }
}

TEST_CASE("x86 bf16: a lone bf16 gelu (between two GEMMs) is a fused kernel, not eager's widening one") {
  if (!test::x86_jit_on()) return;
  manual_seed(6);
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    // [3, 67]: whole vectors and a tail on both ISAs; h is read twice (the second GEMM and the sum), so the
    // first GEMM's epilogue cannot take the gelu
    Tensor x = (randn({3, 16}) * 2.0).to(DType::BFloat16), w1 = randn({16, 67}).to(DType::BFloat16);
    Tensor w2 = randn({67, 5}).to(DType::BFloat16);
    Function f = trace([](const Tensors& in) {
      Tensor h = matmul(in[0], in[1]);
      return Tensors{matmul(gelu(h, "none"), in[2]), h};
    }, {x, w1, w2});
    Function cf = compile(f);
    auto run = [&](const Function& fn) {
      Tensor leaf = w1.detach().clone().requires_grad_(true);
      Tensors out = fn({x, leaf, w2});
      sum(out[0].to(DType::Float32)).backward();
      return Tensors{out[0], leaf.grad()};
    };
    Tensors want = run(f), got = run(cf);
    CHECK(got[0].dtype() == DType::BFloat16);
    // one rounding of gelu's float32 value in both; the GEMM after it sums 67 of them
    check_close(got[0], want[0], 2e-2, 2e-2);
    check_close(got[1], want[1], 2e-2, 5e-2);
    CHECK(compile_stats(cf).interpreted_groups == 0);
    std::vector<IValue> in{x, w1.detach().clone().requires_grad_(true), w2};
    auto g = compiled_graph(cf, in);
    CAPTURE(g->str());
    int64_t groups = 0;
    for (ir::Node* n : g->block()->nodes()) {
      CHECK_FALSE(n->is_op(OpId::Gelu));
      groups += n->prim() == ir::Prim::FusionGroup;
    }
    CHECK(groups >= 1);
  }
}

TEST_CASE("x86 bf16: softmax and layer_norm over bf16 rows are row kernels, forward and backward == eager") {
  if (!test::x86_jit_on()) return;
  manual_seed(4);
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    for (int64_t c : {7, 16, 67}) {
      CAPTURE(x86::isa_name(isa));
      CAPTURE(c);
      Tensor x = (randn({3, 5, c}) * 2.0).to(DType::BFloat16);
      Tensor w = randn({c}).to(DType::BFloat16), b = randn({c}).to(DType::BFloat16);
      for (int which = 0; which < 2; ++which) {
        CAPTURE(which);
        Function f = trace([which](const Tensors& in) {
          return Tensors{which == 0 ? softmax(in[0], -1) : layer_norm(in[0], {in[0].size(-1)}, in[1], in[2], 1e-5)};
        }, {x, w, b});
        Function cf = compile(f);
        auto run = [&](auto&& fn, DType dt) {
          Tensor leaf = x.detach().clone().to(dt).requires_grad_(true);
          Tensor out = fn({leaf, w.to(dt), b.to(dt)})[0];
          Tensor g = sin(arange(0.0, double(out.numel()), 1.0) * 0.7).reshape(out.sizes()).to(DType::BFloat16).to(dt);
          sum(out * g).backward();
          return Tensors{out, leaf.grad()};
        };
        auto eager = [which](const Tensors& in) {
          return Tensors{which == 0 ? softmax(in[0], -1) : layer_norm(in[0], {in[0].size(-1)}, in[1], in[2], 1e-5)};
        };
        Tensors want = run(f, DType::BFloat16), got = run(cf, DType::BFloat16), exact = run(eager, DType::Float32);
        CHECK(got[0].dtype() == DType::BFloat16);
        // The kernel keeps a row's statistics in float32 and rounds once (as torch's bf16 layer_norm does),
        // eager rounds every step: both are held to the float32 result, the kernel at least as close as eager.
        auto err = [](const Tensor& a, const Tensor& e) { return amax(abs(a.to(DType::Float32) - e)).item<float>(); };
        for (size_t i = 0; i < 2; ++i) {
          CAPTURE(i);
          check_close(got[i], exact[i], 2e-2, 2e-2);
          CHECK(err(got[i], exact[i]) <= err(want[i], exact[i]) * 1.25f + 1e-3f);
        }
        jit::CacheStats st = compile_stats(cf);
        CHECK(st.interpreted_groups == 0);
        // no reduction over the rows is left outside a group in the forward
        std::vector<IValue> in{x.detach().clone().requires_grad_(true), w, b};
          auto g = compiled_graph(cf, in);
        for (ir::Node* n : g->block()->nodes()) {
          CAPTURE(g->str());
          CHECK_FALSE((n->is_op(OpId::Amax) || n->is_op(OpId::Sum)));
        }
      }
    }
  }
}
