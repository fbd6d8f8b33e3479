// script(): a bool mask inside index_put's tuple (x.index_put_((mask, i), v), torch.index_put(x, (mask, i), v,
// accumulate=True), x[mask, 0] = v), interpreted and compiled, against PyTorch 1.13: the numbers below are
// tests/gen_script_index_put_values.py's run of tests/data/script_index_put/mask_tuple.py.
#include <string>
#include <vector>

#include "error_of.h"
#include "ramp.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

Tensor ramp(const Shape& shape, int k) { return kiln::test::ramp(shape, k, DType::Float64); }

Tensor mask(const std::vector<double>& v, const Shape& s) { return tensor(v, s).to(DType::Bool); }
Tensor ints(const std::vector<int64_t>& v) { return tensor(v, {int64_t(v.size())}); }

struct Expected {
  std::vector<double> y, gx, gv;
};

// y = fn(x, rest..., v), then (y * ramp(k=2)).sum() backward: values and both gradients
void check(const Function& fn, const Shape& xs, std::vector<Tensor> rest, const Shape& vs, int kv, const Expected& e) {
  Tensor x = ramp(xs, 0).requires_grad_(), v = ramp(vs, kv).requires_grad_();
  std::vector<IValue> args = {x};
  for (const Tensor& t : rest) args.push_back(t);
  args.push_back(v);
  Tensor y = fn.call(args)[0].to_tensor();
  check_close(y, tensor(e.y, xs, DType::Float64));
  sum(mul(y, ramp(xs, 2))).backward();
  check_close(x.grad(), tensor(e.gx, xs, DType::Float64));
  check_close(v.grad(), tensor(e.gv, vs, DType::Float64));
}

}  // namespace

TEST_CASE("script index_put: a bool mask in the index tuple as torch, values and gradients, interpreted and compiled") {
  ScriptFile file = script_file(std::string(KILN_TEST_DATA) + "/script_index_put/mask_tuple.py");
  Tensor m = mask({1, 0, 1}, {3}), m2 = mask({1, 0, 1, 0, 1, 1}, {2, 3});
  for (bool compiled : {false, true}) {
    CAPTURE(compiled);
    auto fn = [&](const char* name) { return compiled ? compile(file.function(name)) : file.function(name); };
    Function put = fn("put_"), put_accumulate = fn("put_accumulate");
    check(put, {3, 4}, {m, ints({1, 3})}, {2}, 5,
          {{-0.375, 0.25, 0.375, -0.125, 0.25, -0.25, 0.125, -0.375, 0.0, 0.375, -0.125, -0.25},
           {-0.125, 0.0, -0.25, 0.125, -0.375, 0.0, 0.375, -0.125, 0.25, -0.25, 0.125, 0.0},
           {0.25, -0.375}});
    // a 2-D mask covers dims 0 and 1, the index dim 2
    check(put_accumulate, {2, 3, 4}, {m2, ints({0, 3, 3, 1})}, {4}, 1,
          {{-0.625, 0.0, 0.375, -0.125, 0.25, -0.25, 0.125, -0.375, 0.0, 0.375, -0.125, 0.375,
            -0.25, 0.125, -0.375, 0.0, 0.375, -0.125, 0.25, -0.625, 0.125, -0.375, 0.0, 0.375},
           {-0.125, 0.25, -0.25, 0.125, -0.375, 0.0, 0.375, -0.125, 0.25, -0.25, 0.125, -0.375,
            0.0, 0.375, -0.125, 0.25, -0.25, 0.125, -0.375, 0.0, 0.375, -0.125, 0.25, -0.25},
           {-0.125, -0.375, 0.0, -0.125}});
    // compiled, each records its backward through the prim::index_put (x[mask, 0] = v branches on the mask's dtype
    // when the graph runs, so it takes the interpreter)
    if (compiled) CHECK((compile_stats(put).train_compiles == 1 && compile_stats(put_accumulate).train_compiles == 1));
    check(fn("write"), {3, 4}, {m}, {2}, 4,
          {{0.125, 0.0, 0.375, -0.125, 0.25, -0.25, 0.125, -0.375, -0.375, 0.375, -0.125, 0.25},
           {0.0, 0.25, -0.25, 0.125, -0.375, 0.0, 0.375, -0.125, 0.0, -0.25, 0.125, -0.375},
           {-0.125, 0.25}});
  }
  // the mask's shape is checked when the graph runs, in torch's words, with the line
  std::string e = kiln::test::error_of([&] { file.function("put_").call({ramp({3, 4}, 0), mask({1, 0}, {2}), ints({1}), ramp({1}, 0)}); });
  CHECK(e.find("line 7") != std::string::npos);
  CHECK(e.find("index_put: the shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0") !=
        std::string::npos);
}
