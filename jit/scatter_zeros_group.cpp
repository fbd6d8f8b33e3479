#include "jit/scatter_zeros_group.h"

#include <algorithm>
#include <optional>

#include "backends/interp/interpreter.h"
#include "eager/cpu/scatter.h"
#include "jit/ir_utils.h"

namespace kiln::jit {

namespace {

class ScatterZerosKernel final : public GroupKernel {
 public:
  ScatterZerosKernel(std::string name, Shape shape, DType dtype, size_t index, size_t src, int64_t dim,
                     std::unique_ptr<ir::Graph> g)
      : name_(std::move(name)), shape_(std::move(shape)), dtype_(dtype), index_(index), src_(src), dim_(dim),
        graph_(std::move(g)), plan_(*graph_) {}

  const std::string& name() const override { return name_; }

  Tensors run(const Tensors& in) const override {
    if (std::optional<Tensor> r = cpu::scatter_add_into_zeros(shape_, dtype_, in.at(index_), in.at(src_), dim_))
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

bool is_zero_constant(const ir::Value* v) {
  const Tensor* t = tensor_constant(v);
  if (!t || (t->dtype() != DType::Float32 && t->dtype() != DType::Float64) || !t->device().is_cpu()) return false;
  Tensor c = t->host_contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  return std::all_of(p, p + c.numel() * int64_t(c.element_size()), [](unsigned char b) { return b == 0; });
}

std::shared_ptr<GroupKernel> compile_scatter_zeros_group(const ir::Graph& group, const std::string& name,
                                                         std::string* why_not) {
  auto no = [&](const char* why) -> std::shared_ptr<GroupKernel> {
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

}  // namespace kiln::jit
