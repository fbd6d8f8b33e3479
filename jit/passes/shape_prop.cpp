// Shape and dtype propagation: each op node's output type computed from its inputs' types, symbolic
// dims carried through (broadcasting N against 1 gives N; N against 3 gives 3, the only size both
// can have at run time; N against M is unknown). Only table ops are typed here; the result replaces
// an output type only when it knows more (a traced graph's types are already exact).
#include <numeric>

#include "core/ir/dtype_rules.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

using ir::Dim;
using ir::Type;
using Dims = std::vector<Dim>;

std::optional<Dims> dims_of(const ir::Value* v) { return v->type().is_tensor() ? v->type().dims : std::nullopt; }

Dim broadcast_dim(const Dim& a, const Dim& b) {
  if (a.is_known() && a.size == 1) return b;
  if (b.is_known() && b.size == 1) return a;
  if (a.is_known()) return a;
  if (b.is_known()) return b;
  if (!a.sym.empty() && a.sym == b.sym) return a;
  return Dim::unknown();
}

std::optional<Dims> broadcast(const std::vector<ir::Value*>& ins) {
  Dims out;
  for (const ir::Value* v : ins) {
    auto d = dims_of(v);
    if (!d) return std::nullopt;
    if (d->size() > out.size()) out.insert(out.begin(), d->size() - out.size(), Dim::known(1));
    size_t off = out.size() - d->size();
    for (size_t i = 0; i < d->size(); ++i) out[off + i] = broadcast_dim(out[off + i], (*d)[i]);
  }
  return out;
}

int64_t wrap(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }

std::optional<Dims> reduce_dims(const Dims& in, const Attrs& a, const char* key, bool single) {
  bool keep = a.b_or("keepdim", false);
  std::vector<bool> mask(in.size(), !a.has(key));
  if (a.has(key)) {
    Shape ds = single ? Shape{a.i(key)} : a.ints(key);
    if (ds.empty()) mask.assign(in.size(), true);
    for (int64_t d : ds) {
      int64_t w = wrap(d, in.size());
      if (w < 0 || w >= int64_t(in.size())) return std::nullopt;
      mask[size_t(w)] = true;
    }
  }
  Dims out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!mask[i]) out.push_back(in[i]);
    else if (keep) out.push_back(Dim::known(1));
  }
  return out;
}

std::optional<Dims> reshape_dims(const Dims& in, const Shape& shape) {
  int64_t known = 1;
  bool all_known = true;
  for (const Dim& d : in) {
    if (d.is_known()) known *= d.size;
    else all_known = false;
  }
  int64_t rest = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) infer = int64_t(i);
    else rest *= shape[i];
  }
  Dims out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (int64_t(i) != infer) out.push_back(Dim::known(shape[i]));
    else if (all_known && rest > 0) out.push_back(Dim::known(known / rest));
    else out.push_back(Dim::unknown());
  }
  return out;
}

std::optional<Dims> matmul_dims(const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  if (a.size() == 1 && b.size() == 1) return Dims{};
  if (a.size() == 1) {
    Dims out(b.begin(), b.end() - 2);
    out.push_back(b.back());
    return out;
  }
  if (b.size() == 1) return Dims(a.begin(), a.end() - 1);
  Dims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  if (ba.size() < bb.size()) ba.insert(ba.begin(), bb.size() - ba.size(), Dim::known(1));
  if (bb.size() < ba.size()) bb.insert(bb.begin(), ba.size() - bb.size(), Dim::known(1));
  Dims out;
  for (size_t i = 0; i < ba.size(); ++i) out.push_back(broadcast_dim(ba[i], bb[i]));
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return out;
}

std::optional<Dims> view_dims(const ir::Node& n, const Dims& in) {
  const Attrs& a = n.attrs();
  switch (n.op()) {
    case OpId::Reshape: return reshape_dims(in, a.ints("shape"));
    case OpId::Permute: {
      Dims out;
      for (int64_t d : a.ints("dims")) {
        int64_t w = wrap(d, in.size());
        if (w < 0 || w >= int64_t(in.size())) return std::nullopt;
        out.push_back(in[size_t(w)]);
      }
      return out;
    }
    case OpId::Expand: {
      const Shape& s = a.ints("shape");
      if (s.size() < in.size()) return std::nullopt;
      Dims out;
      size_t off = s.size() - in.size();
      for (size_t i = 0; i < s.size(); ++i) out.push_back(s[i] == -1 && i >= off ? in[i - off] : Dim::known(s[i]));
      return out;
    }
    case OpId::Slice: {
      int64_t d = wrap(a.i("dim"), in.size());
      if (d < 0 || d >= int64_t(in.size())) return std::nullopt;
      Dims out = in;
      const Dim& src = in[size_t(d)];
      if (!src.is_known()) {
        out[size_t(d)] = Dim::unknown();
        return out;
      }
      int64_t size = src.size, step = a.i_or("step", 1);
      int64_t start = a.i_or("start", 0), end = a.has("end") ? a.i("end") : size;
      if (step <= 0) return std::nullopt;
      if (start < 0) start += size;
      if (end < 0) end += size;
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, start, size);
      out[size_t(d)] = Dim::known((end - start + step - 1) / step);
      return out;
    }
    case OpId::Select: {
      int64_t d = wrap(a.i("dim"), in.size());
      if (d < 0 || d >= int64_t(in.size())) return std::nullopt;
      Dims out = in;
      out.erase(out.begin() + d);
      return out;
    }
    case OpId::Squeeze: {
      Shape ds = a.has("dims") ? a.ints("dims") : Shape{};
      Dims out;
      for (size_t i = 0; i < in.size(); ++i) {
        bool listed = ds.empty();
        for (int64_t d : ds) listed |= wrap(d, in.size()) == int64_t(i);
        if (listed && !in[i].is_known()) return std::nullopt;  // squeezed or not depends on the run
        if (!(listed && in[i].size == 1)) out.push_back(in[i]);
      }
      return out;
    }
    case OpId::Unsqueeze: {
      int64_t d = wrap(a.i("dim"), in.size() + 1);
      if (d < 0 || d > int64_t(in.size())) return std::nullopt;
      Dims out = in;
      out.insert(out.begin() + d, Dim::known(1));
      return out;
    }
    default: return std::nullopt;
  }
}

std::optional<Dims> out_dims(const ir::Node& n) {
  auto in0 = dims_of(n.input(0));
  OpId op = n.op();
  switch (op_info(op).kind) {
    case OpKind::Unary: return in0;
    case OpKind::Binary: return broadcast(n.inputs());
    case OpKind::Reduce: return in0 ? reduce_dims(*in0, n.attrs(), "dims", false) : std::nullopt;
    case OpKind::View: return in0 ? view_dims(n, *in0) : std::nullopt;
    case OpKind::Other:
      switch (op) {
        case OpId::Where: return broadcast(n.inputs());
        case OpId::Argmax: case OpId::Argmin:
          if (!in0) return std::nullopt;
          if (!n.attrs().has("dim")) return Dims{};
          return reduce_dims(*in0, n.attrs(), "dim", true);
        case OpId::Contiguous: case OpId::Clone: case OpId::Cast: return in0;
        case OpId::Matmul: {
          auto b = dims_of(n.input(1));
          return in0 && b ? matmul_dims(*in0, *b) : std::nullopt;
        }
        default: return std::nullopt;
      }
  }
  return std::nullopt;
}

// How much a type pins down: each known dtype, rank and dim counts.
int knowledge(const Type& t) {
  if (!t.is_tensor()) return 0;
  int k = t.dtype ? 1 : 0;
  if (t.dims) {
    k += 1;
    for (const Dim& d : *t.dims) k += d.is_known() ? 2 : !d.sym.empty() ? 1 : 0;
  }
  return k;
}

int64_t run_block(ir::Block& b) {
  int64_t changed = 0;
  for (ir::Node* n : b.nodes()) {
    for (ir::Block* sub : n->blocks()) changed += run_block(*sub);
    if (!n->is_op() || n->outputs().size() != 1 || n->inputs().empty()) continue;
    Type t = Type::tensor(ir::op_result_dtype(*n, /*others_keep_first=*/true), out_dims(*n));
    const Type& old = n->output()->type();
    if (knowledge(t) > knowledge(old) || (knowledge(t) == knowledge(old) && t != old && knowledge(t) > 0 &&
                                          !old.has_static_shape())) {
      n->output()->set_type(t);
      ++changed;
    }
  }
  return changed;
}

}  // namespace

PassResult propagate_shapes(ir::Graph& g) { return {run_block(*g.block()), {}}; }

}  // namespace kiln::jit
