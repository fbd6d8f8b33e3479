#pragma once
// Sizes and strides: formatting, element counts, contiguity, broadcasting and dim wrapping.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[2,3]"
int64_t numel_of(const Shape& s);
Shape contiguous_strides(const Shape& sizes);
// NumPy broadcasting; raises "<op>: shapes [2,3] and [4] cannot be broadcast".
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
// Maps a possibly negative dim into [0, ndim); raises "<op>: dim 3 is out of range for a tensor of rank 2".
int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim);
// The length of a sliding window's output (conv, pool) over `in` elements padded by p on both sides,
// torch's rule: floor((in + 2p - d(k - 1) - 1) / s) + 1; ceil_mode rounds up instead, but a last window must
// start inside the input or its left padding. Below 1 when the window does not fit.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode = false);
// The length of a transposed convolution's output (conv_transpose2d), torch's rule: the input a convolution
// with these arguments maps to `in`, plus output_padding: (in - 1)s - 2p + d(k - 1) + output_padding + 1.
int64_t transposed_window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t output_padding);

}  // namespace kiln
