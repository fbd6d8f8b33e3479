// slice_scatter / select_scatter: the functional form of `x[..., a:b] = v` and `x[i] = v` (torch's names),
// which script lowers writes through views to. Written with differentiable ops (slice_backward places
// the source, where picks it), so autograd flows to both the base and the source. The overloads taking
// the base by rvalue write into it when nothing else can see it (slice_scatter.h).
#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/shape.h"
#include "core/trace_hooks.h"
#include "eager/autograd/graph.h"
#include "eager/ops.h"
#include "eager/slice_scatter.h"

namespace kiln {

namespace {
// src broadcasts to `to` without changing it (torch's copy_ rule).
bool broadcastable(const Shape& src, const Shape& to) {
  if (src.size() > to.size()) return false;
  for (size_t k = 0; k < src.size(); ++k) {
    int64_t a = src[src.size() - 1 - k], b = to[to.size() - 1 - k];
    if (a != 1 && a != b) return false;
  }
  return true;
}

// The slice a scatter writes, checked as torch checks it: its dim, clamped start and end, and shape.
struct Target {
  int64_t dim, start, end;
  Shape shape;
};

Target slice_target(const Tensor& base, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                    std::optional<int64_t> end, int64_t step) {
  if (base.dim() == 0) fail("slice_scatter: cannot slice a 0-d tensor");
  if (step <= 0) fail("slice_scatter: step must be positive, got {}", step);
  int64_t d = wrap_dim("slice_scatter", dim, base.dim());
  int64_t size = base.sizes()[size_t(d)];
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t i = *v < 0 ? *v + size : *v;
    return std::clamp(i, int64_t(0), size);
  };
  int64_t s = clamp(start, 0), e = std::max(s, clamp(end, size));
  Shape view = base.sizes();
  view[size_t(d)] = (e - s + step - 1) / step;
  if (!broadcastable(src.sizes(), view))
    fail("slice_scatter: cannot write a value of shape {} into a slice of shape {}", shape_str(src.sizes()),
         shape_str(view));
  return {d, s, e, view};
}

// Autograd or a tracer must see the scatter as ops (the composite below).
bool recorded(const Tensor& base, const Tensor& src) {
  return trace_hooks() || (GradMode::enabled() && (base.requires_grad() || src.requires_grad()));
}

// No one but this handle can see t's memory: no other Tensor or view, no saved-for-backward holder,
// memory kiln owns (not from_blob's), one element per address (not an expand).
bool sole_owner(const Tensor& t) {
  const std::shared_ptr<Storage>& st = t.storage();
  return t.impl_ptr().use_count() == 1 && st.use_count() == 1 && st->owned &&
         st->saved.load(std::memory_order_relaxed) == 0 && t.is_contiguous();
}
}  // namespace

Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step) {
  auto [d, s, e, view] = slice_target(base, src, dim, start, end, step);
  // Without autograd or a tracer to see it, one copy of the base and a store into its slice: the
  // composite below costs two full-size slice_backwards and a where per write.
  if (!recorded(base, src)) {
    Tensor out = base.clone();
    out.slice(d, s, e, step).copy_(src);  // copy_ broadcasts and converts, as torch's
    return out;
  }
  // As torch's copy_: the value takes the base's dtype and broadcasts to the slice.
  Tensor placed = slice_backward(src.to(base.dtype()).expand(view).contiguous(), base.sizes(), d, s, e, step);
  Tensor mask = slice_backward(ones(view, DType::Bool), base.sizes(), d, s, e, step);
  return where(mask, placed, base);
}

Tensor slice_scatter(Tensor&& base, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step) {
  Tensor b = std::move(base);
  if (recorded(b, src) || !sole_owner(b)) return slice_scatter(std::as_const(b), src, dim, start, end, step);
  auto [d, s, e, view] = slice_target(b, src, dim, start, end, step);
  b.slice(d, s, e, step).copy_(src);
  return b;
}

namespace {
// select_scatter as the slice_scatter of one index: (dim, index) wrapped and checked, src as that slice.
struct Element {
  int64_t dim, index;
  Shape shape;
};

Element select_target(const Tensor& base, const Tensor& src, int64_t dim, int64_t index) {
  if (base.dim() == 0) fail("select_scatter: cannot index a 0-d tensor");
  int64_t d = wrap_dim("select_scatter", dim, base.dim());
  int64_t size = base.sizes()[size_t(d)];
  if (index < -size || index >= size)
    fail("select_scatter: index {} is out of bounds for dimension {} with size {}", index, d, size);
  if (index < 0) index += size;
  Shape view = base.sizes();
  view.erase(view.begin() + d);
  if (!broadcastable(src.sizes(), view))
    fail("select_scatter: cannot write a value of shape {} into an element of shape {}", shape_str(src.sizes()),
         shape_str(view));
  return {d, index, view};
}
}  // namespace

Tensor select_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t index) {
  auto [d, i, view] = select_target(base, src, dim, index);
  return slice_scatter(base, src.to(base.dtype()).expand(view).unsqueeze(d), d, i, i + 1, 1);
}

Tensor select_scatter(Tensor&& base, const Tensor& src, int64_t dim, int64_t index) {
  Tensor b = std::move(base);
  auto [d, i, view] = select_target(b, src, dim, index);
  if (recorded(b, src) || !sole_owner(b)) return select_scatter(std::as_const(b), src, dim, index);
  b.select(d, i).copy_(src);  // copy_ broadcasts and converts, as torch's
  return b;
}

}  // namespace kiln
