// The profiler on JIT-compiled functions: each compiled kernel is a row of its own (the dispatcher never
// sees it) with the flops of the ops it fused, so a compiled call counts what its interpreted run counts.
#include "support.h"

#include "backends/interp/kernel_flops.h"
#include "core/ir/parser.h"
#include "samples/digits_models.h"

using namespace kiln;

namespace {

const OpProfile* row_of(const Profiler& p, std::string_view name, bool kernel) {
  static std::vector<OpProfile> rows;
  rows = p.ops();
  for (const OpProfile& r : rows)
    if (r.name == name && r.kernel == kernel) return &r;
  return nullptr;
}

int64_t kernel_rows(const Profiler& p) {
  int64_t n = 0;
  for (const OpProfile& r : p.ops()) n += r.kernel;
  return n;
}

}  // namespace

TEST_CASE("profiler: a compiled function's kernels are rows with the flops of the ops they fused") {
  manual_seed(1);
  Tensor x = randn({64, 32}), w = randn({32, 16}), b = randn({16});
  Function f = trace([](const Tensors& in) { return Tensors{sum(exp(relu(matmul(in[0], in[1]) + in[2]) * 0.5))}; },
                     {x, w, b});
  Function c = compile(f);
  c({x, w, b});  // compiles outside the profile
  Profiler interpreted = profile([&] { f({x, w, b}); });
  Profiler compiled = profile([&] { c({x, w, b}); });
  const int64_t gemm = 2 * 64 * 32 * 16, elementwise = 64 * 16;
  CHECK(interpreted.total_flops() == gemm + 4 * elementwise + elementwise);  // add relu mul exp, and sum
  CHECK(compiled.total_flops() == interpreted.total_flops());
  CHECK(kernel_rows(interpreted) == 0);
  CHECK(kernel_rows(compiled) >= 1);
  if (kiln::test::x86_jit_on()) CHECK(row_of(compiled, "exp", false) == nullptr);  // fused: not an op of the dispatcher
  int64_t kernel_flops = 0, calls = 0;
  for (const OpProfile& r : compiled.ops()) {
    CHECK(r.total_ns >= 0);
    if (r.kernel) kernel_flops += r.flops, calls += r.count;
  }
  CHECK(kernel_flops >= gemm);  // the matmul runs as a compiled gemm group with its epilogue
  CHECK(calls == kernel_rows(compiled));  // one call each
  bool kernel_event = false;
  for (const ProfileEvent& e : compiled.events()) kernel_event = kernel_event || e.is_kernel;
  CHECK(kernel_event);
  CHECK(compiled.chrome_trace().find("\"cat\":\"kernel\"") != std::string::npos);
  CHECK(compiled.table().find(" (jit)") != std::string::npos);
  // A compiled graph's run is a scope, holding every flop of the call.
  std::vector<ScopeProfile> sc = compiled.scopes();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].flops == compiled.total_flops());
  CHECK(sc[0].count == 1);
}

TEST_CASE("profiler: a fused kernel's symbolic dims are bound from its runtime inputs") {
  auto g = ir::parse_ir(R"(graph(%x : f32[N,4], %y : f32[N,4]):
  %z : f32[N], %e : f32[N,4] = prim::FusionGroup[name="fused_mul_exp_sum"](%x, %y)
    block0(%a : f32[N,4], %b : f32[N,4]):
      %c : f32[N,4] = mul(%a, %b)
      %d : f32[N,4] = exp(%c)
      %s : f32[N] = sum[dims=[1], keepdim=false](%d)
      -> (%s, %d)
  return (%z, %e)
)");
  const ir::Node& group = **g->block()->nodes().begin();
  for (int64_t n : {3, 7}) {
    std::vector<IValue> in{IValue(ones({n, 4})), IValue(ones({n, 4}))};
    CHECK(interp::kernel_flops(group, in, {}) == 3 * n * 4);  // mul, exp, and sum's n*4 reads
  }
}

TEST_CASE("profiler: a compiled training step shows its forward and backward graphs as scopes of kernels") {
  manual_seed(0);
  auto model = samples::digits_mlp(64, 32);
  Tensor x = randn({16, 64});
  Tensor y = randint(0, 10, {16});
  auto loss_fn = [&](const Tensors& b) { return cross_entropy((*model)(b[0]), b[1]); };
  optim::SGD opt(model->parameters(), {0.01});
  Profiler eager = profile([&] {
    Tensor loss = loss_fn({x, y});
    opt.zero_grad();
    loss.backward();
    opt.step();
  });
  CompiledTrainStep step(*model, loss_fn, opt);
  step({x, y});
  Profiler compiled = profile([&] { step({x, y}); });
  CHECK(kernel_rows(compiled) >= (kiln::test::x86_jit_on() ? 3 : 1));  // fused groups need the x86 JIT
  const ScopeProfile* fwd = nullptr;
  const ScopeProfile* bwd = nullptr;
  std::vector<ScopeProfile> sc = compiled.scopes();
  for (const ScopeProfile& s : sc) {
    if (s.path.size() > 4 && s.path.ends_with("_fwd")) fwd = &s;
    if (s.path.ends_with("_bwd")) bwd = &s;
  }
  REQUIRE(fwd);
  REQUIRE(bwd);
  // The three GEMMs of each layer (forward, input and weight gradient; no input gradient for the
  // first layer) are counted whether they run as gemm groups or as matmul ops.
  const int64_t gemms = 2 * 16 * 64 * 32 * 2 + 2 * 16 * 32 * 10 * 3;
  CHECK(fwd->flops >= 2 * 16 * 64 * 32 + 2 * 16 * 32 * 10);
  CHECK(fwd->flops + bwd->flops >= gemms);
  // What the compiled step counts is the eager step's work, give or take what the passes removed or
  // recomputed (a recomputed relu, a merged sum): within 5 %.
  MESSAGE("eager " << eager.total_flops() << " compiled " << compiled.total_flops());
  CHECK(double(compiled.total_flops()) >= 0.95 * double(eager.total_flops()));
  CHECK(double(compiled.total_flops()) <= 1.05 * double(eager.total_flops()));
}
