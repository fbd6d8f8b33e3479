#pragma once
// Two MLP towers on one input, concatenated: the branches share nothing until the cat, so the inter-op
// scheduler runs them at once. Every matmul is small (0.13 MFLOP at batch 16): each step gets one thread.
// Used by tests/test_interop.cpp and the ThreadSanitizer program (tests/tsan).
#include <kiln/kiln.h>

#include <memory>
#include <vector>

namespace kiln::test {

inline const char* kTwoTowers = R"(graph(%x : f32[16,64], %wa : f32[64,64], %ba : f32[64], %wb : f32[64,64], %bb : f32[64], %wc : f32[64,64], %bc : f32[64], %wd : f32[64,64], %bd : f32[64]):
  %a0 : f32[16,64] = matmul(%x, %wa)
  %a1 : f32[16,64] = add(%a0, %ba)
  %a2 : f32[16,64] = relu(%a1)
  %a3 : f32[16,64] = matmul(%a2, %wb)
  %a4 : f32[16,64] = add(%a3, %bb)
  %a5 : f32[16,64] = tanh(%a4)
  %c0 : f32[16,64] = matmul(%x, %wc)
  %c1 : f32[16,64] = add(%c0, %bc)
  %c2 : f32[16,64] = relu(%c1)
  %c3 : f32[16,64] = matmul(%c2, %wd)
  %c4 : f32[16,64] = add(%c3, %bd)
  %c5 : f32[16,64] = sigmoid(%c4)
  %y : f32[16,128] = cat[dim=1](%a5, %c5)
  return (%y)
)";

// The input and the four layers' weights and biases, from a seed.
inline std::vector<IValue> tower_inputs(int64_t batch = 16, uint64_t seed = 7) {
  manual_seed(seed);
  std::vector<IValue> ins{randn({batch, 64})};
  for (int i = 0; i < 4; ++i) {
    ins.emplace_back(randn({64, 64}) * 0.1);
    ins.emplace_back(randn({64}));
  }
  return ins;
}

inline Function tower_function() {
  auto g = ir::parse_ir(kTwoTowers);
  ir::verify(*g);
  return Function(std::shared_ptr<ir::Graph>(std::move(g)), "towers");
}

}  // namespace kiln::test
