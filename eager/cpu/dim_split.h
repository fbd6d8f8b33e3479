#pragma once
// A contiguous tensor seen around one dim: `outer` rows before it, `n` along it, `inner` elements after,
// so element (o, i, k) sits at (o * n + i) * inner + k. What the scans and sorts walk.
#include <cstdint>

#include "core/shape.h"

namespace kiln::cpu {

struct DimSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

inline DimSplit split_at(const Shape& s, int64_t dim) {
  DimSplit r;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    if (d < dim) r.outer *= s[size_t(d)];
    else if (d > dim) r.inner *= s[size_t(d)];
  }
  r.n = s[size_t(dim)];
  return r;
}

}  // namespace kiln::cpu
