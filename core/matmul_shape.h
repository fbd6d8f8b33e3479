#pragma once
// torch.matmul's shapes, written once: for concrete shapes (eager's and cuBLAS's kernels, the profiler's
// estimate before a GEMM runs) and for the JIT's symbolic dims (jit/passes/shape_prop.cpp).
// a [..., M, K] @ b [..., K, N] → [batch..., M, N], the batch dims broadcast; a 1-D a is a row [1, K] and
// a 1-D b a column [K, 1], and the result drops that dim again.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace kiln {

// The result's dims; `one` is a dim of size 1 (the batch padding), broadcast(x, y) one batch dim of the two.
template <class D, class Broadcast>
std::vector<D> matmul_out(const std::vector<D>& a, const std::vector<D>& b, const D& one, Broadcast broadcast) {
  if (a.size() == 1 && b.size() == 1) return {};
  if (a.size() == 1) {
    std::vector<D> out(b.begin(), b.end() - 2);
    out.push_back(b.back());
    return out;
  }
  if (b.size() == 1) return std::vector<D>(a.begin(), a.end() - 1);
  std::vector<D> ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  size_t n = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), n - ba.size(), one);
  bb.insert(bb.begin(), n - bb.size(), one);
  std::vector<D> out;
  for (size_t i = 0; i < n; ++i) out.push_back(broadcast(ba[i], bb[i]));
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return out;
}

// Concrete shapes, with torch's errors: a 0-d operand, inner dims that differ, batch dims that do not broadcast.
inline Shape matmul_shape(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty())
    fail("matmul: both arguments need at least 1 dimension, got shapes {} and {}", shape_str(a), shape_str(b));
  int64_t k = a.back(), k2 = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k != k2) fail("matmul: shapes {} and {} cannot be multiplied", shape_str(a), shape_str(b));
  return matmul_out<int64_t>(a, b, 1, [&](int64_t x, int64_t y) {
    if (x != y && x != 1 && y != 1)
      fail("matmul: batch dims of shapes {} and {} cannot be broadcast", shape_str(a), shape_str(b));
    return x == 1 ? y : x;
  });
}

}  // namespace kiln
