// Views share storage and alias writes; reshape copies only when strides demand it; copies and casts
// (contiguous, clone, to) for every dtype pair; item/data_ptr; and the text of every error.
#include <cstdint>
#include <limits>
#include <optional>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {
Tensor iota(const Shape& s, DType dt = DType::Float32) { return kiln::arange(numel_of(s)).to(dt).reshape(s); }
std::vector<double> seq(std::initializer_list<double> v) { return v; }
}  // namespace

TEST_CASE("views: every view shares storage and sees writes") {
  Tensor x = iota({2, 3, 4});
  Tensors views = {x.view({6, 4}),       x.reshape({4, 6}),        x.permute({2, 0, 1}), x.transpose(0, 2),
                   x[1],                 x.select(2, -1),          x.slice(1, 1, 3),     x.narrow(2, 1, 2),
                   x.unsqueeze(0),       x.slice(0, 0, 1).squeeze(), x.flatten(),         x.flatten(1),
                   x.slice(2, 0, 1).expand({2, 3, 5}), x.detach()};
  for (const Tensor& v : views) {
    CHECK(v.storage() == x.storage());
    CHECK(v.storage()->data == x.storage()->data);
  }
  x.fill_(5);
  for (const Tensor& v : views) {
    auto vals = values(v);
    CHECK(std::all_of(vals.begin(), vals.end(), [](double d) { return d == 5; }));
  }
  x.select(1, 2).select(1, 3).fill_(-1);  // element [*,2,3]
  CHECK(x.view({6, 4})[2][3].item<float>() == -1);
  CHECK(x.permute({2, 0, 1})[3][1][2].item<float>() == -1);
}

TEST_CASE("views: shapes, strides and offsets") {
  Tensor x = iota({2, 3, 4});
  CHECK(x.strides() == Shape{12, 4, 1});
  Tensor p = x.permute({2, 0, 1});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(!p.is_contiguous());
  CHECK(x.permute({-1, 0, 1}).sizes() == Shape{4, 2, 3});
  CHECK(x.transpose(-1, 0).sizes() == Shape{4, 3, 2});
  CHECK(x[1].storage_offset() == 12);
  CHECK(x[-1].storage_offset() == 12);
  CHECK(x.select(1, -1).sizes() == Shape{2, 4});
  CHECK(x.select(1, -1).storage_offset() == 8);
  CHECK(values(x.select(2, -2)) == seq({2, 6, 10, 14, 18, 22}));
  Tensor s = x.slice(2, 1, std::nullopt, 2);
  CHECK(s.sizes() == Shape{2, 3, 2});
  CHECK(s.strides() == Shape{12, 4, 2});
  CHECK(s.storage_offset() == 1);
  CHECK(values(x.slice(2, -3, -1)) == values(x.slice(2, 1, 3)));
  CHECK(x.slice(2, 3, 1).sizes() == Shape{2, 3, 0});      // start past end: empty
  CHECK(x.slice(2, -100, 100).sizes() == Shape{2, 3, 4});  // bounds clamp
  CHECK(x.slice(0, 0, 2, 5).sizes() == Shape{1, 3, 4});
  CHECK(values(x.narrow(1, -2, 2)) == values(x.slice(1, 1, 3)));
  CHECK(x.unsqueeze(0).sizes() == Shape{1, 2, 3, 4});
  CHECK(x.unsqueeze(-1).sizes() == Shape{2, 3, 4, 1});
  CHECK(x.unsqueeze(-1).strides() == Shape{12, 4, 1, 1});
  CHECK(x.unsqueeze(1).strides() == Shape{12, 12, 4, 1});
  Tensor o = zeros({1, 3, 1, 2});
  CHECK(o.squeeze().sizes() == Shape{3, 2});
  CHECK(o.squeeze(0).sizes() == Shape{3, 1, 2});
  CHECK(o.squeeze(-2).sizes() == Shape{1, 3, 2});
  CHECK(o.squeeze(1).sizes() == Shape{1, 3, 1, 2});  // not size 1: unchanged
  CHECK(x.flatten().sizes() == Shape{24});
  CHECK(x.flatten(0, 1).sizes() == Shape{6, 4});
  CHECK(x.flatten(-2).sizes() == Shape{2, 12});
  CHECK(kiln::zeros({}).flatten().sizes() == Shape{1});
  Tensor e = x.slice(2, 0, 1).expand({2, 3, 5});
  CHECK(e.strides() == Shape{12, 4, 0});
  CHECK(x.expand({7, 2, 3, 4}).strides() == Shape{0, 12, 4, 1});
  CHECK(x.expand({-1, 3, -1}).sizes() == Shape{2, 3, 4});
  CHECK(iota({3}).t().sizes() == Shape{3});
  CHECK(iota({2, 5}).t().sizes() == Shape{5, 2});
  CHECK(iota({2, 5}).t().strides() == Shape{1, 5});
}

TEST_CASE("views: 0-d and size-1 tensors") {
  Tensor s = kiln::full({}, 3.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.is_contiguous());
  Tensor v = s.view({1, 1});  // one element views as any all-ones shape
  CHECK(v.storage() == s.storage());
  CHECK(v.sizes() == Shape{1, 1});
  CHECK(s.reshape({1}).storage() == s.storage());
  CHECK(v.view({}).dim() == 0);
  CHECK(s.unsqueeze(0).sizes() == Shape{1});
  CHECK(s.squeeze().dim() == 0);
  CHECK(s.squeeze(0).dim() == 0);
  CHECK(s.expand({2, 3}).sizes() == Shape{2, 3});
  CHECK(s.t().dim() == 0);
  CHECK(s.item<double>() == 3.5);
  check_error([&] { s.select(0, 0); }, "select: cannot select from a 0-d tensor");
  check_error([&] { s.slice(0, 0, 1); }, "slice: cannot slice a 0-d tensor");
}

TEST_CASE("views: view vs reshape") {
  Tensor x = iota({4, 6});
  Tensor r = x.reshape({3, 8});
  CHECK(r.storage() == x.storage());  // contiguous: a view
  Tensor t = x.t();
  Tensor tv = t.reshape({6, 2, 2});   // splits a dim of the transpose: still expressible
  CHECK(tv.storage() == x.storage());
  CHECK(values(tv) == values(t.contiguous().reshape({6, 2, 2})));
  Tensor tc = t.reshape({24});  // merges across non-adjacent memory: copies
  CHECK(tc.storage() != x.storage());
  CHECK(tc.is_contiguous());
  CHECK(values(tc) == values(t.contiguous()));
  CHECK(x.reshape({-1}).sizes() == Shape{24});
  CHECK(x.reshape({2, -1, 3}).sizes() == Shape{2, 4, 3});
  CHECK(x.slice(1, 0, 3).reshape({12}).storage() != x.storage());  // rows no longer adjacent
  CHECK(x.slice(0, 1, 3).reshape({12}).storage() == x.storage());  // whole rows: adjacent
  check_error([&] { t.view({24}); },
              "view: size [24] is not compatible with the input's size [6,4] and stride [1,6] (at least one "
              "dimension spans across two contiguous subspaces); use reshape instead");
  check_error([&] { zeros({4, 4}).reshape({3, 5}); }, "reshape: shape [3,5] is invalid for input of size 16");
  check_error([&] { zeros({4, 4}).view({3, 5}); }, "view: shape [3,5] is invalid for input of size 16");
  check_error([&] { zeros({4, 4}).reshape({-1, 3}); }, "reshape: shape [-1,3] is invalid for input of size 16");
  check_error([&] { zeros({4, 4}).reshape({-1, -1}); }, "reshape: only one dimension can be inferred in shape [-1,-1]");
  check_error([&] { zeros({4, 4}).reshape({-2, 8}); }, "reshape: invalid shape dimension -2 in shape [-2,8]");
  // empty tensors reshape freely among zero-element shapes
  CHECK(zeros({0, 4}).reshape({4, 0, 2}).sizes() == Shape{4, 0, 2});
  CHECK(zeros({0, 4}).reshape({-1, 2}).sizes() == Shape{0, 2});
}

TEST_CASE("views: errors name the op and the facts") {
  Tensor x = iota({2, 3});
  check_error([&] { x.select(0, 2); }, "select: index 2 is out of range for dimension 0 of size 2");
  check_error([&] { x.select(1, -4); }, "select: index -4 is out of range for dimension 1 of size 3");
  check_error([&] { x[5]; }, "select: index 5 is out of range for dimension 0 of size 2");
  check_error([&] { x.select(2, 0); }, "select: dim 2 is out of range for a tensor of rank 2 (expected in [-2, 1])");
  check_error([&] { x.transpose(0, 2); }, "transpose: dim 2 is out of range for a tensor of rank 2");
  check_error([&] { x.permute({0}); }, "permute: number of dims [0] doesn't match the tensor's rank 2");
  check_error([&] { x.permute({1, 1}); }, "permute: dim 1 appears more than once in [1,1]");
  check_error([&] { x.expand({2, 4}); },
              "expand: the expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension 1");
  check_error([&] { x.expand({3}); }, "expand: the number of sizes provided (1) must be at least the tensor's rank (2)");
  check_error([&] { x.slice(0, 0, 1).expand({-2, 3}); }, "expand: invalid size -2 in shape [-2,3]");
  check_error([&] { x.slice(1, 0, 2, 0); }, "slice: step must be positive, got 0");
  check_error([&] { x.slice(1, 0, 2, -1); }, "slice: step must be positive, got -1");
  check_error([&] { x.narrow(1, 2, 2); }, "narrow: start (2) + length (2) exceeds dimension size (3)");
  check_error([&] { x.unsqueeze(3); }, "unsqueeze: dim 3 is out of range for a tensor of rank 3");
  check_error([&] { x.squeeze(2); }, "squeeze: dim 2 is out of range");
  check_error([&] { x.flatten(1, 0); }, "flatten: start_dim 1 cannot come after end_dim 0");
  check_error([&] { iota({2, 2, 2}).t(); }, "t: expects a tensor with <= 2 dimensions, but self is 3-D");
  check_error([&] { x.size(2); }, "size: dim 2 is out of range for a tensor of rank 2");
  check_error([&] { Tensor().sizes(); }, "tensor: use of an undefined tensor");
}

TEST_CASE("views: contiguous and clone") {
  Tensor x = iota({3, 4});
  CHECK(x.contiguous().is_same(x));  // already contiguous: the same tensor
  Tensor t = x.t();
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.storage() != x.storage());
  CHECK(c.strides() == Shape{3, 1});
  CHECK(values(c) == values(t));
  Tensor k = x.clone();
  CHECK(k.storage() != x.storage());
  CHECK(values(k) == values(x));
  k.fill_(0);
  CHECK(values(x)[5] == 5);  // the clone is independent
  Tensor stepped = iota({5, 6}).slice(0, 0, std::nullopt, 2).slice(1, 1, std::nullopt, 3);
  CHECK(values(stepped.contiguous()) == seq({1, 4, 13, 16, 25, 28}));
  CHECK(values(stepped.clone()) == seq({1, 4, 13, 16, 25, 28}));
  Tensor ex = kiln::tensor({1.0, 2.0}).expand({3, 2});
  CHECK(values(ex.contiguous()) == seq({1, 2, 1, 2, 1, 2}));
  CHECK(zeros({3, 0}).t().is_contiguous());  // no element to misplace
  CHECK(zeros({3, 1}).t().is_contiguous());  // size-1 dims' strides don't matter
}

TEST_CASE("views: transposing copies (8x8 register tiles and what they leave) put every element in place") {
  // y[b][i][j] = x[b][j][i] for x = iota: y's element at (b, i, j) is b*rows*cols + j*rows + i.
  auto expect = [](int64_t batch, int64_t rows, int64_t cols) {
    std::vector<double> v;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) v.push_back(double(b * rows * cols + j * rows + i));
    return v;
  };
  auto raw = [](const Tensor& t) {  // y's memory in order, without another copy
    std::vector<double> v;
    for (int64_t k = 0; k < t.numel(); ++k)
      v.push_back(t.dtype() == DType::Int32 ? double(t.data_ptr<int32_t>()[k]) : double(t.data_ptr<float>()[k]));
    return v;
  };
  for (DType dt : {DType::Float32, DType::Int32})
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {8, 8}, {9, 17}, {16, 16}, {17, 8}, {23, 40}, {64, 33}, {100, 9}, {9, 100}, {130, 257}, {31, 31}}) {
      INFO(dtype_name(dt), " ", rows, "x", cols);
      Tensor y = iota({cols, rows}, dt).t().contiguous();
      REQUIRE(y.sizes() == Shape{rows, cols});
      CHECK(raw(y) == expect(1, rows, cols));
      Tensor yb = iota({3, cols, rows}, dt).transpose(-1, -2).contiguous();
      CHECK(raw(yb) == expect(3, rows, cols));
    }
  // into a destination that is itself a view: rows of a wider tensor
  Tensor wide = zeros({20, 30});
  wide.slice(1, 2, 2 + 19).copy_(iota({19, 20}).t());
  std::vector<double> w = values(wide), want = expect(1, 20, 19);
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t j = 0; j < 30; ++j)
      CHECK(w[size_t(i * 30 + j)] == (j >= 2 && j < 21 ? want[size_t(i * 19 + j - 2)] : 0.0));
  // a broadcast source column: every destination row is one value
  std::vector<double> rows_of_one;
  for (int64_t i = 0; i < 12; ++i) rows_of_one.insert(rows_of_one.end(), 9, double(i));
  CHECK(values(iota({12, 1}).expand({12, 9}).contiguous()) == rows_of_one);
  CHECK(values(iota({9, 1}).expand({9, 12}).t().contiguous()) == values(iota({9}).expand({12, 9})));
}

TEST_CASE("views: to(dtype) for every dtype pair") {
  const DType all[] = {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16,
                       DType::Float16, DType::Float32, DType::Float64};
  // Values every dtype holds exactly (bool: nonzero → 1).
  std::vector<double> v = {0, 1, -2, 3, 64, -128, 0.5, -0.25};
  for (DType from : all)
    for (DType to : all) {
      CAPTURE(dtype_name(from));
      CAPTURE(dtype_name(to));
      Tensor x = kiln::tensor(v, {2, 4}, from);
      Tensor y = x.t().to(to);  // through a strided source too
      CHECK(y.dtype() == to);
      CHECK(y.sizes() == Shape{4, 2});
      std::vector<double> want = values(x.t());
      for (double& w : want) {
        if (to == DType::Bool) w = w != 0;
        else if (is_integral(to)) w = std::trunc(w);
      }
      CHECK(values(y) == want);
      if (from == to) CHECK(x.to(to).is_same(x));
    }
}

TEST_CASE("views: half-precision conversions round to nearest even") {
  // float32 → bits, as torch 1.13 gives them
  struct Golden {
    float f;
    uint16_t bf16, f16;
  };
  const Golden golden[] = {
      {1.0f, 0x3f80, 0x3c00},         {1.00390625f, 0x3f80, 0x3c04},  {1.01171875f, 0x3f82, 0x3c0c},
      {65504.0f, 0x4780, 0x7bff},     {65519.0f, 0x4780, 0x7bff},     {65520.0f, 0x4780, 0x7c00},
      {1e-8f, 0x322c, 0x0000},        {3e-8f, 0x3301, 0x0001},        {6.1e-5f, 0x3880, 0x03ff},
      {-0.0f, 0x8000, 0x8000},        {1e-45f, 0x0000, 0x0000},       {3.4e38f, 0x7f80, 0x7c00},
      {0.1f, 0x3dcd, 0x2e66},         {-2.5f, 0xc020, 0xc100},
  };
  for (const Golden& g : golden) {
    CAPTURE(g.f);
    Tensor x = kiln::tensor(std::vector<float>{g.f});
    CHECK(x.to(DType::BFloat16).data_ptr<BFloat16>()->bits == g.bf16);
    CHECK(x.to(DType::Float16).data_ptr<Float16>()->bits == g.f16);
  }
  Tensor nan = kiln::full({1}, std::numeric_limits<double>::quiet_NaN());
  CHECK(std::isnan(nan.to(DType::BFloat16).item<float>()));
  CHECK(std::isnan(nan.to(DType::Float16).item<float>()));
  // Every half value survives half → float32 → half, and bf16 → f16 → f32 → bf16 where representable.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Float16 h;
    h.bits = uint16_t(bits);
    float f = h;
    if (std::isnan(f)) continue;
    if (Float16(f).bits != h.bits) {
      FAIL_CHECK("float16 bits " << bits << " do not round-trip");
      break;
    }
    BFloat16 b;
    b.bits = uint16_t(bits);
    float fb = b;
    if (!std::isnan(fb) && BFloat16(fb).bits != b.bits) {
      FAIL_CHECK("bfloat16 bits " << bits << " do not round-trip");
      break;
    }
  }
  Tensor r = kiln::tensor({0.1, 1.0 / 3, 1000.5, -7.75}).to(DType::BFloat16).to(DType::Float16).to(DType::Float32);
  check_close(r, kiln::tensor({0.10009765625, 0.333984375, 1000.0, -7.75}), 0, 0);
}

TEST_CASE("views: item and data_ptr") {
  CHECK(kiln::full({}, 2.5).item<double>() == 2.5);
  CHECK(kiln::full({1, 1}, 7, DType::Int32).item<int>() == 7);
  CHECK(kiln::full({1}, 1.75, DType::BFloat16).item<float>() == 1.75f);
  CHECK(kiln::full({1}, true, DType::Bool).item<bool>());
  int64_t big = (int64_t(1) << 62) + 1;  // past 2^53: must not go through double
  CHECK(kiln::full({1}, big, DType::Int64).item<int64_t>() == big);
  CHECK(kiln::arange(big, big + 3)[2].item<int64_t>() == big + 2);
  Tensor x = iota({2, 3});
  CHECK(x[1][2].item<float>() == 5);
  CHECK(x.t()[2][1].item<float>() == 5);
  check_error([&] { x.item<float>(); }, "item: a tensor with 6 elements cannot be converted to a scalar");
  check_error([&] { zeros({0}).item<float>(); }, "item: a tensor with 0 elements cannot be converted to a scalar");
  CHECK(x.data_ptr<float>()[4] == 4);
  CHECK(x[1].data_ptr<float>()[0] == 3);  // offset applied
  check_error([&] { x.data_ptr<double>(); }, "data_ptr: tensor has dtype float32 but float64 was requested");
  check_error([&] { kiln::arange(3).data_ptr<int32_t>(); }, "data_ptr: tensor has dtype int64 but int32 was requested");
}

TEST_CASE("views: from_blob borrows memory") {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  Tensor b = Tensor::from_blob(buf.data(), {2, 3}, DType::Float32);
  CHECK(b.data_ptr<float>() == buf.data());
  b.mul_(2);
  CHECK(buf[5] == 12);
  Tensor col = Tensor::from_blob(buf.data(), {3}, DType::Float32, {2});
  CHECK(values(col) == seq({2, 6, 10}));
  check_error([&] { Tensor::from_blob(buf.data(), {2, 3}, DType::Float32, {1}); },
              "from_blob: 1 strides given for a shape of rank 2");
}

TEST_CASE("views: shape composites") {
  Tensor x = iota({4, 3});
  Tensors parts = kiln::split(x, 3);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].sizes() == Shape{3, 3});
  CHECK(parts[1].sizes() == Shape{1, 3});
  CHECK(parts[1].storage() == x.storage());
  CHECK(kiln::chunk(x, 3, 1).size() == 3);
  check_error([&] { kiln::split(x, std::vector<int64_t>{1, 2}); }, "split: split sizes [1,2] do not sum to the size 4 of dimension 0");
  CHECK(kiln::transpose(x, 0, 1).sizes() == Shape{3, 4});
  CHECK(kiln::squeeze(zeros({1, 2})).sizes() == Shape{2});
  CHECK(kiln::unsqueeze(x, 1).sizes() == Shape{4, 1, 3});
  CHECK(kiln::flatten(iota({2, 3, 4}), 1, 2).sizes() == Shape{2, 12});
  CHECK(kiln::reshape(x, {3, 4}).sizes() == Shape{3, 4});
  CHECK(kiln::permute(x, {1, 0}).strides() == Shape{1, 3});
}
