// The x86 JIT backend: every elementwise row of ops.def, where, reductions, broadcasting, strides,
// several outputs, threads, on both ISAs (AVX2 forced through set_isa_cap on an AVX-512 machine),
// f32 and f64, against the eager kernels.
#include <cmath>
#include <limits>
#include <random>

#include "backends/x86/isa.h"
#include "backends/x86/kernel.h"
#include "core/ir/parser.h"
#include "eager/dispatch.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

using test::IsaCap;
std::vector<x86::Isa> isas_to_test() { return test::x86_isas(); }

bool skip_without_avx2() {
  if (kiln::test::x86_jit_on()) return false;
  MESSAGE("skipped: the x86 JIT is off (it needs AVX2 or AVX-512; KILN_X86_ISA=none turns it off)");
  return true;
}

const char* dt_str(DType dt) { return dt == DType::Float64 ? "f64" : "f32"; }

// fn(dt, T) on every ISA to test, for float32 and float64 (T: the dtype's IR spelling)
template <class F>
void each_isa_and_float(F&& fn) {
  for (x86::Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    for (DType dt : {DType::Float32, DType::Float64}) fn(dt, std::string(dt_str(dt)));
  }
}

// Random values in [-lo, hi] plus the special values, n in total (n not a multiple of the vector width).
Tensor special_values(int64_t n, DType dt, uint32_t seed, double scale = 4.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  const double inf = std::numeric_limits<double>::infinity();
  double den = dt == DType::Float64 ? 1e-310 : 1e-40;
  std::vector<double> sp = {0.0, -0.0, inf, -inf, std::nan(""), den, -den, 1e30, -1e30, 1.0, -1.0, 0.5,
                            -0.5, 2.0, 3.0, -3.0, 100.0, -100.0, 1e-5, -1e-5, 0.625, -0.625, 20.0, -20.0, 88.0,
                            -88.0, 700.0, -700.0, 1e6, 3.14159265, -1.5707963};
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i < sp.size() ? sp[i] : u(rng);
  std::shuffle(v.begin(), v.end(), rng);
  return tensor(v, {n}, DType::Float64).to(dt);
}

Tensors run_ir(const std::string& text, const Tensors& in) {
  auto g = ir::parse_ir(text);
  std::string why;
  REQUIRE_MESSAGE(x86::supported(*g, &why), why);
  auto k = x86::compile(*g, "test_kernel");
  return k->run(in);
}

double rtol_for(DType dt, OpId op) {
  if (dt == DType::Float64) return 1e-12;
  (void)op;
  return 2e-5;
}

}  // namespace

TEST_CASE("x86: isa detection and cap") {
  if (skip_without_avx2()) return;
  x86::Isa before = x86::best_isa();  // the CPU's, or less under KILN_X86_ISA (tests/run_matrix.sh's avx2 entry)
  CHECK(before != x86::Isa::None);
  CHECK(int(before) <= int(x86::cpu_isa()));
  {
    IsaCap c(x86::Isa::Avx2);
    CHECK(x86::best_isa() == x86::Isa::Avx2);
  }
  CHECK(x86::best_isa() == before);
  CHECK(x86::isa_name(x86::Isa::Avx512) == "avx512");
}

TEST_CASE("x86: every unary row matches eager (f32, f64, both ISAs, special values)") {
  if (skip_without_avx2()) return;
  for (x86::Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = special_values(1003, dt, 7);
#define KILN_UNARY(Id, name, rule, expr)                                                                       \
  {                                                                                                            \
    const bool logical = DTypeRule::rule == DTypeRule::Logical;                                                \
    std::string text = std::string("graph(%x : ") + dt_str(dt) + "[N]):\n  %0 : " + (logical ? "bool" : dt_str(dt)) + \
                       "[N] = " #name "(%x)\n  return (%0)\n";                                                 \
    CAPTURE(text);                                                                                             \
    CAPTURE(x86::isa_name(isa));                                                                               \
    Tensor want = dispatch1(OpId::Id, {x});                                                                    \
    Tensor got = run_ir(text, {x})[0];                                                                         \
    CHECK(got.dtype() == want.dtype());                                                                        \
    check_close(got, want, rtol_for(dt, OpId::Id), dt == DType::Float64 ? 1e-13 : 1e-6);                        \
  }
#include "core/ops.def"
    }
  }
}

TEST_CASE("x86: every binary row matches eager, with broadcasting") {
  if (skip_without_avx2()) return;
  for (x86::Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor a = special_values(37 * 29, dt, 11).reshape({37, 29});
      Tensor b = special_values(37 * 29, dt, 12).reshape({37, 29});
      Tensor brow = special_values(29, dt, 13);                    // [29]: stride-1 inner, broadcast outer
      Tensor bcol = special_values(37, dt, 14).reshape({37, 1});  // inner stride 0
      Tensor at = special_values(29 * 37, dt, 15).reshape({29, 37}).t();  // non-contiguous
      // a pow exponent set with integers (negative bases) and fractions
      Tensor e = tensor(std::vector<double>(37 * 29, 0.0), {37, 29}, DType::Float64);
      {
        double* ep = e.data_ptr<double>();
        const double ex[] = {2, 3, -1, 0.5, -2, 0, 1.5, 7, -3, 0.25, 4};
        for (int i = 0; i < 37 * 29; ++i) ep[i] = ex[i % 11];
      }
      e = e.to(dt);
#define KILN_BINARY(Id, name, rule, expr)                                                                 \
  {                                                                                                       \
    const bool logical = DTypeRule::rule == DTypeRule::Compare || DTypeRule::rule == DTypeRule::Logical; \
    const std::string T = dt_str(dt), O = logical ? "bool" : T;                                         \
    auto text = [&](const std::string& sa, const std::string& sb) {                                       \
      return "graph(%a : " + T + sa + ", %b : " + T + sb + "):\n  %0 : " + O + "[37,29] = " #name         \
             "(%a, %b)\n  return (%0)\n";                                                                \
    };                                                                                                    \
    CAPTURE(#name);                                                                                       \
    CAPTURE(x86::isa_name(isa));                                                                          \
    CAPTURE(T);                                                                                           \
    const Tensor& bb = OpId::Id == OpId::Pow ? e : b;                                                    \
    check_close(run_ir(text("[37,29]", "[37,29]"), {a, bb})[0], dispatch1(OpId::Id, {a, bb}),            \
                rtol_for(dt, OpId::Id), 1e-6);                                                            \
    check_close(run_ir(text("[37,29]", "[29]"), {a, brow})[0], dispatch1(OpId::Id, {a, brow}),           \
                rtol_for(dt, OpId::Id), 1e-6);                                                            \
    check_close(run_ir(text("[37,29]", "[37,1]"), {a, bcol})[0], dispatch1(OpId::Id, {a, bcol}),         \
                rtol_for(dt, OpId::Id), 1e-6);                                                            \
    check_close(run_ir(text("[37,29]", "[37,29]"), {at, b})[0], dispatch1(OpId::Id, {at, b}),            \
                rtol_for(dt, OpId::Id), 1e-6);                                                            \
  }
#include "core/ops.def"
    }
  }
}

TEST_CASE("x86: per-channel operands over short rows ([N, C, 2, 2], batch norm's shape at ResNet's layer3)") {
  // The per-channel operands are expanded over [C, H, W] so the rows are long; the per-sample one is
  // as large as the group and stays as it is. Values as eager's, and a full sum of the same chain.
  if (skip_without_avx2()) return;
  each_isa_and_float([&](DType dt, const std::string& T) {
    Tensor x = test::seq({5, 7, 2, 2}, 0.37, 0.2, dt), m = test::seq({1, 7, 1, 1}, 0.11, 0.5, dt);
    Tensor w = test::seq({7, 1, 1}, 0.23, 0.3, dt), s = test::seq({5, 1, 1, 1}, 0.19, 0.4, dt);
    std::string text = "graph(%x : " + T + "[5,7,2,2], %m : " + T + "[1,7,1,1], %w : " + T + "[7,1,1], %s : " + T +
                       "[5,1,1,1]):\n  %0 : " + T + "[5,7,2,2] = sub(%x, %m)\n  %1 : " + T +
                       "[5,7,2,2] = mul(%0, %w)\n  %2 : " + T + "[5,7,2,2] = add(%1, %s)\n  %3 : " + T +
                       "[5,7,2,2] = relu(%2)\n  %4 : " + T + "[] = sum[keepdim=false](%3)\n  return (%3, %4)\n";
    Tensor want = dispatch1(OpId::Relu, {dispatch1(OpId::Add, {dispatch1(OpId::Mul, {dispatch1(OpId::Sub, {x, m}), w}), s})});
    Tensors got = run_ir(text, {x, m, w, s});
    check_close(got[0], want, 1e-6, 1e-6);
    check_close(got[1], dispatch1(OpId::Sum, {want}, Attrs().set("dims", Shape{}).set("keepdim", false)), 1e-5, 1e-6);
  });
}

TEST_CASE("x86: pow with constant exponents, constants, where, bool inputs and outputs") {
  if (skip_without_avx2()) return;
  each_isa_and_float([&](DType dt, const std::string& T) {
    Tensor x = special_values(517, dt, 21);
    for (double c : {2.0, 3.0, -1.0, -2.0, 0.0, 1.0, 0.5, 2.5, 16.0}) {
      CAPTURE(c);
      std::string text = "graph(%x : " + T + "[N]):\n  %c : " + T + "[] = prim::Constant[value=[" +
                         std::to_string(c) + "]]()\n  %0 : " + T + "[N] = pow(%x, %c)\n  return (%0)\n";
      Tensor ct = tensor({c}, {}, DType::Float64).to(dt);
      check_close(run_ir(text, {x})[0], dispatch1(OpId::Pow, {x, ct}), dt == DType::Float64 ? 1e-13 : 1e-5,
                  1e-6);
    }
    Tensor y = special_values(517, dt, 22);
    Tensor cond = dispatch1(OpId::Gt, {y, tensor({0.0}, {}, DType::Float64).to(dt)});
    // where with a bool input, computed comparisons and a bool output
    std::string text = "graph(%c : bool[N], %x : " + T + "[N], %y : " + T + "[N]):\n  %0 : " + T +
                       "[N] = where(%c, %x, %y)\n  %1 : bool[N] = lt(%x, %y)\n  %2 : " + T +
                       "[N] = where(%1, %x, %0)\n  %3 : bool[N] = logical_not(%c)\n  return (%2, %3, %1)\n";
    Tensors got = run_ir(text, {cond, x, y});
    Tensor w0 = dispatch1(OpId::Where, {cond, x, y});
    Tensor w1 = dispatch1(OpId::Lt, {x, y});
    check_close(got[0], dispatch1(OpId::Where, {w1, x, w0}), 0, 0);
    check_close(got[1], dispatch1(OpId::LogicalNot, {cond}), 0, 0);
    check_close(got[2], w1, 0, 0);
    // broadcast bool input (inner stride 0) and a 0-d input
    Tensor c2 = cond.narrow(0, 0, 7).reshape({7, 1});
    Tensor s = tensor({1.25}, {}, DType::Float64).to(dt);
    Tensor x2 = x.narrow(0, 0, 7 * 61).reshape({7, 61});
    std::string t2 = "graph(%c : bool[7,1], %x : " + T + "[7,61], %s : " + T + "[]):\n  %0 : " + T +
                     "[7,61] = where(%c, %x, %s)\n  return (%0)\n";
    check_close(run_ir(t2, {c2, x2, s})[0], dispatch1(OpId::Where, {c2, x2, s}), 0, 0);
  });
}

TEST_CASE("x86: nodes of broadcast operands alone are computed once per run, before the loop, as eager") {
  // sqrt, pow with a variable exponent (the scalar fallback, called before the loop), a where on a broadcast
  // bool and a division by the result: a layer norm's rstd shape, bits equal to eager's
  if (skip_without_avx2()) return;
  each_isa_and_float([&](DType dt, const std::string& T) {
    Tensor x = special_values(6 * 37, dt, 31).reshape({6, 37});
    Tensor s = dispatch1(OpId::Abs, {test::seq({6, 1}, 0.41, 0.3, dt)});
    Tensor e = tensor({1.5}, {}, DType::Float64).to(dt);
    Tensor c = dispatch1(OpId::Gt, {test::seq({6, 1}, 0.7, -0.5, dt), tensor({0.0}, {}, DType::Float64).to(dt)});
    std::string text = "graph(%x : " + T + "[6,37], %s : " + T + "[6,1], %e : " + T + "[], %c : bool[6,1]):\n" +
                       "  %0 : " + T + "[6,1] = sqrt(%s)\n  %1 : " + T + "[6,1] = pow(%s, %e)\n" +
                       "  %2 : " + T + "[6,1] = where(%c, %0, %1)\n  %3 : " + T + "[6,37] = div(%x, %2)\n" +
                       "  %4 : " + T + "[6,37] = mul(%3, %0)\n  return (%4)\n";
    Tensor sq = dispatch1(OpId::Sqrt, {s});
    Tensor den = dispatch1(OpId::Where, {c, sq, dispatch1(OpId::Pow, {s, e})});
    Tensor want = dispatch1(OpId::Mul, {dispatch1(OpId::Div, {x, den}), sq});
    check_close(run_ir(text, {x, s, e, c})[0], want, dt == DType::Float64 ? 1e-13 : 1e-6, 0);
  });
}

TEST_CASE("x86: reductions over all dims and the last dim, fused") {
  if (skip_without_avx2()) return;
  for (x86::Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    for (DType dt : {DType::Float32, DType::Float64}) {
      const std::string T = dt_str(dt);
      Tensor x = test::seq({33, 45}, 0.37, 0.2, dt);
      Tensor y = test::seq({45}, 0.11, 0.5, dt);
      for (const char* red : {"sum", "amax", "amin", "prod"}) {
        for (const char* dims : {"[0, 1]", "[1]", "[-1]", "[]"}) {
          for (bool keep : {false, true}) {
            CAPTURE(red);
            CAPTURE(dims);
            CAPTURE(keep);
            bool all = std::string(dims) != "[1]" && std::string(dims) != "[-1]";
            std::string attrs = std::string("[dims=") + dims + ", keepdim=" + (keep ? "true" : "false") + "]";
            if (std::string(dims) == "[]") attrs = std::string("[keepdim=") + (keep ? "true" : "false") + "]";
            std::string text = "graph(%x : " + T + "[33,45], %y : " + T + "[45]):\n  %0 : " + T +
                               "[33,45] = mul(%x, %y)\n  %1 : " + T + "[33,45] = exp(%0)\n  %2 : " + T + "[*] = " +
                               red + attrs + "(%1)\n  return (%2, %1)\n";
            Tensor e = dispatch1(OpId::Exp, {dispatch1(OpId::Mul, {x, y})});
            OpId rop = std::string(red) == "sum" ? OpId::Sum : std::string(red) == "amax" ? OpId::Amax
                     : std::string(red) == "amin" ? OpId::Amin : OpId::Prod;
            Attrs a;
            a.set("dims", all ? Shape{} : Shape{1});
            a.set("keepdim", keep);
            Tensor want = dispatch1(rop, {e}, a);
            Tensors got = run_ir(text, {x, y});
            double rt = rop == OpId::Prod ? 1e-3 : (dt == DType::Float64 ? 1e-12 : 1e-5);
            check_close(got[0], want, rt, 1e-5);
            check_close(got[1], e, dt == DType::Float64 ? 1e-13 : 1e-6, 1e-6);
          }
        }
      }
      // NaN propagates through amax / amin
      Tensor n = test::seq({100}, 0.3, 0.1, dt);
      n = n.clone();
      if (dt == DType::Float32) n.data_ptr<float>()[57] = NAN;
      else n.data_ptr<double>()[57] = NAN;
      std::string t2 = "graph(%x : " + T + "[100]):\n  %0 : " + T + "[] = amax(%x)\n  return (%0)\n";
      CHECK(std::isnan(run_ir(t2, {n})[0].item<double>()));
    }
  }
}

TEST_CASE("x86: large groups split across threads, non-temporal stores, the 8-op chain") {
  if (skip_without_avx2()) return;
  for (x86::Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    for (int th : {1, 2}) {
      kiln::test::NumThreads threads(th);
      const int64_t n = (int64_t(1) << 22) + 13;
      Tensor x = randn({n});
      std::string text =
          "graph(%x : f32[N]):\n"
          "  %c1 : f32[] = prim::Constant[value=[1.5]]()\n"
          "  %c2 : f32[] = prim::Constant[value=[0.5]]()\n"
          "  %c3 : f32[] = prim::Constant[value=[0.1]]()\n"
          "  %0 : f32[N] = mul(%x, %c1)\n"
          "  %1 : f32[N] = add(%0, %c2)\n"
          "  %2 : f32[N] = tanh(%1)\n"
          "  %3 : f32[N] = mul(%2, %x)\n"
          "  %4 : f32[N] = sigmoid(%3)\n"
          "  %5 : f32[N] = exp(%x)\n"
          "  %6 : f32[N] = mul(%5, %c3)\n"
          "  %7 : f32[N] = add(%4, %6)\n"
          "  %8 : f32[N] = sub(%7, %x)\n"
          "  %9 : f32[] = sum(%8)\n"
          "  return (%8, %9)\n";
      Tensors got = run_ir(text, {x});
      Tensor want = sigmoid(tanh(x * 1.5 + 0.5) * x) + exp(x) * 0.1 - x;
      check_close(got[0], want, 1e-5, 1e-6);
      check_close(got[1], sum(want.to(DType::Float64)).to(DType::Float32), 1e-4, 1e-2);
      // a cheap (memory-bound) group over 16 MiB streams its output with non-temporal stores
      std::string cheap =
          "graph(%x : f32[N], %y : f32[N]):\n  %0 : f32[N] = mul(%x, %y)\n  %1 : f32[N] = add(%0, %x)\n"
          "  %2 : bool[N] = gt(%1, %y)\n  return (%1, %2)\n";
      Tensor y = randn({n});
      Tensors g2 = run_ir(cheap, {x, y});
      check_close(g2[0], x * y + x, 1e-6, 1e-6);
      check_close(g2[1], dispatch1(OpId::Gt, {g2[0], y}), 0, 0);
    }
  }
}

TEST_CASE("x86: kernel name, disassembly, code size, unsupported groups") {
  if (skip_without_avx2()) return;
  auto g = ir::parse_ir("graph(%x : f32[N], %y : f32[N]):\n  %0 : f32[N] = mul(%x, %y)\n  %1 : f32[N] = exp(%0)\n  return (%1)\n");
  auto k = x86::compile(*g, "kiln_fused_2_mul_exp");
  CHECK(k->name() == "kiln_fused_2_mul_exp");
  CHECK(k->code_size() > 0);
  std::string d = k->disassembly();
  CHECK(d.find("kiln_fused_2_mul_exp") != std::string::npos);
  CHECK(d.size() > 100);
  auto k2 = x86::compile(*g);
  CHECK(k2->name() == "kiln_fused_2_mul_exp");
  auto bad = ir::parse_ir("graph(%x : f32[2,2], %y : f32[2,2]):\n  %0 : f32[2,2] = matmul(%x, %y)\n  return (%0)\n");
  std::string why;
  CHECK_FALSE(x86::supported(*bad, &why));
  CHECK(why.find("matmul") != std::string::npos);
  test::check_error([&] { x86::compile(*bad, "x"); }, "matmul");
  // wrong dtype at run time
  test::check_error([&] { k->run({randn({3}).to(DType::Float64), randn({3}).to(DType::Float64)}); }, "dtype");
  // empty and 0-d inputs
  CHECK(k->run({randn({0}), randn({0})})[0].numel() == 0);
  Tensor s = tensor({0.5}, {}, DType::Float32);
  check_close(k->run({s, s})[0], exp(s * s), 1e-6, 1e-7);
}

TEST_CASE("x86: more live values than registers spill to the stack") {
  if (skip_without_avx2()) return;
  const int n = 26;
  std::string text = "graph(";
  for (int i = 0; i < n; ++i) text += (i ? ", " : "") + std::string("%x") + std::to_string(i) + " : f64[5,67]";
  text += "):\n";
  for (int i = 0; i < n; ++i) text += "  %e" + std::to_string(i) + " : f64[5,67] = exp(%x" + std::to_string(i) + ")\n";
  // pairwise tree: every exp is live before the first add
  std::vector<std::string> level;
  for (int i = 0; i < n; ++i) level.push_back("%e" + std::to_string(i));
  int t = 0;
  while (level.size() > 1) {
    std::vector<std::string> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      std::string v = "%t" + std::to_string(t++);
      text += "  " + v + " : f64[5,67] = add(" + level[i] + ", " + level[i + 1] + ")\n";
      next.push_back(v);
    }
    if (level.size() % 2) next.push_back(level.back());
    level = next;
  }
  text += "  %s : f64[] = sum(" + level[0] + ")\n  return (" + level[0] + ", %s, %e3)\n";
  Tensors in;
  for (int i = 0; i < n; ++i) in.push_back(test::seq({5, 67}, 0.1 + 0.01 * i, 0.3 * i));
  for (x86::Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    Tensor want = exp(in[0]);
    for (int i = 1; i < n; ++i) want = want + exp(in[size_t(i)]);
    Tensors got = run_ir(text, in);
    check_close(got[0], want, 1e-12, 1e-12);
    check_close(got[1], sum(want), 1e-12, 1e-12);
    check_close(got[2], exp(in[3]), 1e-13, 1e-13);
  }
}
