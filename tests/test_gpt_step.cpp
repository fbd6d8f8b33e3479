// The GPT of samples/gpt.py (nanoGPT's manner) trained through CompiledTrainStep beside eager: the same
// losses, the allocator's peak per step at or below eager's, the softmax max's path left out of the
// recorded backward (as eager's autograd leaves it) and a split's gradients joined into one cat.
#include <fstream>
#include <sstream>

#include "jit/compiled_function.h"
#include "jit/group_kinds.h"
#include "jit/train_step.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;

namespace {

struct Run {
  std::vector<double> losses;
  int64_t step_peak_bytes = 0;  // allocator peak over a step after the first, above what was live before it
  std::string backward;         // the compiled backward graph
};

Run train(bool compiled, int steps) {
  manual_seed(7);
  ScriptFile file = script_file(std::string(KILN_TEST_DATA) + "/../../samples/gpt.py");
  auto net = file.build("GPT", {file.value("GPTConfig(block_size=16, vocab_size=24, n_layer=2, n_head=2, n_embd=32, "
                                           "dropout=0.0, bias=False)")});
  optim::AdamW opt(net->parameters(), {3e-3});
  auto loss_of = [&](const std::vector<Tensor>& b) { return net->call({b[0], b[1]}).at(0).elements().at(1).to_tensor(); };
  CompiledTrainStep step(*net, loss_of, opt);
  Tensor x = randint(0, 24, {4, 16}), y = randint(0, 24, {4, 16});
  Run r;
  for (int s = 0; s < steps; ++s) {
    int64_t before = memory_stats().current_bytes;
    reset_peak_memory_stats();
    Tensor loss;
    if (compiled) {
      loss = step({x, y});
    } else {
      loss = loss_of({x, y});
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    if (s > 0) r.step_peak_bytes = std::max(r.step_peak_bytes, memory_stats().peak_bytes - before);
    r.losses.push_back(loss.item<double>());
  }
  if (compiled) r.backward = compiled_backward_graph(step.function(), {x, y})->str();
  return r;
}

}  // namespace

TEST_CASE("gpt step: samples/gpt.py through CompiledTrainStep follows eager over 8 AdamW steps, peak memory <= eager") {
  test::NumInteropThreads one(1);  // the planner's bound holds for the plan's order (docs/jit.md)
  Run e = train(false, 8), c = train(true, 8);
  for (size_t i = 0; i < e.losses.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(c.losses[i] - e.losses[i]) <= 1e-4 * std::abs(e.losses[i]));
  }
  CHECK(c.losses.back() < c.losses.front());
  MESSAGE("gpt step peak: compiled " << c.step_peak_bytes << " bytes, eager " << e.step_peak_bytes);
  if (test::x86_jit_on()) CHECK(c.step_peak_bytes <= e.step_peak_bytes);
  // one cat per block for the q, k, v split's gradient; no slice_backward, and no comparison with the
  // softmax's max (the detached max has no gradient path)
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = c.backward.find(what); at != std::string::npos; at = c.backward.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count(" = cat[dim=2](") == 2);
  CHECK(count("slice_backward") == 0);
  CHECK(count(" = eq(") == 0);
}

TEST_CASE("gpt eval: the scripted forward compiled at its inputs' dims is typed throughout and fused, both attentions") {
  // fold_shapes: the file computes its shapes at run time (x.size(), view(B, T, ...), asserts on T); at a
  // compiled signature they are constants, so every tensor is typed and the fusion passes see the model.
  std::string path = std::string(KILN_TEST_DATA) + "/../../samples/gpt.py";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string sdpa = ss.str(), flash = "self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')";
  REQUIRE(sdpa.find(flash) != std::string::npos);
  std::string written = sdpa;
  written.replace(written.find(flash), flash.size(), "self.flash = False");
  for (const std::string* src : std::vector<const std::string*>{&sdpa, &written}) {
    CAPTURE(src == &sdpa ? "sdpa" : "written");
    manual_seed(7);
    ScriptFile file = script_source(*src, path);
    auto net = file.build("GPT", {file.value("GPTConfig(block_size=16, vocab_size=24, n_layer=2, n_head=2, n_embd=32, "
                                             "dropout=0.0, bias=False)")});
    net->eval();
    NoGradGuard no_grad;
    Tensor x = randint(0, 24, {4, 16}), y = randint(0, 24, {4, 16});
    std::vector<IValue> want = net->call({x, y}).at(0).elements();
    Function f = compile(net->method("forward"));
    std::vector<IValue> got = f.call({x, y}).at(0).elements();
    test::check_close(got.at(0).to_tensor(), want.at(0).to_tensor(), 1e-4, 1e-4);
    test::check_close(got.at(1).to_tensor(), want.at(1).to_tensor(), 1e-4, 1e-4);
    auto g = compiled_graph(f, {x, y});
    CAPTURE(g->str());
    int untyped = 0, gemm = 0, groups = 0, asserts = 0;
    for (const ir::Node* n : g->block()->nodes()) {
      if (n->is_op())
        for (const ir::Value* o : n->outputs()) untyped += !o->type().has_static_shape();
      if (n->prim() == ir::Prim::FusionGroup) (jit::group_kind(*n) == jit::kGemmKind ? gemm : groups) += 1;
      asserts += n->prim() == ir::Prim::If;
    }
    CHECK(untyped == 0);
    CHECK(asserts == 0);  // the file's shape checks hold for these dims and went at compile time
    if (test::x86_jit_on()) {
      // per block: the MLP's gelu and both residual adds in their GEMMs; the softmax and both layer norms
      // row kernels
      CHECK(gemm == 2 * 3);
      CHECK(groups >= 2 * 3);
    }
  }
}
