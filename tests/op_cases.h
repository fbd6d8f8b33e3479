#pragma once
// One sample call per row of the op table (inputs and attributes), shared by the tests that run
// every row: traced == eager, compiled gradients == eager gradients.
#include <kiln/kiln.h>

#include <optional>

namespace kiln::test {

struct OpCase {
  Tensors inputs;
  Attrs attrs;
};

// Inputs and attributes for one row of the table; `seed` changes the values, never the shapes.
// No default: a new row does not compile until it has a case here.
OpCase case_for(OpId op, uint64_t seed);

// A row's sample with PyTorch's result (tests/gen_index_rows_values.py): the output's shape and values, and the
// gradients of sum(y * sin(0.4 * i + 0.3)) per input (empty for an index). Rows without one: nullopt.
struct TorchCase {
  Tensors inputs;
  Attrs attrs;
  Shape shape;
  std::vector<double> out;
  std::vector<std::vector<double>> grads;
};
std::optional<TorchCase> torch_case(OpId op);

// The rest of an elementwise row's test entry (test_gradcheck.cpp and test_elementwise.cpp read it, so a
// new row is one entry here): where gradcheck draws its inputs, how test_elementwise samples values, a
// float64 reference written independently of the ops.def expression, and torch 1.13's result dtypes (codes
// b i l B h f d per dtype bool int32 int64 bf16 f16 f32 f64, x: torch raises; generated with
// /usr/bin/python3). No default: a new row does not compile until it has an entry.
struct ElementwiseCase {
  double lo = -2, hi = 2;           // gradcheck: the inputs' interval (a binary row's first operand)
  double other_lo = 0, other_hi = 0;  // gradcheck: the second operand's, when other_hi > other_lo
  bool kink_at_zero = false;        // gradcheck: magnitudes in [0.2, 2) of either sign, first order only
  bool second_order = true;         // gradgradcheck too
  bool positive = false;            // test_elementwise: the first operand in (0.05, 4) rather than (-4, 4)
  bool quantized = false;           // test_elementwise: halves in [-2, 2] (ties and zeros for comparisons)
  double (*ref1)(double) = nullptr;
  double (*ref2)(double, double) = nullptr;
  const char* torch_unary = nullptr;  // the result dtype per input dtype
  // tensor∘tensor, tensor∘0-d, 0-d∘tensor, 0-d∘0-d (49 codes, lhs dtype major), then tensor∘scalar and
  // scalar∘tensor (7 dtypes × a bool, int and float scalar)
  const char *tt = nullptr, *t0 = nullptr, *zt = nullptr, *zz = nullptr, *ts = nullptr, *st = nullptr;
};
ElementwiseCase elementwise_case(OpId op);

}  // namespace kiln::test
