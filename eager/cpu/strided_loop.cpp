#include "eager/cpu/strided_loop.h"

#include <algorithm>

namespace kiln::cpu {

StridedLoop make_loop(const char* op, const Tensor& out, const std::vector<const Tensor*>& inputs) {
  StridedLoop L;
  L.nops = int(inputs.size()) + 1;
  const Shape& shape = out.sizes();
  int nd = int(shape.size());
  if (nd > kMaxDims) fail("{}: rank {} exceeds the {} dims kiln's kernels support", op, nd, kMaxDims);
  std::vector<const Tensor*> all{&out};
  all.insert(all.end(), inputs.begin(), inputs.end());
  // Innermost first; size-1 dims dropped; broadcast dims get stride 0.
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxOperands][kMaxDims];
  int n = 0;
  for (int d = nd - 1; d >= 0; --d) {
    if (shape[size_t(d)] == 1) continue;
    sizes[n] = shape[size_t(d)];
    for (int k = 0; k < L.nops; ++k) {
      const Tensor& t = *all[size_t(k)];
      int td = d - (nd - int(t.dim()));
      int64_t st = (td < 0 || t.sizes()[size_t(td)] == 1) ? 0 : t.strides()[size_t(td)];
      strides[k][n] = st * int64_t(t.element_size());
    }
    ++n;
  }
  // Coalesce dim i+1 into dim i when every operand steps through them as one.
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (m > 0) {
      bool ok = true;
      for (int k = 0; k < L.nops && ok; ++k) ok = strides[k][i] == strides[k][m - 1] * L.sizes[m - 1];
      if (ok) {
        L.sizes[m - 1] *= sizes[i];
        continue;
      }
    }
    L.sizes[m] = sizes[i];
    for (int k = 0; k < L.nops; ++k) L.strides[k][m] = strides[k][i];
    ++m;
  }
  if (m == 0) {  // a single element
    L.sizes[0] = 1;
    for (int k = 0; k < L.nops; ++k) L.strides[k][0] = 0;
    m = 1;
  }
  L.ndim = m;
  for (int k = 0; k < L.nops; ++k) L.ptr[k] = static_cast<char*>(all[size_t(k)]->raw_data());
  return L;
}

}  // namespace kiln::cpu
