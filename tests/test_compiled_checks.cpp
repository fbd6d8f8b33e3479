// compile() of a scripted method whose parameters require grad: the checks a lowering writes (a recurrent
// layer's input rank and size, its state's shape, for a state made by torch.zeros / new_zeros of the input's
// sizes) are decided by the call's shapes, so the method trains as one compiled forward and backward; a
// check the call fails, or one only the run decides, raises the interpreter's error.
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const char* kTagger = R"(
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 5, 2)
        self.gru = nn.GRU(5, 3)
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        h0 = torch.zeros(2, x.size(1), 5)
        c0 = self.out.weight.new_zeros(2, x.size(1), 5)
        y, _ = self.rnn(x, (h0, c0))
        z, _ = self.gru(y, torch.zeros(1, x.size(1), 3))
        return self.out(z).sum()
)";

std::map<std::string, Tensor> grads_of(const nn::Module& m) {
  std::map<std::string, Tensor> g;
  for (const auto& [name, p] : m.named_parameters()) g[name] = p.grad().clone();
  return g;
}

}  // namespace

TEST_CASE("compile: a scripted LSTM and GRU from zero states of the input's batch train compiled; a failed check raises as interpreted") {
  manual_seed(3);
  auto net = script_source(kTagger, "tagger.py").module("Tagger");
  Function compiled = compile(net->method());
  for (int64_t batch : {3, 2}) {
    INFO("batch " << batch);
    Tensor x = randn({6, batch, 4});
    net->zero_grad();
    Tensor want = net->call({x})[0].to_tensor();
    want.backward();
    std::map<std::string, Tensor> eager = grads_of(*net);
    net->zero_grad();
    Tensor got = compiled.call({x})[0].to_tensor();
    got.backward();
    check_close(got.detach(), want.detach(), 1e-5, 1e-5);
    for (const auto& [name, g] : grads_of(*net)) {
      INFO(name);
      check_close(g, eager.at(name), 1e-5, 1e-5);
    }
  }
  jit::CacheStats stats = compile_stats(compiled);
  CHECK(stats.eager_calls == 0);
  CHECK(stats.train_compiles == 2);  // one forward+backward per batch size
  // the input size the call gives fails the LSTM's check: the compiled call raises what the interpreter does
  const char* bad_size = "tagger.py:16: LSTM: input.size(-1) must be equal to input_size. Expected 4";
  check_error([&] { net->call({randn({6, 3, 5})}); }, bad_size);
  check_error([&] { compiled.call({randn({6, 3, 5})}); }, bad_size);

  // a check on a value only the run decides: the interpreter, which raises when it fails
  const char* by_value = R"(
import torch
import torch.nn as nn


class Bounded(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        if x.abs().max() > 10:
            raise ValueError("input out of range")
        return self.fc(x).sum()
)";
  auto bounded = script_source(by_value, "bounded.py").module("Bounded");
  Function f = compile(bounded->method());
  f.call({randn({4, 3})})[0].to_tensor().backward();
  CHECK(compile_stats(f).eager_calls == 1);
  CHECK(bounded->named_parameters().at(0).second.grad().defined());
  check_error([&] { f.call({full({4, 3}, 20.0)}); }, "ValueError: input out of range");
}
