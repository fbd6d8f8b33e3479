// jit::TensorParallelModule under mpirun: a traced module split by a plan naming its Linear submodules
// (jit/tensor_parallel_plan.h), trained as one process trains the whole model: samples/gpt.py (its
// attention's heads split across the ranks, the fused and the written attention) and an MLP. Bad plans
// name the module and the numbers.
#include "../support.h"

#include <fstream>

#include "eager/dist/dist.h"
#include "jit/tensor_parallel_module.h"
#include "script_frontend/script.h"

using namespace kiln;
using kiln::test::check_error;
using jit::ParallelStyle;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

const jit::TensorParallelPlan gpt_plan = {{"transformer.h.*.attn.c_attn", ParallelStyle::Colwise},
                                          {"transformer.h.*.attn.c_proj", ParallelStyle::Rowwise},
                                          {"transformer.h.*.mlp.c_fc", ParallelStyle::Colwise},
                                          {"transformer.h.*.mlp.c_proj", ParallelStyle::Rowwise}};

// samples/gpt.py; `written` takes its attention without scaled_dot_product_attention (q @ k.T, the masked softmax)
std::shared_ptr<ScriptedModule> gpt(const std::string& config, bool written = false) {
  std::string path = KILN_SAMPLES_DIR "/gpt.py";
  if (written) {
    std::string text = test::read_bytes(path);
    const std::string flash = "self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')";
    REQUIRE(text.find(flash) != std::string::npos);
    text.replace(text.find(flash), flash.size(), "self.flash = False");
    path = test::scratch_path("tp_plan", "gpt_written.py");
    test::write_bytes(path, text);
  }
  ScriptFile file = script_file(path);
  return file.build("GPT", {file.value("GPTConfig(" + config + ", dropout=0.0, bias=True)")});
}
const std::string tiny = "block_size=16, vocab_size=65, n_layer=2, n_head=4, n_embd=32";

struct Model {
  std::shared_ptr<nn::Module> net;
  std::function<Tensor(const Tensor&, const Tensor&)> loss;  // on the whole model, eagerly
  Tensor x, y;                                              // 5 batches of rows
  int64_t rows;
};

Model gpt_model(bool written) {
  manual_seed(7);
  auto net = gpt(tiny, written);
  manual_seed(9);
  return {net, [net](const Tensor& x, const Tensor& y) { return net->call({x, y}).at(0).elements().at(1).to_tensor(); },
          randint(0, 65, {20, 16}), randint(0, 65, {20, 16}), 4};
}

Model mlp_model() {
  manual_seed(21);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(24, 48), std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(48, 10)});
  manual_seed(5);
  return {net, [net](const Tensor& x, const Tensor& y) { return cross_entropy(net->forward(x), y); }, randn({80, 24}),
          randint(0, 10, {80}), 16};
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, Tensor> state;  // every parameter whole
};

Run train(Model m, const jit::TensorParallelPlan* plan, bool adamw) {
  auto batch = [&](int s, const Tensor& t) { return t.slice(0, (s % 5) * m.rows, (s % 5) * m.rows + m.rows); };
  std::unique_ptr<jit::TensorParallelModule> tp;
  if (plan) {
    Function fwd = trace_module(*m.net, [&](const Tensors& in) { return Tensors{m.loss(in[0], in[1])}; },
                                {batch(0, m.x), batch(0, m.y)}, {.quiet = true});
    tp = std::make_unique<jit::TensorParallelModule>(fwd, *plan);
  }
  std::vector<Tensor> params = tp ? tp->parameters() : m.net->parameters();
  std::unique_ptr<optim::Optimizer> opt;
  if (adamw) opt = std::make_unique<optim::AdamW>(params, optim::AdamOptions{1e-2, 0.9, 0.99, 1e-8, 0.01});
  else opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{0.5});
  Run r;
  for (int s = 0; s < 20; ++s) {
    Tensor x = batch(s, m.x), y = batch(s, m.y);
    opt->zero_grad();
    Tensor loss = tp ? (*tp)({x, y}).at(0) : m.loss(x, y);
    loss.backward();
    opt->step();
    r.losses.push_back(loss.item<double>());
  }
  for (const auto& [name, p] : tp ? tp->full_state() : m.net->named_parameters()) r.state[name] = p.detach().clone();
  if (!tp)
    for (const auto& [name, b] : m.net->named_buffers()) r.state[name] = b.detach().clone();
  return r;
}

void check_same(const Run& ref, const Run& got, const std::string& what) {
  double loss = 0, state = 0;
  for (size_t s = 0; s < ref.losses.size(); ++s) loss = std::max(loss, std::abs(got.losses[s] - ref.losses[s]));
  REQUIRE(got.state.size() == ref.state.size());
  for (const auto& [name, p] : ref.state) {
    REQUIRE(got.state.count(name));
    CHECK(got.state.at(name).sizes() == p.sizes());
    state = std::max(state, amax((got.state.at(name) - p).abs()).item<double>());
  }
  if (rank() == 0)
    MESSAGE(what << ", " << world() << "-way tensor parallel vs one process, 20 steps: losses within " << loss
                 << ", parameters within " << state << " (first loss " << ref.losses.front() << ", last " << ref.losses.back() << ")");
  CHECK(loss <= 1e-5);
  CHECK(state <= 1e-5);
  CHECK(ref.losses.back() < ref.losses.front());  // it trained
}

int64_t bytes(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel() * int64_t(t.element_size());
  return n;
}

}  // namespace

// SGD: the key bias's gradient is zero but for rounding (a query's scores all shift by q . b, which softmax
// ignores), and Adam would scale those different roundings up to whole steps.
TEST_CASE("tensor parallel plan: the scripted GPT with its heads split across the ranks trains as one process, 20 SGD steps") {
  for (bool written : {false, true}) {
    Run ref = train(gpt_model(written), nullptr, false);
    Run got = train(gpt_model(written), &gpt_plan, false);
    check_same(ref, got, written ? "GPT, written attention" : "GPT, scaled_dot_product_attention");
  }
}

TEST_CASE("tensor parallel plan: a rank keeps its part of each split Linear, q, k and v cut per block") {
  Model m = gpt_model(false);
  Function fwd = trace_module(*m.net, [&](const Tensors& in) { return Tensors{m.loss(in[0], in[1])}; },
                              {m.x.slice(0, 0, 4), m.y.slice(0, 0, 4)}, {.quiet = true});
  jit::TensorParallelModule tp(fwd, gpt_plan);
  std::map<std::string, Tensor> local, whole;
  for (const auto& [name, t] : tp.local_state()) local[name] = t;
  for (const auto& [name, t] : m.net->named_parameters()) whole[name] = t.detach();
  const int64_t w = world(), r = rank();
  CHECK(local.at("transformer.h.0.attn.c_attn.weight").sizes() == Shape{96 / w, 32});
  CHECK(local.at("transformer.h.1.mlp.c_proj.weight").sizes() == Shape{32, 128 / w});
  CHECK(local.at("transformer.h.1.mlp.c_proj.bias").sizes() == Shape{32});  // a rowwise bias is whole
  CHECK(local.at("transformer.wte.weight").sizes() == Shape{65, 32});       // not in the plan
  // c_attn's rows: this rank's heads of q, then of k, then of v
  const int64_t part = 32 / w;
  Tensor want = cat({whole.at("transformer.h.0.attn.c_attn.weight").slice(0, r * part, (r + 1) * part),
                     whole.at("transformer.h.0.attn.c_attn.weight").slice(0, 32 + r * part, 32 + (r + 1) * part),
                     whole.at("transformer.h.0.attn.c_attn.weight").slice(0, 64 + r * part, 64 + (r + 1) * part)}, 0);
  CHECK(amax((local.at("transformer.h.0.attn.c_attn.weight") - want).abs()).item<double>() == 0.0);
  // Megatron's placement: per block, the input of c_attn and of c_fc copied (all-reduced in backward), the
  // rowwise products all-reduced forward
  std::map<std::string, int> markers;
  for (const ir::Node* n : tp.sharded().graph->block()->nodes())
    if (n->attrs().has("tensor_parallel")) ++markers[n->attrs().s("tensor_parallel")];
  CHECK(markers == std::map<std::string, int>{{"copy", 4}, {"reduce", 4}});
  const auto& shards = tp.sharded().shards;
  auto c_attn = std::find_if(shards.begin(), shards.end(), [](const auto& s) { return s.name == "transformer.h.0.attn.c_attn.bias"; });
  REQUIRE(c_attn != shards.end());
  CHECK(c_attn->blocks == 3);
  CHECK(c_attn->module == "transformer.h.0.attn.c_attn");
  // split: per block c_attn's, c_proj's, c_fc's and mlp.c_proj's weights (12 C^2) and the colwise biases (3 C + 4 C)
  const int64_t all = bytes(m.net->parameters()), mine = bytes(tp.parameters()), linears = 2 * (12 * 32 * 32 + 7 * 32) * 4;
  if (r == 0) MESSAGE("GPT parameters: one process " << all << " bytes, a rank of " << w << " " << mine);
  CHECK(mine == all - linears + linears / w);
}

TEST_CASE("tensor parallel plan: an MLP by plan trains as one process, 20 AdamW steps") {
  const jit::TensorParallelPlan plan = {{"0", ParallelStyle::Colwise}, {"2", ParallelStyle::Rowwise}};
  Run ref = train(mlp_model(), nullptr, true);
  Run got = train(mlp_model(), &plan, true);
  check_same(ref, got, "MLP");
}

TEST_CASE("tensor parallel plan: a width or a head count that does not divide, and a plan that does not fit, name the module and the numbers") {
  // the pass alone, for 2 ranks (no collective)
  auto sharded = [](const std::shared_ptr<nn::Module>& net, const Tensors& sample, const jit::TensorParallelPlan& plan,
                    std::function<Tensor(const Tensors&)> loss) {
    Function fwd = trace_module(*net, [&](const Tensors& in) { return Tensors{loss(in)}; }, sample, {.quiet = true});
    jit::shard_for_tensor_parallel(fwd, plan, 2);
  };
  auto gpt_loss = [](std::shared_ptr<ScriptedModule> net) {
    return [net](const Tensors& in) { return net->call({in[0], in[1]}).at(0).elements().at(1).to_tensor(); };
  };
  Tensor idx = randint(0, 65, {2, 8}), idy = randint(0, 65, {2, 8});
  // 3 heads of 8: c_attn's 72 rows split (12 of each of q, k, v per rank), but not the heads
  auto three = gpt("block_size=8, vocab_size=65, n_layer=1, n_head=3, n_embd=24");
  check_error([&] { sharded(three, {idx, idy}, gpt_plan, gpt_loss(three)); },
              "node 28 (reshape) views dim 2 of [2,8,24], sharded by module transformer.h.0.attn.c_attn, as [3,8]: its leading size 3 "
              "(the heads) does not divide by the world size 2");
  // n_embd 21: q, k and v have 21 rows each, which do not split in 2
  auto odd = gpt("block_size=8, vocab_size=65, n_layer=1, n_head=3, n_embd=21");
  check_error([&] { sharded(odd, {idx, idy}, gpt_plan, gpt_loss(odd)); },
              "colwise module transformer.h.0.attn.c_attn: out_features 63 are read as 3 slices of 21, which do not "
              "divide by the world size 2");
  auto mlp = [](int64_t hidden) {
    manual_seed(3);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(8, hidden), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(hidden, 4)});
  };
  Tensor x = randn({5, 8});
  auto out = [](std::shared_ptr<nn::Sequential> net) { return [net](const Tensors& in) { return net->forward(in[0]); }; };
  auto m7 = mlp(7);
  check_error([&] { sharded(m7, {x}, {{"0", ParallelStyle::Colwise}, {"2", ParallelStyle::Rowwise}}, out(m7)); },
              "colwise module 0: out_features 7 does not divide by the world size 2");
  check_error([&] { sharded(m7, {x}, {{"2", ParallelStyle::Rowwise}}, out(m7)); },
              "rowwise module 2: in_features 7 does not divide by the world size 2");
  auto m6 = mlp(6);
  check_error([&] { sharded(m6, {x}, {{"2", ParallelStyle::Rowwise}}, out(m6)); },
              "multiplies a replicated input by module 2's split rows; a rowwise module reads the output of a colwise one");
  check_error([&] { sharded(m6, {x}, {{"0", ParallelStyle::Colwise}}, out(m6)); },
              "node 5 (matmul) multiplies module 0's split features by a replicated matrix; a rowwise module takes them");
  auto one = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(8, 6)});
  check_error([&] { sharded(one, {x}, {{"0", ParallelStyle::Colwise}}, out(one)); },
              "the graph's output 0 of shape [5,6] is sharded on dim 1 by module 0; end each sharded region with a rowwise module");
  check_error([&] { sharded(m6, {x}, {{"mlp.*", ParallelStyle::Colwise}}, out(m6)); },
              "the plan's 'mlp.*' (colwise) names no module with a weight in the traced model; its parameters are named like '0.weight'");
}
