// partition_for_pipeline: the plan it picks against every plan of small graphs (brute force), and the stage
// graphs split_for_pipeline makes, run one after another, against the whole traced forward.
#include "support.h"

#include "jit/pipeline_partition.h"
#include "samples/digits_models.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

// A block with a skip connection and a side branch, so some cuts carry two values and some one.
struct Skip : nn::Module {
  std::shared_ptr<nn::Linear> a, b, c, head;
  Skip() {
    a = register_module("a", std::make_shared<nn::Linear>(16, 32));
    b = register_module("b", std::make_shared<nn::Linear>(32, 32));
    c = register_module("c", std::make_shared<nn::Linear>(32, 32));
    head = register_module("head", std::make_shared<nn::Linear>(32, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu((*a)(x));
    Tensor y = h + tanh((*b)(h));
    Tensor z = y + (*c)(y) * sigmoid(h);
    return (*head)(z);
  }
  std::string name() const override { return "Skip"; }
};

Function traced(nn::Module& m, const Tensor& x) {
  return trace_module(m, [&](const Tensors& in) { return Tensors{m.forward(in[0])}; }, {x});
}

// Every plan of `stages` stages: the best by the partition's own rule (balance within slack, then fewest
// bytes, then balance).
jit::PipelinePartition brute_force(const Function& f, int stages, double slack) {
  size_t n = 0;
  for (const ir::Node* node : f.graph().block()->nodes()) (void)node, ++n;
  std::vector<jit::PipelinePartition> all;
  std::vector<size_t> starts{0};
  std::function<void(size_t)> rec = [&](size_t from) {
    if (int(starts.size()) == stages) {
      all.push_back(jit::evaluate_pipeline_plan(f, starts));
      return;
    }
    for (size_t s = from; s < n; ++s) {
      starts.push_back(s);
      rec(s + 1);
      starts.pop_back();
    }
  };
  rec(1);
  int64_t best = INT64_MAX;
  for (auto& p : all) best = std::min(best, p.max_flops());
  const jit::PipelinePartition* win = nullptr;
  for (auto& p : all) {
    if (double(p.max_flops()) > double(int64_t(double(best) * (1 + slack)))) continue;
    if (!win || std::pair(p.total_cut_bytes(), p.max_flops()) < std::pair(win->total_cut_bytes(), win->max_flops()))
      win = &p;
  }
  return *win;
}

// The stages run one after another, each stage's sent values the next one's received values.
Tensors run_stages(const Function& f, const std::vector<jit::StageGraph>& stages, const Tensors& inputs) {
  Tensors carry = inputs;
  for (const jit::StageGraph& sg : stages) {
    REQUIRE(carry.size() == sg.num_received);
    Tensors in = carry;
    for (size_t k : sg.params) in.push_back(f.binding().bound[k]);
    carry = Function(sg.graph, "stage")(in);
  }
  return carry;
}

}  // namespace

TEST_CASE("pipeline partition: the plan equals the best of every plan on small graphs, and its stages compute the forward") {
  manual_seed(3);
  auto mlp = kiln::samples::digits_mlp(16, 24);
  Skip skip;
  Tensor x = randn({5, 16});
  for (nn::Module* m : {static_cast<nn::Module*>(mlp.get()), static_cast<nn::Module*>(&skip)}) {
    Function f = traced(*m, x);
    Tensor want = m->forward(x);
    for (int stages : {2, 3})
      for (double slack : {0.0, 0.5}) {
        CAPTURE(m->name());
        CAPTURE(stages);
        CAPTURE(slack);
        jit::PipelinePartition got = jit::partition_for_pipeline(f, stages, {slack});
        jit::PipelinePartition best = brute_force(f, stages, slack);
        CHECK(got.total_cut_bytes() == best.total_cut_bytes());
        CHECK(got.max_flops() == best.max_flops());
        CHECK(got.starts.size() == size_t(stages));
        Tensors out = run_stages(f, jit::split_for_pipeline(f, got), {x});
        REQUIRE(out.size() == 1);
        check_close(out[0], want, 1e-5, 1e-6);
      }
  }
  // The skip block's activations are 5 x 32 floats: a cut inside the block carries two of them
  Function f = traced(skip, x);
  jit::PipelinePartition two = jit::partition_for_pipeline(f, 2, {0.0});
  CHECK(two.cut_bytes[0] % (5 * 32 * 4) == 0);
}

TEST_CASE("pipeline partition: bad plans name the numbers") {
  manual_seed(4);
  auto mlp = kiln::samples::digits_mlp(16, 24);
  Function f = traced(*mlp, randn({2, 16}));
  check_error([&] { jit::partition_for_pipeline(f, 100); }, "100 stages for a graph of");
  check_error([&] { jit::partition_for_pipeline(f, 0); }, "0 stages");
  check_error([&] { jit::evaluate_pipeline_plan(f, {0, 3, 3}); }, "stage 2 starts at node 3");
  check_error([&] { jit::evaluate_pipeline_plan(f, {1}); }, "the first stage must start at node 0");
}
