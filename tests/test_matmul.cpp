// matmul against a naive float64 reference written here: every rank combination of torch.matmul, batch
// broadcasting, the BLAS transpose paths, strided operands that force a copy, ints, halves, empty dims.
#include <random>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {

Tensor rnd(const Shape& s, DType dt = DType::Float32, uint32_t seed = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(size_t(numel_of(s)));
  for (double& x : v) x = is_floating(dt) ? u(gen) : double(int(u(gen) * 5));
  if (s.empty()) return kiln::tensor(v, {1}, dt).reshape({});
  return kiln::tensor(v, s, dt);
}

// torch.matmul semantics by hand: 1-D operands are promoted to matrices and the added dim dropped, batch
// dims broadcast; every product accumulated in float64.
Tensor reference(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(1) : b_in;
  int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  REQUIRE(b.size(-2) == K);
  Shape ab(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  Shape batch = broadcast_shapes("ref", ab, bb);
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {M, K});
  eb.insert(eb.end(), {K, N});
  std::vector<double> av = values(a.expand(ea)), bv = values(b.expand(eb));
  int64_t nb = numel_of(batch);
  std::vector<double> out(size_t(nb * M * N), 0.0);
  for (int64_t p = 0; p < nb; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += av[size_t(p * M * K + i * K + k)] * bv[size_t(p * K * N + k * N + j)];
        out[size_t(p * M * N + i * N + j)] = acc;
      }
  Shape shape = batch;
  if (a_in.dim() != 1) shape.push_back(M);
  if (b_in.dim() != 1) shape.push_back(N);
  if (shape.empty()) return kiln::tensor(out, {1}, DType::Float64).reshape({});
  return kiln::tensor(out, shape, DType::Float64);
}

void check_matmul(const Tensor& a, const Tensor& b) {
  CAPTURE(shape_str(a.sizes()));
  CAPTURE(shape_str(b.sizes()));
  CAPTURE(shape_str(a.strides()));
  CAPTURE(shape_str(b.strides()));
  Tensor y = kiln::matmul(a, b);
  CHECK(y.dtype() == a.dtype());
  double rtol = a.dtype() == DType::Float64 ? 1e-12 : a.dtype() == DType::Float32 ? 1e-5 : 0;
  double atol = a.dtype() == DType::Float64 ? 1e-12 : a.dtype() == DType::Float32 ? 1e-5 : 0;
  check_close(y, reference(a, b), rtol, atol);
}

}  // namespace

TEST_CASE("matmul: every rank combination") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype_name(dt));
    check_matmul(rnd({7}, dt, 1), rnd({7}, dt, 2));                  // dot → 0-d
    check_matmul(rnd({5, 7}, dt, 3), rnd({7}, dt, 4));               // matrix · vector
    check_matmul(rnd({7}, dt, 5), rnd({7, 6}, dt, 6));               // vector · matrix
    check_matmul(rnd({5, 7}, dt, 7), rnd({7, 6}, dt, 8));            // matrix · matrix
    check_matmul(rnd({3, 5, 7}, dt, 9), rnd({7, 6}, dt, 10));        // batch · matrix (one folded GEMM)
    check_matmul(rnd({3, 5, 7}, dt, 11), rnd({7}, dt, 12));          // batch · vector
    check_matmul(rnd({7}, dt, 13), rnd({3, 7, 6}, dt, 14));          // vector · batch
    check_matmul(rnd({5, 7}, dt, 15), rnd({3, 7, 6}, dt, 16));       // matrix · batch
    check_matmul(rnd({3, 5, 7}, dt, 17), rnd({3, 7, 6}, dt, 18));    // batch · batch
    check_matmul(rnd({2, 1, 3, 4}, dt, 19), rnd({5, 4, 6}, dt, 20));  // batch dims broadcast → [2,5,3,6]
    check_matmul(rnd({1, 4, 2, 3}, dt, 21), rnd({2, 1, 3, 2}, dt, 22));
    CHECK(kiln::matmul(rnd({2, 1, 3, 4}, dt), rnd({5, 4, 6}, dt)).sizes() == Shape{2, 5, 3, 6});
    CHECK(kiln::matmul(rnd({7}, dt), rnd({7}, dt)).dim() == 0);
  }
}

TEST_CASE("matmul: transposed and strided operands") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype_name(dt));
    Tensor a = rnd({6, 5}, dt, 30), b = rnd({7, 6}, dt, 31);
    check_matmul(a.t(), rnd({6, 7}, dt, 32));             // A transposed (BLAS Trans)
    check_matmul(rnd({5, 6}, dt, 33), b.t());             // B transposed
    check_matmul(a.t(), b.t());                           // both
    Tensor big = rnd({20, 30}, dt, 34);
    Tensor sa = big.slice(0, 1, 15, 2).slice(1, 0, 24, 3);  // neither stride is 1: copied first
    Tensor sb = big.slice(0, 0, 16, 2).slice(1, 3, 10);     // unit inner stride, row stride 60
    check_matmul(sa, sb);
    check_matmul(sb.t(), sa.t());
    check_matmul(big.slice(1, 0, 30, 2).select(0, 3), big.slice(0, 0, 15).slice(1, 0, 4));  // strided vector
    check_matmul(big.slice(0, 0, 4).slice(1, 0, 20), big.select(1, 7));                      // column vector
    Tensor batch = rnd({4, 6, 5}, dt, 35);
    check_matmul(batch.transpose(1, 2), rnd({6, 3}, dt, 36));        // batch of transposed matrices
    check_matmul(batch.permute({2, 0, 1}).slice(1, 0, 4), rnd({6, 2}, dt, 37));
    check_matmul(rnd({2, 5}, dt, 38), batch.transpose(1, 2).transpose(0, 2).slice(2, 0, 4));
    check_matmul(rnd({1, 6}, dt, 39).expand({3, 6}), rnd({6, 4}, dt, 40));  // stride-0 rows
    check_matmul(rnd({3, 6}, dt, 41), rnd({6, 1}, dt, 42).expand({6, 4}));  // stride-0 columns
    // a weight gradient's dY^T·X large enough that float32 computes X^T·dY and copies it back transposed, and
    // the same with the shorter side first (not swapped) and with a row stride
    Tensor dy = rnd({64, 300}, dt, 43), x = rnd({64, 70}, dt, 44);
    check_matmul(dy.t(), x);
    check_matmul(x.t(), dy);
    check_matmul(rnd({64, 600}, dt, 45).slice(1, 0, 300).t(), x);  // A^T with a row stride of 600
  }
}

TEST_CASE("matmul: a transposed operand's gradient is computed transposed, so a weight gets it contiguous") {
  // As torch's mm_mat1/mat2_backward: the same values as with dense operands, and a Linear-style
  // weight (used as w.t()) receives a contiguous .grad without a copy of a strided one.
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype_name(dt));
    Tensor x = rnd({6, 5}, dt, 50).requires_grad_(), w = rnd({7, 5}, dt, 51).requires_grad_();
    Tensor at = rnd({5, 6}, dt, 52).requires_grad_();  // used as at.t(): column-major [6,5]
    Tensor g = rnd({6, 7}, dt, 53);
    kiln::sum(matmul(x, w.t()) * g).backward();
    kiln::sum(matmul(at.t(), w.t().contiguous()) * g).backward();
    Tensor xd = x.detach().clone().requires_grad_(), wd = w.detach().t().contiguous().requires_grad_();
    Tensor ad = at.detach().t().contiguous().requires_grad_();
    kiln::sum(matmul(xd, wd) * g).backward();
    kiln::sum(matmul(ad, wd.detach()) * g).backward();
    CHECK(w.grad().is_contiguous());
    CHECK(at.grad().is_contiguous());
    check_close(x.grad(), xd.grad());
    check_close(at.grad(), ad.grad().t());
    // w took two gradients: from x @ w.t() and from at.t() @ w.t().contiguous()
    Tensor wd2 = w.detach().t().contiguous().requires_grad_();
    kiln::sum(matmul(x.detach(), wd2) * g).backward();
    kiln::sum(matmul(at.detach().t(), wd2) * g).backward();
    check_close(w.grad(), wd2.grad().t());
  }
  CHECK(gradcheck([](const Tensors& in) { return matmul(in[0].t(), in[1].t()); },
                  {rnd({4, 3}, DType::Float64, 54).requires_grad_(), rnd({5, 4}, DType::Float64, 55).requires_grad_()}));
}

TEST_CASE("matmul: integer and half dtypes") {
  for (DType dt : {DType::Int32, DType::Int64}) {
    check_matmul(rnd({4, 5}, dt, 50), rnd({5, 3}, dt, 51));
    check_matmul(rnd({2, 4, 5}, dt, 52).transpose(1, 2), rnd({4}, dt, 53));
    check_matmul(rnd({5}, dt, 54), rnd({5}, dt, 55));
  }
  Tensor i = kiln::tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
  Tensor j = kiln::tensor(std::vector<int64_t>{5, 6}, {2, 1});
  CHECK(values(kiln::matmul(i, j)) == std::vector<double>{17, 39});
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor a = rnd({4, 8}, dt, 56), b = rnd({8, 3}, dt, 57);
    Tensor y = kiln::matmul(a, b);
    CHECK(y.dtype() == dt);
    check_close(y, reference(a, b), dt == DType::BFloat16 ? 1e-2 : 2e-3, 1e-2);
  }
}

TEST_CASE("matmul: zero-size dims") {
  CHECK(kiln::matmul(zeros({0, 3}), zeros({3, 4})).sizes() == Shape{0, 4});
  CHECK(kiln::matmul(zeros({2, 3}), zeros({3, 0})).sizes() == Shape{2, 0});
  Tensor k0 = kiln::matmul(ones({2, 0}), ones({0, 4}));  // empty sum: zeros
  CHECK(k0.sizes() == Shape{2, 4});
  CHECK(values(k0) == std::vector<double>(8, 0.0));
  Tensor k0d = kiln::matmul(ones({2, 0}, DType::Float64), ones({0, 4}, DType::Float64));
  CHECK(values(k0d) == std::vector<double>(8, 0.0));
  Tensor k0i = kiln::matmul(ones({2, 0}, DType::Int64), ones({0, 4}, DType::Int64));
  CHECK(values(k0i) == std::vector<double>(8, 0.0));
  CHECK(kiln::matmul(zeros({0, 2, 3}), zeros({3, 4})).sizes() == Shape{0, 2, 4});
  CHECK(kiln::matmul(zeros({5, 0, 3}), zeros({5, 3, 4})).sizes() == Shape{5, 0, 4});
  CHECK(kiln::matmul(ones({0}), ones({0})).item<float>() == 0);
}

TEST_CASE("matmul: errors") {
  check_error([] { kiln::matmul(zeros({64, 784}), zeros({128, 256})); },
              "matmul: shapes [64,784] and [128,256] cannot be multiplied");
  check_error([] { kiln::matmul(zeros({3}), zeros({4})); }, "matmul: shapes [3] and [4] cannot be multiplied");
  check_error([] { kiln::matmul(zeros({2, 3, 4}), zeros({3, 4, 5})); }, "matmul: batch dims of shapes [2,3,4] and [3,4,5] cannot be broadcast");
  check_error([] { kiln::matmul(zeros({}), zeros({3})); },
              "matmul: both arguments need at least 1 dimension, got shapes [] and [3]");
  check_error([] { kiln::matmul(zeros({2, 2}), zeros({2, 2}, DType::Float64)); },
              "matmul: expected both inputs to have the same dtype, got float32 and float64");
  check_error([] { kiln::matmul(ones({2, 2}, DType::Bool), ones({2, 2}, DType::Bool)); },
              "matmul: dtype bool is not supported");
  check_error([] { kiln::mm(zeros({3}), zeros({3, 2})); }, "mm: expected 2-D tensors, got shapes [3] and [3,2]");
}

TEST_CASE("matmul: mm, linear and the method") {
  Tensor a = rnd({4, 5}, DType::Float64, 60), b = rnd({5, 3}, DType::Float64, 61);
  check_close(kiln::mm(a, b), reference(a, b), 1e-12, 1e-12);
  check_close(a.matmul(b), reference(a, b), 1e-12, 1e-12);
  Tensor x = rnd({2, 6, 5}, DType::Float32, 62), w = rnd({3, 5}, DType::Float32, 63), bias = rnd({3}, DType::Float32, 64);
  Tensor y = kiln::linear(x, w, bias);
  CHECK(y.sizes() == Shape{2, 6, 3});
  check_close(y, kiln::add(reference(x, w.t()), bias.to(DType::Float64)), 1e-5, 1e-5);
  check_close(kiln::linear(x, w), reference(x, w.t()), 1e-5, 1e-5);
  check_close(kiln::linear(x, rnd({5}, DType::Float32, 65)), reference(x, rnd({5}, DType::Float32, 65)), 1e-5, 1e-5);
  check_error([&] { kiln::linear(x, zeros({1, 3, 5})); }, "linear: weight must be 1-D or 2-D, got shape [1,3,5]");
}

TEST_CASE("matmul: large enough for threaded BLAS") {
  Tensor a = rnd({130, 257}, DType::Float32, 70), b = rnd({257, 190}, DType::Float32, 71);
  check_matmul(a, b);
  check_matmul(rnd({257, 130}, DType::Float64, 72).t(), rnd({190, 257}, DType::Float64, 73).t());
}
