// Row kernels (backends/x86/row_kernel.h): softmax, log_softmax, layer_norm and cross-entropy, forward and
// backward, compiled into one fused group per row computation; results equal eager's (the interpreter's
// kernels) on both ISAs at row lengths around the vector widths, rows of 1 included. A one-block GPT's
// compiled training step runs within a kernel budget, so a change that splits a row group again fails.
#include <kiln/kiln.h>

#include <set>

#include "backends/x86/isa.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

std::vector<x86::Isa> isas() {
  if (x86::best_isa() == x86::Isa::None) return {x86::Isa::None};
  std::vector<x86::Isa> r{x86::Isa::Avx2};
  if (x86::best_isa() == x86::Isa::Avx512) r.push_back(x86::Isa::Avx512);
  return r;
}
struct IsaCap {
  explicit IsaCap(x86::Isa i) { x86::set_isa_cap(i); }
  ~IsaCap() { x86::set_isa_cap(x86::Isa::None); }
};

// Outputs and input gradients of sum(out * w), eagerly and compiled, checked close; then the compiled
// graphs hold no reduction over the last dim outside a fusion group.
void check_rows(const Function& fn, const std::vector<Tensor>& inputs, double rtol = 1e-5, double atol = 1e-6) {
  Function compiled = compile(fn);
  auto run = [&](const Function& f) {
    std::vector<Tensor> leaves = test::fresh_leaves(inputs);
    std::vector<Tensor> outs = f(leaves);
    Tensor w = sin(arange(0.0, double(outs[0].numel()), 1.0) * 0.7).reshape(outs[0].sizes());
    sum(outs[0] * w).backward();
    std::vector<Tensor> res{outs[0]};
    for (const Tensor& l : leaves)
      if (l.requires_grad()) res.push_back(l.grad());
    return res;
  };
  std::vector<Tensor> want = run(fn), got = run(compiled);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    check_close(got[i], want[i], rtol, atol);
  }
  jit::CacheStats st = compile_stats(compiled);
  CHECK(st.interpreted_groups == 0);
  if (x86::best_isa() == x86::Isa::None) return;
  std::vector<IValue> in;
  for (const Tensor& t : inputs) in.emplace_back(is_floating(t.dtype()) ? t.detach().clone().requires_grad_(true) : t);
  // The backward may keep an amax outside: the compiled step records the detached max's derivative
  // (a mask of x == max, rounding noise that eager never computes) and its cast to float ends a group.
  bool forward = true;
  for (auto g : {compiled_graph(compiled, in), compiled_backward_graph(compiled, in)}) {
    for (ir::Node* n : g->block()->nodes()) {
      CAPTURE(g->str());
      const int64_t rank = n->inputs().empty() ? 0 : int64_t(n->input(0)->type().dims.value_or(std::vector<ir::Dim>{}).size());
      bool last = n->is_op(OpId::Sum) && n->attrs().has("dims") && rank > 1 &&
                  (n->attrs().ints("dims") == Shape{-1} || n->attrs().ints("dims") == Shape{rank - 1});
      CHECK(!((forward && n->is_op(OpId::Amax)) || last));
    }
    forward = false;
  }
}

}  // namespace

TEST_CASE("row kernels: softmax, log_softmax, layer_norm, cross_entropy forward and backward == eager, both ISAs") {
  manual_seed(11);
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    for (int64_t c : {1, 7, 8, 16, 17, 64, 67}) {
      CAPTURE(x86::isa_name(isa));
      CAPTURE(c);
      Tensor x = randn({3, 5, c}) * 3.0;
      check_rows(trace([](const Tensors& in) { return Tensors{softmax(in[0], -1)}; }, {x}), {x});
      check_rows(trace([](const Tensors& in) { return Tensors{log_softmax(in[0], -1)}; }, {x}), {x});
      Tensor w = randn({c}), b = randn({c});
      check_rows(trace([c](const Tensors& in) { return Tensors{layer_norm(in[0], {c}, in[1], in[2])}; }, {x, w, b}),
                 {x, w, b});
      Tensor logits = randn({6, c}) * 2.0;
      Tensor target = randint(0, c, {6});
      check_rows(trace([](const Tensors& in) { return Tensors{cross_entropy(in[0], in[1])}; }, {logits, target}),
                 {logits, target});
    }
  }
}

TEST_CASE("row kernels: f64 rows, and rows split across threads, == eager") {
  manual_seed(12);
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    CAPTURE(x86::isa_name(isa));
    Tensor x = randn({4, 9, 21}).to(DType::Float64);
    check_rows(trace([](const Tensors& in) { return Tensors{softmax(in[0], -1)}; }, {x}), {x});
    // 2^16 elements and more: the rows are cut into one chunk per thread
    test::NumThreads threads(2);
    Tensor big = randn({3, 300, 80}), w = randn({80}), b = randn({80});
    // the weight's gradient sums 900 rows of products whose mean and rstd were folded in float lanes
    // (eager folds in double): rounding a little above the small cases'
    check_rows(trace([](const Tensors& in) { return Tensors{layer_norm(in[0], {80}, in[1], in[2])}; }, {big, w, b}),
               {big, w, b}, 1e-4, 1e-5);
  }
}

TEST_CASE("row kernels: a one-block GPT's compiled training step runs within its kernel budget") {
  manual_seed(5);
  ScriptFile file = script_file(std::string(KILN_TEST_DATA) + "/../../samples/gpt.py");
  auto model = file.build("GPT", {file.value("GPTConfig(block_size=16, vocab_size=16, n_layer=1, n_head=2, "
                                             "n_embd=32, dropout=0.0, bias=False)")});
  optim::AdamW opt(model->parameters(), {1e-3, 0.9, 0.99, 1e-8, 0.1});
  Tensor x = randint(0, 16, {2, 16}), y = randint(0, 16, {2, 16});
  auto loss = [&](const std::vector<Tensor>& b) { return model->call({b[0], b[1]}).at(0).elements().at(1).to_tensor(); };
  CompiledTrainStep step(*model, loss, opt);
  step({x, y});
  Profiler prof;
  step({x, y});
  prof.stop();
  // Views (reshape, permute, ...) launch nothing; every other row of the table is a kernel.
  const std::set<std::string> views{"reshape", "permute", "expand", "unsqueeze", "squeeze", "slice", "select"};
  int64_t kernels = 0;
  bool attention_one = false;
  for (const OpProfile& op : prof.ops()) {
    if (!views.count(op.name)) kernels += op.count;
    attention_one |= op.name == "flash_attention" && op.count == 1;
  }
  MESSAGE("one-block GPT step: " << kernels << " kernels\n" << prof.table());
  if (x86::best_isa() == x86::Isa::None) return;
  CHECK(attention_one);  // attention: scores, softmax and the product with v in one fused kernel
  // 70 when row groups came in (softmax, layer_norm, their gradients, log_softmax each one kernel) with
  // the qkv split's gradient as one cat. A change that splits a group again fails here.
  CHECK(kernels <= 70);
}
