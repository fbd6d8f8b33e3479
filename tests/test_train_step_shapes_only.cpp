// CompiledTrainStep's first call records the step from shapes alone (the kernels of ops with fresh outputs
// skipped; the compiled run computes the step): the same backward graph, losses and parameters, bit for
// bit, as a first call that records with values, for the GPT of samples/gpt.py (dropout drawing) and a CNN
// (convs and pools run on undefined contents); a loss function that reads a value into C++ records again
// with values; an error is eager's.
#include "jit/compiled_function.h"
#include "jit/train_step.h"
#include "samples/digits_models.h"
#include "script_frontend/script.h"
#include "error_of.h"
#include "support.h"

using namespace kiln;

namespace {

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;
  std::string backward;  // the compiled backward graph
  int64_t value_recordings = 0;
};

Run train(nn::Module& net, const CompiledTrainStep::LossFn& loss_of, const std::vector<Tensor>& batch,
          bool shapes_only) {
  optim::AdamW opt(net.parameters(), {3e-3});
  CompiledTrainStep step(net, loss_of, opt);
  step.record_shapes_only = shapes_only;
  Run r;
  for (int s = 0; s < 3; ++s) r.losses.push_back(step(batch).item<double>());
  for (const Tensor& p : net.parameters()) r.params.push_back(p.detach().clone());
  r.backward = compiled_backward_graph(step.function(), std::vector<IValue>(batch.begin(), batch.end()))->str();
  r.value_recordings = step.value_recordings();
  return r;
}

void check_same(const Run& values, const Run& shapes) {
  CHECK(values.value_recordings == 1);
  CHECK(shapes.value_recordings == 0);
  CHECK(shapes.backward == values.backward);
  REQUIRE(shapes.losses.size() == values.losses.size());
  for (size_t i = 0; i < values.losses.size(); ++i) {
    CAPTURE(i);
    CHECK(shapes.losses[i] == values.losses[i]);
  }
  REQUIRE(shapes.params.size() == values.params.size());
  for (size_t i = 0; i < values.params.size(); ++i) {
    CAPTURE(i);
    CHECK((shapes.params[i] - values.params[i]).abs().max().item<double>() == 0.0);
  }
}

Run train_gpt(bool shapes_only) {
  manual_seed(11);
  ScriptFile file = script_file(std::string(KILN_TEST_DATA) + "/../../samples/gpt.py");
  auto net = file.build("GPT", {file.value("GPTConfig(block_size=16, vocab_size=24, n_layer=2, n_head=2, n_embd=32, "
                                           "dropout=0.1, bias=True)")});
  auto loss_of = [&](const std::vector<Tensor>& b) { return net->call({b[0], b[1]}).at(0).elements().at(1).to_tensor(); };
  return train(*net, loss_of, {randint(0, 24, {4, 16}), randint(0, 24, {4, 16})}, shapes_only);
}

Run train_cnn(bool shapes_only) {
  manual_seed(5);
  auto net = samples::digits_cnn();
  auto loss_of = [&](const std::vector<Tensor>& b) { return cross_entropy((*net)(b[0]), b[1]); };
  return train(*net, loss_of, {randn({6, 1, 8, 8}), randint(0, 10, {6})}, shapes_only);
}

}  // namespace

TEST_CASE("train step shapes only: the GPT's first step recorded from shapes trains as one recorded with values") {
  check_same(train_gpt(false), train_gpt(true));
}

TEST_CASE("train step shapes only: a CNN's first step recorded from shapes trains as one recorded with values") {
  check_same(train_cnn(false), train_cnn(true));
}

TEST_CASE("train step shapes only: a loss function that reads a value records with values, and guards it") {
  auto run = [](bool shapes_only) {
    manual_seed(3);
    auto net = samples::digits_mlp(8, 16);
    // a branch on a computed value (a count, which the compiled step computes exactly as eager): the
    // recording needs it, the compiled step guards it
    auto loss_of = [&](const std::vector<Tensor>& b) {
      Tensor l = cross_entropy((*net)(b[0]), b[1]);
      return (b[1] > 100).sum().item<double>() > 0 ? l * 0.5 : l;
    };
    return train(*net, loss_of, {randn({5, 8}), randint(0, 10, {5})}, shapes_only);
  };
  Run values = run(false), shapes = run(true);
  CHECK(shapes.value_recordings == 1);
  CHECK(shapes.losses == values.losses);
  CHECK(shapes.backward == values.backward);
}

TEST_CASE("train step shapes only: a shape error of the loss function is eager's") {
  manual_seed(3);
  auto net = samples::digits_mlp(8, 16);
  optim::SGD opt(net->parameters(), {0.1});
  auto loss_of = [&](const std::vector<Tensor>& b) { return cross_entropy((*net)(b[0]), b[1]); };
  Tensor x = randn({5, 7}), y = randint(0, 10, {5});  // 7 features for a Linear(8, 16)
  std::string eager = test::error_of([&] { loss_of({x, y}); });
  REQUIRE(!eager.empty());
  CompiledTrainStep step(*net, loss_of, opt);
  CHECK(test::error_of([&] { step({x, y}); }) == eager);
}
