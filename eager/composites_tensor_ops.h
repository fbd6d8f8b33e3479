#pragma once
// Tensor ops model files call that are compositions of rows (masked_fill, tril/triu, sort/topk over the
// argsort row, median/kthvalue, multinomial, repeat, flip, roll, repeat_interleave, one_hot, cumsum/cumprod), each written once over a builder (eager/builder.h) so eager, the
// tracer and the script frontend record the same ops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"
#include "eager/composites.h"

namespace kiln::composite {

template <class B>
Val<B> cumsum(B& b, Val<B> x, int64_t dim);
template <class B>
Val<B> keep_dtype(B& b, Val<B> y, Val<B> x);

// The position of each element along dim d (int64), broadcastable against x. With the shape known now it
// is a constant; otherwise the stable argsort of an all-false tensor, which is the positions 0..n-1 along d
// for whatever size the graph sees.
template <class B>
Val<B> positions(B& b, Val<B> x, int64_t d, const std::string& name) {
  if (std::optional<Shape> s = b.shape(x)) {
    const int64_t r = int64_t(s->size()), dd = d < 0 ? d + r : d, n = (*s)[size_t(dd)];
    Shape shape(size_t(r - dd), 1);
    shape[0] = n;
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
    return b.parameter(tensor(v, shape), name);
  }
  Val<B> none = b.op(OpId::LogicalAnd, {x, b.scalar(false)});
  return b.op(OpId::Argsort, {none}, Attrs().set("dim", d).set("descending", false));
}

// The positions 0..n-1 of dim d of x, 1-D int64: a constant where x's shape is known now, else the stable
// argsort of an all-false column of x's dim d (for whatever size the graph sees).
template <class B>
Val<B> dim_range(B& b, Val<B> x, int64_t d) {
  if (std::optional<Shape> s = b.shape(x)) {
    const int64_t n = (*s)[size_t(d)];
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
    return b.parameter(tensor(v, {n}), "index_range");
  }
  Val<B> rows = b.flatten(d == 0 ? x : b.transpose(x, 0, d), 1, -1);
  Val<B> column = b.op(OpId::Slice, {rows}, Attrs().set("dim", int64_t(1)).set("start", int64_t(0)).set("end", int64_t(1)).set("step", int64_t(1)));
  Val<B> none = b.op(OpId::LogicalAnd, {column, b.scalar(false)});
  Val<B> pos = b.op(OpId::Argsort, {none}, Attrs().set("dim", int64_t(0)).set("descending", false));
  return b.op(OpId::Reshape, {pos}, Attrs().set("shape", Shape{-1}));
}

// An advanced index's pick along dim d of x by the flattened index (index_select marked "indexing": a negative
// index counts from the end, a bad one fails with torch's words naming dimension `reported`).
template <class B>
Val<B> pick(B& b, Val<B> x, int64_t d, Val<B> index, int64_t reported) {
  return b.op(OpId::IndexSelect, {x, b.op(OpId::Reshape, {index}, Attrs().set("shape", Shape{-1}))},
              Attrs().set("dim", d).set("indexing", reported));
}

// The index tensors on x's dims first, first + 1, ... (broadcast together, each wrapped and checked against its
// dim) as one linear index into those dims flattened, row-major
template <class B>
Val<B> linear_index(B& b, Val<B> x, int64_t first, const std::vector<Val<B>>& idx) {
  auto no_check = [](const std::optional<Shape>&) { return std::string(); };
  // numpy's rule, in torch's IndexError words rather than a binary op's
  b.check_broadcast(idx, "shape mismatch: indexing tensors could not be broadcast together with shapes ");
  Val<B> lin{};
  for (int64_t j = 0; j < int64_t(idx.size()); ++j) {
    Val<B> i = b.reshape_like(pick(b, dim_range(b, x, first + j), 0, idx[size_t(j)], j), idx[size_t(j)], {});
    lin = j == 0 ? i : b.op(OpId::Add, {b.op(OpId::Mul, {lin, b.count(x, {first + j}, -1, no_check)}), i});
  }
  return lin;
}

// x[i0, i1, ...] with integer index tensors on the adjacent dims first, first + 1, ... (torch's advanced indexing,
// `x[torch.arange(n), targets]`): the indices broadcast to one shape S (a negative one counts from the end), are
// combined into one linear index over those dims, and one index_select of x with those dims flattened picks the
// elements; the result is x.shape[:first] + S + x.shape[first + k:], and its gradient index_select's (index_add).
// Each index is first picked from its dim's positions, so a bad one is reported with its own value and dim.
template <class B>
Val<B> index_tensors(B& b, Val<B> x, int64_t first, const std::vector<Val<B>>& idx) {
  const int64_t k = int64_t(idx.size());
  if (first < 0) {
    if (std::optional<int64_t> r = b.rank(x)) return index_tensors(b, x, first + *r, idx);
    // x[..., i] with x's rank known only when the graph runs: x's dims before `first` (and a leading 1, so there is
    // always one) are flattened to one dim P, indexed behind it, and P unflattened to those dims again
    Val<B> x1 = b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", int64_t(0)));
    Val<B> picked = index_tensors(b, b.flatten(x1, 0, first - 1), 1, idx);
    Val<B> lead = b.op(OpId::Select, {b.flatten(x1, first, -1)}, Attrs().set("dim", int64_t(-1)).set("index", int64_t(0)));
    return b.op(OpId::Select, {b.unflatten_like(picked, 0, lead)}, Attrs().set("dim", int64_t(0)).set("index", int64_t(0)));
  }
  if (k == 1) return b.unflatten_like(pick(b, x, first, idx[0], 0), first, idx[0]);
  Val<B> lin = linear_index(b, x, first, idx);
  Val<B> flat = b.flatten(x, first, first + k - 1);
  Val<B> picked = b.op(OpId::IndexSelect, {flat, b.op(OpId::Reshape, {lin}, Attrs().set("shape", Shape{-1}))},
                       Attrs().set("dim", first));
  return b.unflatten_like(picked, first, lin);
}

// x[..., i, :, j] in general: index tensors on the ascending dims `dims` (counted from the front). Adjacent ones
// keep their place; apart, torch puts the broadcast index dims first, so the indexed dims are moved to the front
// (in order, the others keeping theirs) and indexed there.
template <class B>
Val<B> index_dims(B& b, Val<B> x, const Shape& dims, const std::vector<Val<B>>& idx) {
  bool adjacent = true;
  for (size_t j = 1; j < dims.size(); ++j) adjacent = adjacent && dims[j] == dims[j - 1] + 1;
  if (adjacent) return index_tensors(b, x, dims[0], idx);
  Val<B> y = x;
  for (size_t j = 0; j < dims.size(); ++j)
    for (int64_t p = dims[j]; p > int64_t(j); --p) y = b.transpose(y, p, p - 1);
  return index_tensors(b, y, 0, idx);
}

// The positions of a bool mask's true elements in its flattened order, 1-D int64 of their count (torch's nonzero()
// of the flattened mask), known only when it runs: a stable argsort puts them first, and the first sum(mask) are kept.
template <class B>
Val<B> mask_positions(B& b, Val<B> mask) {
  Val<B> m = b.flatten(mask, 0, -1);
  Attrs i64 = Attrs().set("dtype", DType::Int64);
  Val<B> order = b.op(OpId::Argsort, {b.op(OpId::Cast, {b.op(OpId::LogicalNot, {m})}, i64)},
                      Attrs().set("dim", int64_t(0)).set("descending", false));
  return b.head(order, b.op(OpId::Sum, {b.op(OpId::Cast, {m}, i64)}, Attrs().set("dims", Shape{0})));
}

// x[mask] (a bool mask shaped as x's leading dims): the elements (or rows) where mask is true, in order, as one
// dim of their count, by one index_select of x's rows at the mask's positions. Its gradient is index_select's.
// The caller checks the mask's shape against x's (torch's IndexError), which a count alone cannot tell.
template <class B>
Val<B> masked_rows(B& b, Val<B> x, Val<B> mask) {
  if (std::optional<DType> d = b.dtype(mask); d && *d != DType::Bool) b.fail("masked_rows: the mask must be bool");
  Val<B> rows = b.reshape_like(x, b.flatten(mask, 0, -1), {-1});
  Val<B> picked = b.op(OpId::IndexSelect, {rows, mask_positions(b, mask)}, Attrs().set("dim", int64_t(0)));
  return b.reshape_rows(picked, x, mask);
}

// A mask's rank is not known when a script graph is built from a function's arguments, so where it is needed
// (a mask after '...' whose rank is unknown) the mask must be 1-D, checked when the graph runs.
template <class B>
void check_mask_1d(B& b, Val<B> mask) {
  b.check_rank(mask, {1}, [](const std::optional<Shape>& s) {
    return fmt::format("a bool mask after '...' must be 1-D in kiln script unless its rank is known when lowering{}",
                       s ? fmt::format(", got shape {}", shape_str(*s)) : std::string());
  });
}

// x with the dims a mask covers merged into one dim of the mask's element count, so that a mask of any rank picks
// along one dim as a 1-D one does (torch reads a k-D mask as k nonzero() index tensors, whose linear index over those
// dims is this merged dim's). d >= 0: the mask's first dim lands on x's dim d; d < 0: its last dim lands on x's dim d.
// With the mask's rank unknown and d > 0, x is reshaped through x.shape[:d] + [mask.numel(), -1] and its trailing
// dims restored from a slice of x, which a graph reads when it runs.
template <class B>
Val<B> merge_mask_dims(B& b, Val<B> x, int64_t d, Val<B> mask) {
  std::optional<int64_t> k = b.rank(mask);
  if (k && *k == 1) return x;
  if (k) return d >= 0 ? b.flatten(x, d, d + *k - 1) : b.flatten(x, d - *k + 1, d);
  if (d < 0) {
    check_mask_1d(b, mask);
    return x;
  }
  Val<B> m = b.flatten(mask, 0, -1);
  if (d == 0) return b.reshape_rows(b.reshape_like(x, m, {-1}), x, mask);
  Attrs first = Attrs().set("start", int64_t(0)).set("end", int64_t(1)).set("step", int64_t(1));
  Val<B> lead = b.op(OpId::Slice, {b.flatten(x, d, -1)}, Attrs(first).set("dim", d));       // x.shape[:d] + [1]
  Val<B> lead_mask = b.op(OpId::LogicalOr, {b.op(OpId::LogicalAnd, {lead, b.scalar(false)}), m});  // x.shape[:d] + [N]
  Val<B> one = x;  // [1] + mask.shape + x's trailing dims
  for (int64_t j = 0; j < d; ++j) one = b.op(OpId::Slice, {one}, Attrs(first).set("dim", j));
  one = b.flatten(one, 0, d - 1);
  Val<B> merged = b.flatten(b.reshape_like(x, lead_mask, {-1}), 0, d);
  Val<B> rows = b.reshape_rows(merged, one, b.op(OpId::Unsqueeze, {mask}, Attrs().set("dim", int64_t(0))));
  return b.unflatten_like(rows, 0, lead_mask);
}

// x[:, mask], x[..., mask], x[:, mask2d]: a mask of any rank over x's dims from d (d < 0: its last dim on d) beside
// slices; its dims are merged into one, swapped to the front, its rows picked and swapped back, so the count's dim
// takes the mask's place as in torch's result.
template <class B>
Val<B> masked_dim(B& b, Val<B> x, int64_t d, Val<B> mask) {
  Val<B> y = merge_mask_dims(b, x, d, mask);
  Val<B> m = b.flatten(mask, 0, -1);
  if (d == 0) return masked_rows(b, y, m);
  return b.transpose(masked_rows(b, b.transpose(y, 0, d), m), 0, d);
}

// torch's C++ name of a dtype ("Float", "Long"), which its index_put_ errors use
inline const char* torch_scalar_type(DType t) {
  switch (t) {
    case DType::Bool: return "Bool";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
    case DType::BFloat16: return "BFloat16";
    case DType::Float16: return "Half";
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
  }
  return "?";
}

// torch's rule for index_put_'s value: a 0-d v is cast to x's dtype, one of more dims must have it (checked where
// both are known now; a graph's caller decides the rest when it runs)
template <class B>
Val<B> put_value(B& b, Val<B> x, Val<B> v) {
  std::optional<DType> want = b.dtype(x), got = b.dtype(v);
  std::optional<int64_t> r = b.rank(v);
  if (!want || !got || !r || *want == *got) return v;
  if (*r == 0) return b.op(OpId::Cast, {v}, Attrs().set("dtype", *want));
  b.fail(fmt::format("index put requires the source and destination dtypes match, got {} for the destination and {} for "
                     "the source", torch_scalar_type(*want), torch_scalar_type(*got)));
}

// x[mask] = v (torch's index_put_ with a bool mask over x's leading dims), as a new value: v broadcast to the
// picked rows' shape [n] + x.shape[k:] (torch's rule), cast to x's dtype; then each row of x is taken from v's rows
// (the i-th true position takes v's row i) or from x, by one index_select of [v rows; x rows]. Gradients: x's
// through its kept rows, v's summed over where it was broadcast, as torch's.
template <class B>
Val<B> masked_put(B& b, Val<B> x, Val<B> mask, Val<B> v) {
  if (std::optional<DType> d = b.dtype(mask); d && *d != DType::Bool) b.fail("masked_put: the mask must be bool");
  v = put_value(b, x, v);
  Val<B> sel = masked_rows(b, b.detach(x), mask);
  Val<B> every = b.op(OpId::LogicalNot, {b.op(OpId::LogicalAnd, {sel, b.scalar(false)})});
  Val<B> vb = b.op(OpId::Where, {every, v, sel});
  vb = keep_dtype(b, vb, x);
  Val<B> m = b.flatten(mask, 0, -1);
  Val<B> xr = b.reshape_rows(b.reshape_like(x, m, {-1}), x, mask);
  Attrs i64 = Attrs().set("dtype", DType::Int64);
  Val<B> mi = b.op(OpId::Cast, {m}, i64);
  Val<B> n = b.op(OpId::Sum, {mi}, Attrs().set("dims", Shape{0}));
  Val<B> from_v = b.op(OpId::Sub, {cumsum(b, mi, 0), b.scalar(Scalar(int64_t(1)))});
  Val<B> from_x = b.op(OpId::Add, {dim_range(b, m, 0), n});
  Val<B> at = b.op(OpId::Where, {m, from_v, from_x});
  Val<B> rows = b.op(OpId::IndexSelect, {b.op(OpId::Cat, {vb, xr}, Attrs().set("dim", int64_t(0))), at},
                     Attrs().set("dim", int64_t(0)));
  return b.reshape_like(rows, x, {});
}

// x[:, mask] = v, x[..., mask] = v: masked_put over the mask's dims (from d; d < 0: its last dim on d) merged and
// swapped to the front. v is first broadcast to x[:, mask]'s shape, where torch broadcasts it.
template <class B>
Val<B> masked_put_dim(B& b, Val<B> x, int64_t d, Val<B> mask, Val<B> v) {
  if (d == 0) return masked_put(b, x, mask, v);
  v = put_value(b, x, v);
  Val<B> sel = masked_dim(b, b.detach(x), d, mask);
  Val<B> every = b.op(OpId::LogicalNot, {b.op(OpId::LogicalAnd, {sel, b.scalar(false)})});
  Val<B> vb = b.op(OpId::Where, {every, v, sel});
  Val<B> y = b.transpose(merge_mask_dims(b, x, d, mask), 0, d);
  Val<B> put = masked_put(b, y, b.flatten(mask, 0, -1), b.transpose(vb, 0, d));
  return b.reshape_like(b.transpose(put, 0, d), x, {});
}

// x[idx] = v with an integer index tensor (torch's index_put_, accumulate=False), as a new value: v broadcast to
// x[idx]'s shape idx.shape + x.shape[1:] and cast to x's dtype; each row of x is then taken from the last row of v
// written to it or from x, by one index_select of [v rows; x rows] (torch leaves repeated indices' winner undefined;
// this is the last, as its CPU kernel does). A row's last writer is found by a stable argsort of the (wrapped,
// checked) indices: a row's writers end at the running count of writes up to it.
template <class B>
struct PutRows {
  Val<B> range;  // 0 .. x.size(0)
  Val<B> pos;    // idx flattened, negative ones wrapped, out of range ones refused
  Val<B> rows;   // v broadcast to x[idx]'s shape and cast to x's dtype, one row per entry of pos
};

// What both index_puts write and where: v's rows and their positions in x's first dim
template <class B>
PutRows<B> put_rows(B& b, Val<B> x, Val<B> idx, Val<B> v) {
  if (std::optional<DType> d = b.dtype(idx); d && !is_integral(*d))
    b.fail(fmt::format("index_put: tensors used as indices must be long, int, byte or bool tensors, got {}", dtype_name(*d)));
  v = put_value(b, x, v);
  Val<B> sel = index_tensors(b, b.detach(x), 0, std::vector<Val<B>>{idx});
  Val<B> every = b.op(OpId::LogicalNot, {b.op(OpId::LogicalAnd, {sel, b.scalar(false)})});
  Val<B> vb = keep_dtype(b, b.op(OpId::Where, {every, v, sel}), x);
  Val<B> range = dim_range(b, x, 0);
  Val<B> pos = pick(b, range, 0, idx, 0);
  return PutRows<B>{range, pos, b.reshape_rows(b.reshape_like(vb, pos, {-1}), x, pos)};
}

template <class B>
Val<B> index_put(B& b, Val<B> x, Val<B> idx, Val<B> v) {
  PutRows<B> put = put_rows(b, x, idx, v);
  Val<B> range = put.range, pos = put.pos, vrows = put.rows;
  Val<B> zero = b.op(OpId::Mul, {range, b.scalar(Scalar(int64_t(0)))});
  Val<B> writes = b.op(OpId::ScatterAdd, {zero, pos, b.op(OpId::Add, {b.op(OpId::Mul, {pos, b.scalar(Scalar(int64_t(0)))}), b.scalar(Scalar(int64_t(1)))})},
                       Attrs().set("dim", int64_t(0)));
  Val<B> written = b.op(OpId::Gt, {writes, b.scalar(Scalar(int64_t(0)))});
  Val<B> order = b.op(OpId::Argsort, {pos}, Attrs().set("dim", int64_t(0)).set("descending", false));
  Val<B> m = b.count(pos, {0}, -1, [](const std::optional<Shape>&) { return std::string(); });
  Val<B> last = b.op(OpId::Sub, {cumsum(b, writes, 0), b.scalar(Scalar(int64_t(1)))});
  // rows no one writes read a spare entry, so the index stays in range when nothing is written at all
  Val<B> spare = b.op(OpId::Slice, {range}, Attrs().set("dim", int64_t(0)).set("start", int64_t(0)).set("end", int64_t(1)).set("step", int64_t(1)));
  Val<B> writer = b.op(OpId::IndexSelect, {b.op(OpId::Cat, {order, spare}, Attrs().set("dim", int64_t(0))),
                                           b.op(OpId::Where, {written, last, m})},
                       Attrs().set("dim", int64_t(0)));
  Val<B> at = b.op(OpId::Where, {written, writer, b.op(OpId::Add, {range, m})});
  return b.op(OpId::IndexSelect, {b.op(OpId::Cat, {vrows, x}, Attrs().set("dim", int64_t(0))), at}, Attrs().set("dim", int64_t(0)));
}

// x.index_put_((idx,), v, accumulate=True) as a new value: v broadcast to x[idx]'s shape and cast to x's dtype,
// its rows added into x's rows by index_add, so repeated indices accumulate (torch's rule) and the gradients are
// index_add's: x's is g, v's the rows of g it was added to, summed where v was broadcast.
template <class B>
Val<B> index_put_accumulate(B& b, Val<B> x, Val<B> idx, Val<B> v) {
  PutRows<B> put = put_rows(b, x, idx, v);
  return b.op(OpId::IndexAdd, {x, put.pos, put.rows}, Attrs().set("dim", int64_t(0)));
}

// x.index_put_((i0, i1, ...), v, accumulate) as a new value, integer indices on x's leading dims: those dims
// flattened into one, indexed by put_rows' rule with the linear index of the tuple (so v broadcasts to
// x[i0, i1, ...]'s shape, and a repeated tuple accumulates or keeps its last write as with one index), and
// x's shape restored
template <class B>
Val<B> index_put_tuple(B& b, Val<B> x, const std::vector<Val<B>>& idx, Val<B> v, bool accumulate) {
  const int64_t k = int64_t(idx.size());
  if (k == 0) b.fail("index_put: needs at least one index tensor");
  if (k == 1) return accumulate ? index_put_accumulate(b, x, idx[0], v) : index_put(b, x, idx[0], v);
  if (std::optional<int64_t> r = b.rank(x); r && k > *r)
    b.fail(fmt::format("index_put: too many indices for tensor of dimension {} (got {})", *r, k));
  for (const Val<B>& i : idx)
    if (std::optional<DType> d = b.dtype(i); d && !is_integral(*d))
      b.fail(fmt::format("index_put: tensors used as indices must be long, int, byte or bool tensors, got {}", dtype_name(*d)));
  Val<B> flat = b.flatten(x, 0, k - 1);
  Val<B> lin = linear_index(b, x, 0, idx);
  Val<B> put = accumulate ? index_put_accumulate(b, flat, lin, v) : index_put(b, flat, lin, v);
  return b.reshape_like(put, x, {});
}

// x[:, idx] = v, x[..., idx] = v: index_put over dim d (d < 0: from the end) swapped to the front. v is first broadcast
// to x[:, idx]'s shape (where torch broadcasts it) and idx's dims merged into one, as index_put takes one index dim.
template <class B>
Val<B> index_put_dim(B& b, Val<B> x, int64_t d, Val<B> idx, Val<B> v) {
  if (d == 0) return index_put(b, x, idx, v);
  v = put_value(b, x, v);
  Val<B> xd = b.detach(x);
  Val<B> sel = index_tensors(b, xd, d, std::vector<Val<B>>{idx});
  Val<B> every = b.op(OpId::LogicalNot, {b.op(OpId::LogicalAnd, {sel, b.scalar(false)})});
  Val<B> flat = b.op(OpId::Reshape, {idx}, Attrs().set("shape", Shape{-1}));
  Val<B> vb = b.reshape_like(b.op(OpId::Where, {every, v, sel}), pick(b, xd, d, flat, 0), {});
  Val<B> put = index_put(b, b.transpose(x, 0, d), flat, b.transpose(vb, 0, d));
  return b.transpose(put, 0, d);
}

// x's dtype where the builder knows it and the row's promotion changed it (masked_fill keeps x's dtype)
template <class B>
Val<B> keep_dtype(B& b, Val<B> y, Val<B> x) {
  std::optional<DType> want = b.dtype(x), got = b.dtype(y);
  if (want && got && *want != *got) return b.op(OpId::Cast, {y}, Attrs().set("dtype", *want));
  return y;
}

// torch.masked_fill: value where mask (bool, broadcast to x's shape) is true; x's shape and dtype
template <class B>
Val<B> masked_fill(B& b, Val<B> x, Val<B> mask, Val<B> value) {
  if (std::optional<DType> md = b.dtype(mask); md && *md != DType::Bool)
    b.fail(fmt::format("masked_fill: expected a bool mask, got {}", dtype_name(*md)));
  if (std::optional<int64_t> vr = b.rank(value); vr && *vr != 0)
    b.fail(fmt::format("masked_fill: only supports a 0-dimensional value tensor, but got tensor with {} dimension(s)", *vr));
  std::optional<Shape> xs = b.shape(x), ms = b.shape(mask);
  if (xs && ms) {
    bool ok = ms->size() <= xs->size();
    for (size_t i = 0; ok && i < ms->size(); ++i) {
      int64_t m = (*ms)[ms->size() - 1 - i], n = (*xs)[xs->size() - 1 - i];
      ok = m == n || m == 1;
    }
    if (!ok)
      b.fail(fmt::format("masked_fill: mask of shape {} cannot be broadcast to the input's shape {}", shape_str(*ms),
                         shape_str(*xs)));
  }
  return keep_dtype(b, b.op(OpId::Where, {mask, value, x}), x);
}

template <class B>
Val<B> masked_fill(B& b, Val<B> x, Val<B> mask, Scalar value) {
  return masked_fill(b, x, mask, b.scalar(value));
}

// torch.tril / triu over the last two dims of a tensor of rank >= 2: elements with col - row <= diagonal
// (tril) or >= diagonal (triu) kept, the rest zero. The dropped ones get a zero gradient through where.
template <class B>
Val<B> triangle(B& b, Val<B> x, int64_t diagonal, bool upper) {
  const char* name = upper ? "triu" : "tril";
  if (std::optional<int64_t> r = b.rank(x); r && *r < 2)
    b.fail(fmt::format("{}: input tensor must have at least 2 dimensions, got {}-D", name, *r));
  Val<B> keep;
  if (std::optional<Shape> s = b.shape(x)) {
    const int64_t n = (*s)[s->size() - 2], m = (*s)[s->size() - 1];
    std::vector<int64_t> v(size_t(n * m));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) v[size_t(i * m + j)] = upper ? j - i >= diagonal : j - i <= diagonal;
    keep = b.parameter(tensor(v, {n, m}, DType::Bool), std::string(name) + "_mask");
  } else {
    Val<B> diff = b.op(OpId::Sub, {positions(b, x, -1, ""), positions(b, x, -2, "")});
    keep = b.op(upper ? OpId::Ge : OpId::Le, {diff, b.scalar(Scalar(diagonal))});
  }
  std::optional<DType> dt = b.dtype(x);
  Val<B> zero = dt == std::optional<DType>(DType::Bool) ? b.scalar(false) : b.scalar(Scalar(0));
  return keep_dtype(b, b.op(OpId::Where, {keep, x, zero}), x);
}

template <class B>
Val<B> argsort(B& b, Val<B> x, int64_t dim, bool descending) {
  return b.op(OpId::Argsort, {x}, Attrs().set("dim", b.dim("argsort", dim, x)).set("descending", descending));
}

// torch.sort: (values, indices), stable, NaN as the largest value; the values are a gather, so the gradient
// flows back to the positions they came from
template <class B>
std::pair<Val<B>, Val<B>> sort(B& b, Val<B> x, int64_t dim, bool descending) {
  Val<B> idx = argsort(b, x, dim, descending);
  return {b.op(OpId::Gather, {x, idx}, Attrs().set("dim", b.dim("sort", dim, x))), idx};
}

// torch.topk: the k largest (or smallest) along dim, in order (sorted=False gives them in order too, which
// torch allows), with their int64 indices
template <class B>
std::pair<Val<B>, Val<B>> topk(B& b, Val<B> x, int64_t k, int64_t dim, bool largest) {
  if (std::optional<Shape> s = b.shape(x)) {
    const int64_t size = s->empty() ? 1 : (*s)[size_t(b.dim("topk", dim, x))];
    if (k < 0 || k > size) b.fail(fmt::format("topk: selected index k out of range: k is {} for a dim of size {}", k, size));
  } else if (k < 0) {
    b.fail(fmt::format("topk: selected index k out of range: k is {}", k));
  }
  const int64_t d = b.dim("topk", dim, x);
  Val<B> idx = b.op(OpId::Slice, {argsort(b, x, dim, largest)},
                    Attrs().set("dim", d).set("start", int64_t(0)).set("end", k).set("step", int64_t(1)));
  return {b.op(OpId::Gather, {x, idx}, Attrs().set("dim", d)), idx};
}

// The element at position k (0-based, int64, shaped as x with size 1 along d) of the stable ascending sort along d
// (NaN as the largest value) and where it stood in x; dim d dropped unless keepdim. A tie gives the stable sort's
// k-th: torch 1.13's CPU median returns the same (every row of 5850 random ones with ties), its CPU kthvalue's
// quickselect often another of the tied elements (torch names no rule; the values agree). The value is a gather,
// so its gradient goes to that index, as torch's value_selecting_reduction_backward.
template <class B>
std::pair<Val<B>, Val<B>> select_sorted(B& b, Val<B> x, int64_t d, Val<B> k, bool keepdim) {
  auto [v, i] = sort(b, x, d, false);
  Val<B> vk = b.op(OpId::Gather, {v, k}, Attrs().set("dim", d));
  Val<B> ik = b.op(OpId::Gather, {i, k}, Attrs().set("dim", d));
  if (keepdim) return {vk, ik};
  Attrs sq = Attrs().set("dims", Shape{d});
  return {b.op(OpId::Squeeze, {vk}, sq), b.op(OpId::Squeeze, {ik}, sq)};
}

// An int64 zero shaped as x with size 1 along d (the shape of select_sorted's k)
template <class B>
Val<B> zero_along(B& b, Val<B> x, int64_t d) {
  Val<B> none = b.op(OpId::Cast, {b.op(OpId::LogicalAnd, {x, b.scalar(false)})}, Attrs().set("dtype", DType::Int64));
  return b.op(OpId::Sum, {none}, Attrs().set("dims", Shape{d}).set("keepdim", true));
}

// x's size along d (wrapped integer), which must not be zero: torch's words for median and kthvalue
template <class B>
Val<B> reduction_size(B& b, const char* fn, Val<B> x, int64_t d) {
  return b.count(x, {d}, 0, [fn, d](const std::optional<Shape>&) {
    return fmt::format("{}(): Expected reduction dim {} to have non-zero size", fn, d);
  });
}

inline std::string kth_out_of_range(int64_t d) { return fmt::format("kthvalue(): selected number k out of range for dimension {}", d); }

// torch.kthvalue with k (1-based) a wrapped integer the caller checked to lie in [1, x.size(d)], d wrapped
template <class B>
std::pair<Val<B>, Val<B>> kth_sorted(B& b, Val<B> x, int64_t d, Val<B> k, bool keepdim) {
  Val<B> at = b.op(OpId::Add, {zero_along(b, x, d), b.op(OpId::Sub, {k, b.scalar(Scalar(int64_t(1)))})});
  return select_sorted(b, x, d, at, keepdim);
}

// torch.kthvalue(x, k, dim, keepdim), checked as torch checks it. A 0-d x is one element along dim 0 or -1.
template <class B>
std::pair<Val<B>, Val<B>> kthvalue(B& b, Val<B> x, int64_t k, int64_t dim, bool keepdim) {
  if (std::optional<int64_t> r = b.rank(x); r && *r == 0)
    return kthvalue(b, b.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{1})), k, dim, false);
  const int64_t d = b.dim("kthvalue", dim, x);
  reduction_size(b, "kthvalue", x, d);
  if (k < 1) b.fail(kth_out_of_range(d));
  b.count(x, {d}, k - 1, [d](const std::optional<Shape>&) { return kth_out_of_range(d); });
  return kth_sorted(b, x, d, b.scalar(Scalar(k)), keepdim);
}

// torch.median(x, dim, keepdim): the lower median, position (n - 1) // 2 of the sort; where a slice holds a NaN, its
// first NaN (the sort puts the NaNs last, in order), as torch propagates NaN
template <class B>
std::pair<Val<B>, Val<B>> median(B& b, Val<B> x, int64_t dim, bool keepdim) {
  if (std::optional<int64_t> r = b.rank(x); r && *r == 0)
    return median(b, b.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{1})), dim, false);
  const int64_t d = b.dim("median", dim, x);
  Val<B> n = reduction_size(b, "median", x, d);
  Val<B> nans = b.op(OpId::Sum, {b.op(OpId::Cast, {b.op(OpId::Ne, {x, x})}, Attrs().set("dtype", DType::Int64))},
                     Attrs().set("dims", Shape{d}).set("keepdim", true));
  Val<B> lower = b.op(OpId::FloorDivide, {b.op(OpId::Sub, {n, b.scalar(Scalar(int64_t(1)))}), b.scalar(Scalar(int64_t(2)))});
  Val<B> k = b.op(OpId::Where, {b.op(OpId::Gt, {nans, b.scalar(Scalar(int64_t(0)))}), b.op(OpId::Sub, {n, nans}), lower});
  return select_sorted(b, x, d, k, keepdim);
}

// The amax of flat where tie and of a detached value below r elsewhere: r again, its gradient shared by the ties.
template <class B>
Val<B> shared_by_ties(B& b, Val<B> flat, Val<B> tie, Val<B> r) {
  // min(2 * min(r, 0) - 1, r): below r for floats of any size, and at most r where an integer wraps
  Val<B> twice = b.op(OpId::Mul, {b.op(OpId::Minimum, {r, b.scalar(Scalar(int64_t(0)))}), b.scalar(Scalar(int64_t(2)))});
  Val<B> below = b.op(OpId::Minimum, {b.op(OpId::Sub, {twice, b.scalar(Scalar(int64_t(1)))}), r});
  return b.op(OpId::Amax, {b.op(OpId::Where, {tie, flat, below})}, Attrs().set("dims", Shape{0}).set("keepdim", false));
}

// torch.median(x): the lower median of all elements, a 0-d tensor (NaN for an empty floating x, as torch). Its
// gradient is torch's evenly_distribute_backward, shared by the elements equal to the result: the result is
// read again as the amax of x where x equals it (or is NaN) and of a detached value below it elsewhere, so the
// value is unchanged and amax's gradient splits among the ties, whatever x's dtype.
template <class B>
Val<B> median_all(B& b, Val<B> x) {
  Val<B> flat = b.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1}));
  if (std::optional<Shape> s = b.shape(flat); s && (*s)[0] == 0)
    return keep_dtype(b, b.op(OpId::Mul, {b.op(OpId::Sum, {b.detach(flat)}, Attrs().set("dims", Shape{}).set("keepdim", false)), b.scalar(NAN)}), x);
  Val<B> r = b.detach(median(b, flat, 0, false).first);
  std::optional<DType> dt = b.dtype(x);
  if (!dt || !is_floating(*dt)) {  // no NaN to meet (a script graph's unknown dtype keeps the int-safe form)
    Val<B> tie = b.op(OpId::LogicalOr, {b.op(OpId::Eq, {flat, r}), b.op(OpId::Ne, {flat, flat})});
    return shared_by_ties(b, flat, tie, r);
  }
  // A NaN median (torch propagates NaN): torch 1.13's evenly_distribute_backward gives each NaN element an equal
  // share. The value is the NaN elements' sum over their count; the amax branch then sees no NaN (r read as 0), so
  // the branch `where` drops gets a finite zero gradient.
  Val<B> nan = b.op(OpId::Ne, {flat, flat}), r_nan = b.op(OpId::Ne, {r, r});
  Val<B> zero = b.scalar(0.0);
  Attrs all = Attrs().set("dims", Shape{0}).set("keepdim", false);
  Val<B> nans = b.op(OpId::Sum, {b.op(OpId::Cast, {nan}, Attrs().set("dtype", DType::Int64))}, all);
  Val<B> shared = b.op(OpId::Div, {b.op(OpId::Sum, {b.op(OpId::Where, {nan, flat, zero})}, all),
                                   b.op(OpId::Maximum, {nans, b.scalar(Scalar(int64_t(1)))})});
  Val<B> r_safe = b.op(OpId::Where, {r_nan, zero, r});
  Val<B> tie = b.op(OpId::LogicalAnd, {b.op(OpId::Eq, {flat, r_safe}), b.op(OpId::LogicalNot, {r_nan})});
  return b.op(OpId::Where, {r_nan, shared, shared_by_ties(b, b.op(OpId::Where, {nan, zero, flat}), tie, r_safe)});
}

// torch.multinomial over the last dim of a 1-D or 2-D tensor of non-negative weights (unnormalised), drawn
// from kiln's generator. Gumbel keys log(p) - log(-log(u)): the largest key of each draw is distributed as
// p / sum(p), and the order of the keys is sampling without replacement, so both modes are one argmax or
// one argsort of fresh uniforms (a traced or scripted graph draws new ones at each run).
template <class B>
Val<B> multinomial(B& b, Val<B> probs, int64_t num_samples, bool replacement) {
  if (std::optional<int64_t> r = b.rank(probs); r && *r != 1 && *r != 2)
    b.fail(fmt::format("multinomial: prob_dist must be 1 or 2 dim, got {}-D", *r));
  if (std::optional<DType> dt = b.dtype(probs); dt && !is_floating(*dt))
    b.fail(fmt::format("multinomial: only supports floating-point dtypes for input, got {}", dtype_name(*dt)));
  if (num_samples <= 0) b.fail(fmt::format("multinomial: cannot sample n_sample <= 0 samples (got {})", num_samples));
  std::optional<Shape> s = b.shape(probs);
  if (s && !replacement && num_samples > s->back())
    b.fail(fmt::format("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement ({} > {})",
                       num_samples, s->back()));
  if (s && s->back() == 0) b.fail("multinomial: the last dim of prob_dist must not be empty");
  Val<B> p = b.detach(probs);
  auto keys = [&](Val<B> w) {
    Val<B> gumbel = b.op(OpId::Neg, {b.op(OpId::Log, {b.op(OpId::Neg, {b.op(OpId::Log, {b.rand_like(w)})})})});
    return b.op(OpId::Add, {b.op(OpId::Log, {w}), gumbel});
  };
  if (replacement) {
    // one row of keys per draw: (..., num_samples, n)
    Val<B> rows = b.op(OpId::Add, {b.op(OpId::Unsqueeze, {p}, Attrs().set("dim", int64_t(-2))),
                                   b.parameter(zeros({num_samples, 1}), "multinomial_draws")});
    return b.op(OpId::Argmax, {keys(rows)}, Attrs().set("dim", int64_t(-1)).set("keepdim", false));
  }
  Val<B> order = b.op(OpId::Argsort, {keys(p)}, Attrs().set("dim", int64_t(-1)).set("descending", true));
  return b.op(OpId::Slice, {order},
              Attrs().set("dim", int64_t(-1)).set("start", int64_t(0)).set("end", num_samples).set("step", int64_t(1)));
}

// Tensor.repeat over an x of rank sizes.size() (the caller puts the leading 1s on): each dim i as
// (1, s_i) expanded to (r_i, s_i) and flattened, so the copies are one expand and one reshape.
template <class B>
Val<B> repeat(B& b, Val<B> x, const Shape& repeats) {
  for (int64_t r : repeats)
    if (r < 0) b.fail(fmt::format("repeat: trying to create tensor with negative dimension {}: {}", r, shape_str(repeats)));
  const int64_t m = int64_t(repeats.size());
  if (m == 0) return x;
  Val<B> y = x;
  Shape e;
  for (int64_t i = 0; i < m; ++i) {
    y = b.op(OpId::Unsqueeze, {y}, Attrs().set("dim", 2 * i));
    e.push_back(repeats[size_t(i)]);
    e.push_back(-1);
  }
  y = b.op(OpId::Expand, {y}, Attrs().set("shape", e));
  for (int64_t i = m - 1; i >= 0; --i) y = b.flatten(y, 2 * i, 2 * i + 1);
  return y;
}

// x with the elements along dim d taken at source positions `src(pos)`; with the shape known now the
// positions are constants and this is one index_select, else a gather by positions computed in the graph.
template <class B, class KnownFn, class GraphFn>
Val<B> take_along(B& b, Val<B> x, int64_t d, const char* name, KnownFn known, GraphFn graph) {
  if (std::optional<Shape> s = b.shape(x)) {
    const int64_t n = s->empty() ? 1 : (*s)[size_t(d)];
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = known(i, n);
    return b.op(OpId::IndexSelect, {x, b.parameter(tensor(idx, {n}), std::string(name) + "_index")}, Attrs().set("dim", d));
  }
  Val<B> n = b.count(x, {d}, -1, [](const std::optional<Shape>&) { return std::string(); });
  return b.op(OpId::Gather, {x, graph(positions(b, x, d, ""), n)}, Attrs().set("dim", d));
}

// torch.flip: each listed dim reversed
template <class B>
Val<B> flip(B& b, Val<B> x, const Shape& dims) {
  std::vector<int64_t> seen;
  Val<B> y = x;
  for (int64_t d0 : dims) {
    const int64_t d = b.dim("flip", d0, x);
    for (int64_t s : seen)
      if (s == d) b.fail(fmt::format("flip: dim {} appears multiple times in the list of dims", d0));
    seen.push_back(d);
    y = take_along(b, y, d, "flip", [](int64_t i, int64_t n) { return n - 1 - i; },
                   [&](Val<B> pos, Val<B> n) { return b.op(OpId::Sub, {b.op(OpId::Sub, {n, b.scalar(Scalar(int64_t(1)))}), pos}); });
  }
  return y;
}

// torch.roll: element i moves to (i + shift) mod n along each dim; without dims, over the flattened tensor
template <class B>
Val<B> roll(B& b, Val<B> x, const Shape& shifts, const Shape& dims) {
  if (dims.empty()) {
    if (shifts.size() != 1) b.fail(fmt::format("roll: shifts and dimensions must align. shifts: {}, dims: 0", shifts.size()));
    Val<B> flat = b.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1}));
    return b.reshape_like(roll(b, flat, shifts, Shape{0}), x, {});
  }
  if (shifts.size() != dims.size())
    b.fail(fmt::format("roll: shifts and dimensions must align. shifts: {}, dims: {}", shifts.size(), dims.size()));
  Val<B> y = x;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = b.dim("roll", dims[k], x), shift = shifts[k];
    y = take_along(b, y, d, "roll", [shift](int64_t i, int64_t n) { return ((i - shift) % n + n) % n; },
                   [&](Val<B> pos, Val<B> n) { return remainder(b, b.op(OpId::Sub, {pos, b.scalar(Scalar(shift))}), n); });
  }
  return y;
}

// torch.repeat_interleave with an int count: each element repeated `repeats` times along dim (the
// flattened input without one), as copies along a new dim after it, flattened into it
template <class B>
Val<B> repeat_interleave(B& b, Val<B> x, int64_t repeats, std::optional<int64_t> dim) {
  if (repeats < 0) b.fail(fmt::format("repeat_interleave: repeats can not be negative, got {}", repeats));
  if (!dim) return repeat_interleave(b, b.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1})), repeats, int64_t(0));
  const int64_t d = b.dim("repeat_interleave", *dim, x);
  // after the unsqueeze the copies' dim is d + 1 counted from the start, or d counted from the end
  const int64_t at = d >= 0 ? d + 1 : d;
  Val<B> u = b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", at));
  std::vector<Val<B>> copies(size_t(std::max<int64_t>(repeats, 1)), u);
  Val<B> c = b.op(OpId::Cat, copies, Attrs().set("dim", at));
  if (repeats == 0) c = b.op(OpId::Slice, {c}, Attrs().set("dim", at).set("start", int64_t(0)).set("end", int64_t(0)).set("step", int64_t(1)));
  return d >= 0 ? b.flatten(c, d, d + 1) : b.flatten(c, d - 1, d);
}

// F.one_hot: int64 (..., C) with a 1 at each index, given the classes 0..C-1 (int64, 1-D): a constant when
// num_classes is known now, else made by the caller from the input's max when the graph runs
template <class B>
Val<B> one_hot_of(B& b, Val<B> x, Val<B> classes) {
  if (std::optional<DType> dt = b.dtype(x); dt && *dt != DType::Int64)
    b.fail(fmt::format("one_hot: one_hot is only applicable to index tensor, got {}", dtype_name(*dt)));
  Val<B> eq = b.op(OpId::Eq, {b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", int64_t(-1))), classes});
  return b.op(OpId::Cast, {eq}, Attrs().set("dtype", DType::Int64));
}

template <class B>
Val<B> one_hot(B& b, Val<B> x, int64_t num_classes) {
  if (num_classes < 0) b.fail("one_hot: num_classes must be known to build the classes");
  std::vector<int64_t> classes(static_cast<size_t>(num_classes));
  for (int64_t i = 0; i < num_classes; ++i) classes[size_t(i)] = i;
  return one_hot_of(b, x, b.parameter(tensor(classes, {num_classes}), "one_hot_classes"));
}

template <class B>
Val<B> cumsum(B& b, Val<B> x, int64_t dim) {
  return b.op(OpId::Cumsum, {x}, Attrs().set("dim", b.dim("cumsum", dim, x)));
}

template <class B>
Val<B> cumprod(B& b, Val<B> x, int64_t dim) {
  return b.op(OpId::Cumprod, {x}, Attrs().set("dim", b.dim("cumprod", dim, x)));
}


}  // namespace kiln::composite
