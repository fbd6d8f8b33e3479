#pragma once
// The functional forms of writes through indexing views (torch's names).
#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace kiln {

// x with x.slice(dim, start, end, step) replaced by src (broadcast, cast to x's dtype): the functional
// form of `x[:, a:b] = src`; select_scatter is that of `x[i] = src` (torch's names)
Tensor slice_scatter(const Tensor& x, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step = 1);
Tensor select_scatter(const Tensor& x, const Tensor& src, int64_t dim, int64_t index);

// The same, taking x over: when this handle is the only holder of x's memory (no other Tensor or
// view, not saved for backward, not borrowed) and neither autograd nor a tracer records, src is
// written into x's own memory and x returned, O(src) instead of O(x); otherwise as above. The
// interpreter passes a value here at its last use (torch's functionalization, undone in place).
Tensor slice_scatter(Tensor&& x, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step = 1);
Tensor select_scatter(Tensor&& x, const Tensor& src, int64_t dim, int64_t index);

}  // namespace kiln
