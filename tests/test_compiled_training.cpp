// Compiled training: a compiled function called on inputs that require grad runs a compiled forward
// and leaves a node whose backward is a compiled graph. Gradients equal eager's for every
// differentiable row of the op table and on random graphs (both ISAs); the digits MLP and CNN follow
// eager's loss trajectory; memory kept for backward and the allocator's peak stay at or below eager's.
#include <random>

#include "backends/x86/isa.h"
#include "eager/autograd/derivatives.h"
#include "jit/group_kinds.h"
#include "op_cases.h"
#include "random_graphs.h"
#include "samples/digits_models.h"
#include "support.h"

using namespace kiln;
using samples::digits_cnn;
using samples::digits_mlp;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

// The ISAs the x86 backend can run here: AVX2 always (forced by a cap), AVX-512 where the CPU has it.
std::vector<x86::Isa> isas() {
  std::vector<x86::Isa> r;
  if (x86::best_isa() == x86::Isa::None) return {x86::Isa::None};
  r.push_back(x86::Isa::Avx2);
  if (x86::best_isa() == x86::Isa::Avx512) r.push_back(x86::Isa::Avx512);
  return r;
}
struct IsaCap {
  explicit IsaCap(x86::Isa i) { x86::set_isa_cap(i); }
  ~IsaCap() { x86::set_isa_cap(x86::Isa::None); }
};

// Gradients of sum(outputs * weights) by eager autograd and through compile(fn), checked equal.
void check_grads_match(const Function& fn, const std::vector<Tensor>& inputs, double rtol = 1e-5,
                       double atol = 1e-6) {
  Function compiled = compile(fn);
  auto run = [&](const Function& f) {
    std::vector<Tensor> leaves = test::fresh_leaves(inputs);
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
  // The backward is a graph with fused x86 kernels and BLAS calls, fed by what the forward saved.
  std::shared_ptr<const ir::Graph> bwd = compiled_backward_graph(c, {IValue(x)});
  std::shared_ptr<const ir::Graph> fwd = compiled_graph(c, {IValue(x)});
  int groups = 0, matmuls = 0;
  for (ir::Node* n : bwd->block()->nodes()) groups += n->prim() == ir::Prim::FusionGroup, matmuls += n->is_op(OpId::Matmul);
  CHECK(groups >= 2);
  CHECK(matmuls == 3);  // dx of layer 2 and dW of both layers (dx of layer 1 is not needed: x needs no grad)
  CHECK(fwd->outputs().size() > 1);  // the loss, then the saved values
  CHECK(bwd->outputs().size() == 4);  // one gradient per parameter
}

TEST_CASE("compiled training: an activation a GEMM reads is kept for the backward, not run again (f32 and bf16)") {
  manual_seed(5);
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    CAPTURE(dtype_name(dt));
    Tensor x = randn({6, 8}).to(dt), w1 = randn({8, 24}).to(dt), w2 = randn({24, 4}).to(dt);
    // h is read twice (the GEMM after gelu and the backward's gelu gradient), so the first GEMM keeps no epilogue
    Function f = trace([](const Tensors& in) { return Tensors{sum(matmul(gelu(matmul(in[0], in[1]), "none"), in[2]).to(DType::Float32))}; },
                       {x, w1, w2});
    Function c = compile(f);
    auto grads = [&](const Function& fn) {
      Tensor a = w1.detach().clone().requires_grad_(true), b = w2.detach().clone().requires_grad_(true);
      fn({x, a, b})[0].backward();
      return Tensors{a.grad(), b.grad()};
    };
    Tensors want = grads(f), got = grads(c);
    const double tol = dt == DType::Float32 ? 1e-5 : 3e-2;
    check_close(got[0], want[0], tol, tol);
    check_close(got[1], want[1], tol, tol);
    std::vector<IValue> in{x, w1.detach().clone().requires_grad_(true), w2.detach().clone().requires_grad_(true)};
    std::shared_ptr<const ir::Graph> bwd = compiled_backward_graph(c, in);
    CAPTURE(bwd->str());
    int gelus = 0;
    for (const ir::Node* n : bwd->block()->nodes()) {
      gelus += n->is_op(OpId::Gelu);
      for (const ir::Block* b : n->blocks())
        for (const ir::Node* m : b->nodes()) gelus += m->is_op(OpId::Gelu);
    }
    CHECK(gelus == 0);
    CHECK(compile_stats(c).saved_bytes <= compile_stats(c).eager_saved_bytes);
  }
}

TEST_CASE("compiled training: a parameter's narrowing cast a GEMM or conv reads is kept for the backward, not cast again") {
  // autocast's bf16 weights: the backward's input gradients read them
  manual_seed(6);
  const DType bf = DType::BFloat16;
  Tensor x = randn({2, 8, 3, 3}), w1 = randn({8, 8, 3, 3}), w2 = randn({8 * 3 * 3, 4});
  Function f = trace([bf](const Tensors& in) {
    Tensor h = conv2d(in[0].to(bf), in[1].to(bf), Tensor(), {1, 1}, {1, 1});
    return Tensors{sum(matmul(h.reshape({2, 8 * 3 * 3}), in[2].to(bf)).to(DType::Float32))};
  }, {x, w1, w2});
  Function c = compile(f);
  auto grads = [&](const Function& fn) {
    Tensor a = x.detach().clone().requires_grad_(true), b = w1.detach().clone().requires_grad_(true),
           d = w2.detach().clone().requires_grad_(true);
    fn({a, b, d})[0].backward();
    return Tensors{a.grad(), b.grad(), d.grad()};
  };
  Tensors want = grads(f), got = grads(c);
  for (size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], 3e-2, 3e-2);
  std::vector<IValue> in{x.detach().clone().requires_grad_(true), w1.detach().clone().requires_grad_(true),
                         w2.detach().clone().requires_grad_(true)};
  std::shared_ptr<const ir::Graph> bwd = compiled_backward_graph(c, in);
  CAPTURE(bwd->str());
  // what it reads of the forward is the bf16 casts (recomputed, it would read the float32 parameters and x)
  const auto& bin = bwd->inputs();
  for (size_t i = 0; i + 1 < bin.size(); ++i) CHECK(bin[i]->type().dtype == std::optional<DType>(bf));
  int narrowing = 0;  // the incoming gradient's only
  for (const ir::Node* n : bwd->block()->nodes()) narrowing += n->is_op(OpId::Cast) && n->attrs().dtype("dtype") == bf;
  CHECK(narrowing == 1);
  CHECK(compile_stats(c).saved_bytes <= compile_stats(c).eager_saved_bytes);
}

TEST_CASE("compiled training: relu then max pool is pooled first; gradients equal eager's with negative windows and ties") {
  // Windows wholly negative (relu's gradient is zero there, whichever index pooling picks), windows with
  // a tie at the maximum, zeros, and ordinary ones.
  Tensor x = tensor(std::vector<float>{-1, -2, 3, 3,  -4, -1, 0, 0,  5, -1, -3, -3,  2, 2, 0, -7,
                                       -5, -6, 1, 2,  -8, -9, 0.5, 0,  0, 0, -1, 4,  0, -2, 4, -1},
                    {1, 2, 4, 4});
  Function f = trace([](const std::vector<Tensor>& in) {
    Tensor y = max_pool2d(relu(in[0] * in[1]), {2, 2});
    return std::vector<Tensor>{y};
  }, {x, ones({1, 2, 4, 4})});
  check_grads_match(f, {x, ones({1, 2, 4, 4})});
  Function c = compile(f);
  Tensor l = x.detach().clone().requires_grad_(true), w = ones({1, 2, 4, 4}).requires_grad_(true);
  std::shared_ptr<const ir::Graph> fwd = compiled_graph(c, {IValue(l), IValue(w)});
  const ir::Node* pool = nullptr;
  for (ir::Node* n : fwd->block()->nodes())
    if (n->is_op(OpId::MaxPool2d)) pool = n;
  REQUIRE(pool);
  CHECK(pool->input(0)->node()->kind_name().find("relu") == std::string::npos);
  bool relu_after = false;
  for (const ir::Use& u : pool->output(0)->uses()) {
    std::string what = u.user->prim() == ir::Prim::FusionGroup ? u.user->attrs().s("name") : std::string(u.user->kind_name());
    relu_after |= what.find("relu") != std::string::npos;
  }
  CHECK(relu_after);
}

TEST_CASE("compiled training: max_pool2d's backward scatters through the forward's indices, ties to the first maximum") {
  // Windows with ties and padding; no relu before the pool, so the pool keeps its place.
  Tensor x = tensor(std::vector<float>{1, 1, 2, 0, 0, 1, 0, 2, 2, -1, 3, 3, -1, -1, -1, 3, 0, 5, 5, 5, 0, 0, 5, 5, 5},
                    {1, 1, 5, 5});
  Function f = trace([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{max_pool2d(in[0] * in[1], {3, 3}, {2, 2}, {1, 1})};
  }, {x, ones({1, 1, 5, 5})});
  check_grads_match(f, {x, ones({1, 1, 5, 5})});
  Function c = compile(f);
  Tensor l = x.detach().clone().requires_grad_(true), w = ones({1, 1, 5, 5}).requires_grad_(true);
  std::shared_ptr<const ir::Graph> bwd = compiled_backward_graph(c, {IValue(l), IValue(w)});
  for (const ir::Node* n : bwd->block()->nodes()) CHECK_FALSE(n->is_op(OpId::MaxPool2d));
  bool indices_saved = false;
  for (const ir::Value* v : bwd->inputs()) indices_saved |= v->type().dtype == DType::Int64;
  CHECK(indices_saved);
}

TEST_CASE("compiled training: each conv's gradients are one conv-backward group; gradients equal eager's") {
  manual_seed(8);
  auto model = digits_cnn();
  Tensor x = randn({16, 1, 8, 8}), y = argmax(randn({16, 10}), 1);
  Function f = trace_module(*model, [&](const Tensors& in) { return Tensors{cross_entropy((*model)(in[0]), in[1])}; },
                            {x, y});
  Tensors ps = model->parameters();
  auto grads = [&](const Function& fn) {
    for (Tensor& p : ps) p.set_grad(Tensor());
    fn({x, y})[0].backward();
    Tensors g;
    for (const Tensor& p : ps) g.push_back(p.grad().clone());
    return g;
  };
  Tensors want = grads(f);
  Function c = compile(f);
  Tensors got = grads(c);
  for (size_t i = 0; i < ps.size(); ++i) check_close(got[i], want[i], 1e-5, 1e-6);
  // conv 2: input, weight and bias gradients; conv 1: weight and bias (the images need no gradient).
  std::shared_ptr<const ir::Graph> bwd = compiled_backward_graph(c, {IValue(x), IValue(y)});
  std::vector<size_t> outputs;
  for (ir::Node* n : bwd->block()->nodes())
    if (jit::group_kind(*n) == jit::kConvBackwardKind) outputs.push_back(n->outputs().size());
  CHECK(outputs == std::vector<size_t>{3, 2});
  CHECK(compile_stats(c).interpreted_groups == 0);
}

TEST_CASE("compiled training: a compiled block inside an eager model; errors for double backward") {
  manual_seed(4);
  Tensor w1 = randn({6, 6}).requires_grad_(), w2 = randn({6, 3}).requires_grad_();
  Tensor x = randn({5, 6});
  Function block = trace([](const Tensors& in) { return Tensors{gelu(matmul(in[0], in[1])) * sigmoid(in[0])}; },
                         {x, w1.detach()});
  Function cblock = compile(block);
  auto model = [&](const Function& b) {
    Tensor h = tanh(x) * 2.0;                 // eager before
    Tensor y = b({h, w1})[0];                 // the block
    return sum(matmul(y, w2) * matmul(y, w2));  // eager after
  };
  Tensor le = model(block);
  Tensors ge = grad({le}, {w1, w2});
  Tensor lc = model(cblock);
  Tensors gc = grad({lc}, {w1, w2}, {}, /*retain_graph=*/true);
  check_close(lc, le, 1e-5);
  check_close(gc[0], ge[0], 1e-4, 1e-5);
  check_close(gc[1], ge[1], 1e-4, 1e-5);
  CHECK(compile_stats(cblock).train_compiles == 1);
  // a gradient of a gradient through the compiled block: a clear error naming it
  check_error([&] { grad({model(cblock)}, {w1}, {}, false, /*create_graph=*/true); },
              "CompiledFunctionBackward: create_graph=true (a gradient of a gradient) through compiled function");
  // backward twice without retain_graph
  Tensor l2 = model(cblock);
  l2.backward();
  check_error([&] { l2.backward(); }, "a second time");
  // a saved input changed in place between forward and backward
  Tensor w = randn({6, 6}).requires_grad_();
  Tensor xin = randn({5, 6}).requires_grad_();
  Tensor out = sum(cblock({xin, w})[0]);
  {
    NoGradGuard ng;
    w.add_(1.0);
  }
  check_error([&] { out.backward(); }, "modified by an in-place operation");
}

TEST_CASE("compiled training: outputs the loss does not use get zero gradients; unused inputs keep no grad") {
  manual_seed(6);
  Tensor a = randn({4}), b = randn({4}), unused = randn({4});
  Function f = trace([](const Tensors& in) { return Tensors{exp(in[0]) * in[1], sin(in[1])}; }, {a, b});
  Function c = compile(f);
  Tensor ra = a.clone().requires_grad_(), rb = b.clone().requires_grad_();
  Tensors outs = c({ra, rb});
  sum(outs[0]).backward();  // outs[1] unused
  check_close(ra.grad(), exp(a) * b, 1e-6);
  check_close(rb.grad(), exp(a), 1e-6);
  // an input that does not require grad is not differentiated; an output that is an input keeps the
  // input's own history intact
  Function id = trace([](const Tensors& in) { return Tensors{in[0], in[1] * 2.0}; }, {a, b});
  Function cid = compile(id);
  Tensor ia = a.clone().requires_grad_();
  Tensors o = cid({ia, b});
  CHECK(o[0].requires_grad());
  CHECK(!o[0].is_same(ia));
  CHECK(ia.grad_fn() == nullptr);
  sum(o[0] * 3.0).backward();
  check_close(ia.grad(), full({4}, 3.0), 1e-6);
}

TEST_CASE("compiled training: recording the backward keeps no gradient past its last use (first call's peak memory)") {
  manual_seed(7);
  Tensor x = randn({256, 1024});  // 1 MiB per value
  auto chain = [](const Tensors& in) {
    Tensor h = in[0];
    for (int i = 0; i < 12; ++i) h = tanh(h * 1.01);
    return Tensors{sum(h)};
  };
  Function c = compile(trace(chain, {x}));
  auto first_call_peak = [&](const std::function<Tensors(const Tensors&)>& f) {
    Tensor leaf = x.clone().requires_grad_();
    empty_cache();
    int64_t base = memory_stats().current_bytes;
    reset_peak_memory_stats();
    f({leaf})[0].backward();
    return memory_stats().peak_bytes - base;
  };
  int64_t eager = first_call_peak(chain);
  // The recording's forward holds its values as eager autograd does; its backward's gradients die as
  // eager's do: the whole first call (recording, compiled forward and backward) peaks at about twice
  // eager's here, where holding every recorded gradient took about five times.
  int64_t compiled = first_call_peak([&](const Tensors& in) { return c(in); });
  if (x86::best_isa() != x86::Isa::None) {
    CHECK(compiled <= 3 * eager);
  } else {
    // Without the x86 JIT (the matrix's baseline entry) nothing fuses: the compiled forward keeps every
    // mul and tanh value for its backward beside the recording's forward values, 4.8x eager here.
    CHECK(compiled <= 6 * eager);
  }
}

TEST_CASE("compiled training: every differentiable row of the op table, gradients == eager on both ISAs") {
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    int tested = 0;
    for (int i = 0; i < kNumOps; ++i) {
      OpId op = OpId(i);
      // their derivatives raise (test_rnn.cpp, test_flash_attention.cpp)
      if (!is_differentiable(op) || op == OpId::RnnLayerBackward || op == OpId::FlashAttentionBackward) continue;
      CAPTURE(op_name(op));
      CAPTURE(int(isa));
      test::OpCase c = test::case_for(op, 5);
      Attrs attrs = c.attrs;
      // An elementwise op on each side, so the row sits between fusion groups as in a real model.
      Function f = trace([op, attrs](const Tensors& in) {
        Tensors args = in;
        if (is_floating(args[0].dtype())) args[0] = args[0] * 1.5;
        Tensors out = dispatch(op, args, attrs);
        if (is_floating(out[0].dtype())) out[0] = tanh(out[0]);
        return out;
      }, c.inputs);
      check_grads_match(f, c.inputs, 1e-4, 1e-5);
      ++tested;
    }
    CHECK(tested > 40);
  }
}

TEST_CASE("compiled training: random graphs, gradients == eager on both ISAs") {
  for (x86::Isa isa : isas()) {
    IsaCap cap(isa);
    std::mt19937 rng(11);
    manual_seed(5);
    for (int iter = 0; iter < 400; ++iter) {
      DType dt = iter % 3 == 0 ? DType::Float64 : DType::Float32;
      test::RandomGraph r = test::random_graph(rng, dt);
      CAPTURE(r.graph->str());
      Function f(r.graph, "random");
      std::vector<Tensor> ins;
      for (const IValue& v : r.inputs) ins.push_back(v.to_tensor());
      // transcendentals within a few ulp, amplified through random chains: as the forward random test
      check_grads_match(f, ins, dt == DType::Float64 ? 1e-7 : 2e-3, dt == DType::Float64 ? 1e-9 : 1e-4);
    }
  }
}

namespace {

struct Trajectory {
  std::vector<double> losses;
  int64_t step_peak_bytes = 0;  // allocator peak over one step (after the first), above what was live before it
};

// 50 Adam steps on batches of 32; `compiled` runs forward+loss through compile(trace_module(...)).
Trajectory train(nn::Module& model, bool compiled, bool image, int steps = 50) {
  auto [x, y] = test::digits();
  if (image) x = x.reshape({-1, 1, 8, 8});
  optim::Adam opt(model.parameters(), {3e-3});
  auto loss_fn = [&](const Tensors& in) { return Tensors{cross_entropy(model(in[0]), in[1])}; };
  Function step_fn;
  if (compiled) step_fn = compile(trace_module(model, loss_fn, {x.slice(0, 0, 32), y.slice(0, 0, 32)}));
  Trajectory t;
  for (int s = 0; s < steps; ++s) {
    Tensor xb = x.slice(0, s * 32, s * 32 + 32), yb = y.slice(0, s * 32, s * 32 + 32);
    int64_t before = memory_stats().current_bytes;
    reset_peak_memory_stats();
    Tensor loss = compiled ? step_fn({xb, yb})[0] : loss_fn({xb, yb})[0];
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (s > 0) t.step_peak_bytes = std::max(t.step_peak_bytes, memory_stats().peak_bytes - before);
    t.losses.push_back(loss.item<double>());
  }
  if (compiled) {
    jit::CacheStats st = compile_stats(step_fn);
    CHECK(st.train_compiles == 1);
    CHECK(st.eager_calls == 0);
    CHECK(st.saved_bytes <= st.eager_saved_bytes);
    MESSAGE("saved for backward: compiled " << st.saved_bytes << " bytes, eager " << st.eager_saved_bytes);
  }
  return t;
}

void check_trajectories(const std::function<std::shared_ptr<nn::Sequential>()>& make, bool image) {
  manual_seed(21);
  auto eager_model = make();
  manual_seed(21);
  auto compiled_model = make();
  Trajectory e = train(*eager_model, false, image), c = train(*compiled_model, true, image);
  REQUIRE(e.losses.size() == c.losses.size());
  // A step's rounding differences (other summation orders in the compiled kernels) feed the next steps, and
  // Adam's normalised updates carry them on: the first steps agree to 1e-4, and the bound widens by 2e-5
  // a step (50 steps on the baseline kernels with oneDNN on SSE4.1 and no x86 JIT drift to 6e-4 by step 46).
  for (size_t i = 0; i < e.losses.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(c.losses[i] - e.losses[i]) <= std::max(1e-4, 2e-5 * double(i + 1)) * std::abs(e.losses[i]));
  }
  CHECK(c.losses.back() < c.losses.front() * 0.5);  // it trained
  // The memory planner's bound holds for the plan's order. Inter-op threads overlap independent steps
  // and their temporaries (docs/jit.md, "Inter-op scheduling"), so the bound is checked sequentially.
  int interop = get_num_interop_threads();
  Trajectory c1;
  {
    kiln::test::NumInteropThreads one(1);
    manual_seed(21);
    auto sequential_model = make();
    c1 = train(*sequential_model, true, image);
  }
  MESSAGE("step peak: compiled " << c1.step_peak_bytes << " bytes (" << c.step_peak_bytes << " with " << interop
                                 << " inter-op threads), eager " << e.step_peak_bytes);
  // The bound counts on fusion: without the x86 JIT every elementwise step keeps its own output.
  if (kiln::test::x86_jit_on()) CHECK(c1.step_peak_bytes <= e.step_peak_bytes);
  // The order of independent steps changes no result; a small GEMM that oneDNN splits along K across
  // threads rounds differently on the one thread a concurrent step gets (docs/jit.md).
  if (get_num_threads() == 1) CHECK(c1.losses == c.losses);
  for (size_t i = 0; i < c.losses.size(); ++i) CHECK(std::abs(c1.losses[i] - c.losses[i]) <= 1e-5 * std::abs(c.losses[i]));
}

}  // namespace

TEST_CASE("compiled training: the digits MLP follows eager's loss trajectory over 50 Adam steps, peak memory <= eager") {
  check_trajectories([] { return digits_mlp(); }, false);
}

TEST_CASE("compiled training: the digits CNN follows eager's loss trajectory over 50 Adam steps, peak memory <= eager") {
  check_trajectories(digits_cnn, true);
}

TEST_CASE("compiled training: a whole step (forward, loss, backward, fused optimizer) equals eager's, every optimizer") {
  auto [x, y] = test::digits();
  using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  std::vector<std::pair<const char*, MakeOpt>> opts = {
      {"sgd momentum", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.05, 0.9}); }},
      {"sgd nesterov wd",
       [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.05, 0.9, 0, 1e-3, true}); }},
      {"adam", [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{3e-3}); }},
      {"adamw", [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p); }},
  };
  for (auto& [name, make_opt] : opts) {
    CAPTURE(name);
    manual_seed(8);
    auto me = digits_mlp();
    manual_seed(8);
    auto mc = digits_mlp();
    auto oe = make_opt(me->parameters()), oc = make_opt(mc->parameters());
    CompiledTrainStep step(*mc, [&](const Tensors& b) { return cross_entropy((*mc)(b[0]), b[1]); }, *oc);
    for (int s = 0; s < 20; ++s) {
      Tensor xb = x.slice(0, s * 16, s * 16 + 16), yb = y.slice(0, s * 16, s * 16 + 16);
      Tensor le = cross_entropy((*me)(xb), yb);
      oe->zero_grad();
      le.backward();
      oe->step();
      Tensor lc = step({xb, yb});
      CHECK(!lc.requires_grad());
      CHECK(std::abs(lc.item<double>() - le.item<double>()) <= 1e-4 * std::abs(le.item<double>()));
    }
    auto pe = me->parameters(), pc = mc->parameters();
    for (size_t i = 0; i < pe.size(); ++i) check_close(pc[i], pe[i], 1e-4, 1e-5);
    CHECK(step.traces() == 1);
    CHECK(compile_stats(step.function()).eager_calls == 0);
  }
}

TEST_CASE("compiled training: a batch of another shape traces again; a loss that is not a scalar is an error") {
  auto [x, y] = test::digits();
  manual_seed(2);
  auto m = digits_mlp();
  optim::SGD opt(m->parameters(), {0.1});
  CompiledTrainStep step(*m, [&](const Tensors& b) { return cross_entropy((*m)(b[0]), b[1]); }, opt);
  step({x.slice(0, 0, 32), y.slice(0, 0, 32)});
  step({x.slice(0, 32, 64), y.slice(0, 32, 64)});
  CHECK(step.traces() == 1);
  step({x.slice(0, 0, 20), y.slice(0, 0, 20)});  // last partial batch of an epoch
  CHECK(step.traces() == 2);
  step({x.slice(0, 64, 96), y.slice(0, 64, 96)});  // back to the first entry
  CHECK(step.traces() == 2);
  CompiledTrainStep bad(*m, [&](const Tensors& b) { return (*m)(b[0]); }, opt);
  check_error([&] { bad({x.slice(0, 0, 4)}); }, "compile_train_step: the loss function must return one scalar, got 1 outputs of shape [4,10]");
}

TEST_CASE("compiled training: a step that branches on a tensor value recompiles when the branch flips, never trains on a stale graph") {
  auto [x, y] = test::digits();
  x = x - mean(x).item<double>();  // per-batch pixel sums of both signs
  auto loss_of = [](nn::Module& m, const Tensors& b) {
    Tensor l = cross_entropy(m(b[0]), b[1]);
    if ((sum(b[0]) > 0).item<bool>()) l = l * 2.0;  // C++ control flow on a tensor value
    return l;
  };
  // Dropout on the logits: a guard that fails after the compiled forward drew its mask must put the
  // random stream back, or every later mask would differ from eager's.
  auto make = [] {
    return std::make_shared<nn::Sequential>(
        std::vector<std::shared_ptr<nn::Module>>{digits_mlp(), std::make_shared<nn::Dropout>(0.2)});
  };
  manual_seed(12);
  auto me = make();
  manual_seed(12);
  auto mc = make();
  optim::SGD oe(me->parameters(), {0.05}), oc(mc->parameters(), {0.05});
  CompiledTrainStep step(*mc, [&](const Tensors& b) { return loss_of(*mc, b); }, oc);
  int flips = 0;
  bool last = false;
  for (int s = 0; s < 24; ++s) {
    Tensors b = {x.slice(0, s * 16, s * 16 + 16), y.slice(0, s * 16, s * 16 + 16)};
    bool positive = sum(b[0]).item<double>() > 0;
    if (s > 0 && positive != last) ++flips;
    last = positive;
    manual_seed(300 + s);
    Tensor le = loss_of(*me, b);
    oe.zero_grad();
    le.backward();
    oe.step();
    manual_seed(300 + s);
    Tensor lc = step(b);
    CAPTURE(s);
    CHECK(std::abs(lc.item<double>() - le.item<double>()) <= 1e-4 * std::abs(le.item<double>()));
  }
  REQUIRE(flips >= 2);
  CHECK(step.guard_failures() == flips);
  CHECK(step.traces() == 1 + flips);
  CHECK(!step.running_eagerly());
  auto pe = me->parameters(), pc = mc->parameters();
  for (size_t i = 0; i < pe.size(); ++i) check_close(pc[i], pe[i], 1e-4, 1e-5);
  // A traced function with guards raises instead of returning a stale result.
  Function g = trace([](const Tensors& in) { return Tensors{(sum(in[0]) > 0).item<bool>() ? in[0] * 2.0 : -in[0]}; },
                     {ones({3})}, [] { TraceOptions o; o.guard_value_reads = true; o.quiet = true; return o; }());
  check_close(g({ones({3}) * 3.0})[0], full({3}, 6.0));
  check_error([&] { g({-ones({3})}); }, "forward: guard failed: item() of the output of gt was 1 when traced and is 0 now");
}

TEST_CASE("compiled training: a step with batch norm and dropout equals eager's from one seed: losses, masks, running statistics, eval steps") {
  using M = std::shared_ptr<nn::Module>;
  auto make = [] {
    return std::make_shared<nn::Sequential>(std::vector<M>{
        std::make_shared<nn::Conv2d>(1, 8, Shape{3, 3}, Shape{1, 1}, Shape{1, 1}), std::make_shared<nn::BatchNorm2d>(8),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(Shape{2, 2}), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Dropout>(0.3), std::make_shared<nn::Linear>(8 * 4 * 4, 10)});
  };
  manual_seed(1);
  auto me = make();
  manual_seed(1);
  auto mc = make();
  // SGD: Adam would magnify the conv bias's gradient, zero but for rounding under batch norm, into
  // updates that differ between any two summation orders.
  optim::SGD oe(me->parameters(), {0.05, 0.9}), oc(mc->parameters(), {0.05, 0.9});
  CompiledTrainStep step(*mc, [&](const Tensors& b) { return cross_entropy((*mc)(b[0]), b[1]); }, oc);
  auto [flat, y] = test::digits();
  Tensor x = flat.reshape({-1, 1, 8, 8});
  for (int s = 0; s < 12; ++s) {
    // Steps 6-8 in eval mode (dropout off, running statistics used and kept): an entry of its own.
    if (s == 6 || s == 9) {
      me->train(s == 9);
      mc->train(s == 9);
    }
    Tensors b = {x.slice(0, s * 32, s * 32 + 32), y.slice(0, s * 32, s * 32 + 32)};
    // The same seed before each: the compiled step (its first call traces and compiles) must draw
    // exactly the masks eager draws, and write the running statistics once per step.
    manual_seed(100 + s);
    Tensor le = cross_entropy((*me)(b[0]), b[1]);
    oe.zero_grad();
    le.backward();
    oe.step();
    manual_seed(100 + s);
    Tensor lc = step(b);
    CAPTURE(s);
    CHECK(std::abs(lc.item<double>() - le.item<double>()) <= 1e-5 * std::abs(le.item<double>()));
  }
  CHECK(step.traces() == 2);
  CHECK(!step.running_eagerly());
  auto be = me->named_buffers(), bc = mc->named_buffers();
  REQUIRE(be.size() == 3);
  for (size_t i = 0; i < be.size(); ++i) {
    CAPTURE(be[i].first);
    check_close(bc[i].second.to(DType::Float64), be[i].second.to(DType::Float64), 1e-5, 1e-6);
  }
  CHECK(bc[2].second.item<int64_t>() == 9);
  int draws = 0;
  for (ir::Node* n : step.function().graph().block()->nodes()) draws += n->prim() == ir::Prim::RandLike;
  CHECK(draws == 1);
}

TEST_CASE("compiled training: a compiled block with dropout, called with inputs that require grad, equals eager from one seed") {
  using M = std::shared_ptr<nn::Module>;
  manual_seed(1);
  auto m = std::make_shared<nn::Sequential>(
      std::vector<M>{std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Tanh>()});
  Function f = compile(trace_module(*m, [&](const Tensors& in) { return Tensors{(*m)(in[0])}; }, {randn({4, 8})}));
  std::vector<Tensor> outputs;
  for (int k = 0; k < 3; ++k) {
    Tensor x = randn({4, 8}).requires_grad_(true), xc = x.detach().clone().requires_grad_(true);
    manual_seed(50 + k);
    Tensor ye = (*m)(x);
    sum(ye * ye).backward();
    Tensor gw = m->parameters()[0].grad().clone();
    m->zero_grad();
    manual_seed(50 + k);
    Tensor yc = f({xc})[0];
    sum(yc * yc).backward();
    CAPTURE(k);
    check_close(yc, ye, 1e-5, 1e-6);
    check_close(xc.grad(), x.grad(), 1e-5, 1e-6);
    check_close(m->parameters()[0].grad(), gw, 1e-5, 1e-6);
    CHECK(sum(eq(yc, 0.0)).item<int64_t>() > 0);  // dropped
    m->zero_grad();
  }
}

TEST_CASE("compiled training: before_step clips the compiled backward's gradients as eager clips its own") {
  manual_seed(8);
  auto me = digits_mlp();
  manual_seed(8);
  auto mc = digits_mlp();
  optim::SGD oe(me->parameters(), {0.5}), oc(mc->parameters(), {0.5});
  CompiledTrainStep step(*mc, [&](const Tensors& b) { return cross_entropy((*mc)(b[0]), b[1]); }, oc);
  std::vector<double> norms;
  step.before_step = [&] { norms.push_back(nn::clip_grad_norm_(mc->parameters(), 0.25).item<double>()); };
  auto [x, y] = test::digits();
  for (int s = 0; s < 8; ++s) {
    Tensors b = {x.slice(0, s * 32, s * 32 + 32), y.slice(0, s * 32, s * 32 + 32)};
    Tensor le = cross_entropy((*me)(b[0]), b[1]);
    oe.zero_grad();
    le.backward();
    double ne = nn::clip_grad_norm_(me->parameters(), 0.25).item<double>();
    oe.step();
    Tensor lc = step(b);
    CAPTURE(s);
    CHECK(std::abs(lc.item<double>() - le.item<double>()) <= 1e-5 * std::abs(le.item<double>()));
    REQUIRE(norms.size() == size_t(s + 1));
    CHECK(norms.back() == doctest::Approx(ne).epsilon(1e-5));
    CHECK(ne > 0.25);  // the clip acts
  }
}

TEST_CASE("compiled training: the first call records the trace and the joint graph in one eager run, and its compiled entry serves every step") {
  auto make = [] {
    return std::make_shared<nn::Sequential>(
        std::vector<std::shared_ptr<nn::Module>>{digits_mlp(), std::make_shared<nn::Dropout>(0.2)});
  };
  manual_seed(5);
  auto me = make();
  manual_seed(5);
  auto mc = make();
  optim::AdamW oe(me->parameters()), oc(mc->parameters());
  CompiledTrainStep step(*mc, [&](const Tensors& b) { return cross_entropy((*mc)(b[0]), b[1]); }, oc);
  auto [x, y] = test::digits();
  // One seed for the whole run: each step's dropout masks come from where the last step left the stream.
  manual_seed(77);
  for (int s = 0; s < 4; ++s) {
    Tensors b = {x.slice(0, s * 16, s * 16 + 16), y.slice(0, s * 16, s * 16 + 16)};
    RngState rng = get_rng_state();
    Tensor le = cross_entropy((*me)(b[0]), b[1]);
    oe.zero_grad();
    le.backward();
    oe.step();
    RngState after_eager = get_rng_state();
    set_rng_state(rng);
    Tensor lc = step(b);
    CAPTURE(s);
    CHECK(get_rng_state().engine == after_eager.engine);
    CHECK(std::abs(lc.item<double>() - le.item<double>()) <= 1e-5 * std::abs(le.item<double>()));
  }
  jit::CacheStats st = compile_stats(step.function());
  CHECK(step.traces() == 1);
  CHECK(st.train_compiles == 1);  // the entry the trace's own run recorded
  CHECK(st.hits == 4);            // every step ran it, the first one included
  CHECK(st.eager_calls == 0);
  auto pe = me->parameters(), pc = mc->parameters();
  for (size_t i = 0; i < pe.size(); ++i) check_close(pc[i], pe[i], 1e-4, 1e-5);
}
