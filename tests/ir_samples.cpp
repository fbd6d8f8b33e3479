#include "ir_samples.h"

namespace kiln::test {

std::shared_ptr<nn::Sequential> digits_mlp() {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Linear>(64, 32)).add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::Linear>(32, 10));
  return m;
}

std::shared_ptr<nn::Sequential> digits_cnn() {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Conv2d>(1, 4, Shape{3, 3}, Shape{1, 1}, Shape{1, 1}))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::MaxPool2d>(Shape{2, 2}))
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(4 * 4 * 4, 10));
  return m;
}

Function traced_sample(const std::string& name) {
  manual_seed(1);
  TraceOptions o;
  if (name == "mlp" || name == "cnn") {
    static std::shared_ptr<nn::Sequential> mlp = digits_mlp(), cnn = digits_cnn();
    auto m = name == "mlp" ? mlp : cnn;
    Tensor x = name == "mlp" ? randn({4, 64}) : randn({4, 1, 8, 8});
    o.input_names = {"x"};
    return trace_module(*m, [m](const Tensors& in) { return Tensors{m->forward(in[0])}; }, {x}, o);
  }
  if (name == "chain") {
    o.input_names = {"a", "b"};
    return trace([](const Tensors& in) { return Tensors{tanh(exp(in[0] * in[1] + 1.0) - in[1]).sum({1})}; },
                 {randn({2, 3}), randn({3})}, o);
  }
  if (name == "inplace") {
    o.input_names = {"x"};
    return trace(
        [](const Tensors& in) {
          Tensor y = in[0] * 2.0;
          y.add_(1.0);
          Tensor x = in[0];
          x.mul_(3.0);
          return Tensors{y};
        },
        {randn({3})}, o);
  }
  if (name == "item") {
    o.input_names = {"x"};
    return trace(
        [](const Tensors& in) {
          Tensor s = in[0].sum();
          return Tensors{s.item<double>() > 0 ? relu(in[0]) : neg(in[0])};
        },
        {tensor({1.0, 2.0})}, o);
  }
  throw Error("traced_sample: no sample named " + name);
}

}  // namespace kiln::test
