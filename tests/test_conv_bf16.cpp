// bf16 conv2d and its gradients through oneDNN's bf16 convolution (eager/cpu/conv_onednn.h) against
// float32 on the same bf16-rounded values, and the choice of path: oneDNN's bf16 kernels where it has
// more than its reference kernel, kiln's float32 path elsewhere. tests/meson.build runs these cases a
// second time with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA), as on an AMD EPYC without AVX-512.
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "eager/cpu/bf16_convert.h"
#include "eager/cpu/conv_one_pixel.h"
#include "eager/cpu/conv_onednn.h"
#include "eager/cpu/onednn_switch.h"
#include "support.h"

namespace kiln {
namespace {

using test::check_close;
using test::seq;

constexpr DType bf = DType::BFloat16;

Tensor bf16(const Shape& s, double a, double b) { return seq(s, a, b, DType::Float32).to(bf); }
Tensor f32(const Tensor& t) { return t.to(DType::Float32); }

Attrs conv_attrs(int64_t stride, int64_t pad) {
  return Attrs()
      .set("stride", Shape{stride, stride})
      .set("padding", Shape{pad, pad})
      .set("dilation", Shape{1, 1})
      .set("groups", int64_t(1));
}

// oneDNN held below AVX-512 (the matrix's avx2 and baseline entries: AVX2, SSE41): it has only its reference
// bf16 conv there
bool held_below_avx512() {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  return isa && strncasecmp(isa, "avx512", 6) != 0 && strncasecmp(isa, "amx", 3) != 0 && strcasecmp(isa, "all") != 0;
}

// Whether oneDNN's bf16 conv runs here, asserting what this machine must get where that is known.
bool onednn_takes_bf16(const Shape& xs, const Shape& ws, const Attrs& a) {
  std::string impl = cpu::onednn_conv2d_impl(xs, ws, a, bf);
  CAPTURE(impl);
  bool taken = cpu::onednn_gemm_enabled() && impl.rfind("none", 0) != 0;
  if (held_below_avx512()) CHECK_FALSE(taken);  // only the reference kernel: kiln's float32 path
  else if (cpu::onednn_gemm_enabled() && cpu::cpu_has_avx512_bf16()) CHECK(taken);
  return taken;
}

TEST_CASE("conv bf16: the forward agrees with float32 on the same bf16 values") {
  for (auto [stride, pad, with_bias] : {std::tuple{1, 1, true}, {2, 0, false}}) {
    CAPTURE(stride);
    Tensor x = bf16({2, 16, 7, 7}, 0.37, 0.1), w = bf16({8, 16, 3, 3}, 0.61, 0.5), b = with_bias ? bf16({8}, 0.3, 0.2) : Tensor();
    Attrs a = conv_attrs(stride, pad);
    Tensor want = conv2d(f32(x), f32(w), with_bias ? f32(b) : Tensor(), {stride, stride}, {pad, pad});
    Tensor got = conv2d(x, w, b, {stride, stride}, {pad, pad});
    REQUIRE(got.dtype() == bf);
    // f32 accumulation on both sides; the bf16 result is rounded to 8 bits of mantissa.
    check_close(got, want, 1e-2, 1e-2);
    std::optional<Tensor> direct = cpu::onednn_conv2d(x, w, b, a);
    CHECK(direct.has_value() == onednn_takes_bf16(x.sizes(), w.sizes(), a));
    if (direct) {
      CHECK(direct->dtype() == bf);
      check_close(*direct, want, 1e-2, 1e-2);
    }
  }
}

TEST_CASE("conv bf16: gradients agree with float32's, eager and in one call") {
  Tensor x = bf16({2, 16, 6, 6}, 0.37, 0.1).requires_grad_(), w = bf16({8, 16, 3, 3}, 0.61, 0.5).requires_grad_(),
         b = bf16({8}, 0.3, 0.2).requires_grad_();
  Tensor x32 = f32(x).detach().requires_grad_(), w32 = f32(w).detach().requires_grad_(),
         b32 = f32(b).detach().requires_grad_();
  Tensor g = seq({2, 8, 6, 6}, 0.29, 0.7, DType::Float32);
  sum(conv2d(x32, w32, b32, {1, 1}, {1, 1}) * g).backward();
  sum(f32(conv2d(x, w, b, {1, 1}, {1, 1})) * g).backward();
  REQUIRE(x.grad().dtype() == bf);
  REQUIRE(w.grad().dtype() == bf);
  check_close(x.grad(), x32.grad(), 2e-2, 2e-2);
  check_close(w.grad(), w32.grad(), 2e-2, 5e-2);  // sums of 72 products of magnitude ~1
  check_close(b.grad(), b32.grad(), 2e-2, 5e-2);
  // The JIT's conv-backward groups ask for all three in one call.
  Attrs a = conv_attrs(1, 1);
  std::optional<cpu::ConvGrads> r =
      cpu::onednn_conv2d_backward(g.to(bf), x.detach(), w.detach(), x.sizes(), w.sizes(), a, true, true, true);
  REQUIRE(r.has_value() == onednn_takes_bf16(x.sizes(), w.sizes(), a));
  if (r) {
    CHECK(r->input.dtype() == bf);
    check_close(r->input, x32.grad(), 2e-2, 2e-2);
    check_close(r->weight, w32.grad(), 2e-2, 5e-2);
    check_close(r->bias, b32.grad(), 2e-2, 5e-2);
  }
}

TEST_CASE("conv bf16: gradients of small output planes are float32's rounded once, a one-pixel plane's too") {
  // 6x6 and 1x1 planes (under 128 outputs): where oneDNN has a bf16 kernel, the gradients are float32's on the
  // same values, rounded to bf16 (its AMX kernels ran these at half float32's speed); a 12x12 plane keeps bf16's.
  struct Case {
    Shape x, w;
    int64_t pad;
  };
  for (const Case& c : {Case{{2, 64, 6, 6}, {32, 64, 3, 3}, 1}, Case{{4, 64, 1, 1}, {32, 64, 3, 3}, 1},
                        Case{{2, 64, 2, 2}, {32, 64, 3, 3}, 1}, Case{{2, 64, 12, 12}, {32, 64, 3, 3}, 1}}) {
    CAPTURE(shape_str(c.x));
    Tensor x = bf16(c.x, 0.37, 0.1), w = bf16(c.w, 0.61, 0.5);
    Attrs a = conv_attrs(1, c.pad);
    const Shape out{c.x[0], c.w[0], c.x[2], c.x[3]};
    Tensor g = bf16(out, 0.29, 0.7);
    std::optional<cpu::ConvGrads> r =
        cpu::onednn_conv2d_backward(g, x, w, x.sizes(), w.sizes(), a, true, true, true);
    if (!onednn_takes_bf16(x.sizes(), w.sizes(), a)) continue;
    REQUIRE(r.has_value());
    // float32's own order: a one-pixel conv's GEMMs, else oneDNN's float32 primitives, else (planes of 4
    // pixels or fewer, where oneDNN declines float32) kiln's column GEMMs
    std::optional<cpu::ConvGrads> f =
        cpu::one_pixel_conv2d_backward(f32(g), f32(x), f32(w), x.sizes(), w.sizes(), a, true, true, true);
    if (!f) {
      f = cpu::onednn_conv2d_backward(f32(g), f32(x), f32(w), x.sizes(), w.sizes(), a, true, true, true);
      if (cpu::onednn_gemm_enabled()) CHECK(f.has_value() == (c.x[2] * c.x[3] > 4));
    }
    if (!f) f = cpu::conv2d_backward(f32(g), f32(x), f32(w), x.sizes(), w.sizes(), a, true, true, true);
    REQUIRE(f.has_value());
    const bool small = c.x[2] * c.x[3] < 128;
    for (auto [got, want] : {std::pair{r->input, f->input}, {r->weight, f->weight}, {r->bias, f->bias}}) {
      CHECK(got.dtype() == bf);
      if (small) check_close(got, want.to(bf), 0, 0);
      else check_close(got, want, 2e-2, 5e-2);
    }
  }
}

TEST_CASE("conv bf16: one-output-pixel convs are float32's GEMMs on the bf16 values, rounded once") {
  // ResNet-18's layer4 under autocast: no cast of the whole weight, no oneDNN reorder, on any CPU.
  struct Case {
    Shape x, w;
    int64_t stride;
  };
  for (const Case& c : {Case{{4, 64, 1, 1}, {32, 64, 3, 3}, 1}, Case{{4, 32, 2, 2}, {64, 32, 3, 3}, 2}}) {
    CAPTURE(shape_str(c.x));
    Tensor x = bf16(c.x, 0.37, 0.1), w = bf16(c.w, 0.61, 0.5), b = bf16({c.w[0]}, 0.3, 0.2);
    Tensor g = bf16({c.x[0], c.w[0], 1, 1}, 0.29, 0.7);
    Attrs a = conv_attrs(c.stride, 1);
    std::optional<Tensor> y = cpu::one_pixel_conv2d(x, w, b, a);
    std::optional<cpu::ConvGrads> r = cpu::one_pixel_conv2d_backward(g, x, w, x.sizes(), w.sizes(), a, true, true, true);
    std::optional<Tensor> y32 = cpu::one_pixel_conv2d(f32(x), f32(w), f32(b), a);
    std::optional<cpu::ConvGrads> r32 =
        cpu::one_pixel_conv2d_backward(f32(g), f32(x), f32(w), x.sizes(), w.sizes(), a, true, true, true);
    REQUIRE(y.has_value());
    REQUIRE(r.has_value());
    REQUIRE(y32.has_value());
    REQUIRE(r32.has_value());
    for (auto [got, want] : {std::pair{*y, *y32}, {r->input, r32->input}, {r->weight, r32->weight}, {r->bias, r32->bias}}) {
      CHECK(got.dtype() == bf);
      check_close(got, want.to(bf), 0, 0);
    }
    // and the op itself (the dispatcher's bf16 conv2d) takes it: float32's values rounded
    check_close(conv2d(x, w, b, {c.stride, c.stride}, {1, 1}), y32->to(bf), 0, 0);
  }
}

TEST_CASE("conv bf16: oneDNN's bf16 kernels where it has them, kiln's float32 path elsewhere") {
  CHECK(cpu::onednn_reference_impl("ref:any"));
  CHECK_FALSE(cpu::onednn_reference_impl("brg:avx512_core_amx"));
  CHECK_FALSE(cpu::onednn_reference_impl("jit:avx512_core_bf16"));
  CHECK_FALSE(cpu::onednn_reference_impl("gemm:jit"));
  CHECK_FALSE(cpu::onednn_reference_impl("jit:avx2"));
  Tensor x = bf16({1, 8, 5, 5}, 0.37, 0.1), w = bf16({4, 8, 3, 3}, 0.61, 0.5);
  Attrs a = conv_attrs(1, 1);
  onednn_takes_bf16(x.sizes(), w.sizes(), a);
  // float32 keeps oneDNN's float32 conv wherever it exists, AVX2 included.
  if (cpu::onednn_gemm_enabled())
    CHECK(cpu::onednn_conv2d_impl(x.sizes(), w.sizes(), a, DType::Float32).rfind("none", 0) != 0);
  // oneDNN switched off: the float32 path, same values.
  Tensor want = conv2d(f32(x), f32(w), Tensor(), {1, 1}, {1, 1});
  cpu::set_onednn_gemm(false);
  CHECK_FALSE(cpu::onednn_conv2d(x, w, Tensor(), a).has_value());
  Tensor got = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  cpu::set_onednn_gemm(true);
  CHECK(got.dtype() == bf);
  check_close(got, want, 1e-2, 1e-2);
}

}  // namespace
}  // namespace kiln
