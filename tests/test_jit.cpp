// compile(): compiled == interpreted on the samples and on thousands of random graphs, every pass
// keeps results, and the signature cache (hits, misses with their reason, symbolic dims after the
// limit, the eager path for inputs that require grad, concurrent calls).
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <random>
#include <thread>

#include "backends/x86/isa.h"
#include "core/log.h"
#include "ir_samples.h"
#include "random_graphs.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::random_graph;
using kiln::test::RandomGraph;

namespace {

// NaN equals NaN here: a pass must keep NaNs where they were.
void check_same(const std::vector<IValue>& got, const std::vector<IValue>& want, double rtol = 1e-5) {
  double atol = rtol > 1e-5 ? 1e-4 : 1e-6;
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!want[i].is_tensor()) {
      CHECK(got[i].repr() == want[i].repr());
      continue;
    }
    CHECK(got[i].to_tensor().dtype() == want[i].to_tensor().dtype());
    check_close(got[i].to_tensor(), want[i].to_tensor(), rtol, atol);
  }
}

}  // namespace

TEST_CASE("jit: compiled == interpreted on thousands of random graphs") {
  std::mt19937 rng(7);
  manual_seed(3);
  int tested = 0, fused = 0, kernels = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    DType dt = iter % 3 == 0 ? DType::Float64 : DType::Float32;
    RandomGraph r = random_graph(rng, dt);
    ir::verify(*r.graph);
    CAPTURE(r.graph->str());
    Function f(r.graph, "random");
    std::vector<IValue> want = f.call(r.inputs);
    // The x86 kernels' transcendentals are within a few ulp (tests/test_x86_math.cpp); random chains can
    // amplify that through cancellation, hence a looser tolerance than the pass-by-pass test's.
    Function c = compile(f);
    check_same(c.call(r.inputs), want, dt == DType::Float64 ? 1e-7 : 2e-3);
    kernels += compile_stats(c).kernels;
    auto og = compiled_graph(c, r.inputs);
    for (ir::Node* n : og->block()->nodes()) fused += n->prim() == ir::Prim::FusionGroup;
    ++tested;
  }
  CHECK(tested == 2000);
  CHECK(fused > 500);
  // the groups ran as x86 kernels where the CPU allows, not on the interpreter fallback
  if (x86::best_isa() != x86::Isa::None) CHECK(kernels > fused / 2);
}

TEST_CASE("jit: each pass alone keeps the results of random graphs") {
  std::mt19937 rng(11);
  manual_seed(4);
  for (const jit::Pass& p : jit::all_passes()) {
    CAPTURE(p.name);
    for (int iter = 0; iter < 150; ++iter) {
      RandomGraph r = random_graph(rng, DType::Float32);
      std::vector<IValue> want = interp::run(*r.graph, r.inputs);
      auto g = r.graph->copy();
      p.run(*g);
      ir::verify(*g);
      check_same(interp::run(*g, r.inputs), want);
    }
  }
}

TEST_CASE("jit: the samples' models compiled == eager") {
  for (const char* name : {"mlp", "cnn", "chain"}) {
    CAPTURE(name);
    Function f = test::traced_sample(name);
    Function c = compile(f);
    std::vector<Tensor> ins;
    for (const ir::Type& t : f.input_types()) ins.push_back(randn(t.static_shape()));
    NoGradGuard no_grad;  // module parameters require grad: without this the compiled function runs eagerly
    Tensors want = f(ins), got = c(ins);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i]);
    CHECK(jit::CacheStats(compile_stats(c)).misses == 1);
  }
}

TEST_CASE("jit: the cache hits, says why it missed, and turns a changing dim symbolic") {
  Function f = trace([](const Tensors& in) { return Tensors{tanh(in[0] * 2.0 + 1.0)}; }, {randn({64, 8})});
  Function c = compile(f);
  c({randn({64, 8})});
  c({randn({64, 8})});
  jit::CacheStats s = compile_stats(c);
  CHECK(s.misses == 1);
  CHECK(s.hits == 1);
  c({randn({32, 8})});
  s = compile_stats(c);
  CHECK(s.misses == 2);
  CHECK(s.last_miss_reason == "input 0 dim 0 changed 64 -> 32");
  // a non-contiguous input is another entry
  c({randn({8, 32}).t()});
  CHECK(compile_stats(c).last_miss_reason == "input 0 contiguity changed");
  // after the limit, dim 0 is symbolic: one entry serves every size
  for (int64_t n = 1; n <= 12; ++n) {
    Tensor x = randn({n, 8});
    check_close(c({x})[0], tanh(x * 2.0 + 1.0));
  }
  s = compile_stats(c);
  CHECK(s.symbolic_dims == 1);
  int64_t misses = s.misses;
  c({randn({100, 8})});
  c({randn({3, 8})});
  CHECK(compile_stats(c).misses == misses);
  auto g = compiled_graph(c, {randn({5, 8})});
  CHECK(g->inputs()[0]->type().str() == "f32[s0_0,8]");
}

TEST_CASE("jit: a recompilation is logged with its reason on kiln's logger, which writes to stderr") {
  spdlog::logger& log = kiln::logger();
  CHECK(log.name() == "kiln");
  CHECK(spdlog::get("kiln").get() == &log);
  REQUIRE(log.sinks().size() == 1);
  CHECK(std::dynamic_pointer_cast<spdlog::sinks::stderr_color_sink_mt>(log.sinks()[0]) != nullptr);
  auto seen = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(8);
  log.sinks().push_back(seen);
  Function f = trace([](const Tensors& in) { return Tensors{in[0] + 1.0}; }, {randn({4, 2})});
  Function c = compile(f);
  c({randn({4, 2})});
  c({randn({6, 2})});
  log.sinks().pop_back();
  std::vector<std::string> lines = seen->last_formatted();
  CHECK(std::any_of(lines.begin(), lines.end(),
                    [](const std::string& l) { return l.find("input 0 dim 0 changed 4 -> 6") != std::string::npos; }));
}

TEST_CASE("jit: inputs that require grad run a compiled forward and backward; control flow runs eagerly") {
  Function f = trace([](const Tensors& in) { return Tensors{(in[0] * in[0]).sum()}; }, {randn({3})});
  Function c = compile(f);
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  c({x})[0].backward();
  check_close(x.grad(), tensor({2.0, 4.0, 6.0}));
  CHECK(compile_stats(c).train_compiles == 1);
  CHECK(compile_stats(c).eager_calls == 0);
  {
    NoGradGuard no_grad;  // another signature (grad mode off): the inference entry
    c({x});
  }
  CHECK(compile_stats(c).misses == 2);
  // A scripted loop: a recorded backward would bake in one trip count, so autograd records eagerly.
  Function s = script_source(
                   "import torch\n"
                   "def f(x: torch.Tensor, n: int) -> torch.Tensor:\n"
                   "    for i in range(n):\n"
                   "        x = x * 2.0\n"
                   "    return x.sum()\n",
                   "loop.py")
                   .function("f");
  Function cs = compile(s);
  Tensor y = tensor({1.0, 2.0}).requires_grad_();
  cs.call({IValue(y), IValue(int64_t(3))})[0].to_tensor().backward();
  check_close(y.grad(), tensor({8.0, 8.0}));
  CHECK(compile_stats(cs).eager_calls == 1);
}

TEST_CASE("jit: concurrent calls share one cache") {
  Function c = compile(trace([](const Tensors& in) { return Tensors{exp(in[0]) - in[0]}; }, {randn({16})}));
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) {
        Tensor x = full({16}, double(t + k) * 0.01);
        Tensor y = c({x})[0];
        if (std::abs(y.sum().item<double>() - (exp(x) - x).sum().item<double>()) > 1e-3) ++bad;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(bad == 0);
  jit::CacheStats s = compile_stats(c);
  CHECK(s.hits + s.misses == 200);
}

TEST_CASE("jit: pipeline options and errors") {
  auto g = ir::parse_ir(R"(graph(%x : f32[4]):
  %0 : f32[4] = exp(%x)
  %1 : f32[4] = neg(%0)
  return (%1)
)");
  jit::PipelineOptions o;
  o.stop_after = "cse";
  auto stats = jit::run_pipeline(*g, o);
  CHECK(stats.back().name == "cse");
  check_error([] { jit::find_pass("fuse"); }, "jit: unknown pass 'fuse' (passes: shape_prop, fold_shapes, constant_fold");
  check_error([] { compile_stats(Function()); }, "not a compiled function");
}
