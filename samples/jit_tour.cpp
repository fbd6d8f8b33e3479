// The capture layers in one program: trace a model into the IR, print it, compile it (fused x86
// kernels, cached by input signature), script a function with a data-dependent loop, and time
// eager against compiled.
#include <kiln/kiln.h>

#include <chrono>
#include <iostream>

using namespace kiln;

namespace {

template <class F>
double best_ms(F&& f, int reps = 20) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

Tensor chain(const Tensor& x) { return sigmoid(tanh(x * 1.5 + 0.5) * x) + exp(x) * 0.1 - x; }

const char* kScript = R"(import torch
from torch import Tensor


def halve_until_small(x: Tensor, limit: float) -> Tuple[Tensor, int]:
    steps = 0
    while bool(x.abs().max() > limit):
        x = x * 0.5
        steps += 1
    return x, steps
)";

}  // namespace

int main() {
  manual_seed(0);
  // 1. trace: the ops that ran, as a graph
  Function f = trace([](const Tensors& in) { return Tensors{chain(in[0])}; }, {randn({8})},
                     TraceOptions{.input_names = {"x"}});
  std::cout << "traced graph:\n" << f << "\n";

  // 2. compile: passes, fusion into one kernel, x86 code
  Function fast = compile(f);
  auto g = compiled_graph(fast, {randn({8})});
  std::cout << "after the JIT's passes:\n" << g->str() << "\n";

  // 3. the same function on 16M elements: the trace did not read sizes, so other sizes run
  Tensor x = randn({1 << 24});
  Tensor want = chain(x), got = fast({x})[0];
  std::cout << "max |compiled - eager| = " << (got - want).abs().max().item<double>() << "\n";
  double eager_ms = best_ms([&] { chain(x); }, 5), jit_ms = best_ms([&] { fast({x}); }, 5);
  std::cout << "8-op chain on 16M floats: eager " << eager_ms << " ms, compiled " << jit_ms << " ms ("
            << eager_ms / jit_ms << "x)\n";
  jit::CacheStats s = compile_stats(fast);
  std::cout << "cache: " << s.hits << " hits, " << s.misses << " misses, " << s.kernels << " kernels\n\n";

  // 4. script: control flow the trace cannot see, from a TorchScript-compatible source
  std::string text = std::string(kScript);
  text.insert(text.find("from torch import Tensor"), "from typing import Tuple\n");
  ScriptFile m = script_source(text, "halve.py");
  IValue r = m.function("halve_until_small").call({randn({4}) * 100.0, 1.0})[0];  // one result: a tuple
  std::cout << "scripted while loop ran " << r.elements()[1].to_int() << " times; result "
            << r.elements()[0].to_tensor() << "\n";
  return 0;
}
