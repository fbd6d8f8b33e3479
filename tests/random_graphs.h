#pragma once
// Random graphs for differential tests (compiled == interpreted, compiled gradients == eager).
#include <kiln/kiln.h>

#include <memory>
#include <random>
#include <vector>

namespace kiln::test {

// A random graph over broadcastable inputs: elementwise rows, wrapped-number constants, views and
// (sometimes) a trailing reduction. Shapes are [a, b] with inputs of [a, b], [b], [a, 1] or [].
struct RandomGraph {
  std::shared_ptr<ir::Graph> graph;
  std::vector<IValue> inputs;
};
RandomGraph random_graph(std::mt19937& rng, DType dt);

}  // namespace kiln::test
