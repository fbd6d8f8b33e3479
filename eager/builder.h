#pragma once
// What a composite (eager/composites.h) is written over, so that each is written once and means the same
// thing run now and lowered into a graph (PyTorch's decompositions, in C++). Two builders share one
// vocabulary:
//
//   EagerBuilder   values are Tensors: each op runs through dispatch() now (autograd, the tracer and
//                  autocast see it as they see any eager op); facts about the values are known.
//   GraphBuilder   values are ir::Value*: each op becomes a node. The script frontend implements it over
//                  its lowerer; what is known only at run time (a rank, a size, a shape check) becomes
//                  nodes too.
//
// The vocabulary (V is the value type):
//   V op(OpId, {inputs}, attrs)        a row of core/ops.def
//   V scalar(Scalar)                   a wrapped number (0-d, does not widen a tensor's dtype)
//   V detach(V)                        the same values with no gradient path
//   V parameter(t, name)               a layer's parameter or buffer `name` (null / undefined when t is)
//   V flatten(V x, start, end)         torch.flatten: the shape computed from x's when the graph runs
//   V reshape_like(V x, V like, tail)  x reshaped to like's shape followed by `tail` (-1 allowed), that shape
//                                      read when the graph runs
//   V pad_rank(V x, rank)              x with size-1 dims appended up to `rank` dims (check its rank first)
//   V unflatten_like(V x, d, V like)   x with its dim d (counted from the front) replaced by like's dims, read
//                                      when the graph runs (an advanced index's broadcast shape)
//   V head(V x, V n)                   x[:n] along dim 0, n a wrapped integer read when the graph runs (a bool
//                                      mask's count)
//   V reshape_rows(V x, V like, V lead) x reshaped to [x.size(0)] + like.shape[rank(lead):], read when the graph
//                                      runs (the rows a mask over like's leading dims picked)
//   V transpose(V x, d0, d1)           x with dims d0 and d1 swapped (a view; negative dims count from the end,
//                                      so a graph serves every rank)
//   V count(V x, dims, more_than, msg) the number of elements over dims, a wrapped integer, which must exceed
//                                      more_than (checked now where the shape is known, else when the graph runs;
//                                      more_than < 0: no check, no branch in the graph)
//   std::pair<V, V> bin(V x, d, j, n)   bin j of n along dim d as adaptive pooling cuts it: x sliced to
//                                      [floor(j * size / n), ceil((j + 1) * size / n)) and the bin's length (a
//                                      wrapped integer), the size read when the graph runs
//   void update_buffer(V buf, V value) a buffer that parameter() gave, overwritten with value outside autograd
//                                      (BatchNorm's running statistics)
//   V rand_like(V)                     U[0, 1) of the value's shape, drawn at each run
//   V causal_mask(V q, V k)            bool (L, S), True where key j <= query i (torch's tril of ones): L and S
//                                      are q's and k's dim -2, read when the graph runs
//   V if_bool(V x, then, otherwise)    the value of `then` where x is a bool tensor, else of `otherwise` (an
//                                      attention mask's meaning): chosen now where x's dtype is known, else when
//                                      the graph runs
//   std::vector<V> autocast(fn, {..})  the inputs as autocast's policy row `fn` wants them in the scope
//   std::optional<int64_t> rank(V)     the rank when known now (always in eager)
//   std::optional<Shape> shape(V)      the shape when known now
//   std::optional<DType> dtype(V)      the dtype when known now
//   int64_t dim(op, d, V x)            d wrapped against x's rank when known now; else d as given
//   void check_rank(V x, ranks, msg)   x's rank must be one of `ranks`: checked now where it is known, else
//                                      when the graph runs
//   void check_shape(V, want, trailing, msg)  x's shape (or its trailing dims) must be `want`: checked now
//                                      where the shape is known, else when the graph runs
//   void check_broadcast({V..}, msg)   the shapes must broadcast together, else msg followed by them ("[2], [3]"):
//                                      checked now where every shape is known, else when the graph runs
//   [[noreturn]] void fail(msg)        an argument error known when building
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln {

namespace ir {
class Value;
}

// A check's message given the shape it saw: the shape when known now, nullopt when the check runs later.
using ShapeMessage = std::function<std::string(const std::optional<Shape>&)>;

class EagerBuilder {
 public:
  using V = Tensor;
  Tensor op(OpId id, const Tensors& inputs, const Attrs& attrs = {});
  Tensor scalar(Scalar v);
  Tensor detach(const Tensor& x) { return x.detach(); }
  Tensor parameter(const Tensor& t, const std::string&) { return t; }
  Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim);
  Tensor reshape_like(const Tensor& x, const Tensor& like, const Shape& tail);
  Tensor pad_rank(const Tensor& x, int64_t rank);
  Tensor unflatten_like(const Tensor& x, int64_t d, const Tensor& like);
  Tensor head(const Tensor& x, const Tensor& n) { return x.slice(0, 0, n.item<int64_t>()); }
  Tensor reshape_rows(const Tensor& x, const Tensor& like, const Tensor& lead);
  Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { return x.transpose(d0, d1); }
  Tensor count(const Tensor& x, const Shape& dims, int64_t more_than, const ShapeMessage& msg);
  std::pair<Tensor, Tensor> bin(const Tensor& x, int64_t d, int64_t j, int64_t n);
  void update_buffer(const Tensor& buffer, const Tensor& value);
  Tensor rand_like(const Tensor& x);
  Tensor causal_mask(const Tensor& q, const Tensor& k);
  Tensor if_bool(const Tensor& x, const std::function<Tensor()>& then, const std::function<Tensor()>& otherwise) {
    return x.dtype() == DType::Bool ? then() : otherwise();
  }
  Tensors autocast(std::string_view fn, const Tensors& inputs);
  std::optional<int64_t> rank(const Tensor& x) { return x.dim(); }
  std::optional<Shape> shape(const Tensor& x) { return x.sizes(); }
  std::optional<DType> dtype(const Tensor& x) { return x.dtype(); }
  int64_t dim(std::string_view op, int64_t d, const Tensor& x);
  void check_rank(const Tensor& x, const std::vector<int64_t>& ranks, const ShapeMessage& msg);
  void check_shape(const Tensor& x, const Shape& want, bool trailing, const ShapeMessage& msg);
  void check_broadcast(const Tensors& xs, const std::string& msg);
  [[noreturn]] void fail(const std::string& msg);
};

class GraphBuilder {
 public:
  using V = ir::Value*;
  virtual ~GraphBuilder() = default;
  virtual V op(OpId id, const std::vector<V>& inputs, const Attrs& attrs = {}) = 0;
  virtual V scalar(Scalar v) = 0;
  virtual V detach(V x) = 0;
  virtual V parameter(const Tensor& t, const std::string& name) = 0;
  virtual V flatten(V x, int64_t start_dim, int64_t end_dim) = 0;
  virtual V reshape_like(V x, V like, const Shape& tail) = 0;
  virtual V pad_rank(V x, int64_t rank) = 0;
  virtual V unflatten_like(V x, int64_t d, V like) = 0;
  virtual V head(V x, V n) = 0;
  virtual V reshape_rows(V x, V like, V lead) = 0;
  virtual V transpose(V x, int64_t d0, int64_t d1) = 0;
  virtual V count(V x, const Shape& dims, int64_t more_than, const ShapeMessage& msg) = 0;
  virtual std::pair<V, V> bin(V x, int64_t d, int64_t j, int64_t n) = 0;
  virtual void update_buffer(V buffer, V value) = 0;
  virtual V rand_like(V x) = 0;
  virtual V causal_mask(V q, V k) = 0;
  virtual V if_bool(V x, const std::function<V()>& then, const std::function<V()>& otherwise) = 0;
  virtual std::vector<V> autocast(std::string_view fn, const std::vector<V>& inputs) = 0;
  virtual std::optional<int64_t> rank(V x) = 0;
  virtual std::optional<Shape> shape(V x) = 0;
  virtual std::optional<DType> dtype(V x) = 0;
  virtual int64_t dim(std::string_view op, int64_t d, V x) = 0;
  virtual void check_rank(V x, const std::vector<int64_t>& ranks, const ShapeMessage& msg) = 0;
  virtual void check_shape(V x, const Shape& want, bool trailing, const ShapeMessage& msg) = 0;
  virtual void check_broadcast(const std::vector<V>& xs, const std::string& msg) = 0;
  [[noreturn]] virtual void fail(const std::string& msg) = 0;
};

}  // namespace kiln
