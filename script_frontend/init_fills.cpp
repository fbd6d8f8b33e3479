// nn.init's structured fills (see init_fills.h), computed in double on the host and copied into t.
#include "script_frontend/init_fills.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "eager/autograd/graph.h"
#include "eager/ops.h"

namespace kiln::script {

namespace {

void store(Tensor& t, const std::vector<double>& v) {
  NoGradGuard ng;
  t.copy_(tensor(v, t.sizes(), DType::Float64).to(t.dtype()));
}

std::vector<double> host(const Tensor& t) {
  Tensor d = t.contiguous().to(DType::Float64);
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

}  // namespace

void init_orthogonal(Tensor& t, double gain) {
  if (t.dim() < 2) fail("Only tensors with 2 or more dimensions are supported");
  if (t.numel() == 0) return;  // torch: "no-op"
  int64_t rows = t.size(0), cols = t.numel() / rows;
  // Gram-Schmidt on the longer side's vectors of a Gaussian matrix: k = min(rows, cols) orthonormal
  // vectors of length n = max(rows, cols); a random Gaussian matrix has full rank almost surely, and a
  // vector that came out dependent is drawn again.
  bool wide = rows < cols;
  int64_t k = wide ? rows : cols, n = wide ? cols : rows;
  std::vector<double> q(size_t(k * n));
  for (int64_t j = 0; j < k; ++j) {
    double* v = &q[size_t(j * n)];
    for (int attempt = 0;; ++attempt) {
      if (attempt == 100) fail("orthogonal_: could not draw independent vectors");
      std::vector<double> g = host(randn({n}, DType::Float64));
      std::copy(g.begin(), g.end(), v);
      for (int pass = 0; pass < 2; ++pass)  // twice: classical Gram-Schmidt loses orthogonality once
        for (int64_t i = 0; i < j; ++i) {
          const double* u = &q[size_t(i * n)];
          double dot = 0;
          for (int64_t e = 0; e < n; ++e) dot += u[e] * v[e];
          for (int64_t e = 0; e < n; ++e) v[e] -= dot * u[e];
        }
      double norm = 0;
      for (int64_t e = 0; e < n; ++e) norm += v[e] * v[e];
      norm = std::sqrt(norm);
      if (norm < 1e-6) continue;
      for (int64_t e = 0; e < n; ++e) v[e] /= norm;
      break;
    }
  }
  // q holds k vectors of length n; t is (rows, cols) = wide ? (k, n) : (n, k)
  std::vector<double> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = gain * (wide ? q[size_t(r * n + c)] : q[size_t(c * n + r)]);
  store(t, out);
}

void init_eye(Tensor& t) {
  if (t.dim() != 2) fail("Only tensors with 2 dimensions are supported");
  int64_t rows = t.size(0), cols = t.size(1);
  std::vector<double> v(size_t(rows * cols), 0.0);
  for (int64_t i = 0; i < std::min(rows, cols); ++i) v[size_t(i * cols + i)] = 1.0;
  store(t, v);
}

void init_dirac(Tensor& t, int64_t groups) {
  if (t.dim() < 3 || t.dim() > 5) fail("Only tensors with 3, 4, or 5 dimensions are supported");
  if (groups <= 0 || t.size(0) % groups != 0) fail("dim 0 must be divisible by groups");
  int64_t per_group = t.size(0) / groups, in = t.size(1), kernel = t.numel() / std::max<int64_t>(t.size(0) * in, 1);
  int64_t centre = 0;  // the flat offset of the kernel's centre (size // 2 on each spatial dim)
  for (int64_t d = 2; d < t.dim(); ++d) centre = centre * t.size(d) + t.size(d) / 2;
  std::vector<double> v(size_t(t.numel()), 0.0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t d = 0; d < std::min(per_group, in); ++d) v[size_t(((g * per_group + d) * in + d) * kernel + centre)] = 1.0;
  store(t, v);
}

void init_sparse(Tensor& t, double sparsity, double std) {
  if (t.dim() != 2) fail("Only tensors with 2 dimensions are supported");
  int64_t rows = t.size(0), cols = t.size(1);
  auto zeros_per_col = int64_t(std::ceil(sparsity * double(rows)));
  std::vector<double> v = host(randn({rows, cols}, DType::Float64));
  for (double& x : v) x *= std;
  for (int64_t c = 0; c < cols; ++c) {
    // a random permutation of the rows: the order of uniform draws
    std::vector<double> order = host(argsort(rand({rows}, DType::Float64)));
    for (int64_t k = 0; k < std::min(zeros_per_col, rows); ++k) v[size_t(int64_t(order[size_t(k)]) * cols + c)] = 0.0;
  }
  store(t, v);
}

}  // namespace kiln::script
