#pragma once
// Vector instruction helpers and transcendental approximations for the x86 JIT, templated on the vector
// register type (Xbyak::Zmm for AVX-512, Xbyak::Ymm for AVX2) in the style of oneDNN's eltwise
// injectors: every constant lives in one table (a full vector per constant, emitted after the code and
// addressed from a base register), so constants are plain memory operands on both ISAs.
//
// Why xbyak alone suffices: the kernels are straight-line vector code plus two loops; xbyak gives us the
// encoder, labels and an executable buffer with no IR, no register allocator and no compile-time
// overhead (a kernel assembles in tens of microseconds). asmjit would serve better if we wanted its
// register allocator (the Compiler API) for large groups with many live values; our groups are small,
// and a linear scan over the topological order with spilling of the value used last to a stack slot
// (kernel_emitter.cpp) is enough, so asmjit is not used.
//
// Accuracy: max error in ulp of the result type, measured by tests/test_x86_math.cpp against the std::
// functions evaluated in double on 2M (f32) / 1M (f64) values per function and ISA (random ranges,
// log-uniform magnitudes up to the type's limits, +-inf, NaN, denormals); results at the edge of
// underflow are checked to 2^24 smallest normals absolute. Special values (inf, NaN, +-0) match exactly.
//   exp      f32 1.4 ulp, f64 1 ulp   Cody-Waite reduction by ln2, Cephes degree-7 / Taylor degree-13
//            polynomial (two Horner chains, half the latency); AVX-512 scales with vscalef, AVX2 by an
//            integer add to the exponent field when every lane's result is normal, else with two exponent
//            multiplies, so denormal results and overflow to inf come out right on both
//   log      f32 2.3 ulp, f64 2 ulp   exponent/mantissa split (denormals pre-scaled), atanh series of
//            (m-1)/(m+1) on [sqrt(1/2), sqrt(2))
//   log1p    f32 4.2 ulp, f64 4 ulp   log(1+x) * (x / ((1+x)-1)) (Goldberg), x where 1+x == 1
//   tanh     f32 2.3 ulp, f64 2 ulp   f32: e/(e+2), e = expm1(2|x|) on one path (no blend of two); f64:
//            Cephes rational for |x| < 0.625, else 1 - 2/(exp(2|x|)+1)
//   sigmoid  f32 3 ulp, f64 4 ulp     (silu 3 / 4): f32 AVX-512 reciprocal by rcp14 + Newton, else division
//   erf      f32 2.5e-7 absolute      Taylor for |x| < 0.8, Abramowitz-Stegun 7.1.26 above; f64 calls
//            std::erf per lane (exact)
//   sin, cos f32 1.8 ulp, f64 2 ulp   for |x| <= 8192 (f32) / 2^19 (f64): Cody-Waite by pi/2 (fdlibm's
//            split for f64), Taylor polynomials; a vector with any larger, infinite or NaN lane calls
//            std::sin / std::cos per lane instead, so those results are the reference's exactly.
// Ops with no vector code (pow with a non-constant exponent, erf in f64, elementwise rows added to ops.def
// later) call ops.def's scalar expression per lane (scalar_fallback.cpp) through callout(): exact semantics.
#include <xbyak/xbyak.h>

#include <bit>
#include <cstdint>
#include <map>
#include <type_traits>
#include <vector>

namespace kiln::x86::detail {

template <class Vmm>
class VecMath : public Xbyak::CodeGenerator {
 public:
  static constexpr bool kAvx512 = std::is_same_v<Vmm, Xbyak::Zmm>;
  static constexpr int kNumVregs = kAvx512 ? 32 : 16;
  static constexpr int kVecBytes = kAvx512 ? 64 : 32;
  using Mask = std::conditional_t<kAvx512, Xbyak::Opmask, Vmm>;

  explicit VecMath(bool f64) : Xbyak::CodeGenerator(8192, Xbyak::AutoGrow), f64_(f64) {
    // Entries 0 and 1: the AVX2 tail mask table (W lanes of all-ones, then W lanes of zeros).
    table_.push_back(~uint64_t(0));
    table_.push_back(0);
  }

  int esz() const { return f64_ ? 8 : 4; }
  int lanes() const { return kVecBytes / esz(); }

 protected:
  bool f64_;
  const Xbyak::Reg64 r_tbl = r15;
  Xbyak::Label table_label_;
  std::vector<uint64_t> table_;      // one entry per constant (lane bits), replicated to a vector
  std::map<uint64_t, int> index_;

  // ---------------- constants ----------------
  uint64_t bits_of(double v) const {
    return f64_ ? std::bit_cast<uint64_t>(v) : uint64_t(std::bit_cast<uint32_t>(float(v)));
  }
  Xbyak::Address Cb(uint64_t bits) {
    auto it = index_.find(bits);
    int i;
    if (it != index_.end()) {
      i = it->second;
    } else {
      i = int(table_.size());
      table_.push_back(bits);
      index_[bits] = i;
    }
    return ptr[r_tbl + i * kVecBytes];
  }
  Xbyak::Address C(double v) { return Cb(bits_of(v)); }
  uint64_t sign_bits() const { return f64_ ? uint64_t(1) << 63 : uint64_t(1) << 31; }
  uint64_t abs_bits() const { return f64_ ? ~(uint64_t(1) << 63) : 0x7fffffffu; }
  uint64_t ones_bits() const { return f64_ ? ~uint64_t(0) : 0xffffffffu; }
  double inf() const { return __builtin_inf(); }
  double nan() const { return __builtin_nan(""); }

  void emit_table() {
    align(64);
    L(table_label_);
    for (size_t i = 0; i < table_.size(); ++i) {
      uint64_t b = table_[i];
      if (i == 0) b = ones_bits();
      for (int l = 0; l < lanes(); ++l) {
        if (f64_) dq(b);
        else dd(uint32_t(b));
      }
    }
  }

  // ---------------- scratch registers ----------------
  std::vector<int> free_v_;  // scratch vector registers
  std::vector<int> free_k_;  // scratch opmasks (AVX-512)
  struct Scope {
    VecMath& g;
    std::vector<int> v, k;
    explicit Scope(VecMath& gg) : g(gg), v(gg.free_v_), k(gg.free_k_) {}
    ~Scope() {
      g.free_v_ = v;
      g.free_k_ = k;
    }
  };
  Vmm tmp() {
    if (free_v_.empty()) throw Xbyak::Error(Xbyak::ERR_INTERNAL);
    int i = free_v_.back();
    free_v_.pop_back();
    return Vmm(i);
  }
  Mask mtmp() {
    if constexpr (kAvx512) {
      if (free_k_.empty()) throw Xbyak::Error(Xbyak::ERR_INTERNAL);
      int i = free_k_.back();
      free_k_.pop_back();
      return Xbyak::Opmask(i);
    } else {
      return tmp();
    }
  }

  // ---------------- typed wrappers ----------------
  using Op = Xbyak::Operand;
  void vadd(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vaddpd(d, a, b) : vaddps(d, a, b); }
  void vsub(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vsubpd(d, a, b) : vsubps(d, a, b); }
  void vmul(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vmulpd(d, a, b) : vmulps(d, a, b); }
  void vdiv(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vdivpd(d, a, b) : vdivps(d, a, b); }
  void vmx(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vmaxpd(d, a, b) : vmaxps(d, a, b); }
  void vmn(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vminpd(d, a, b) : vminps(d, a, b); }
  void vsqrt(const Vmm& d, const Op& a) { f64_ ? vsqrtpd(d, a) : vsqrtps(d, a); }
  // d = a*d + b
  void fma213(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vfmadd213pd(d, a, b) : vfmadd213ps(d, a, b); }
  // d = a*b + d
  void fma231(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vfmadd231pd(d, a, b) : vfmadd231ps(d, a, b); }
  // d = d - a*b
  void fnma231(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vfnmadd231pd(d, a, b) : vfnmadd231ps(d, a, b); }
  // d = b - a*d
  void fnma213(const Vmm& d, const Vmm& a, const Op& b) { f64_ ? vfnmadd213pd(d, a, b) : vfnmadd213ps(d, a, b); }
  void vld(const Vmm& d, const Op& a) { f64_ ? vmovupd(d, a) : vmovups(d, a); }
  void vst(const Xbyak::Address& a, const Vmm& v) { f64_ ? vmovupd(a, v) : vmovups(a, v); }
  void vbcast(const Vmm& d, const Xbyak::Address& a) { f64_ ? vbroadcastsd(d, a) : vbroadcastss(d, a); }
  void vand(const Vmm& d, const Vmm& a, const Op& b) {
    if constexpr (kAvx512) f64_ ? vpandq(d, a, b) : vpandd(d, a, b);
    else vpand(d, a, b);
  }
  void vor(const Vmm& d, const Vmm& a, const Op& b) {
    if constexpr (kAvx512) f64_ ? vporq(d, a, b) : vpord(d, a, b);
    else vpor(d, a, b);
  }
  void vxor(const Vmm& d, const Vmm& a, const Op& b) {
    if constexpr (kAvx512) f64_ ? vpxorq(d, a, b) : vpxord(d, a, b);
    else vpxor(d, a, b);
  }
  void vzero(const Vmm& d) {
    if constexpr (kAvx512) vpxord(d, d, d);
    else vpxor(d, d, d);
  }
  // mode: 0 nearest, 1 floor, 2 ceil, 3 trunc (precision exception suppressed)
  void vround(const Vmm& d, const Op& a, int mode) {
    if constexpr (kAvx512) f64_ ? vrndscalepd(d, a, uint8_t(8 | mode)) : vrndscaleps(d, a, uint8_t(8 | mode));
    else f64_ ? vroundpd(d, a, uint8_t(8 | mode)) : vroundps(d, a, uint8_t(8 | mode));
  }
  void vshl(const Vmm& d, const Vmm& a, int n) { f64_ ? vpsllq(d, a, uint8_t(n)) : vpslld(d, a, uint8_t(n)); }
  void vshr(const Vmm& d, const Vmm& a, int n) { f64_ ? vpsrlq(d, a, uint8_t(n)) : vpsrld(d, a, uint8_t(n)); }

  // Predicates (C++ semantics: ordered compares are false on NaN, != is true).
  static constexpr int kEq = 0x00, kLt = 0x11, kLe = 0x12, kUnord = 0x03, kNe = 0x04, kNlt = 0x05,
                       kNle = 0x06, kOrd = 0x07, kNge = 0x19, kGe = 0x1d, kGt = 0x1e;
  void vcmp(const Mask& m, const Vmm& a, const Op& b, int pred) {
    if constexpr (kAvx512) f64_ ? vcmppd(m, a, b, uint8_t(pred)) : vcmpps(m, a, b, uint8_t(pred));
    else f64_ ? vcmppd(m, a, b, uint8_t(pred)) : vcmpps(m, a, b, uint8_t(pred));
  }
  // d = m ? src : d
  void blend(const Vmm& d, const Mask& m, const Op& src) {
    if constexpr (kAvx512) f64_ ? vblendmpd(d | m, d, src) : vblendmps(d | m, d, src);
    else f64_ ? vblendvpd(d, d, src, m) : vblendvps(d, d, src, m);
  }
  // d = m ? 1 : 0
  void mask_to_01(const Vmm& d, const Mask& m) {
    if constexpr (kAvx512) f64_ ? vmovupd(d | m | T_z, C(1.0)) : vmovups(d | m | T_z, C(1.0));
    else vandps(d, m, C(1.0));
  }
  void mask_and(const Mask& a, const Mask& b) {
    if constexpr (kAvx512) kandw(a, a, b);
    else vandps(a, a, b);
  }
  void mask_or(const Mask& a, const Mask& b) {
    if constexpr (kAvx512) korw(a, a, b);
    else vorps(a, a, b);
  }
  // Jumps to `to` when any lane of m is set.
  void jump_if_any(const Mask& m, Xbyak::Label& to) {
    if constexpr (kAvx512) {
      kortestw(m, m);
    } else {
      f64_ ? vtestpd(m, m) : vtestps(m, m);
    }
    jnz(to, T_NEAR);
  }

  void poly(const Vmm& d, const Vmm& x, const std::vector<double>& c) {  // c[0] + c[1] x + ...
    vld(d, C(c.back()));
    for (int i = int(c.size()) - 2; i >= 0; --i) fma213(d, x, C(c[size_t(i)]));
  }
  // The same polynomial as two Horner chains joined by x^h (h = half the coefficients): half the
  // dependency latency, for the long polynomials on the hot path (exp). Two scratch registers.
  void poly_split(const Vmm& d, const Vmm& x, const std::vector<double>& c) {
    if (c.size() < 6 || free_v_.size() < 2) return poly(d, x, c);  // short of scratch: one chain
    Scope sc(*this);
    Vmm hi = tmp(), xh = tmp();
    const size_t h = c.size() >= 12 ? 8 : 4;  // x^h by squaring
    std::vector<double> lo_c(c.begin(), c.begin() + long(h)), hi_c(c.begin() + long(h), c.end());
    vmul(xh, x, x);
    poly(hi, x, hi_c);
    poly(d, x, lo_c);
    for (size_t k = 2; k < h; k *= 2) vmul(xh, xh, xh);
    fma231(d, hi, xh);
  }

  // ---------------- frame for callouts (set by the kernel emitter) ----------------
  int save_off_ = 0;  // kNumVregs * kVecBytes bytes + 64 for k1, at rsp + save_off_
  int arg_off_ = 0;   // two vectors at rsp + arg_off_

  // d = fn(a, b) lane by lane through a C++ function void fn(T* a, const T* b, int64_t lanes) that writes
  // its results over a. Every vector register (and k1) is saved around the call.
  void callout(const Vmm& d, const Vmm& a, const Vmm* b, const void* fn) {
    for (int i = 0; i < kNumVregs; ++i) vmovups(ptr[rsp + save_off_ + i * kVecBytes], Vmm(i));
    if constexpr (kAvx512) kmovq(ptr[rsp + save_off_ + kNumVregs * kVecBytes], k1);
    vmovups(ptr[rsp + arg_off_], a);
    if (b) vmovups(ptr[rsp + arg_off_ + kVecBytes], *b);
    vzeroupper();
    lea(rdi, ptr[rsp + arg_off_]);
    lea(rsi, ptr[rsp + arg_off_ + kVecBytes]);
    mov(edx, lanes());
    mov(rax, reinterpret_cast<uintptr_t>(fn));
    call(rax);
    for (int i = 0; i < kNumVregs; ++i) vmovups(Vmm(i), ptr[rsp + save_off_ + i * kVecBytes]);
    if constexpr (kAvx512) kmovq(k1, ptr[rsp + save_off_ + kNumVregs * kVecBytes]);
    vmovups(d, ptr[rsp + arg_off_]);
  }

  // ---------------- math ----------------
  // d = 1/s for s >= 1 or +inf (f32: rcp + Newton, rel error <= 2^-22; f64: exact division). d may be s.
  void recip_pos(const Vmm& d, const Vmm& s) {
    if (f64_ || !kAvx512) {  // AVX2: vdivps has less latency than rcpps + two Newton steps
      Scope sc(*this);
      Vmm t = tmp();
      vld(t, C(1.0));
      vdiv(d, t, s);
      return;
    }
    Scope sc(*this);
    Vmm r = tmp(), e = tmp();
    if constexpr (kAvx512) vrcp14ps(r, s);
    else vrcpps(r, s);
    int steps = kAvx512 ? 1 : 2;
    for (int i = 0; i < steps; ++i) {
      vld(e, C(1.0));
      fnma231(e, s, r);  // e = 1 - s*r
      fma231(r, r, e);   // r = r + r*e
    }
    // s = inf: rcp gives 0 and the Newton step NaN; the answer is 0.
    Mask m = mtmp();
    vcmp(m, s, C(inf()), kEq);
    vld(d, r);
    vzero(e);
    blend(d, m, e);
  }

  // d = exp(x), or exp(-x) with neg (sigmoid's: the negation folded into the reduction); d != x. On AVX2
  // a vector whose lanes all lie where exp is a normal number takes the short path (2^n added to the
  // exponent field: no clamp, no two-step scaling, ~20 % fewer instructions on the chain's critical path);
  // any other vector (denormal or infinite results, NaN) the general one.
  void exp_(const Vmm& d, const Vmm& x, bool neg = false) {
    auto general = [&] {
      if (!neg) return exp_general_(d, x);
      Scope sc(*this);
      Vmm nx = tmp();
      vxor(nx, x, Cb(sign_bits()));
      exp_general_(d, nx);
    };
    if constexpr (kAvx512) {
      general();
    } else {
      Xbyak::Label slow, done;
      {
        Scope sc(*this);
        Vmm t = tmp();
        vand(t, x, Cb(abs_bits()));
        vcmp(t, t, C(exp_normal_limit()), kNle);  // out of range or NaN
        jump_if_any(t, slow);
      }
      exp_normal_(d, x, neg);
      jmp(done, T_NEAR);
      L(slow);
      general();
      L(done);
    }
  }
  // |x| up to which exp(x) and 2^round(x/ln2) are normal numbers (see exp_normal_).
  double exp_normal_limit() const { return f64_ ? 708.0 : 87.0; }
  double round_magic() const { return f64_ ? 6755399441055744.0 : 12582912.0; }  // 1.5 * 2^mantissa bits

  // n = round(x * s / ln2) as a float carrying the integer in its low mantissa bits (x*s/ln2 + 1.5*2^mb),
  // r = x*s - round(x*s/ln2)*ln2 (Cody-Waite). s is 1, 2 or -1; k is clobbered (it holds the rounded value).
  void ln2_reduce_(const Vmm& n, const Vmm& k, const Vmm& r, const Vmm& x, int s) {
    vld(n, C(1.4426950408889634 * s));
    fma213(n, x, C(round_magic()));
    vsub(k, n, C(round_magic()));
    if (s == 2) vadd(r, x, x);
    else vld(r, x);
    if (s == 2 && !f64_) {
      // tanh's: one constant is enough, the error k (ln2 - float(ln2)) <= 6e-8 is scaled by 2/(e+2)
      fnma231(r, k, C(0.6931471805599453));
      return;
    }
    const double ln2_hi = f64_ ? 0.693147180559945286227 : 0.693359375;
    if (s == -1) f64_ ? vfnmsub231pd(r, k, C(ln2_hi)) : vfnmsub231ps(r, k, C(ln2_hi));  // -x - k ln2_hi
    else fnma231(r, k, C(ln2_hi));
    fnma231(r, k, C(f64_ ? 2.319046813846299558e-17 : -2.12194440e-4));
  }
  // n = 2^k from ln2_reduce_'s n: the integer shifted into the exponent field, plus 1.0's bits.
  void pow2_from_magic_(const Vmm& n) {
    vshl(n, n, f64_ ? 52 : 23);
    f64_ ? vpaddq(n, n, Cb(bits_of(1.0))) : vpaddd(n, n, Cb(bits_of(1.0)));
  }
  // d = exp(r) for |r| <= ln2/2: Cephes degree 7 (f32), Taylor degree 13 (f64).
  void exp_poly_(const Vmm& d, const Vmm& r) {
    if (f64_) {
      std::vector<double> c(14);
      double f = 1;
      for (int k = 0; k < 14; ++k) {
        if (k) f *= k;
        c[size_t(k)] = 1.0 / f;
      }
      poly_split(d, r, c);
    } else {
      poly_split(d, r, {1.0, 1.0, 5.0000001201E-1, 1.6666665459E-1, 4.1665795894E-2, 8.3334519073E-3,
                        1.3981999507E-3, 1.9875691500E-4});
    }
  }
  // exp for |x| <= exp_normal_limit(): round(x/ln2) lies in [-126, 126] (f32) / [-1021, 1021] (f64) and
  // exp(r) >= 1 whenever it is the lowest, so adding it to the exponent field stays normal.
  void exp_normal_(const Vmm& d, const Vmm& x, bool neg) {
    Scope sc(*this);
    Vmm n = tmp(), r = tmp();
    ln2_reduce_(n, d, r, x, neg ? -1 : 1);
    exp_poly_(d, r);
    vshl(n, n, f64_ ? 52 : 23);
    f64_ ? vpaddq(d, d, n) : vpaddd(d, d, n);
  }

  void exp_general_(const Vmm& d, const Vmm& x) {
    Scope sc(*this);
    Vmm t = tmp(), n = tmp();
    const double lo = f64_ ? -746.0 : -104.5, hi = f64_ ? 710.0 : 89.0;
    vld(t, C(lo));
    vmx(t, t, x);  // NaN stays (vmax returns the second operand on NaN)
    vld(n, C(hi));
    vmn(t, n, t);
    vmul(n, t, C(1.4426950408889634));
    vround(n, n, 0);
    fnma231(t, n, C(f64_ ? 0.693147180559945286227 : 0.693359375));             // ln2 hi
    fnma231(t, n, C(f64_ ? 2.319046813846299558e-17 : -2.12194440e-4));         // ln2 lo
    exp_poly_(d, t);
    if constexpr (kAvx512) {
      f64_ ? vscalefpd(d, d, n) : vscalefps(d, d, n);
    } else {
      // 2^n as 2^n1 * 2^n2 with n1 = floor(n/2): both halves are normal numbers, so results in the
      // denormal range round once and overflow gives inf.
      vmul(t, n, C(0.5));
      vround(t, t, 1);
      vsub(n, n, t);
      const double magic = f64_ ? 6755399441055744.0 + 1023.0 : 12582912.0 + 127.0;
      const int mb = f64_ ? 52 : 23;
      vadd(t, t, C(magic));
      vshl(t, t, mb);
      vmul(d, d, t);
      vadd(n, n, C(magic));
      vshl(n, n, mb);
      vmul(d, d, n);
    }
  }

  // d = log(x); d != x
  void log_(const Vmm& d, const Vmm& x) {
    Scope sc(*this);
    Vmm t = tmp(), e = tmp(), c = tmp();
    Mask m = mtmp();
    const int mb = f64_ ? 52 : 23;
    const double two_mb = f64_ ? 4503599627370496.0 : 8388608.0;
    const double min_normal = f64_ ? 2.2250738585072014e-308 : 1.17549435e-38;
    const uint64_t magic_bits = f64_ ? 0x4330000000000000ull : 0x4B000000u;  // 2^mb as bits
    const int bias = f64_ ? 1023 : 127;
    // Denormals: scale by 2^mb first.
    vmul(t, x, C(two_mb));
    vcmp(m, x, C(min_normal), kGe);
    blend(t, m, x);
    vld(c, C(two_mb + bias + mb));
    blend(c, m, C(two_mb + bias));
    // e = exponent field as a float, minus bias (and mb for scaled denormals)
    vshr(e, t, mb);
    vor(e, e, Cb(magic_bits));
    vsub(e, e, c);
    // mantissa in [1, 2)
    vand(t, t, Cb(f64_ ? 0x000fffffffffffffull : 0x007fffffu));
    vor(t, t, Cb(bits_of(1.0)));
    // m > sqrt(2): halve, e += 1  → mantissa in [sqrt(1/2), sqrt(2))
    vcmp(m, t, C(1.4142135623730951), kGt);
    vmul(c, t, C(0.5));
    blend(t, m, c);
    vadd(c, e, C(1.0));
    blend(e, m, c);
    // log(mant) = 2 atanh(s), s = (mant-1)/(mant+1)
    vadd(c, t, C(1.0));
    vsub(t, t, C(1.0));
    vdiv(t, t, c);      // s
    vmul(c, t, t);      // z = s^2
    std::vector<double> co;
    int terms = f64_ ? 11 : 6;
    for (int k = 0; k < terms; ++k) co.push_back(2.0 / (2 * k + 1));
    poly(d, c, co);
    vmul(d, d, t);      // 2 s (1 + z/3 + ...)
    fma231(d, e, C(f64_ ? 1.9082149292705877e-10 : -2.12194440e-4));
    fma231(d, e, C(f64_ ? 0.6931471803691238 : 0.693359375));
    // specials
    vcmp(m, x, C(inf()), kEq);
    blend(d, m, C(inf()));
    vcmp(m, x, C(0.0), kEq);
    blend(d, m, C(-inf()));
    vcmp(m, x, C(0.0), kNge);  // x < 0 or NaN
    blend(d, m, C(nan()));
  }

  // d = tanh(x); d != x. f64 keeps two paths: expm1 by Taylor would need twice the terms.
  void tanh_(const Vmm& d, const Vmm& x) {
    if (!f64_) return tanh_expm1_(d, x);
    Scope sc(*this);
    // small |x|: x + x z P(z)/Q(z)
    {
      Scope s2(*this);
      Vmm z = tmp(), q = tmp();
      vmul(z, x, x);
      poly(d, z, {-1.61468768441708447952E3, -9.92877231001918586564E1, -9.64399179425052238628E-1});
      poly(q, z, {4.84406305325125486048E3, 2.23548839060100448583E3, 1.12811678491632931402E2, 1.0});
      vdiv(d, d, q);
      vmul(d, d, z);
      fma213(d, x, x);  // d = x*d + x
    }
    Vmm a = tmp(), q = tmp();
    Mask m = mtmp();
    vand(a, x, Cb(abs_bits()));
    vcmp(m, a, C(0.625), kNlt);  // big or NaN
    vadd(a, a, a);
    exp_(q, a);
    vadd(q, q, C(1.0));
    recip_pos(a, q);
    fnma213(a, C2(), C(1.0));  // 1 - 2/(e+1)
    vand(q, x, Cb(sign_bits()));
    vor(a, a, q);
    blend(d, m, a);
  }
  // f32 tanh on one path, no blend of two: tanh|x| = e / (e + 2) with e = expm1(2|x|) = 2^k p + (2^k - 1),
  // p = expm1(r) by Taylor to r^7 (|r| <= ln2/2); |x| clamped to 10, where tanh rounds to 1. No
  // cancellation anywhere (e > 0), so small |x| keeps full relative accuracy; NaN flows through the min.
  void tanh_expm1_(const Vmm& d, const Vmm& x) {
    Scope sc(*this);
    Vmm a = tmp(), n = tmp(), r = tmp();
    const Vmm& k = a;  // |x| is dead once r is formed
    vand(a, x, Cb(abs_bits()));
    vld(n, C(10.0));
    vmn(a, n, a);
    ln2_reduce_(n, d, r, a, 2);
    poly_split(d, r, {1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040});
    vmul(k, r, r);
    fma213(d, k, r);  // p = r + r^2 q(r)
    pow2_from_magic_(n);
    vsub(k, n, C(1.0));
    fma213(d, n, k);  // e = 2^k p + 2^k - 1
    vadd(k, d, C(2.0));
    vdiv(d, d, k);
    vand(k, x, Cb(sign_bits()));
    vor(d, d, k);
  }
  Xbyak::Address C2() { return C(2.0); }
  void fnma213(const Vmm& d, const Xbyak::Address& a, const Xbyak::Address& b) {
    // d = b - a*d with a in memory: vfnmadd213 takes (d, reg, mem); use a scratch for a.
    Scope sc(*this);
    Vmm t = tmp();
    vld(t, a);
    fnma213(d, t, b);
  }

  // d = 1/(1+exp(-x)) (and * x for silu); d != x
  void sigmoid_(const Vmm& d, const Vmm& x, bool times_x) {
    Scope sc(*this);
    exp_(d, x, true);
    vadd(d, d, C(1.0));
    if (times_x) {
      if (f64_) {
        vdiv(d, x, d);
      } else {
        recip_pos(d, d);
        vmul(d, d, x);
      }
    } else {
      recip_pos(d, d);
    }
  }

  // f32 erf; d != x. `near_zero`: the Taylor series where |x| < 0.8, where the large path's error (1.5e-7
  // absolute) is a large relative one; gelu, which adds 1 to erf, needs only the absolute bound.
  void erf_f32(const Vmm& d, const Vmm& x, bool near_zero = true) {
    Scope sc(*this);
    Vmm a = tmp(), t = tmp();
    Mask m = mtmp();
    // large: 1 - poly(t) exp(-x^2), t = 1/(1 + p|x|)
    vand(a, x, Cb(abs_bits()));
    vld(t, C(0.3275911));
    fma213(t, a, C(1.0));  // 1 + p|x|
    recip_pos(t, t);        // >= 1 (inf: 0)
    poly(d, t, {0.0, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429});
    vmul(a, x, x);
    vxor(a, a, Cb(sign_bits()));
    exp_(t, a);
    vmul(d, d, t);
    vld(t, C(1.0));
    vsub(d, t, d);
    vand(t, x, Cb(sign_bits()));
    vor(d, d, t);
    if (!near_zero) return;
    // small: Taylor; for |x| < 0.8 the terms past x^17 add under 3e-9
    vmul(a, x, x);
    std::vector<double> c;
    double f = 1;
    for (int k = 0; k < 9; ++k) {
      if (k) f *= k;
      c.push_back(1.1283791670955126 * ((k & 1) ? -1 : 1) / (f * (2 * k + 1)));
    }
    poly(t, a, c);
    vmul(t, t, x);
    vand(a, x, Cb(abs_bits()));
    vcmp(m, a, C(0.8), kLt);
    blend(d, m, t);
    // NaN: the large path gives NaN already
  }

  // sin (cos_ = false) or cos of x for |x| <= limit; lanes beyond (or inf/NaN) fall back to `fallback`.
  void sincos_(const Vmm& d, const Vmm& x, bool cos_, const void* fallback) {
    Xbyak::Label slow, done;
    {
      Scope sc(*this);
      Vmm n = tmp(), r = tmp(), z = tmp(), s = tmp();
      Mask m = mtmp();
      vand(r, x, Cb(abs_bits()));
      vcmp(m, r, C(f64_ ? 524288.0 : 8192.0), kNle);
      jump_if_any(m, slow);
      vmul(n, x, C(0.63661977236758134308));  // 2/pi
      vround(n, n, 0);
      vld(r, x);
      if (f64_) {
        fnma231(r, n, Cb(0x3FF921FB54400000ull));
        fnma231(r, n, Cb(0x3DD0B4611A600000ull));
        fnma231(r, n, Cb(0x3BA3198A2E000000ull));
        fnma231(r, n, Cb(0x397B839A252049C1ull));
      } else {
        const double pio2 = 1.5707963267948966;
        float c1 = float(pio2);
        float c2 = float(pio2 - double(c1));
        float c3 = float(pio2 - double(c1) - double(c2));
        fnma231(r, n, C(c1));
        fnma231(r, n, C(c2));
        fnma231(r, n, C(c3));
      }
      if (cos_) vadd(n, n, C(1.0));
      vmul(z, r, r);
      // s = sin r = r + r z S(z); d = cos r = C(z)
      std::vector<double> sc_, cc;
      int terms = f64_ ? 10 : 6;
      double f = 1;
      for (int k = 1; k <= 2 * terms + 1; ++k) {
        f *= k;
        if (k % 2 == 1) sc_.push_back(((k / 2) % 2 ? -1.0 : 1.0) / f);
        else cc.push_back(((k / 2) % 2 ? -1.0 : 1.0) / f);
      }
      cc.insert(cc.begin(), 1.0);
      poly(s, z, sc_);
      vmul(s, s, r);
      poly(d, z, cc);
      // odd quadrant: cos r; quadrant 2, 3: negate
      vmul(z, n, C(0.5));
      vround(r, z, 1);
      vcmp(m, z, r, kNe);  // n odd
      blend(s, m, d);
      vmul(z, n, C(0.25));
      vround(r, z, 1);
      vsub(z, z, r);
      vcmp(m, z, C(0.5), kGe);
      vxor(d, s, Cb(sign_bits()));
      blend(s, m, d);
      vld(d, s);
    }
    jmp(done, T_NEAR);
    L(slow);
    callout(d, x, nullptr, fallback);
    L(done);
  }
};

}  // namespace kiln::x86::detail
