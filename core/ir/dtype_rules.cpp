#include "core/ir/dtype_rules.h"

#include "core/type_promotion.h"

namespace kiln::ir {

namespace {

bool wrapped(const Value* v) {
  const Node* d = v->node();
  return d->prim() == Prim::Constant && d->attrs().has("wrapped") && d->attrs().b("wrapped");
}

// torch.result_type of some of n's inputs; nothing when one's rank is unknown (0-d or not decides
// the promotion group).
std::optional<DType> promoted(const Node& n, size_t first) {
  ResultTypeState st;
  for (size_t i = first; i < n.inputs().size(); ++i) {
    const Value* v = n.input(i);
    if (!v->type().dims || !v->type().dtype) return std::nullopt;
    st.add(*v->type().dtype, v->type().dims->empty(), wrapped(v));
  }
  return st.result();
}

}  // namespace

std::optional<DType> op_result_dtype(const Node& n, bool others_keep_first) {
  if (!n.is_op() || n.inputs().empty()) return std::nullopt;
  std::vector<DType> in;
  for (const Value* v : n.inputs()) {
    if (!v->type().is_tensor() || !v->type().dtype) return std::nullopt;
    in.push_back(*v->type().dtype);
  }
  OpId op = n.op();
  switch (op_info(op).kind) {
    case OpKind::Unary: return elementwise_out_dtype(op, unary_compute_dtype(op, in[0]));
    case OpKind::Binary: {
      if (!promoted(n, 0)) return std::nullopt;
      ResultTypeState st;
      for (const Value* v : n.inputs()) st.add(*v->type().dtype, v->type().dims->empty(), wrapped(v));
      return elementwise_out_dtype(op, binary_compute_dtype(op, st));
    }
    case OpKind::Reduce:
      if (op == OpId::Sum || op == OpId::Prod) return is_floating(in[0]) ? in[0] : DType::Int64;
      return in[0];
    case OpKind::View: return in[0];
    case OpKind::Other:
      switch (op) {
        case OpId::Where: return promoted(n, 1);
        case OpId::Cast: return n.attrs().has("dtype") ? std::optional<DType>(n.attrs().dtype("dtype")) : std::nullopt;
        case OpId::Argmax:
        case OpId::Argmin: case OpId::Argsort: return DType::Int64;
        case OpId::Cumsum: case OpId::Cumprod: return is_floating(in[0]) ? in[0] : DType::Int64;
        case OpId::Contiguous:
        case OpId::Clone: return in[0];
        // the first input's dtype: these rows take one dtype (the kernels check it) or, for the
        // indexing rows, keep self's
        case OpId::Matmul: case OpId::Conv2d: case OpId::MaxPool2d: case OpId::AvgPool2d: case OpId::Cat:
        case OpId::IndexSelect: case OpId::Gather: case OpId::IndexAdd: case OpId::ScatterAdd:
        case OpId::SliceBackward: case OpId::AvgPool2dBackward: case OpId::Conv2dBackwardInput:
        case OpId::Conv2dBackwardWeight: case OpId::RnnLayer: case OpId::RnnLayerBackward:
        case OpId::FlashAttention: case OpId::FlashAttentionBackward:
          return others_keep_first ? std::optional<DType>(in[0]) : std::nullopt;
        // not Other rows: handled by their kind above
#define KILN_UNARY(Id, name, rule, expr) case OpId::Id:
#define KILN_BINARY(Id, name, rule, expr) case OpId::Id:
#define KILN_REDUCE(Id, name, ...) case OpId::Id:
#include "core/ops.def"
        case OpId::Reshape: case OpId::Permute: case OpId::Expand: case OpId::Slice: case OpId::Select:
        case OpId::Squeeze: case OpId::Unsqueeze:
          return std::nullopt;
      }
  }
  return std::nullopt;
}

}  // namespace kiln::ir
