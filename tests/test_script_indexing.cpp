// Advanced indexing as torch does it, in eager (eager/composites_tensor_ops.h) and in scripts: bool masks beside
// slices, writes through a mask with their gradients, index tensors on dims apart, and torch's IndexError words.
// The model file tests/script/models/advanced_indexing.py is compared with PyTorch 1.13's values and gradients
// (tests/script/models/make_indexing_fixtures.py).
#include "eager/autograd/gradcheck.h"
#include "eager/io.h"
#include "eager/tensor_ops.h"
#include "jit/compiled_function.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::flat;
using kiln::test::seq;
using kiln::test::values;

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";

Tensor i64(std::vector<int64_t> v, Shape s) { return tensor(v, s); }
Tensor mask(std::vector<int64_t> v) { return tensor(v, {int64_t(v.size())}).to(DType::Bool); }

}  // namespace

TEST_CASE("script indexing: advanced_indexing.py equals PyTorch 1.13, values and gradients, interpreted and compiled") {
  std::map<std::string, Tensor> data = load_safetensors(kModels + "data/indexing.safetensors");
  auto net = script_file(kModels + "advanced_indexing.py").module("Indexing", {IValue(4)});
  net->load_state_dict(kiln::test::with_prefix(data, "state."));
  Tensor x = data.at("input.0").clone().requires_grad_(), rows = data.at("input.4").clone().requires_grad_();
  std::vector<IValue> in{x, data.at("input.1").to(DType::Bool), data.at("input.2"), data.at("input.3"), rows};
  Tensors out = flat(net->call(in));
  REQUIRE(out.size() == 10);
  Tensor loss;
  for (size_t k = 0; k < out.size(); ++k) {
    CAPTURE(k);
    check_close(out[k], data.at("output." + std::to_string(k)), 1e-5, 1e-6);
    Tensor term = sum(mul(out[k], data.at("weight." + std::to_string(k))));
    loss = k == 0 ? term : add(loss, term);
  }
  loss.backward();
  check_close(x.grad(), data.at("grad.x"), 1e-5, 1e-6);
  check_close(rows.grad(), data.at("grad.rows"), 1e-5, 1e-6);
  for (const auto& [name, p] : net->named_parameters()) {
    CAPTURE(name);
    check_close(p.grad(), data.at("grad." + name), 1e-5, 1e-6);
  }
  Function compiled = compile(net->method());
  NoGradGuard no_grad;
  Tensors got = flat(compiled.call(in));
  REQUIRE(got.size() == 10);
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    check_close(got[k], data.at("output." + std::to_string(k)), 1e-5, 1e-6);
  }
}

TEST_CASE("eager advanced indexing: index tensors apart, a mask over one dim, writes through a mask, gradients") {
  Tensor x = seq({3, 4, 5});
  Tensor i = i64({0, 2}, {2}), j = i64({1, -1}, {2});
  // x[i, :, j]: the broadcast index dim first, then the dim between
  Tensor apart = index_dims(x, {0, 2}, {i, j});
  REQUIRE(apart.sizes() == Shape{2, 4});
  check_close(apart.select(0, 1), x.select(0, 2).select(1, 4));
  CHECK(gradcheck([&](const Tensors& a) { return index_dims(a[0], {0, 2}, {i, j}); }, {seq({3, 4, 5}).requires_grad_()}));
  // x[:, m]: the count takes the mask's dim
  Tensor cols = masked_dim(x, 1, mask({1, 0, 0, 1}));
  REQUIRE(cols.sizes() == Shape{3, 2, 5});
  check_close(cols.select(1, 1), x.select(1, 3));
  CHECK(masked_dim(x, -1, mask({0, 1, 0, 0, 1})).sizes() == Shape{3, 4, 2});
  // x[m] = v: v broadcast to the picked rows, x's rows elsewhere; gradients of both as torch's index_put_
  Tensor m = mask({1, 0, 1});
  Tensor put = masked_put(x, m, full({}, 7.0));
  CHECK(values(put.select(0, 1)) == values(x.select(0, 1)));
  CHECK(values(put.select(0, 2)) == std::vector<double>(20, 7.0));
  CHECK(gradcheck([&](const Tensors& a) { return masked_put(a[0], m, a[1]); },
                  {seq({3, 4, 5}).requires_grad_(), seq({2, 4, 5}, 0.7).requires_grad_()}));
  CHECK(gradcheck([&](const Tensors& a) { return masked_put(a[0], m, a[1]); },
                  {seq({3, 4, 5}).requires_grad_(), seq({5}, 0.7).requires_grad_()}));
  CHECK(values(masked_put(x, mask({0, 0, 0}), seq({5}))) == values(x));  // nothing picked
}

TEST_CASE("advanced indexing errors: torch's IndexError words for a bad index and a mask of the wrong shape") {
  Tensor x = seq({3, 4, 5});
  check_error([&] { index_tensors(x, 0, {i64({7}, {1})}); }, "index 7 is out of bounds for dimension 0 with size 3");
  check_error([&] { index_tensors(x, 0, {i64({-7}, {1})}); }, "index -7 is out of bounds for dimension 0 with size 3");
  check_error([&] { index_tensors(x, 0, {i64({0}, {1}), i64({9}, {1})}); }, "index 9 is out of bounds for dimension 1 with size 4");
  check_error([&] { masked_rows(x, ones({4, 3}, DType::Bool)); },
              "the shape of the mask [4, 3] at index 0 does not match the shape of the indexed tensor [3, 4, 5] at index 0");
  check_error([&] { masked_dim(x, 1, ones({5}, DType::Bool)); },
              "the shape of the mask [5] at index 0 does not match the shape of the indexed tensor [3, 4, 5] at index 1");
  const char* src =
      "import torch\n"
      "def rows(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:\n    return x[m]\n"
      "def cols(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:\n    return x[:, m]\n"
      "def pick(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n    return x[i]\n"
      "def put(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:\n    y = x.clone()\n    y[m] = 1.0\n    return y\n"
      "def after(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n    return x[..., i]\n";
  ScriptModule s = script_source(src, "t.py");
  // a mask of as many elements as x's leading dims, in another shape
  check_error([&] { s.function("rows").call({x, ones({4, 3}, DType::Bool)}); },
              "t.py:3: the shape of the mask does not match the shape of the indexed tensor from index 0");
  check_error([&] { s.function("cols").call({x, ones({2, 2}, DType::Bool)}); }, "a bool mask beside other indices must be 1-D");
  check_error([&] { s.function("cols").call({x, ones({5}, DType::Bool)}); },
              "the shape of the mask does not match the shape of the indexed tensor from index 1");
  check_error([&] { s.function("put").call({x, ones({12}, DType::Bool)}); },
              "the shape of the mask does not match the shape of the indexed tensor from index 0");
  check_error([&] { s.function("pick").call({x, i64({7}, {1})}); }, "index 7 is out of bounds for dimension 0 with size 3");
  check_error([&] { s.function("after").call({x, i64({1}, {1})}); }, "an integer tensor index after '...' is not supported");
  CHECK(s.function("put").call({x, mask({0, 1, 1})})[0].to_tensor().sizes() == Shape{3, 4, 5});
}
