#include "backends/cpu/scatter_zeros_group.h"

#include <optional>

#include "backends/interp/interpreter.h"
#include "core/ir/match.h"
#include "eager/cpu/scatter.h"

namespace kiln::backends::cpu {

namespace {

class ScatterZerosKernel final : public FusedKernel {
 public:
  ScatterZerosKernel(std::string name, Shape shape, DType dtype, size_t index, size_t src, int64_t dim,
                     std::unique_ptr<ir::Graph> g)
      : name_(std::move(name)), shape_(std::move(shape)), dtype_(dtype), index_(index), src_(src), dim_(dim),
        graph_(std::move(g)), plan_(*graph_) {}

  const std::string& name() const override { return name_; }

  Tensors run(const Tensors& in) const override {
    if (std::optional<Tensor> r = kiln::cpu::scatter_add_into_zeros(shape_, dtype_, in.at(index_), in.at(src_), dim_))
      return {std::move(*r)};
    std::vector<IValue> args(in.begin(), in.end());
    return {interp::run(plan_, args).at(0).to_tensor()};
  }

 private:
  std::string name_;
  Shape shape_;
  DType dtype_;
  size_t index_, src_;
  int64_t dim_;
  std::unique_ptr<ir::Graph> graph_;
  interp::Plan plan_;  // reads *graph_
};

}  // namespace

std::shared_ptr<FusedKernel> compile_scatter_zeros_group(const ir::Graph& group, const std::string& name,
                                                         std::string* why_not) {
  auto no = [&](const char* why) -> std::shared_ptr<FusedKernel> {
    if (why_not) *why_not = why;
    return nullptr;
  };
  const ir::Node* scatter = nullptr;
  for (const ir::Node* n : group.block()->nodes()) {
    if (n->prim() == ir::Prim::Constant) continue;
    if (scatter || !n->is_op(OpId::ScatterAdd) || n->inputs().size() != 3) return no("the block is not one scatter_add");
    scatter = n;
  }
  if (!scatter) return no("the block has no scatter_add");
  if (!is_zero_constant(scatter->input(0))) return no("scatter_add's self is not a zero constant of the block");
  auto index = argument_index(group, scatter->input(1)), src = argument_index(group, scatter->input(2));
  if (!index || !src) return no("scatter_add does not read the group's arguments");
  if (group.outputs().size() != 1 || group.outputs()[0] != scatter->output()) return no("the block does not return the scatter");
  const Tensor& zeros = *tensor_constant(scatter->input(0));
  return std::make_shared<ScatterZerosKernel>(name, zeros.sizes(), zeros.dtype(), *index, *src,
                                              scatter->attrs().i("dim"), group.copy());
}

}  // namespace kiln::backends::cpu
