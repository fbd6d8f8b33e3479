#pragma once
// The two digits models the sample trains and the tests and benchmarks reuse: an MLP and a small CNN
// over 8x8 images (conv 1->16, pool, conv 16->32, pool, linear 128->10).
#include <kiln/kiln.h>

#include <memory>
#include <vector>

namespace kiln::samples {

inline std::shared_ptr<nn::Sequential> digits_mlp(int64_t in = 64, int64_t hidden = 128) {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(hidden, 10)});
}

inline std::shared_ptr<nn::Sequential> digits_cnn() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 16, Shape{3, 3}, Shape{1, 1}, Shape{1, 1}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(Shape{2, 2}),
      std::make_shared<nn::Conv2d>(16, 32, Shape{3, 3}, Shape{1, 1}, Shape{1, 1}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(Shape{2, 2}), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(32 * 2 * 2, 10)});
}

}  // namespace kiln::samples
