#include "backends/x86/kernel_emitter.h"

#include <algorithm>
#include <climits>
#include <limits>

#include "backends/x86/scalar_fallback.h"
#include "backends/x86/vec_math.h"
#include "core/error.h"

namespace kiln::x86::detail {
namespace {

// Register roles. AVX-512: values zmm0-20, reduction accumulator zmm21, scratch zmm22-31, tail mask k1,
// scratch masks k2-k7. AVX2: values ymm0-6, accumulator ymm7, scratch ymm8-14, tail mask ymm15.
// GPRs: r12 ptrs, r13 n, r14 i (element index), rbx acc, r15 constants table; rax rcx rdx r8 r9 free.
template <class Vmm>
class KernelGen : public VecMath<Vmm> {
  using B = VecMath<Vmm>;
  using Mask = typename B::Mask;
  using B::kAvx512;
  using B::kVecBytes;
  using B::kNumVregs;

 public:
  KernelGen(const Program& p, const Variant& v) : B(p.f64), p_(p), v_(v) {}

  void generate() {
    using namespace Xbyak;
    const int ni = int(p_.input_dtypes.size());
    const int W = this->lanes();
    // frame
    splat_off_ = 0;
    this->arg_off_ = splat_off_ + ni * kVecBytes;
    this->save_off_ = this->arg_off_ + 2 * kVecBytes;
    spill_off_ = this->save_off_ + kNumVregs * kVecBytes + 64;
    rows_off_ = spill_off_ + int(p_.vals.size()) * kVecBytes;  // rows mode: rows left
    int frame = rows_off_ + 64;
    frame = (frame + 63) & ~63;

    // last uses (node index in vals); outputs are stored when defined
    last_use_.assign(p_.vals.size(), -1);
    for (size_t i = 0; i < p_.vals.size(); ++i)
      for (int a : p_.vals[i].args) last_use_[size_t(a)] = std::max(last_use_[size_t(a)], int(i));
    if (p_.red_val >= 0) last_use_[size_t(p_.red_val)] = INT_MAX;
    out_of_.assign(p_.vals.size(), {});
    for (size_t j = 0; j < p_.outputs.size(); ++j) out_of_[size_t(p_.outputs[j])].push_back(int(j));

    this->push(this->rbp);
    this->mov(this->rbp, this->rsp);
    this->push(this->rbx);
    this->push(this->r12);
    this->push(this->r13);
    this->push(this->r14);
    this->push(this->r15);
    this->and_(this->rsp, -64);
    this->sub(this->rsp, frame);
    this->mov(this->r12, this->rdi);
    this->mov(this->r13, this->rsi);
    this->mov(this->rbx, this->rdx);
    this->lea(this->r15, this->ptr[this->rip + this->table_label_]);
    Label row_loop;
    if (v_.rows) {
      this->mov(this->rax, this->ptr[this->rbx + 8]);
      this->mov(this->ptr[this->rsp + rows_off_], this->rax);
      this->L(row_loop);
    }
    this->xor_(this->r14, this->r14);
    // broadcast inputs: splat once into the frame (once per row in rows mode: a row's own values)
    for (int k = 0; k < ni; ++k) {
      if (!is_bcast(k)) continue;
      this->mov(this->rax, this->ptr[this->r12 + 8 * k]);
      Vmm v0(0);
      if (p_.input_dtypes[size_t(k)] == DType::BFloat16) {
        this->movzx(this->eax, this->word[this->rax]);
        this->shl(this->eax, 16);
        this->vmovd(Xmm(0), this->eax);
        this->vbroadcastss(v0, Xmm(0));
      } else if (p_.input_dtypes[size_t(k)] == DType::Bool) {
        this->movzx(this->eax, this->byte[this->rax]);
        if (p_.f64) this->vcvtsi2sd(Xmm(0), Xmm(0), this->eax);
        else this->vcvtsi2ss(Xmm(0), Xmm(0), this->eax);
        if (p_.f64) this->vbroadcastsd(v0, Xmm(0));
        else this->vbroadcastss(v0, Xmm(0));
      } else {
        this->vbcast(v0, this->ptr[this->rax]);
      }
      this->vmovups(this->ptr[this->rsp + splat_off_ + k * kVecBytes], v0);
    }
    hoist();
    if (p_.red_val >= 0) {
      if (v_.rows) this->vld(acc(), this->C(identity()));
      else this->vmovups(acc(), this->ptr[this->rbx]);
    }

    Label loop, tail, done;
    this->L(loop);
    this->mov(this->rax, this->r13);
    this->sub(this->rax, this->r14);
    this->cmp(this->rax, W);
    this->jl(tail, this->T_NEAR);
    body(false);
    this->add(this->r14, W);
    this->jmp(loop, this->T_NEAR);
    this->L(tail);
    this->cmp(this->r14, this->r13);
    this->jge(done, this->T_NEAR);
    this->mov(this->rcx, this->r13);
    this->sub(this->rcx, this->r14);  // rem in [1, W)
    if constexpr (kAvx512) {
      this->mov(this->eax, -1);
      this->bzhi(this->eax, this->eax, this->ecx);
      this->kmovw(this->k1, this->eax);
    } else {
      this->mov(this->rax, W);
      this->sub(this->rax, this->rcx);
      this->lea(this->rax, this->ptr[this->r15 + this->rax * this->esz()]);
      this->vmovups(tail_mask(), this->ptr[this->rax]);
    }
    body(true);
    this->L(done);
    if (p_.red_val >= 0) {
      if (v_.rows) {
        fold_lanes();
        Xbyak::Xmm a0(acc().getIdx());
        this->mov(this->rax, this->ptr[this->rbx]);
        p_.f64 ? this->vmovsd(this->ptr[this->rax], a0) : this->vmovss(this->ptr[this->rax], a0);
        this->add(this->qword[this->rbx], this->esz());
      } else {
        this->vmovups(this->ptr[this->rbx], acc());
      }
    }
    if (v_.rows) {
      const int nptrs = ni + int(p_.outputs.size());
      for (int k = 0; k < nptrs; ++k) {
        this->mov(this->rax, this->ptr[this->rbx + 16 + 8 * k]);
        this->add(this->ptr[this->r12 + 8 * k], this->rax);
      }
      this->dec(this->qword[this->rsp + rows_off_]);
      this->jnz(row_loop, this->T_NEAR);
    }
    if (v_.nt) this->sfence();
    this->vzeroupper();
    this->lea(this->rsp, this->ptr[this->rbp - 40]);
    this->pop(this->r15);
    this->pop(this->r14);
    this->pop(this->r13);
    this->pop(this->r12);
    this->pop(this->rbx);
    this->pop(this->rbp);
    this->ret();
    this->emit_table();
    this->ready();
  }

 private:
  const Program& p_;
  Variant v_;
  int splat_off_ = 0;
  int rows_off_ = 0;
  std::vector<int> last_use_;
  std::vector<std::vector<int>> out_of_;
  // per body emission
  std::vector<int> reg_of_;    // value → vreg index or -1
  std::vector<int> free_vals_;
  std::vector<char> spilled_;  // value has a valid copy in its frame slot
  std::vector<int> pinned_;    // operands of the node being emitted: never spilled
  int spill_off_ = 0;
  bool masked_ = false;

  static constexpr int kFirstScratch = kAvx512 ? 22 : 8;
  static constexpr int kLastScratch = kAvx512 ? 31 : 14;
  static constexpr int kNumValueRegs = kAvx512 ? 21 : 7;
  Vmm acc() const { return Vmm(kAvx512 ? 21 : 7); }
  Vmm tail_mask() const { return Vmm(15); }

  bool is_bcast(int k) const { return k < 64 && ((v_.bcast >> k) & 1); }

  // Nodes whose operands are all constants, broadcast inputs or such nodes have one value for the whole
  // run (a row's mean, rstd or 1/sum): computed once before the loop into their frame slots, then read as
  // memory operands. A layer norm's output pass otherwise ran three divisions and a square root per vector.
  std::vector<char> hoisted_;
  void hoist() {
    hoisted_.assign(p_.vals.size(), 0);
    masked_ = false;
    for (size_t i = 0; i < p_.vals.size(); ++i) {
      const PValue& pv = p_.vals[i];
      if (pv.kind != PValue::Node) continue;
      if (last_use_[i] < 0 && out_of_[i].empty()) continue;  // dead
      if (!std::all_of(pv.args.begin(), pv.args.end(), [&](int a) { return in_memory(a); })) continue;
      reset_pools();
      emit_node(int(i));
      this->vmovups(slot(int(i)), Vmm(reg_of_[i]));
      hoisted_[i] = 1;
    }
  }

  void reset_pools() {
    this->free_v_.clear();
    for (int i = kLastScratch; i >= kFirstScratch; --i) this->free_v_.push_back(i);
    this->free_k_.clear();
    if constexpr (kAvx512)
      for (int i = 7; i >= 2; --i) this->free_k_.push_back(i);
    free_vals_.clear();
    for (int i = kNumValueRegs - 1; i >= 0; --i) free_vals_.push_back(i);
    reg_of_.assign(p_.vals.size(), -1);
    spilled_.assign(p_.vals.size(), 0);
    pinned_.clear();
  }
  Xbyak::Address slot(int v) { return this->ptr[this->rsp + spill_off_ + v * kVecBytes]; }
  // A free value register; when none is left, the live value used last (not an operand of the node
  // being emitted) goes to its frame slot (stream inputs are simply reloaded from their tensor later).
  int alloc_val() {
    if (free_vals_.empty()) {
      int victim = -1;
      for (size_t v = 0; v < reg_of_.size(); ++v) {
        if (reg_of_[v] < 0) continue;
        if (std::find(pinned_.begin(), pinned_.end(), int(v)) != pinned_.end()) continue;
        if (victim < 0 || last_use_[v] > last_use_[size_t(victim)]) victim = int(v);
      }
      if (victim < 0) fail("x86: internal: no register to spill");
      int r = reg_of_[size_t(victim)];
      if (p_.vals[size_t(victim)].kind != PValue::Input && !spilled_[size_t(victim)]) {
        this->vmovups(slot(victim), Vmm(r));
        spilled_[size_t(victim)] = 1;
      }
      reg_of_[size_t(victim)] = -1;
      return r;
    }
    int r = free_vals_.back();
    free_vals_.pop_back();
    return r;
  }

  Xbyak::Address in_addr(int k, int scale) {
    this->mov(this->rax, this->ptr[this->r12 + 8 * k]);
    return this->ptr[this->rax + this->r14 * scale];
  }

  // Copies the remaining elements (r13 - r14, fewer than W) of `size`-byte elements at `base` into the
  // frame's argument area (zero-filled first), or with `to_stream` from there back: AVX2 tails of bool
  // and bf16 streams, which have no masked load or store of their width.
  void tail_bytes(const Xbyak::Reg64& base, int size, bool to_stream) {
    if (!to_stream) {
      this->mov(this->qword[this->rsp + this->arg_off_], 0);
      this->mov(this->qword[this->rsp + this->arg_off_ + 8], 0);
    }
    this->lea(this->r8, this->ptr[base + this->r14 * size]);
    this->mov(this->rcx, this->r13);
    this->sub(this->rcx, this->r14);
    if (size > 1) this->imul(this->rcx, this->rcx, size);
    this->xor_(this->edx, this->edx);
    Xbyak::Label l;
    this->L(l);
    if (to_stream) {
      this->movzx(this->r9d, this->byte[this->rsp + this->arg_off_ + this->rdx]);
      this->mov(this->byte[this->r8 + this->rdx], this->r9b);
    } else {
      this->movzx(this->r9d, this->byte[this->r8 + this->rdx]);
      this->mov(this->byte[this->rsp + this->arg_off_ + this->rdx], this->r9b);
    }
    this->inc(this->rdx);
    this->cmp(this->rdx, this->rcx);
    this->jl(l);
  }

  // bf16 lanes widened to f32: the 16 bits become the high half (exact).
  void load_bf16(const Vmm& d, int k) {
    using namespace Xbyak;
    Address a = in_addr(k, 2);
    if constexpr (kAvx512) {
      if (masked_) this->vpmovzxwd(d | this->k1 | this->T_z, a);
      else this->vpmovzxwd(d, a);
    } else {
      if (masked_) {
        tail_bytes(this->rax, 2, false);
        a = this->ptr[this->rsp + this->arg_off_];
      }
      this->vpmovzxwd(d, a);
    }
    this->vpslld(d, d, 16);
  }

  // f32 lanes rounded to bf16 as eager's casts round them (eager/cpu/bf16_convert.h), so a fused result has
  // eager's bits for the same f32 value: vcvtneps2bf16 where the CPU has AVX512_BF16 (float32 subnormals
  // flushed to zero), else to nearest even by integer ops, a NaN quieted keeping its sign and payload.
  // The bf16 bits land in the low half of each 32-bit lane of u (u distinct from r).
  static constexpr bool kBf16Insn = kAvx512;  // and cpu_avx512_bf16(), asked at emission
  void round_bf16(const Vmm& u, const Vmm& r) {
    using namespace Xbyak;
    if (kBf16Insn && cpu_avx512_bf16()) {
      Ymm y(u.getIdx());
      this->vcvtneps2bf16(y, r, EvexEncoding);
      this->vpmovzxwd(u, y);
      return;
    }
    typename B::Scope sc(*this);
    Vmm t = this->tmp();
    this->vpsrld(t, r, 16);
    this->vand(u, t, this->Cb(1));
    this->vpaddd(u, u, this->Cb(0x7fff));
    this->vpaddd(u, u, r);
    this->vpsrld(u, u, 16);
    this->vor(t, t, this->Cb(0x40));
    Mask m = this->mtmp();
    this->vcmp(m, r, r, B::kUnord);
    this->blend(u, m, t);
  }
  void store_bf16(const Xbyak::Address& a, const Vmm& r) {
    using namespace Xbyak;
    typename B::Scope sc(*this);
    Vmm u = this->tmp();
    if constexpr (kAvx512) {
      if (cpu_avx512_bf16()) {
        Ymm y(u.getIdx());
        this->vcvtneps2bf16(y, r, EvexEncoding);
        if (masked_) this->vmovdqu16(a | this->k1, y);
        else this->vmovdqu16(a, y);
        return;
      }
      round_bf16(u, r);
      if (masked_) this->vpmovdw(a | this->k1, u);
      else this->vpmovdw(a, u);
    } else {
      round_bf16(u, r);
      Vmm t = this->tmp();
      Xmm xt(t.getIdx()), xu(u.getIdx());
      this->vextracti128(xt, u, 1);
      this->vpackusdw(xu, xu, xt);
      if (!masked_) return this->vmovdqu(a, xu);
      this->vmovdqu(this->ptr[this->rsp + this->arg_off_], xu);
      tail_bytes(this->rax, 2, true);
    }
  }

  void load_input(const Vmm& d, int k) {
    using namespace Xbyak;
    const bool f64 = p_.f64;
    if (p_.input_dtypes[size_t(k)] == DType::BFloat16) return load_bf16(d, k);
    if (p_.input_dtypes[size_t(k)] == DType::Bool) {
      if constexpr (kAvx512) {
        Address a = in_addr(k, 1);
        if (f64) {
          Ymm y(d.getIdx());
          if (masked_) this->vpmovzxbd(y | this->k1 | this->T_z, a);
          else this->vpmovzxbd(y, a);
          this->vcvtdq2pd(d, y);
        } else {
          if (masked_) this->vpmovzxbd(d | this->k1 | this->T_z, a);
          else this->vpmovzxbd(d, a);
          this->vcvtdq2ps(d, d);
        }
      } else {
        Address a = in_addr(k, 1);
        if (masked_) {
          tail_bytes(this->rax, 1, false);
          a = this->ptr[this->rsp + this->arg_off_];
        }
        if (f64) {
          this->vpmovzxbd(Xmm(d.getIdx()), a);
          this->vcvtdq2pd(d, Xmm(d.getIdx()));
        } else {
          this->vpmovzxbd(d, a);
          this->vcvtdq2ps(d, d);
        }
      }
      return;
    }
    Address a = in_addr(k, this->esz());
    if (!masked_) return this->vld(d, a);
    if constexpr (kAvx512) {
      if (f64) this->vmovupd(d | this->k1 | this->T_z, a);
      else this->vmovups(d | this->k1 | this->T_z, a);
    } else {
      if (f64) this->vmaskmovpd(d, tail_mask(), a);
      else this->vmaskmovps(d, tail_mask(), a);
    }
  }

  // The operand for value v: a register, or a memory operand (constants, broadcast inputs).
  bool in_memory(int v) const {
    const PValue& pv = p_.vals[size_t(v)];
    return pv.kind == PValue::Const || (pv.kind == PValue::Input && is_bcast(pv.input)) ||
           (pv.kind == PValue::Node && hoisted_[size_t(v)]);
  }
  Xbyak::Address mem_of(int v) {
    const PValue& pv = p_.vals[size_t(v)];
    if (pv.kind == PValue::Const) return this->C(pv.cval);
    if (pv.kind == PValue::Node) return slot(v);
    return this->ptr[this->rsp + splat_off_ + pv.input * kVecBytes];
  }
  // Makes sure a register value is materialised (stream inputs load lazily).
  void ensure(int v) {
    if (in_memory(v) || reg_of_[size_t(v)] >= 0) return;
    const PValue& pv = p_.vals[size_t(v)];
    if (spilled_[size_t(v)]) {
      int r = alloc_val();
      reg_of_[size_t(v)] = r;
      this->vmovups(Vmm(r), slot(v));
      return;
    }
    if (pv.kind != PValue::Input) fail("x86: internal: value {} used before definition", v);
    int r = alloc_val();
    reg_of_[size_t(v)] = r;
    load_input(Vmm(r), pv.input);
  }
  const Xbyak::Operand& opnd(int v, Xbyak::Address& storage) {
    ensure(v);
    if (in_memory(v)) {
      storage = mem_of(v);
      return storage;
    }
    storage_reg_ = Vmm(reg_of_[size_t(v)]);
    return storage_reg_;
  }
  Vmm storage_reg_;
  // A register holding v: its own, or a scratch from the caller's scope.
  Vmm reg(int v) {
    ensure(v);
    if (!in_memory(v)) return Vmm(reg_of_[size_t(v)]);
    Vmm t = this->tmp();
    this->vld(t, mem_of(v));
    return t;
  }

  void store_output(int j, const Vmm& r) {
    using namespace Xbyak;
    const int k = int(p_.input_dtypes.size()) + j;
    const bool f64 = p_.f64;
    const DType dt = p_.output_dtypes[size_t(j)];
    if (dt == DType::BFloat16) return store_bf16(in_addr(k, 2), r);
    if (dt != DType::Bool) {
      Address a = in_addr(k, this->esz());
      if (masked_) {
        if constexpr (kAvx512) f64 ? this->vmovupd(a | this->k1, r) : this->vmovups(a | this->k1, r);
        else f64 ? this->vmaskmovpd(a, tail_mask(), r) : this->vmaskmovps(a, tail_mask(), r);
      } else if (v_.nt) {
        f64 ? this->vmovntpd(a, r) : this->vmovntps(a, r);
      } else {
        this->vst(a, r);
      }
      return;
    }
    typename B::Scope sc(*this);
    Vmm t = this->tmp();
    Xmm xt(t.getIdx());
    Address a = in_addr(k, 1);
    if constexpr (kAvx512) {
      if (f64) this->vcvttpd2dq(Ymm(t.getIdx()), r);
      else this->vcvttps2dq(t, r);
      if (masked_) {
        this->vpmovdb(a | this->k1, t);
      } else {
        this->vpmovdb(xt, t);
        if (f64) this->vmovq(a, xt);
        else this->vmovdqu32(a, xt);
      }
    } else {
      if (f64) {
        this->vcvttpd2dq(xt, r);
        this->vpackssdw(xt, xt, xt);
      } else {
        Vmm u = this->tmp();
        this->vcvttps2dq(t, r);
        this->vextracti128(Xmm(u.getIdx()), t, 1);
        this->vpackssdw(xt, xt, Xmm(u.getIdx()));
      }
      this->vpacksswb(xt, xt, xt);
      if (!masked_) {
        if (f64) this->vmovd(a, xt);
        else this->vmovq(a, xt);
      } else {
        this->vmovq(this->ptr[this->rsp + this->arg_off_], xt);
        tail_bytes(this->rax, 1, true);
      }
    }
  }

  double identity() const {
    switch (p_.red_op) {
      case OpId::Sum: return 0.0;
      case OpId::Prod: return 1.0;
      case OpId::Amax: return -std::numeric_limits<double>::infinity();
      case OpId::Amin: return std::numeric_limits<double>::infinity();
      default: fail("x86: internal: no vector fold for {}", op_name(p_.red_op));
    }
  }
  // Every lane of acc becomes the fold of all lanes: halves swapped and folded, then quarters, ... (each
  // step's shuffle moves lane i + s to lane i).
  void fold_lanes() {
    masked_ = false;
    Vmm a = acc();
    typename B::Scope sc(*this);
    Vmm r = this->tmp();
    auto step = [&](auto&& shuffle) {
      shuffle();
      accumulate(r);
    };
    if constexpr (kAvx512) {
      if (p_.f64) {
        step([&] { this->vshuff64x2(r, a, a, 0x4E); });
        step([&] { this->vshuff64x2(r, a, a, 0xB1); });
        step([&] { this->vpermilpd(r, a, 0x55); });
      } else {
        step([&] { this->vshuff32x4(r, a, a, 0x4E); });
        step([&] { this->vshuff32x4(r, a, a, 0xB1); });
        step([&] { this->vpermilps(r, a, 0x4E); });
        step([&] { this->vpermilps(r, a, 0xB1); });
      }
    } else {
      if (p_.f64) {
        step([&] { this->vperm2f128(r, a, a, 0x01); });
        step([&] { this->vpermilpd(r, a, 0x5); });
      } else {
        step([&] { this->vperm2f128(r, a, a, 0x01); });
        step([&] { this->vpermilps(r, a, 0x4E); });
        step([&] { this->vpermilps(r, a, 0xB1); });
      }
    }
  }

  void accumulate(const Vmm& r) {
    typename B::Scope sc(*this);
    Vmm a = acc();
    if (p_.red_op == OpId::Sum || p_.red_op == OpId::Prod) {
      const bool sum = p_.red_op == OpId::Sum;
      auto op = [&](const Xbyak::Xmm& d, const Vmm& x, const Xbyak::Operand& y) {
        if (sum) p_.f64 ? this->vaddpd(d, x, y) : this->vaddps(d, x, y);
        else p_.f64 ? this->vmulpd(d, x, y) : this->vmulps(d, x, y);
      };
      if (!masked_) return op(a, a, r);
      if constexpr (kAvx512) {
        op(a | this->k1, a, r);
      } else {
        Vmm t = this->tmp();
        this->vld(t, this->C(sum ? 0.0 : 1.0));
        this->blend(t, tail_mask(), r);
        op(a, a, t);
      }
      return;
    }
    // amax / amin, NaN-propagating
    Vmm t = this->tmp();
    if (p_.red_op == OpId::Amax) this->vmx(t, r, a);
    else this->vmn(t, r, a);
    Mask m = this->mtmp();
    this->vcmp(m, r, r, B::kUnord);
    this->blend(t, m, r);
    if (!masked_) return this->vld(a, t);
    if constexpr (kAvx512) {
      p_.f64 ? this->vmovupd(a | this->k1, t) : this->vmovups(a | this->k1, t);
    } else {
      this->blend(a, tail_mask(), t);
    }
  }

  void body(bool masked) {
    masked_ = masked;
    reset_pools();
    for (size_t i = 0; i < p_.vals.size(); ++i) {
      const PValue& pv = p_.vals[i];
      if (pv.kind != PValue::Node || hoisted_[i]) continue;
      if (last_use_[i] < 0 && out_of_[i].empty()) continue;  // dead
      emit_node(int(i));
      Vmm d(reg_of_[i]);
      for (int j : out_of_[i]) store_output(j, d);
      for (int a : pv.args)
        if (last_use_[size_t(a)] == int(i) && reg_of_[size_t(a)] >= 0) release(a);
      if (last_use_[i] < 0) release(int(i));
    }
    // outputs that are inputs, constants or hoisted
    for (size_t j = 0; j < p_.outputs.size(); ++j) {
      int v = p_.outputs[j];
      if (!in_memory(v) && p_.vals[size_t(v)].kind == PValue::Node) continue;
      typename B::Scope sc(*this);
      pinned_ = {v};
      store_output(int(j), reg(v));
    }
    if (p_.red_val >= 0) {
      typename B::Scope sc(*this);
      pinned_ = {p_.red_val};
      accumulate(reg(p_.red_val));
    }
  }
  void release(int v) {
    int r = reg_of_[size_t(v)];
    if (r < 0) return;
    // a register may be shared by nothing else; free it
    free_vals_.push_back(r);
    reg_of_[size_t(v)] = -1;
  }

  void emit_node(int i) {
    using namespace Xbyak;
    const PValue& pv = p_.vals[size_t(i)];
    typename B::Scope sc(*this);
    // operands first (lazy input loads, reloads), then the destination, distinct from every operand
    pinned_ = pv.args;
    for (int a : pv.args) ensure(a);
    Vmm d(alloc_val());
    reg_of_[size_t(i)] = d.getIdx();
    const int a0 = pv.args.empty() ? -1 : pv.args[0];
    const int a1 = pv.args.size() > 1 ? pv.args[1] : -1;
    Address m0 = this->ptr[this->rax], m1 = this->ptr[this->rax];
    auto R0 = [&] { return reg(a0); };
    auto O0 = [&]() -> const Operand& { return opnd(a0, m0); };
    auto O1 = [&]() -> const Operand& { return opnd(a1, m1); };
    auto one = [&](const Vmm& t) { this->vld(t, this->C(1.0)); };
    const bool f64 = p_.f64;
    auto fallback = [&](OpId op) {
      const void* fn = scalar_fn(op, f64);
      if (!fn) fail("x86: no scalar fallback for {}", op_name(op));
      Vmm a = R0();
      if (a1 >= 0) {
        Vmm b = reg(a1);
        this->callout(d, a, &b, fn);
      } else {
        this->callout(d, a, nullptr, fn);
      }
    };
    switch (pv.op) {
      case OpId::Neg: this->vxor(d, R0(), this->Cb(this->sign_bits())); break;
      case OpId::Abs: this->vand(d, R0(), this->Cb(this->abs_bits())); break;
      case OpId::Exp: this->exp_(d, R0()); break;
      case OpId::Log: this->log_(d, R0()); break;
      case OpId::Log1p: {
        Vmm x = R0();
        Vmm u = this->tmp();
        this->vadd(u, x, this->C(1.0));
        this->log_(d, u);
        this->vsub(u, u, this->C(1.0));  // d = log(u) * (x / (u - 1)), or x where u == 1
        this->vdiv(u, x, u);
        this->vmul(d, d, u);
        this->vsub(u, x, this->C(-1.0));  // u - 1 == 0 again for the blend below
        this->vsub(u, u, this->C(1.0));
        Mask m = this->mtmp();
        this->vcmp(m, u, this->C(0.0), B::kEq);
        this->blend(d, m, x);
        this->vcmp(m, x, this->C(this->inf()), B::kEq);
        this->blend(d, m, x);
        break;
      }
      case OpId::Sqrt: this->vsqrt(d, O0()); break;
      case OpId::Rsqrt: {
        Vmm t = this->tmp();
        this->vsqrt(t, O0());
        one(d);
        this->vdiv(d, d, t);
        break;
      }
      case OpId::Sin:
      case OpId::Cos: this->sincos_(d, R0(), pv.op == OpId::Cos, scalar_fn(pv.op, f64)); break;
      case OpId::Tanh: this->tanh_(d, R0()); break;
      case OpId::Sigmoid: this->sigmoid_(d, R0(), false); break;
      case OpId::Silu: this->sigmoid_(d, R0(), true); break;
      case OpId::Relu:
        this->vzero(d);
        this->vmx(d, d, O0());
        break;
      case OpId::Gelu: {
        Vmm x = R0();
        Vmm y = this->tmp();
        this->vmul(y, x, this->C(0.70710678118654752440));
        if (f64) this->callout(d, y, nullptr, scalar_fn(OpId::Erf, true));
        else this->erf_f32(d, y, false);
        this->vadd(d, d, this->C(1.0));
        this->vmul(y, x, this->C(0.5));
        this->vmul(d, d, y);
        break;
      }
      case OpId::GeluTanh: {
        Vmm x = R0();
        Vmm y = this->tmp();
        this->vmul(y, x, x);
        this->vmul(y, y, x);
        this->vmul(y, y, this->C(0.044715));
        this->vadd(y, y, x);
        this->vmul(y, y, this->C(0.79788456080286535588));
        this->tanh_(d, y);
        this->vadd(d, d, this->C(1.0));
        this->vmul(y, x, this->C(0.5));
        this->vmul(d, d, y);
        break;
      }
      case OpId::Erf:
        if (f64) fallback(OpId::Erf);
        else this->erf_f32(d, R0());
        break;
      case OpId::Reciprocal:
        one(d);
        this->vdiv(d, d, O0());
        break;
      case OpId::Sign: {
        Vmm x = R0();
        this->vld(d, x);
        Mask m = this->mtmp();
        this->vcmp(m, x, this->C(0.0), B::kGt);
        this->blend(d, m, this->C(1.0));
        this->vcmp(m, x, this->C(0.0), B::kLt);
        this->blend(d, m, this->C(-1.0));
        break;
      }
      case OpId::LogicalNot: {
        Mask m = this->mtmp();
        this->vcmp(m, R0(), this->C(0.0), B::kEq);
        this->mask_to_01(d, m);
        break;
      }
      case OpId::Add: this->vadd(d, R0(), O1()); break;
      case OpId::Sub: this->vsub(d, R0(), O1()); break;
      case OpId::Mul: this->vmul(d, R0(), O1()); break;
      case OpId::Div: this->vdiv(d, R0(), O1()); break;
      case OpId::Pow: {
        const PValue& b = p_.vals[size_t(a1)];
        double c = b.kind == PValue::Const ? b.cval : 0.5;
        if (b.kind == PValue::Const && c == double(int64_t(c)) && c >= -16 && c <= 16) {
          int64_t e = int64_t(c < 0 ? -c : c);
          if (e == 0) {
            one(d);  // pow(x, 0) = 1, NaN included
            break;
          }
          Vmm x = R0();
          Vmm pw = this->tmp();
          this->vld(pw, x);
          bool first = true;
          while (e) {
            if (e & 1) {
              if (first) this->vld(d, pw);
              else this->vmul(d, d, pw);
              first = false;
            }
            e >>= 1;
            if (e) this->vmul(pw, pw, pw);
          }
          if (c < 0) {
            one(pw);
            this->vdiv(d, pw, d);
          }
        } else {
          fallback(OpId::Pow);
        }
        break;
      }
      case OpId::Maximum:
      case OpId::Minimum: {
        Vmm a = R0();
        if (pv.op == OpId::Maximum) this->vmx(d, a, O1());
        else this->vmn(d, a, O1());
        Mask m = this->mtmp();
        this->vcmp(m, a, a, B::kUnord);
        this->blend(d, m, a);
        break;
      }
      case OpId::Eq:
      case OpId::Ne:
      case OpId::Lt:
      case OpId::Le:
      case OpId::Gt:
      case OpId::Ge: {
        int pred = pv.op == OpId::Eq ? B::kEq : pv.op == OpId::Ne ? B::kNe : pv.op == OpId::Lt ? B::kLt
                 : pv.op == OpId::Le ? B::kLe : pv.op == OpId::Gt ? B::kGt : B::kGe;
        Mask m = this->mtmp();
        this->vcmp(m, R0(), O1(), pred);
        this->mask_to_01(d, m);
        break;
      }
      case OpId::LogicalAnd:
      case OpId::LogicalOr: {
        Mask m = this->mtmp(), n = this->mtmp();
        this->vcmp(m, R0(), this->C(0.0), B::kNe);
        this->vcmp(n, reg(a1), this->C(0.0), B::kNe);
        if (pv.op == OpId::LogicalAnd) this->mask_and(m, n);
        else this->mask_or(m, n);
        this->mask_to_01(d, m);
        break;
      }
      case OpId::Floor: this->vround(d, R0(), 1); break;
      // Of the other rows only where and autocast's casts join a fusion group; reductions are the program's trailing step
      // (accumulate), and the rest never join (backends/x86/fusion_backend.cpp's can_fuse).
#define KILN_REDUCE(Id, name, init, fold) case OpId::Id:
#define KILN_OP(Id, name, kind) case OpId::Id:
#include "core/ops.def"
        if (pv.op == OpId::Cast) {  // a cast to bf16 rounds as a bf16 store would; to f32 keeps the value
          Vmm x = R0();
          if (pv.to_bf16) {
            round_bf16(d, x);
            this->vpslld(d, d, 16);
          } else {
            this->vld(d, x);
          }
          break;
        }
        if (pv.op != OpId::Where) fail("x86: {} is not an elementwise op", op_name(pv.op));
        {
          Mask m = this->mtmp();
          this->vcmp(m, R0(), this->C(0.0), B::kNe);
          Address m2 = this->ptr[this->rax];
          this->vld(d, opnd(pv.args[2], m2));
          this->blend(d, m, O1());
        }
        break;
      // An elementwise row without vector code above runs its ops.def expression per lane (the scalar
      // fallback): correct for every row, so this is the one switch over ops with a default on purpose; a
      // new row fuses from the day it is added and gets vector code when it is worth it (floor_divide has
      // none: its exact rounding is the expression's).
      default: fallback(pv.op); break;
    }
  }
};

template <class Vmm>
class CodeImpl : public Code {
 public:
  CodeImpl(const Program& p, const Variant& v) : gen_(p, v) { gen_.generate(); }
  KernelFn fn() const override { return gen_.template getCode<KernelFn>(); }
  const uint8_t* bytes() const override { return gen_.getCode(); }
  size_t size() const override { return gen_.getSize(); }

 private:
  KernelGen<Vmm> gen_;
};

}  // namespace

std::unique_ptr<Code> emit(const Program& p, Isa isa, const Variant& v) {
  try {
    if (isa == Isa::Avx512) return std::make_unique<CodeImpl<Xbyak::Zmm>>(p, v);
    if (isa == Isa::Avx2) return std::make_unique<CodeImpl<Xbyak::Ymm>>(p, v);
  } catch (const Xbyak::Error& e) {
    fail("x86: code generation failed: {}", e.what());
  }
  fail("x86: this CPU has neither AVX2 nor AVX-512");
}

}  // namespace kiln::x86::detail
