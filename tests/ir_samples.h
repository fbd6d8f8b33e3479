#pragma once
// Traced sample programs shared by the golden IR tests (ir_tool trace NAME) and the unit tests.
#include <memory>
#include <string>

#include "kiln/kiln.h"

namespace kiln::test {

// The samples' models (samples/train_digits.cpp): an MLP and a small CNN on 8x8 digits.
std::shared_ptr<nn::Sequential> digits_mlp();
std::shared_ptr<nn::Sequential> digits_cnn();

// "mlp", "cnn", "chain", "inplace", "item", "batchnorm": a function traced on fixed sample inputs.
Function traced_sample(const std::string& name);

}  // namespace kiln::test
