// EagerBuilder: a composite's ops run now, through the dispatcher like any eager op.
#include "eager/builder.h"

#include <algorithm>

#include "core/shapes_broadcast.h"
#include "eager/autocast/autocast.h"
#include "eager/autograd/graph.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {

Tensor EagerBuilder::op(OpId id, const Tensors& inputs, const Attrs& attrs) { return dispatch1(id, inputs, attrs); }

Tensor EagerBuilder::scalar(Scalar v) { return Tensor::wrap_scalar(v); }

// Half types draw in float32: their few mantissa bits would make the keep probability coarse.
Tensor EagerBuilder::rand_like(const Tensor& x) {
  DType rt = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  return kiln::rand_like(x.dtype() == rt ? x : x.to(rt));
}

Tensor EagerBuilder::causal_mask(const Tensor& q, const Tensor& k) {
  TensorOptions o(DType::Int64, q.device());
  Tensor i = arange(Scalar(0), Scalar(q.size(-2)), Scalar(1), o), j = arange(Scalar(0), Scalar(k.size(-2)), Scalar(1), o);
  return dispatch1(OpId::Ge, {unsqueeze(i, 1), j}, {});
}

Tensor EagerBuilder::flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return kiln::flatten(x, start_dim, end_dim);
}

Tensor EagerBuilder::reshape_like(const Tensor& x, const Tensor& like, const Shape& tail) {
  Shape s = like.sizes();
  s.insert(s.end(), tail.begin(), tail.end());
  return kiln::reshape(x, s);
}

Tensor EagerBuilder::pad_rank(const Tensor& x, int64_t rank) {
  Shape s = x.sizes();
  while (int64_t(s.size()) < rank) s.push_back(1);
  return kiln::reshape(x, s);
}

Tensor EagerBuilder::unflatten_like(const Tensor& x, int64_t d, const Tensor& like) {
  Shape s(x.sizes().begin(), x.sizes().begin() + d);
  for (int64_t n : like.sizes()) s.push_back(n);
  s.insert(s.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return kiln::reshape(x, s);
}

Tensor EagerBuilder::reshape_rows(const Tensor& x, const Tensor& like, const Tensor& lead) {
  Shape s{x.size(0)};
  s.insert(s.end(), like.sizes().begin() + std::min<int64_t>(lead.dim(), like.dim()), like.sizes().end());
  return kiln::reshape(x, s);
}

Tensor EagerBuilder::count(const Tensor& x, const Shape& dims, int64_t more_than, const ShapeMessage& msg) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  if (n <= more_than) fail(msg(x.sizes()));
  return scalar(Scalar(n));
}

std::pair<Tensor, Tensor> EagerBuilder::bin(const Tensor& x, int64_t d, int64_t j, int64_t n) {
  int64_t size = x.size(d), start = j * size / n, end = ((j + 1) * size + n - 1) / n;
  Attrs a = Attrs().set("dim", wrap_dim("bin", d, x.dim())).set("start", start).set("end", end).set("step", int64_t(1));
  return {op(OpId::Slice, {x}, a), scalar(Scalar(end - start))};
}

void EagerBuilder::update_buffer(const Tensor& buffer, const Tensor& value) {
  NoGradGuard no_grad;
  Tensor b = buffer;
  b.copy_(value);
}

Tensors EagerBuilder::autocast(std::string_view fn, const Tensors& inputs) { return autocast_inputs(fn, inputs); }

int64_t EagerBuilder::dim(std::string_view op, int64_t d, const Tensor& x) { return wrap_dim(op, d, x.dim()); }

void EagerBuilder::check_rank(const Tensor& x, const std::vector<int64_t>& ranks, const ShapeMessage& msg) {
  if (std::find(ranks.begin(), ranks.end(), x.dim()) == ranks.end()) fail(msg(x.sizes()));
}

void EagerBuilder::check_shape(const Tensor& x, const Shape& want, bool trailing, const ShapeMessage& msg) {
  const Shape& s = x.sizes();
  bool ok = trailing ? s.size() >= want.size() && std::equal(want.begin(), want.end(), s.end() - ptrdiff_t(want.size()))
                     : s == want;
  if (!ok) fail(msg(s));
}

void EagerBuilder::check_broadcast(const Tensors& xs, const std::string& msg) {
  std::vector<Shape> shapes;
  for (const Tensor& x : xs) shapes.push_back(x.sizes());
  if (!shapes_broadcast(shapes)) fail(msg + shapes_list(shapes));
}

void EagerBuilder::fail(const std::string& msg) { kiln::fail("{}", msg); }

}  // namespace kiln
