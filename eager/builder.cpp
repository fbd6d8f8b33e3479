// EagerBuilder: a composite's ops run now, through the dispatcher like any eager op.
#include "eager/builder.h"

#include "eager/autocast/autocast.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {

Tensor EagerBuilder::op(OpId id, const Tensors& inputs, const Attrs& attrs) { return dispatch1(id, inputs, attrs); }

Tensor EagerBuilder::scalar(double v) { return Tensor::wrap_scalar(Scalar(v)); }

// Half types draw in float32: their few mantissa bits would make the keep probability coarse.
Tensor EagerBuilder::rand_like(const Tensor& x) {
  DType rt = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  return kiln::rand_like(x.dtype() == rt ? x : x.to(rt));
}

Tensor EagerBuilder::flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return kiln::flatten(x, start_dim, end_dim);
}

Tensors EagerBuilder::autocast(std::string_view fn, const Tensors& inputs) { return autocast_inputs(fn, inputs); }

int64_t EagerBuilder::dim(std::string_view op, int64_t d, const Tensor& x) { return wrap_dim(op, d, x.dim()); }

void EagerBuilder::check_shape(const Tensor& x, const Shape& want, bool trailing, const ShapeMessage& msg) {
  const Shape& s = x.sizes();
  bool ok = trailing ? s.size() >= want.size() && std::equal(want.begin(), want.end(), s.end() - ptrdiff_t(want.size()))
                     : s == want;
  if (!ok) fail(msg(s));
}

void EagerBuilder::fail(const std::string& msg) { kiln::fail("{}", msg); }

}  // namespace kiln
