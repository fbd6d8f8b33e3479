// GEMM epilogue fusion (jit/passes/fuse_gemm_epilogue.cpp, backends/cpu/gemm_group.cpp,
// eager/cpu/gemm_epilogue.cpp): which chains become gemm groups and which do not, compiled ==
// interpreted for every epilogue with plain and transposed weights at odd sizes, on oneDNN and on the
// fallback (matmul, then the compiled epilogue), the primitive cache, and the group's text form,
// shape propagation and interpretation.
#include <atomic>
#include <thread>

#include "backends/fusion_backend.h"
#include "eager/autocast/autocast.h"
#include "eager/cpu/gemm_epilogue.h"
#include "eager/cpu/matmul_bf16.h"
#include "eager/cpu/conv_onednn.h"
#include "jit/group_kinds.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

enum class Bias { None, Vec, Row };  // none, [N], [1,N]
enum class Act { None, Relu, Gelu };

struct Case {
  int64_t M, K, N;
  Bias bias;
  Act act;
  bool residual;
  bool transposed;  // the weight is [N,K] and multiplied as w.t(), as nn::Linear does
};

std::string str(const Case& c) {
  const char* bias[] = {"none", "[N]", "[1,N]"};
  const char* act[] = {"none", "relu", "gelu"};
  return fmt::format("[{},{}]x[{},{}] bias {} act {} residual {} transposed {}", c.M, c.K, c.K, c.N,
                     bias[int(c.bias)], act[int(c.act)], c.residual, c.transposed);
}

// The traced epilogue(x @ w) of a case and inputs for it.
Function traced(const Case& c, std::vector<Tensor>& inputs) {
  inputs = {randn({c.M, c.K}), c.transposed ? randn({c.N, c.K}) : randn({c.K, c.N})};
  if (c.bias == Bias::Vec) inputs.push_back(randn({c.N}));
  if (c.bias == Bias::Row) inputs.push_back(randn({1, c.N}));
  if (c.residual) inputs.push_back(randn({c.M, c.N}));
  return trace(
      [c](const Tensors& in) {
        size_t i = 2;
        Tensor y = matmul(in[0], c.transposed ? in[1].t() : in[1]);
        if (c.bias != Bias::None) y = y + in[i++];
        if (c.act == Act::Relu) y = relu(y);
        if (c.act == Act::Gelu) y = gelu(y, "none");
        if (c.residual) y = y + in[i++];
        return Tensors{y};
      },
      inputs);
}

std::vector<const ir::Node*> gemm_groups(const ir::Graph& g) {
  std::vector<const ir::Node*> out;
  for (const ir::Node* n : g.block()->nodes())
    if (jit::group_kind(*n) == jit::kGemmKind) out.push_back(n);
  return out;
}

int count_op(const ir::Graph& g, OpId op) {
  int k = 0;
  for (const ir::Node* n : g.block()->nodes()) k += n->is_op(op);
  return k;
}

// Sets whether gemm groups run on oneDNN for the guard's lifetime.
struct OnednnGemm {
  explicit OnednnGemm(bool on) : saved_(cpu::onednn_gemm_enabled()) { cpu::set_onednn_gemm(on); }
  ~OnednnGemm() { cpu::set_onednn_gemm(saved_); }
  bool saved_;
};

// The paths a gemm group can take here: oneDNN where the build has it, and always the fallback.
std::vector<bool> onednn_modes() {
  std::vector<bool> modes{false};
  if (cpu::onednn_gemm_enabled()) modes.push_back(true);
  return modes;
}

// Compiles the case's trace with oneDNN on or off and checks: one gemm group holding the matmul,
// nothing else left but the weight's view, and results equal to the interpreter's.
void check_case(const Case& c, bool onednn) {
  CAPTURE(str(c));
  CAPTURE(onednn);
  OnednnGemm mode(onednn);
  std::vector<Tensor> in;
  Function f = traced(c, in);
  std::vector<Tensor> want = f(in);
  Function compiled = compile(f);
  int64_t runs = cpu::gemm_epilogue_stats().runs, allocs = memory_stats().alloc_count;
  std::vector<Tensor> got = compiled(in);
  CHECK(cpu::gemm_epilogue_stats().runs - runs == (onednn ? 1 : 0));  // the path asked for ran
  // oneDNN writes the result and allocates nothing else (the transposed weight is not copied); the
  // fallback writes the product, then the result (its epilogue one x86 kernel; op by op without the JIT)
  if (onednn || kiln::test::x86_jit_on()) CHECK(memory_stats().alloc_count - allocs == (onednn ? 1 : 2));
  REQUIRE(got.size() == 1);
  // Sums of K products in another order (oneDNN's blocking against dnnl_sgemm's or OpenBLAS's).
  check_close(got[0], want[0], 1e-4, 1e-4);
  std::vector<IValue> ins(in.begin(), in.end());
  auto g = compiled_graph(compiled, ins);
  CAPTURE(g->str());
  auto groups = gemm_groups(*g);
  REQUIRE(groups.size() == 1);
  CHECK(count_op(*g, OpId::Matmul) == 0);
  CHECK(count_op(*g, OpId::Permute) == (c.transposed ? 1 : 0));
  // every epilogue node went into the group, none into an elementwise one
  CHECK(g->block()->nodes().begin() != g->block()->nodes().end());
  for (const ir::Node* n : g->block()->nodes())
    CHECK((n->is_op(OpId::Permute) || jit::group_kind(*n) == jit::kGemmKind));
  jit::CacheStats st = compile_stats(compiled);
  CHECK(st.gemm_kernels == 1);
  CHECK(st.kernels == 0);
  CHECK(st.interpreted_groups == 0);
}

const ir::Node* only_gemm_group(const ir::Graph& g) {
  auto groups = gemm_groups(g);
  REQUIRE(groups.size() == 1);
  return groups[0];
}

// fn traced on `in` and compiled, the compiled outputs checked against the traced ones (within tol),
// and the compiled graph for those inputs.
struct Compiled {
  Function fn;
  std::shared_ptr<const ir::Graph> graph;
};

Compiled compile_checked(const std::function<Tensors(const Tensors&)>& fn, const std::vector<Tensor>& in, double tol) {
  Function f = trace(fn, in);
  Function c = compile(f);
  std::vector<Tensor> want = f(in), got = c(in);
  for (size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], tol, tol);
  return {c, compiled_graph(c, {in.begin(), in.end()})};
}

}  // namespace

TEST_CASE("gemm epilogue: every epilogue, plain and transposed weights, compiled == interpreted") {
  manual_seed(11);
  const std::array<int64_t, 3> shapes[] = {{7, 33, 257}, {33, 257, 7}};
  for (bool onednn : onednn_modes())
    for (auto [M, K, N] : shapes)
      for (Bias bias : {Bias::None, Bias::Vec, Bias::Row})
        for (Act act : {Act::None, Act::Relu, Act::Gelu})
          for (bool residual : {false, true})
            for (bool transposed : {false, true}) {
              if (bias == Bias::None && act == Act::None && !residual) continue;
              check_case({M, K, N, bias, act, residual, transposed}, onednn);
            }
}

TEST_CASE("gemm epilogue: odd sizes 1, 7, 33, 257 in every dim") {
  manual_seed(12);
  const int64_t sizes[] = {1, 7, 33, 257};
  for (bool onednn : onednn_modes())
    for (int64_t M : sizes)
      for (int64_t K : sizes)
        for (int64_t N : sizes) {
          check_case({M, K, N, Bias::Vec, Act::Relu, false, true}, onednn);
          check_case({M, K, N, Bias::Row, Act::Gelu, true, false}, onednn);
        }
}

TEST_CASE("gemm epilogue: a matmul whose result is read elsewhere is not fused") {
  manual_seed(13);
  std::vector<Tensor> in = {randn({7, 33}), randn({5, 33}), randn({5})};
  auto [c, g] = compile_checked(
      [](const Tensors& x) {
        Tensor y = matmul(x[0], x[1].t());
        return Tensors{relu(y + x[2]), y * 2.0};
      },
      in, 1e-5);
  CAPTURE(g->str());
  CHECK(gemm_groups(*g).empty());
  CHECK(count_op(*g, OpId::Matmul) == 1);
  CHECK(compile_stats(c).gemm_kernels == 0);
}

TEST_CASE("gemm epilogue: the chain stops at a step whose result is read elsewhere") {
  manual_seed(14);
  std::vector<Tensor> in = {randn({7, 33}), randn({5, 33}), randn({5})};
  auto g = compile_checked(
               [](const Tensors& x) {
                 Tensor h = matmul(x[0], x[1].t()) + x[2];
                 return Tensors{relu(h), h};
               },
               in, 1e-5)
               .graph;
  CAPTURE(g->str());
  const ir::Node* group = only_gemm_group(*g);
  CHECK(group->attrs().s("name") == "gemm_matmul_add");
  CHECK(group->outputs().size() == 1);
  CHECK(count_op(*g, OpId::Relu) == 1);
}

TEST_CASE("gemm epilogue: what the pass leaves alone") {
  manual_seed(15);
  auto unfused = [](const std::function<Tensors(const Tensors&)>& fn, const std::vector<Tensor>& in) {
    auto g = compile_checked(fn, in, 1e-5).graph;
    CAPTURE(g->str());
    CHECK(gemm_groups(*g).empty());
  };
  SUBCASE("float64") {
    unfused([](const Tensors& x) { return Tensors{relu(matmul(x[0], x[1]) + x[2])}; },
            {randn({4, 3}).to(DType::Float64), randn({3, 5}).to(DType::Float64), randn({5}).to(DType::Float64)});
  }
  SUBCASE("batched matmul: a batch of matrices on the right") {
    unfused([](const Tensors& x) { return Tensors{relu(matmul(x[0], x[1]) + x[2])}; },
            {randn({2, 4, 3}), randn({2, 3, 5}), randn({5})});
  }
  SUBCASE("a bias per row, not per column") {
    unfused([](const Tensors& x) { return Tensors{matmul(x[0], x[1]) + x[2]}; }, {randn({4, 3}), randn({3, 5}), randn({4, 1})});
  }
  SUBCASE("an add that broadcasts the product to a larger shape") {
    unfused([](const Tensors& x) { return Tensors{matmul(x[0], x[1]) + x[2]}; }, {randn({4, 3}), randn({3, 5}), randn({2, 4, 5})});
  }
  SUBCASE("an activation oneDNN is not asked for") {
    unfused([](const Tensors& x) { return Tensors{sigmoid(matmul(x[0], x[1]))}; }, {randn({4, 3}), randn({3, 5})});
  }
  SUBCASE("a lone matmul") {
    unfused([](const Tensors& x) { return Tensors{matmul(x[0], x[1])}; }, {randn({4, 3}), randn({3, 5})});
  }
}

TEST_CASE("gemm epilogue: a Linear on [B, T, C] is one GEMM over B*T rows with its epilogue") {
  manual_seed(19);
  for (bool onednn : onednn_modes()) {
    CAPTURE(onednn);
    OnednnGemm mode(onednn);
    // a GPT's MLP: bias, gelu, then the residual of the [B, T, N] result's shape; a [1, 1, N] bias
    std::vector<Tensor> in = {randn({3, 5, 16}), randn({24, 16}), randn({24}), randn({3, 5, 24}), randn({1, 1, 24}),
                              randn({24, 16})};
    auto [c, g] = compile_checked(
        [](const Tensors& x) {
          return Tensors{gelu(matmul(x[0], x[1].t()) + x[2], "none") + x[3], relu(matmul(x[0], x[5].t()) + x[4])};
        },
        in, 1e-4);
    CAPTURE(g->str());
    std::vector<const ir::Node*> groups = gemm_groups(*g);
    REQUIRE(groups.size() == 2);
    CHECK(groups[0]->attrs().s("name") == "gemm_matmul_add_gelu_add");
    CHECK(groups[1]->attrs().s("name") == "gemm_matmul_add_relu");
    CHECK(groups[0]->output()->type().str() == "f32[3,5,24]");
    CHECK(compile_stats(c).gemm_kernels == 2);
    int64_t runs = cpu::gemm_epilogue_stats().runs;
    c(in);
    CHECK(cpu::gemm_epilogue_stats().runs - runs == (onednn ? 2 : 0));  // the rows flattened, not declined
  }
}

// Under bf16 autocast a Linear's matmul is bf16, and its gelu and the float32 residual's add were eager kernels
// converting to float32 and back; now oneDNN applies them to the float32 accumulator in the GEMM (the product
// is not rounded to bf16 first). A bf16 + bf16 add stays out.
TEST_CASE("gemm epilogue: an autocast bf16 Linear takes its gelu and a float32 residual, not a bf16 add") {
  manual_seed(23);
  for (bool onednn : onednn_modes()) {
    CAPTURE(onednn);
    OnednnGemm mode(onednn);
    std::vector<Tensor> in = {randn({3, 5, 16}), randn({24, 16}), randn({3, 5, 24}), randn({24, 16}), randn({24, 16})};
    auto [c, g] = compile_checked(
        [](const Tensors& x) {
          AutocastGuard autocast(DType::BFloat16);
          return Tensors{gelu(matmul(x[0], x[1].t()), "none"), matmul(x[0], x[3].t()) + x[2].to(DType::BFloat16),
                         gelu(matmul(x[0], x[4].t()), "none") + x[2]};
        },
        in, 2e-2);
    CAPTURE(g->str());
    std::vector<const ir::Node*> groups = gemm_groups(*g);
    REQUIRE(groups.size() == 2);
    CHECK(groups[0]->attrs().s("name") == "gemm_matmul_gelu");
    CHECK(groups[0]->output()->type().str() == "bf16[3,5,24]");
    CHECK(groups[1]->attrs().s("name") == "gemm_matmul_gelu_add");
    CHECK(groups[1]->output()->type().str() == "f32[3,5,24]");
    CHECK(count_op(*g, OpId::Gelu) == 0);
    CHECK(count_op(*g, OpId::Matmul) == 1);  // the bf16 add keeps eager's rounding of the product first
    int64_t runs = cpu::gemm_epilogue_stats().runs;
    std::vector<Tensor> got = c(in);
    CHECK(cpu::gemm_epilogue_stats().runs - runs == (onednn && cpu::bf16_gemm_available() ? 2 : 0));
    REQUIRE(got.size() == 3);
    CHECK(got[0].dtype() == DType::BFloat16);
    CHECK(got[2].dtype() == DType::Float32);
    // against float32 throughout (bf16 inputs: errors grow with K, as in test_autocast)
    check_close(got[0].to(DType::Float32), gelu(matmul(in[0], in[1].t()), "none"), 2e-2, 1e-1);
    check_close(got[2], gelu(matmul(in[0], in[4].t()), "none") + in[2], 2e-2, 1e-1);
  }
}

TEST_CASE("gemm epilogue: steps after the epilogue are fused vertically, as before") {
  manual_seed(16);
  std::vector<Tensor> in = {randn({8, 16}), randn({4, 16}), randn({4})};
  Function f = trace([](const Tensors& x) { return Tensors{tanh(relu(matmul(x[0], x[1].t()) + x[2]) * 3.0) + 1.0}; }, in);
  Function c = compile(f);
  check_close(c(in)[0], f(in)[0], 1e-4, 1e-4);
  auto g = compiled_graph(c, {in.begin(), in.end()});
  CAPTURE(g->str());
  CHECK(only_gemm_group(*g)->attrs().s("name") == "gemm_matmul_add_relu");
  int fused = 0;
  for (const ir::Node* n : g->block()->nodes()) fused += n->prim() == ir::Prim::FusionGroup && jit::group_kind(*n) != jit::kGemmKind;
  CHECK(fused == 1);
}

TEST_CASE("gemm epilogue: horizontal fusion keeps two independent gemm groups apart") {
  manual_seed(17);
  std::vector<Tensor> in = {randn({8, 16}), randn({12, 16}), randn({12}), randn({12, 16}), randn({12})};
  auto [c, g] = compile_checked(
      [](const Tensors& x) {
        return Tensors{relu(matmul(x[0], x[1].t()) + x[2]), gelu(matmul(x[0], x[3].t()) + x[4], "none")};
      },
      in, 1e-4);
  CAPTURE(g->str());
  CHECK(gemm_groups(*g).size() == 2);
  CHECK(compile_stats(c).gemm_kernels == 2);
  CHECK(compile_stats(c).interpreted_groups == 0);
}

TEST_CASE("gemm epilogue: stacked layers with a residual read by the next layer") {
  manual_seed(18);
  std::vector<Tensor> in = {randn({9, 20}), randn({20, 20}), randn({20}), randn({20, 20}), randn({20})};
  Function f = trace(
      [](const Tensors& x) {
        Tensor h = relu(matmul(x[0], x[1].t()) + x[2]);
        Tensor y = gelu(matmul(h, x[3].t()) + x[4], "none") + h;
        return Tensors{relu(matmul(y, x[1]) + x[2])};
      },
      in);
  for (bool onednn : onednn_modes()) {
    OnednnGemm mode(onednn);
    Function c = compile(f);
    check_close(c(in)[0], f(in)[0], 1e-4, 1e-4);
    auto g = compiled_graph(c, {in.begin(), in.end()});
    CAPTURE(g->str());
    CHECK(gemm_groups(*g).size() == 3);
  }
}

TEST_CASE("gemm epilogue: operands with odd strides, and a symbolic batch dim") {
  manual_seed(19);
  SUBCASE("a strided input is copied, a transposed one read in place") {
    // x[:, ::2] has no unit stride; x.t() of a [K,M] input is column-major; so is the residual
    std::vector<Tensor> in = {randn({7, 66}), randn({33, 7}), randn({33, 5}), randn({5}), randn({5, 7})};
    Function f = trace(
        [](const Tensors& x) {
          return Tensors{relu(matmul(x[0].slice(1, 0, std::nullopt, 2), x[2]) + x[3]),
                         gelu(matmul(x[1].t(), x[2]) + x[3], "none") + x[4].t()};
        },
        in);
    for (bool onednn : onednn_modes()) {
      OnednnGemm mode(onednn);
      Function c = compile(f);
      std::vector<Tensor> want = f(in), got = c(in);
      for (size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], 1e-4, 1e-4);
      CHECK(compile_stats(c).gemm_kernels == 2);
    }
  }
  SUBCASE("one entry serves every batch size; oneDNN primitives are made once per size") {
    std::vector<Tensor> w = {randn({16, 24}), randn({16})};
    Function f = trace([](const Tensors& x) { return Tensors{relu(matmul(x[0], x[1].t()) + x[2])}; },
                       {randn({3, 24}), w[0], w[1]});
    jit::CompileOptions o;
    o.recompile_limit = 2;
    Function c = compile(f, o);
    for (int64_t m : {3, 5, 9, 17, 9, 3}) {
      CAPTURE(m);
      std::vector<Tensor> in = {randn({m, 24}), w[0], w[1]};
      cpu::GemmEpilogueStats s0 = cpu::gemm_epilogue_stats();
      check_close(c(in)[0], f(in)[0], 1e-4, 1e-4);
      cpu::GemmEpilogueStats s1 = cpu::gemm_epilogue_stats();
      check_close(c(in)[0], f(in)[0], 1e-4, 1e-4);
      cpu::GemmEpilogueStats s2 = cpu::gemm_epilogue_stats();
      CHECK(s2.primitives_created == s1.primitives_created);  // the second call finds the first's primitive
      CHECK(s1.primitives_created - s0.primitives_created <= 1);
      CHECK(s2.runs - s1.runs == (cpu::onednn_gemm_enabled() ? 1 : 0));
    }
    jit::CacheStats st = compile_stats(c);
    CHECK(st.symbolic_dims == 1);
    auto g = compiled_graph(c, {randn({4, 24}), w[0], w[1]});
    CAPTURE(g->str());
    CHECK(g->inputs()[0]->type().str() == "f32[s0_0,24]");
    CHECK(gemm_groups(*g).size() == 1);
  }
}

TEST_CASE("gemm epilogue: compiled training through Linear+GELU layers") {
  manual_seed(20);
  auto mlp = nn::Sequential({std::make_shared<nn::Linear>(12, 24), std::make_shared<nn::GELU>(),
                             std::make_shared<nn::Linear>(24, 6), std::make_shared<nn::ReLU>()});
  Tensor x = randn({5, 12});
  Function f = trace_module(mlp, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(mlp(in[0]))}; }, {x});
  Function c = compile(f);
  Tensor le = f({x})[0];
  le.backward();
  std::vector<Tensor> ge;
  for (Tensor& p : mlp.parameters()) {
    ge.push_back(p.grad().clone());
    p.set_grad(Tensor());
  }
  Tensor lc = c({x})[0];
  lc.backward();
  check_close(lc, le, 1e-5, 1e-5);
  auto ps = mlp.parameters();
  for (size_t i = 0; i < ps.size(); ++i) check_close(ps[i].grad(), ge[i], 1e-4, 1e-5);
  CHECK(compile_stats(c).eager_calls == 0);
  // and without grad the whole forward is two gemm groups
  NoGradGuard off;
  check_close(c({x})[0], le, 1e-5, 1e-5);
  auto g = compiled_graph(c, {x});
  CAPTURE(g->str());
  CHECK(gemm_groups(*g).size() == 2);
}

TEST_CASE("gemm epilogue: the group prints, parses, verifies, propagates shapes and interprets") {
  const std::string text =
      "graph(%x : f32[3,4], %w : f32[5,4], %b : f32[5], %r : f32[3,5]):\n"
      "  %0 : f32[4,5] = permute[dims=[1, 0]](%w)\n"
      "  %y : f32[3,5] = prim::FusionGroup[name=\"gemm_matmul_add_gelu_add\", kind=\"gemm\"](%x, %0, %b, %r)\n"
      "    block0(%1 : f32[3,4], %2 : f32[4,5], %3 : f32[5], %4 : f32[3,5]):\n"
      "      %5 : f32[3,5] = matmul(%1, %2)\n"
      "      %6 : f32[3,5] = add(%5, %3)\n"
      "      %7 : f32[3,5] = gelu(%6)\n"
      "      %8 : f32[3,5] = add(%7, %4)\n"
      "      -> (%8)\n"
      "  return (%y)\n";
  auto g = ir::parse_ir(text, "gemm.ir");
  ir::verify(*g);
  CHECK(g->str() == text);
  const ir::Node* group = only_gemm_group(*g);
  CHECK(jit::group_kind(*group) == jit::kGemmKind);

  // shape propagation types the block from the arguments, and types an untyped copy back the same
  auto untyped = ir::parse_ir(text, "gemm.ir");
  jit::for_each_node(*untyped->block(), [](ir::Node* n) {
    if (n->is_op()) n->output()->set_type(ir::Type::tensor());
  });
  CHECK(untyped->str() != text);
  jit::propagate_shapes(*untyped);
  ir::verify(*untyped);
  CHECK(untyped->str() == text);

  Tensor x = randn({3, 4}), w = randn({5, 4}), b = randn({5}), r = randn({3, 5});
  Tensor want = gelu(matmul(x, w.t()) + b, "none") + r;
  std::vector<IValue> out = interp::run(*g, {x, w, b, r});
  check_close(out.at(0).to_tensor(), want, 1e-5, 1e-6);
  // and compiled: the pipeline leaves the group as it is and runs it as a gemm kernel
  Function fn(std::shared_ptr<ir::Graph>(std::move(g)), "gemm");
  Function c = compile(fn);
  check_close(c({x, w, b, r})[0], want, 1e-4, 1e-5);
  CHECK(compile_stats(c).gemm_kernels == 1);
}

TEST_CASE("gemm epilogue: the kernel declines a block that is not matmul + epilogue") {
  const std::string text =
      "graph(%x : f32[3,4], %w : f32[4,5]):\n"
      "  %y : f32[3,5] = prim::FusionGroup[name=\"gemm_odd\", kind=\"gemm\"](%x, %w)\n"
      "    block0(%0 : f32[3,4], %1 : f32[4,5]):\n"
      "      %2 : f32[3,5] = matmul(%0, %1)\n"
      "      %3 : f32[3,5] = sigmoid(%2)\n"
      "      -> (%3)\n"
      "  return (%y)\n";
  auto g = ir::parse_ir(text, "odd.ir");
  std::string why;
  CHECK(backends::compile_kind(Device::Type::CPU, jit::kGemmKind, *jit::group_graph(*only_gemm_group(*g)), "odd", {},
                              &why) == nullptr);
  CHECK(why == "sigmoid is not an epilogue step (add, mul, relu, gelu of the previous step)");
  // it still runs, on the interpreter
  Tensor x = randn({3, 4}), w = randn({4, 5});
  Function c = compile(Function(std::shared_ptr<ir::Graph>(std::move(g)), "odd"));
  check_close(c({x, w})[0], sigmoid(matmul(x, w)), 1e-5, 1e-6);
  CHECK(compile_stats(c).interpreted_groups == 1);
}

TEST_CASE("gemm epilogue: cpu::gemm_epilogue declines what it cannot run") {
  Tensor a = randn({3, 4}), b = randn({4, 5});
  std::vector<cpu::GemmPostOp> relu_add{cpu::GemmPostOp::Relu, cpu::GemmPostOp::Add};
  CHECK_FALSE(cpu::gemm_epilogue(a.to(DType::Float64), b.to(DType::Float64), {}, {}).has_value());
  CHECK_FALSE(cpu::gemm_epilogue(a, b, relu_add, {randn({3, 1})}).has_value());  // neither a bias nor a residual
  CHECK_FALSE(cpu::gemm_epilogue(randn({0, 4}), b, {}, {}).has_value());
  {
    OnednnGemm off(false);
    CHECK_FALSE(cpu::gemm_epilogue(a, b, {}, {}).has_value());
  }
  if (!cpu::onednn_gemm_enabled()) return;
  Tensor y_residual = randn({3, 5});
  std::optional<Tensor> y = cpu::gemm_epilogue(a, b, relu_add, {y_residual});
  REQUIRE(y.has_value());
  check_close(*y, relu(matmul(a, b)) + y_residual, 1e-5, 1e-6);
  // a transposed weight is read in place: the output is the one allocation; a weight with no unit
  // stride is copied first
  Tensor w = randn({5, 4}), wt = w.t(), bias = randn({5}), wide = randn({4, 10}), strided = wide.slice(1, 0, std::nullopt, 2);
  std::vector<cpu::GemmPostOp> add_relu{cpu::GemmPostOp::Add, cpu::GemmPostOp::Relu};
  int64_t allocs = memory_stats().alloc_count;
  std::optional<Tensor> t = cpu::gemm_epilogue(a, wt, add_relu, {bias});
  CHECK(memory_stats().alloc_count - allocs == 1);
  REQUIRE(t.has_value());
  check_close(*t, relu(matmul(a, wt) + bias), 1e-5, 1e-6);
  allocs = memory_stats().alloc_count;
  std::optional<Tensor> u = cpu::gemm_epilogue(a, strided, add_relu, {bias});
  CHECK(memory_stats().alloc_count - allocs == 2);
  REQUIRE(u.has_value());
  check_close(*u, relu(matmul(a, strided) + bias), 1e-5, 1e-6);
  Tensor r = randn({1, 5});  // broadcast over rows: a bias after the activation
  std::optional<Tensor> z = cpu::gemm_epilogue(a, b, relu_add, {r});
  REQUIRE(z.has_value());
  check_close(*z, relu(matmul(a, b)) + r, 1e-5, 1e-6);
  test::check_error([&] { cpu::gemm_epilogue(a, b, relu_add, {}); }, "gemm epilogue: 0 operands for 1 add and mul steps");
  // a factor of the result's shape (the gradient through an activation), and a row of factors
  Tensor f = randn({3, 5}), row = randn({5});
  std::optional<Tensor> m = cpu::gemm_epilogue(a, b, {cpu::GemmPostOp::Mul}, {f});
  REQUIRE(m.has_value());
  check_close(*m, matmul(a, b) * f, 1e-5, 1e-6);
  std::optional<Tensor> mr = cpu::gemm_epilogue(a, b, {cpu::GemmPostOp::Mul, cpu::GemmPostOp::Add}, {row, f});
  REQUIRE(mr.has_value());
  check_close(*mr, matmul(a, b) * row + f, 1e-5, 1e-6);
}

// oneDNN's library scratchpad is one buffer for every primitive and ties a primitive to the thread that
// made it; kiln's cached primitives are shared, so each execution brings its own (eager/cpu/onednn_scratchpad.h).
// Two threads running the same GEMM epilogue and the same convolution at once (as the inter-op scheduler runs
// two branches of one shape) each get the single-thread result, bit for bit.
TEST_CASE("gemm epilogue: oneDNN's cached primitives run on two threads at once, each with the single-thread result") {
  if (!cpu::onednn_gemm_enabled()) return;
  kiln::test::NumThreads one(1);
  std::vector<cpu::GemmPostOp> add_relu{cpu::GemmPostOp::Add, cpu::GemmPostOp::Relu};
  Attrs conv = Attrs().set("stride", Shape{1, 1}).set("padding", Shape{1, 1}).set("dilation", Shape{1, 1}).set("groups", int64_t(1));
  struct Work {
    Tensor a, w, bias, x, k, y_gemm, y_conv;
  };
  std::vector<Work> work(2);
  for (Work& u : work) {
    u.a = randn({16, 64});
    u.w = randn({64, 64});
    u.bias = randn({64});
    u.x = randn({2, 16, 12, 12});
    u.k = randn({16, 16, 3, 3});
    u.y_gemm = *cpu::gemm_epilogue(u.a, u.w, add_relu, {u.bias});
    std::optional<Tensor> c = cpu::onednn_conv2d(u.x, u.k, Tensor(), conv);
    REQUIRE(c.has_value());
    u.y_conv = *c;
  }
  std::atomic<int> wrong{0};
  auto run = [&](const Work& u) {
    set_num_threads(1);
    for (int rep = 0; rep < 200; ++rep) {
      std::optional<Tensor> g = cpu::gemm_epilogue(u.a, u.w, add_relu, {u.bias});
      std::optional<Tensor> c = cpu::onednn_conv2d(u.x, u.k, Tensor(), conv);
      if (!g || !c || !kiln::test::same_bits(*g, u.y_gemm) || !kiln::test::same_bits(*c, u.y_conv)) ++wrong;
    }
  };
  std::thread t0(run, std::cref(work[0])), t1(run, std::cref(work[1]));
  t0.join();
  t1.join();
  CHECK(wrong.load() == 0);
}
