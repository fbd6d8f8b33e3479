#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace kiln {

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (span >= 0 ? span / s : -((-span + s - 1) / s)) + 1;  // floor division, as torch's div_rtn
  if (ceil_mode && out > 0 && (out - 1) * s >= in + p) --out;
  return out;
}

int64_t transposed_window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t output_padding) {
  return (in - 1) * s - 2 * p + d * (k - 1) + output_padding + 1;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return st;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("{}: shapes {} and {} cannot be broadcast", op, shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim) {
  int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor accepts dim 0 and -1, as in torch
  if (dim < -n || dim >= n)
    fail("{}: dim {} is out of range for a tensor of rank {} (expected in [{}, {}])", op, dim, ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}

}  // namespace kiln
