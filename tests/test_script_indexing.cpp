// Advanced indexing as torch does it, in eager (eager/composites_tensor_ops.h) and in scripts: bool masks beside
// slices, writes through a mask with their gradients, index tensors on dims apart, and torch's IndexError words.
// The model file tests/script/models/advanced_indexing.py is compared with PyTorch 1.13's values and gradients
// (tests/script/models/make_indexing_fixtures.py); mixed_indexing.py (ints after '...', 2-D masks beside other indices,
// masks beside index tensors, index_put_, writes after ':' and 0-d values of another dtype, writes through an index tensor
// after ':' or '...' and beside ints and slices) with PyTorch 2.15's.
#include "eager/autograd/gradcheck.h"
#include "eager/index_put_dim.h"
#include "eager/io.h"
#include "eager/tensor_ops.h"
#include "jit/compiled_function.h"
#include "script_frontend/script.h"
#include "support.h"
#include "tracer/trace.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::flat;
using kiln::test::seq;
using kiln::test::values;

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";

Tensor i64(std::vector<int64_t> v, Shape s) { return tensor(v, s); }
Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s, DType::Float64); }
Tensor mask(std::vector<int64_t> v) { return tensor(v, {int64_t(v.size())}).to(DType::Bool); }

// The model's outputs and the gradients of sum(output_k * weight_k) over x, rows and its parameters, against the
// fixture, interpreted; then its outputs through compile(). Inputs 1 and 2 of mixed_indexing.py are masks.
void check_model(const std::string& file, const std::string& cls, const std::string& fixture, size_t masks, size_t outputs) {
  std::map<std::string, Tensor> data = load_safetensors(kModels + "data/" + fixture);
  auto net = script_file(kModels + file).module(cls, {IValue(4)});
  net->load_state_dict(kiln::test::with_prefix(data, "state."));
  Tensor x = data.at("input.0").clone().requires_grad_(), rows = data.at("input.4").clone().requires_grad_();
  std::vector<IValue> in{x, data.at("input.1").to(DType::Bool), data.at("input.2"), data.at("input.3"), rows};
  if (masks == 2) in[2] = data.at("input.2").to(DType::Bool);
  Tensors out = flat(net->call(in));
  REQUIRE(out.size() == outputs);
  Tensor loss;
  for (size_t k = 0; k < out.size(); ++k) {
    CAPTURE(k);
    check_close(out[k], data.at("output." + std::to_string(k)), 1e-5, 1e-6);
    CHECK(out[k].dtype() == data.at("output." + std::to_string(k)).dtype());
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
  REQUIRE(got.size() == outputs);
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    check_close(got[k], data.at("output." + std::to_string(k)), 1e-5, 1e-6);
  }
}

}  // namespace

TEST_CASE("script indexing: advanced_indexing.py equals PyTorch 1.13, values and gradients, interpreted and compiled") {
  check_model("advanced_indexing.py", "Indexing", "indexing.safetensors", 1, 10);
}

// PyTorch 2.15's fixture: 1.13 applies h[grid, 1]'s int to the mask's second dim (make_indexing_fixtures.py)
TEST_CASE("script indexing: mixed_indexing.py (ints after '...', 2-D masks, masks beside ints, index_put_) equals PyTorch 2.15") {
  check_model("mixed_indexing.py", "Mixed", "mixed_indexing.safetensors", 2, 20);
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

TEST_CASE("eager mixed indexing: ints after '...', 2-D masks beside other indices, masks beside ints, index_put") {
  Tensor x = seq({3, 4, 5});
  Tensor i = i64({4, -5}, {2});
  // x[..., i]: i's shape in the last dim's place
  Tensor last = index_dims(x, {-1}, {i});
  REQUIRE(last.sizes() == Shape{3, 4, 2});
  check_close(last.select(2, 1), x.select(2, 0));
  // x[:, m2]: a 2-D mask over dims 1 and 2, its count in their place
  Tensor m2 = tensor(std::vector<int64_t>{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {4, 5}).to(DType::Bool);
  Tensor cols = masked_dim(x, 1, m2);
  REQUIRE(cols.sizes() == Shape{3, 4});
  check_close(cols.select(1, 3), x.select(2, 4).select(1, 3));
  CHECK(gradcheck([&](const Tensors& a) { return masked_dim(a[0], 1, m2); }, {seq({3, 4, 5}).requires_grad_()}));
  CHECK(masked_dim(x, -1, m2).sizes() == Shape{3, 4});
  // x[m, :, i]: the mask's positions [0, 2] broadcast with i
  Tensor apart = index_dims(x, {0, 2}, {mask({1, 0, 1}), i});
  REQUIRE(apart.sizes() == Shape{2, 4});
  check_close(apart.select(0, 1), x.select(0, 2).select(1, 0));
  // x[i] = v: rows 4 - 5 = ... wrapped; v broadcast; gradients to x (zero on written rows) and v
  Tensor rows = i64({2, -3}, {2});
  Tensor put = index_put(x, rows, full({}, 7.0));
  CHECK(values(put.select(0, 0)) == std::vector<double>(20, 7.0));
  CHECK(values(put.select(0, 1)) == values(x.select(0, 1)));
  CHECK(gradcheck([&](const Tensors& a) { return index_put(a[0], rows, a[1]); },
                  {seq({3, 4, 5}).requires_grad_(), seq({2, 4, 5}, 0.7).requires_grad_()}));
  CHECK(values(index_put(x, i64({1, 1}, {2}), seq({2, 4, 5}, 0.7)).select(0, 1)) == values(seq({2, 4, 5}, 0.7).select(0, 1)));
  // x[:, m] = v and a 0-d v of another dtype, cast as torch casts it
  Tensor cput = masked_put_dim(x, 1, mask({0, 1, 1, 0}), full({}, int64_t(3)));
  CHECK(cput.dtype() == DType::Float64);
  CHECK(values(cput.select(1, 2)) == std::vector<double>(15, 3.0));
  CHECK(values(cput.select(1, 0)) == values(x.select(1, 0)));
  CHECK(gradcheck([&](const Tensors& a) { return masked_put_dim(a[0], -1, m2, a[1]); },
                  {seq({3, 4, 5}).requires_grad_(), seq({3, 1}, 0.7).requires_grad_()}));
  // x[:, i] = v, x[..., i] = v: index_put_dim, v broadcast, gradients to x and v; a repeated index keeps the last write
  Tensor put_cols = index_put_dim(x, 1, rows, seq({3, 2, 5}, 0.7));
  check_close(put_cols.select(1, 2), seq({3, 2, 5}, 0.7).select(1, 0));
  check_close(put_cols.select(1, 1), seq({3, 2, 5}, 0.7).select(1, 1));  // -3 wraps to 1
  check_close(put_cols.select(1, 0), x.select(1, 0));
  CHECK(gradcheck([&](const Tensors& a) { return index_put_dim(a[0], 1, rows, a[1]); },
                  {seq({3, 4, 5}).requires_grad_(), seq({2, 5}, 0.7).requires_grad_()}));
  CHECK(gradcheck([&](const Tensors& a) { return index_put_dim(a[0], -1, i64({0, 4, 0}, {3, 1}), a[1]); },
                  {seq({3, 4, 5}).requires_grad_(), seq({3, 1}, 0.7).requires_grad_()}));
  CHECK(values(index_put_dim(x, -1, i64({2, 2}, {2}), seq({2}, 0.7)).select(2, 2)) == std::vector<double>(12, values(seq({2}, 0.7))[1]));
  // traced: the same ops replayed on other inputs
  Function cols_t = trace([&](const Tensors& a) { return Tensors{index_put_dim(a[0], 2, a[1], a[2])}; },
                          {x, i64({0, 1, 2}, {3}), full({}, 7.0)});
  Tensor y2 = seq({3, 4, 5}, 0.3);
  check_close(flat(cols_t.call({y2, i64({4, 0, 1}, {3}), full({}, 2.0)}))[0], index_put_dim(y2, 2, i64({4, 0, 1}, {3}), full({}, 2.0)));
  Function t = trace([&](const Tensors& a) { return Tensors{index_dims(a[0], {0, 2}, {a[1], i}), index_put(a[0], rows, a[2])}; },
                     {x, mask({1, 0, 1}), full({}, 7.0)});
  Tensor y = seq({3, 4, 5}, 0.9);
  Tensors got = flat(t.call({y, mask({0, 1, 1}), full({}, 2.0)}));
  check_close(got[0], index_dims(y, {0, 2}, {mask({0, 1, 1}), i}));
  check_close(got[1], index_put(y, rows, full({}, 2.0)));
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
  check_error([&] { index_dims(x, {0, 1}, {ones({3}, DType::Bool), i64({0, 1}, {2})}); },
              "shape mismatch: indexing tensors could not be broadcast together with shapes [3], [2]");
  check_error([&] { index_put(x, i64({0, 9}, {2}), full({}, 1.0)); }, "index 9 is out of bounds for dimension 0 with size 3");
  check_error([&] { masked_put(x, mask({1, 0, 1}), ones({5}, DType::Int64)); },
              "index put requires the source and destination dtypes match, got Double for the destination and Long for the source");
  const char* src =
      "import torch\n"
      "def rows(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:\n    return x[m]\n"
      "def cols(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:\n    return x[:, m]\n"
      "def pick(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n    return x[i]\n"
      "def put(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:\n    y = x.clone()\n    y[m] = 1.0\n    return y\n"
      "def after(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n    return x[..., i]\n"
      "def put_rows(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:\n    y = x.clone()\n    y[i] = v\n    return y\n"
      "def mixed(x: torch.Tensor, m: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n    return x[m, i]\n";
  ScriptFile s = script_source(src, "t.py");
  // a mask of as many elements as x's leading dims, in another shape
  check_error([&] { s.function("rows").call({x, ones({4, 3}, DType::Bool)}); },
              "t.py:3: the shape of the mask does not match the shape of the indexed tensor from index 0");
  check_error([&] { s.function("cols").call({x, ones({2, 2}, DType::Bool)}); },
              "the shape of the mask does not match the shape of the indexed tensor from index 1");
  CHECK(s.function("cols").call({x, ones({4, 5}, DType::Bool)})[0].to_tensor().sizes() == Shape{3, 20});
  check_error([&] { s.function("cols").call({x, ones({5}, DType::Bool)}); },
              "the shape of the mask does not match the shape of the indexed tensor from index 1");
  check_error([&] { s.function("put").call({x, ones({12}, DType::Bool)}); },
              "the shape of the mask does not match the shape of the indexed tensor from index 0");
  check_error([&] { s.function("pick").call({x, i64({7}, {1})}); }, "index 7 is out of bounds for dimension 0 with size 3");
  CHECK(s.function("after").call({x, i64({1, -1}, {2})})[0].to_tensor().sizes() == Shape{3, 4, 2});
  check_error([&] { s.function("after").call({x, i64({5}, {1})}); }, "index 5 is out of bounds for dimension 0 with size 5");
  check_error([&] { s.function("put_rows").call({x, i64({9}, {1}), full({}, 1.0)}); },
              "index 9 is out of bounds for dimension 0 with size 3");
  check_error([&] { s.function("put_rows").call({x, mask({1, 0, 1}), ones({5}, DType::Int64)}); },
              "index put requires the source and destination dtypes match");
  // shapes known only when the graph runs: torch's words, with the shapes it saw (the mask's as its positions')
  check_error([&] { s.function("mixed").call({x, mask({1, 0, 1}), i64({0, 1, 2}, {3})}); },
              "t.py:19: shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
  check_error([&] { compile(s.function("mixed")).call({x, mask({1, 0, 1}), i64({0, 1, 2, 0, 1, 2}, {2, 3})}); },
              "t.py:19: shape mismatch: indexing tensors could not be broadcast together with shapes [2], [2, 3]");
  // beside a slice, the put goes into the view (torch's order); two tensor indices, a list being one, are refused
  ScriptFile w = script_source("import torch\ndef f(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:\n"
                                 "    y = x.clone()\n    y[1:, m] = 0.0\n    return y\n", "w.py");
  Tensor written = w.function("f").call({x, mask({0, 1, 0, 1})})[0].to_tensor();
  CHECK(values(written.select(0, 0)) == values(x.select(0, 0)));
  CHECK(values(written.select(0, 2).select(0, 3)) == std::vector<double>(5, 0.0));
  CHECK(values(written.select(0, 1).select(0, 2)) == values(x.select(0, 1).select(0, 2)));
  check_error([&] { script_source("import torch\ndef f(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n"
                                  "    y = x.clone()\n    y[[0, 1], i] = 0.0\n    return y\n", "l.py").function("f"); },
              "l.py:4:7: error: a write through two tensor indices is not supported in kiln script (a list index is one)");
  check_error([&] { script_source("import torch\ndef f(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n"
                                  "    y = x.clone()\n    y[i + 0, i] = 0.0\n    return y\n", "t2.py").function("f"); },
              "t2.py:4:6: error: a write through two tensor indices is not supported in kiln script");
  CHECK(s.function("put").call({x, mask({0, 1, 1})})[0].to_tensor().sizes() == Shape{3, 4, 5});
}

TEST_CASE("index_put with accumulate=True: repeated indices add up, eager and scripted, gradients as PyTorch 1.13") {
  // expected values: torch 1.13's x.index_put((idx,), v, accumulate=True) and the gradients of sum(y * w)
  auto f32 = [](std::vector<float> v) { return tensor(v, {4, 2}); };
  Tensor x = f32({0.5, -1.0, 2.0, 0.25, 1.5, 3.0, -2.0, 0.75}).requires_grad_();
  Tensor v = f32({1, 2, 3, 4, 5, 6, 7, 8}).requires_grad_();
  Tensor w = f32({1.0, -1.0, 2.0, 0.5, 0.25, 3.0, -1.5, 1.0});
  Tensor idx = i64({0, 2, 0, -1}, {4});
  Tensor y = index_put(x, idx, v, true);
  check_close(y, f32({6.5, 7.0, 2.0, 0.25, 4.5, 7.0, 5.0, 8.75}));
  sum(mul(y, w)).backward();
  check_close(x.grad(), w);
  check_close(v.grad(), f32({1.0, -1.0, 0.25, 3.0, 1.0, -1.0, -1.5, 1.0}));
  // a 0-d value broadcast to every picked row, added once per occurrence
  check_close(index_put(x.detach(), idx, full({}, 2.0f), true), f32({4.5, 3.0, 2.0, 0.25, 3.5, 5.0, 0.0, 2.75}));
  CHECK(gradcheck([&](const Tensors& a) { return index_put(a[0], idx, a[1], true); },
                  {seq({4, 3}).requires_grad_(), seq({4, 3}, 0.7).requires_grad_()}));
  check_error([&] { index_put(x.detach(), i64({4}, {1}), v.detach().slice(0, 0, 1), true); }, "index 4 is out of bounds");
  // in a script: index_put_ on a clone and index_put, both with accumulate=True
  const char* src =
      "import torch\nfrom torch import Tensor\n\n\ndef f(x: Tensor, idx: Tensor, v: Tensor) -> Tensor:\n    y = x.clone()\n"
      "    y.index_put_((idx,), v, accumulate=True)\n    return y + x.index_put([idx], v, True)\n";
  Function fn = script_source(src, "put.py").function("f");
  Tensor want = mul(index_put(x.detach(), idx, v.detach(), true), 2.0);
  check_close(fn.call({x.detach(), idx, v.detach()})[0].to_tensor(), want);
  check_close(compile(fn).call({x.detach(), idx, v.detach()})[0].to_tensor(), want);
}

TEST_CASE("index_put with a tuple of indices and accumulate=True: repeated pairs add up, broadcast, gradients as PyTorch 1.13") {
  Tensor x = arange(12).to(DType::Float32).reshape({3, 4}).requires_grad_();
  Tensor v = tensor(std::vector<float>{1, 2, 3, 4, 5}, {5}).requires_grad_();
  Tensor i0 = i64({0, 2, 0, -1, 1}, {5}), i1 = i64({1, 3, 1, 3, -4}, {5});
  Tensor y = index_put(x, {i0, i1}, v, true);
  check_close(y, tensor(std::vector<float>{0, 5, 2, 3, 9, 5, 6, 7, 8, 9, 10, 17}, {3, 4}));
  Tensor wy = sub(mul(arange(12).to(DType::Float32).reshape({3, 4}), 0.5), 2.0);
  sum(mul(y, wy)).backward();
  check_close(x.grad(), wy);
  check_close(v.grad(), tensor(std::vector<float>{-1.5, 3.5, -1.5, 3.5, 0.0}, {5}));
  // indices (2, 1) and (3,) broadcast to (2, 3) over the first two of three dims; v (3, 1) broadcast to (2, 3, 4)
  Tensor x3 = arange(24).to(DType::Float64).reshape({2, 3, 4}).requires_grad_();
  Tensor v3 = f64({10, 20, 30}, {3, 1}).requires_grad_();
  Tensor y3 = index_put(x3, {i64({1, 1}, {2, 1}), i64({0, 2, 0}, {3})}, v3, true);
  std::vector<double> want3(24);
  for (int64_t k = 0; k < 24; ++k) want3[size_t(k)] = double(k);
  for (int64_t c = 0; c < 4; ++c) {
    want3[size_t(12 + c)] += 2 * (10 + 30);
    want3[size_t(20 + c)] += 2 * 20;
  }
  check_close(y3, f64(want3, {2, 3, 4}));
  std::vector<double> lin(24);  // torch.linspace(-1, 1, 24)
  for (int64_t k = 0; k < 24; ++k) lin[size_t(k)] = -1.0 + 2.0 * double(k) / 23.0;
  Tensor w3 = f64(lin, {2, 3, 4});
  sum(mul(y3, w3)).backward();
  check_close(v3.grad(), f64({1.3913043478260871, 6.956521739130435, 1.3913043478260871}, {3, 1}));
  check_close(x3.grad(), w3);
  CHECK(gradcheck([&](const Tensors& a) { return index_put(a[0], {i0, i1}, a[1], true); },
                  {seq({3, 4}).requires_grad_(), seq({5}, 0.7).requires_grad_()}));
  // without accumulate: a plain write
  Tensor put = index_put(zeros({3, 4}), {i64({2, 0}, {2}), i64({1, 3}, {2})}, tensor(std::vector<float>{7, 8}, {2}));
  check_close(put, tensor(std::vector<float>{0, 0, 0, 8, 0, 0, 0, 0, 0, 7, 0, 0}, {3, 4}));
  check_error([] { index_put(zeros({3, 4}), {i64({3}, {1}), i64({0}, {1})}, ones({1}), true); },
              "index 3 is out of bounds for dimension 0 with size 3");
  check_error([] { index_put(zeros({3, 4}), {i64({0, 1}, {2}), i64({0, 1, 2}, {3})}, ones({1}), true); },
              "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
  check_error([] { index_put(zeros({3, 4}), {i64({0}, {1}), i64({0}, {1}), i64({0}, {1})}, ones({1}), true); },
              "index_put: too many indices for tensor of dimension 2 (got 3)");
  // in a script: index_put_ on a clone and index_put, eager's composite, compiled too
  const char* src =
      "import torch\nfrom torch import Tensor\n\n\ndef f(x: Tensor, i: Tensor, j: Tensor, v: Tensor) -> Tensor:\n"
      "    y = x.clone()\n    y.index_put_((i, j), v, accumulate=True)\n    return y + x.index_put([i, j], v, True)\n";
  Function fn = script_source(src, "put2.py").function("f");
  Tensor xs = x.detach().requires_grad_(), vs = v.detach().requires_grad_();
  Tensor got = fn.call({xs, i0, i1, vs})[0].to_tensor();
  check_close(got, mul(y.detach(), 2.0));
  sum(mul(got, wy)).backward();
  check_close(xs.grad(), mul(wy, 2.0));
  check_close(vs.grad(), mul(v.grad(), 2.0));
  check_close(compile(fn).call({x.detach(), i0, i1, v.detach()})[0].to_tensor(), got.detach());
}
