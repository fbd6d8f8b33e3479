#include "core/ir/op_schema.h"

#include <array>

namespace kiln::ir {

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::Ints: return "int list";
    case AttrKind::Str: return "str";
    case AttrKind::DType: return "dtype";
    case AttrKind::Bool: return "bool";
  }
  return "?";
}

namespace {

using K = AttrKind;

OpSchema schema_of(OpId op) {
  const std::vector<std::pair<const char*, K>> conv = {{"stride", K::Ints}, {"padding", K::Ints}, {"dilation", K::Ints}};
  const std::vector<std::pair<const char*, K>> pool = {{"kernel_size", K::Ints}};
  const std::vector<std::pair<const char*, K>> pool_opt = {{"stride", K::Ints}, {"padding", K::Ints}, {"dilation", K::Ints},
                                                            {"ceil_mode", K::Bool}};
  const std::vector<std::pair<const char*, K>> avg_opt = {{"stride", K::Ints}, {"padding", K::Ints}, {"ceil_mode", K::Bool},
                                                           {"count_include_pad", K::Bool}, {"divisor_override", K::Int}};
  switch (op) {
#define KILN_UNARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
      return {1, 1, 1, {}, {}};
#define KILN_BINARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
      return {2, 2, 1, {}, {}};
#define KILN_REDUCE(Id, name, ...) case OpId::Id:
#include "core/ops.def"
      return {1, 1, 1, {}, {{"dims", K::Ints}, {"keepdim", K::Bool}}};
    case OpId::Where: return {3, 3, 1, {}, {}};
    case OpId::Argmax:
    case OpId::Argmin: return {1, 1, 1, {}, {{"dim", K::Int}, {"keepdim", K::Bool}}};
    case OpId::Argsort: return {1, 1, 1, {{"dim", K::Int}}, {{"descending", K::Bool}}};
    case OpId::Cumsum: case OpId::Cumprod: return {1, 1, 1, {{"dim", K::Int}}, {}};
    case OpId::Reshape:
    case OpId::Expand: return {1, 1, 1, {{"shape", K::Ints}}, {}};
    case OpId::Permute: return {1, 1, 1, {{"dims", K::Ints}}, {}};
    case OpId::Slice: return {1, 1, 1, {{"dim", K::Int}}, {{"start", K::Int}, {"end", K::Int}, {"step", K::Int}}};
    case OpId::Select: return {1, 1, 1, {{"dim", K::Int}, {"index", K::Int}}, {}};
    case OpId::Squeeze: return {1, 1, 1, {}, {{"dims", K::Ints}}};
    case OpId::Unsqueeze: return {1, 1, 1, {{"dim", K::Int}}, {}};
    case OpId::Contiguous:
    case OpId::Clone: return {1, 1, 1, {}, {}};
    case OpId::Cast: return {1, 1, 1, {{"dtype", K::DType}}, {}};
    case OpId::Matmul: return {2, 2, 1, {}, {}};
    case OpId::Conv2d: return {2, 3, 1, conv, {{"groups", K::Int}}};
    case OpId::MaxPool2d: return {1, 1, 2, pool, pool_opt};
    case OpId::AvgPool2d: return {1, 1, 1, pool, avg_opt};
    case OpId::RnnLayer:
      return {2, 5, 2, {{"mode", K::Str}}, {{"reverse", K::Bool}, {"bias", K::Bool}, {"lengths", K::Bool}, {"keep", K::Bool}}};
    case OpId::RnnLayerBackward:
      return {5, 8, 4, {{"mode", K::Str}}, {{"reverse", K::Bool}, {"bias", K::Bool}, {"lengths", K::Bool}, {"keep", K::Bool}}};
    case OpId::FlashAttention: return {4, 5, 2, {}, {{"causal", K::Bool}}};
    case OpId::FlashAttentionBackward: return {8, 9, 3, {}, {{"causal", K::Bool}}};
    case OpId::Cat: return {1, -1, 1, {{"dim", K::Int}}, {}};
    // index_select's "indexing": an advanced index's pick, whose errors speak of the index as torch's do
    case OpId::IndexSelect: return {2, 2, 1, {{"dim", K::Int}}, {{"indexing", K::Int}}};
    case OpId::Gather: return {2, 2, 1, {{"dim", K::Int}}, {}};
    case OpId::IndexAdd:
    case OpId::ScatterAdd: return {3, 3, 1, {{"dim", K::Int}}, {}};
    case OpId::SliceBackward:
      return {1, 1, 1, {{"shape", K::Ints}, {"dim", K::Int}}, {{"start", K::Int}, {"end", K::Int}, {"step", K::Int}}};
    case OpId::AvgPool2dBackward: {
      auto req = pool;
      req.push_back({"shape", K::Ints});
      return {1, 1, 1, req, avg_opt};
    }
    // without "shape", conv2d_backward_input is conv_transpose2d: the output's shape from the input's
    case OpId::Conv2dBackwardInput: return {2, 2, 1, conv, {{"groups", K::Int}, {"shape", K::Ints}, {"output_padding", K::Ints}}};
    case OpId::Conv2dBackwardWeight: {
      auto req = conv;
      req.push_back({"shape", K::Ints});
      return {2, 2, 1, req, {{"groups", K::Int}}};
    }
  }
  return {0, 0, 0, {}, {}};
}

std::array<OpSchema, kNumOps> build() {
  std::array<OpSchema, kNumOps> all;
  for (int i = 0; i < kNumOps; ++i) all[size_t(i)] = schema_of(OpId(i));
  return all;
}

}  // namespace

const OpSchema& op_schema(OpId op) {
  static const std::array<OpSchema, kNumOps> all = build();
  return all[size_t(op)];
}

}  // namespace kiln::ir
