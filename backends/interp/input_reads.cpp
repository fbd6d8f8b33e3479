#include "backends/interp/input_reads.h"

#include <algorithm>

#include "backends/interp/interpreter_plan.h"
#include "core/ir/op_aliasing.h"

namespace kiln::interp {

namespace {

using ir::Node;
using ir::Prim;

bool holds_tensor(const ir::Type& t) {
  if (t.is_tensor()) return true;
  return std::any_of(t.elems.begin(), t.elems.end(), holds_tensor);
}

bool may_alias(const Node& n, size_t out);

// Whether the block's output `out` may share memory with one of the block's inputs.
bool block_output_may_alias(const ir::Block& b, size_t out) {
  std::vector<const ir::Value*> pending{b.outputs().at(out)};
  while (!pending.empty()) {
    const ir::Value* v = pending.back();
    pending.pop_back();
    if (v->node() == b.param_node()) return true;
    const Node& n = *v->node();
    size_t k = size_t(std::find(n.outputs().begin(), n.outputs().end(), v) - n.outputs().begin());
    if (!n.blocks().empty()) return true;
    if (!may_alias(n, k)) continue;
    for (const ir::Value* in : n.inputs()) pending.push_back(in);
  }
  return false;
}

// Whether n's output `out` may share memory with what n reads; of the prims, only those that build new
// tensors do not.
bool may_alias(const Node& n, size_t out) {
  if (!holds_tensor(n.outputs().at(out)->type())) return false;
  if (n.is_op()) return ir::op_may_return_input(n.op());
  switch (n.prim()) {
    case Prim::Constant:
    case Prim::Full:
    case Prim::RandLike:
    case Prim::Arange:
    case Prim::ListCat:
    case Prim::Einsum:
    case Prim::FloorDivide:
    case Prim::Remainder:
    case Prim::NumToTensor: return false;
    case Prim::FusionGroup: return block_output_may_alias(*n.blocks()[0], out);
    default: return true;
  }
}

// A step that makes a view, moves a value into or out of a container or asks for its shape or dtype reads no
// element: memory it shares may be absent while it runs. (reshape copies where strides demand it, so it reads.)
bool reads_elements(const Node& n) {
  if (n.is_op()) return op_info(n.op()).kind != OpKind::View || n.op() == OpId::Reshape;
  switch (n.prim()) {
    case Prim::Transpose:
    case Prim::Slice:
    case Prim::Detach:
    case Prim::TupleConstruct:
    case Prim::ListConstruct:
    case Prim::TupleUnpack:
    case Prim::ListUnpack:
    case Prim::TupleIndex:
    case Prim::ListIndex:
    case Prim::Unwrap:
    case Prim::Shape:
    case Prim::Size:
    case Prim::Len:
    case Prim::DTypeOf:
    case Prim::IsBool:
    case Prim::IsCuda:
    case Prim::IsNone: return false;
    default: return true;
  }
}

}  // namespace

std::vector<InputReads> input_reads(const Plan& plan) {
  const Plan::BlockPlan& top = plan.block_plan(*plan.graph().block());
  std::vector<InputReads> reads(top.args.size());
  // per slot, the inputs whose memory its value may share
  std::vector<std::vector<size_t>> shares(size_t(plan.num_slots()));
  for (size_t i = 0; i < top.args.size(); ++i) shares[size_t(top.args[i])].push_back(i);
  for (size_t k = 0; k < top.steps.size(); ++k) {
    const Plan::Step& s = top.steps[k];
    std::vector<size_t> read;
    for (int r : s.reads) read.insert(read.end(), shares[size_t(r)].begin(), shares[size_t(r)].end());
    if (read.empty()) continue;
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    if (reads_elements(*s.node))
      for (size_t i : read) reads[i].steps.push_back(k);
    for (size_t o = 0; o < s.out.size(); ++o)
      if (may_alias(*s.node, o)) shares[size_t(s.out[o])] = read;
  }
  for (size_t r = 0; r < top.results.size(); ++r)
    for (size_t i : shares[size_t(top.results[r])]) reads[i].results.push_back(r);
  return reads;
}

}  // namespace kiln::interp
