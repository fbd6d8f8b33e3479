#include "backends/cpu/conv_backward_group.h"

#include <optional>

#include "backends/interp/interpreter.h"
#include "core/ir/match.h"
#include "eager/cpu/conv_backward.h"
#include "eager/cpu/conv_one_pixel.h"
#include "eager/cpu/conv_onednn.h"

namespace kiln::backends::cpu {

namespace {

enum class Grad { Input, Weight, Bias };

// A conv-backward group's block read back: which arguments are the gradient, the weight (for the input
// gradient) and the conv's input (for the weight gradient), the conv's attrs, and what each output is.
struct ConvLayout {
  size_t grad = 0;
  std::optional<size_t> w, x;
  Attrs attrs;        // of a conv member: stride, padding, dilation, groups, and its "shape"
  Shape input_shape;  // from conv2d_backward_input's "shape"; else x's size at run time
  Shape weight_shape;  // from conv2d_backward_weight's "shape"; else w's size at run time
  std::vector<Grad> outputs;
};

std::optional<ConvLayout> read_layout(const ir::Graph& g, std::string* why) {
  auto no = [&](std::string s) -> std::optional<ConvLayout> {
    if (why) *why = std::move(s);
    return std::nullopt;
  };
  ConvLayout l;
  const ir::Value* grad = nullptr;
  std::vector<std::pair<const ir::Value*, Grad>> made;
  bool has_conv = false;
  for (const ir::Node* n : g.block()->nodes()) {
    if (n->inputs().empty() || n->outputs().size() != 1) return no(fmt::format("{} is not a conv gradient", n->kind_name()));
    if (grad && n->input(0) != grad) return no("the members do not read one gradient");
    grad = n->input(0);
    Grad kind;
    if (n->is_op(OpId::Conv2dBackwardInput) || n->is_op(OpId::Conv2dBackwardWeight)) {
      bool input = n->is_op(OpId::Conv2dBackwardInput);
      kind = input ? Grad::Input : Grad::Weight;
      if (n->inputs().size() != 2) return no(fmt::format("{} has {} inputs", n->kind_name(), n->inputs().size()));
      auto other = argument_index(g, n->input(1));
      if (!other) return no(fmt::format("{} does not read the group's arguments", n->kind_name()));
      Attrs conv = n->attrs().without("shape");
      if (has_conv && !(conv == l.attrs.without("shape"))) return no("the members' conv attributes differ");
      if (!has_conv) l.attrs = n->attrs();
      has_conv = true;
      (input ? l.w : l.x) = other;
      (input ? l.input_shape : l.weight_shape) = n->attrs().ints("shape");
    } else if (is_conv_bias_sum(*n)) {
      kind = Grad::Bias;
    } else {
      return no(fmt::format("{} is not a conv gradient", n->kind_name()));
    }
    for (const auto& [v, k] : made)
      if (k == kind) return no("two members compute the same gradient");
    made.emplace_back(n->output(), kind);
  }
  if (!has_conv || made.size() < 2) return no("the block holds fewer than two conv gradients");
  auto gi = argument_index(g, grad);
  if (!gi) return no("the gradient is not an argument of the group");
  l.grad = *gi;
  for (const ir::Value* o : g.outputs()) {
    std::optional<Grad> k;
    for (const auto& [v, kind] : made)
      if (v == o) k = kind;
    if (!k) return no("an output is not one of the members' results");
    l.outputs.push_back(*k);
  }
  return l;
}

class ConvBackwardKernel final : public FusedKernel {
 public:
  ConvBackwardKernel(std::string name, ConvLayout l, std::unique_ptr<ir::Graph> g)
      : name_(std::move(name)), l_(std::move(l)), graph_(std::move(g)), plan_(*graph_) {}

  const std::string& name() const override { return name_; }

  Tensors run(const Tensors& in) const override {
    bool need_input = false, need_weight = false, need_bias = false;
    for (Grad k : l_.outputs) (k == Grad::Input ? need_input : k == Grad::Weight ? need_weight : need_bias) = true;
    Tensor x = l_.x ? in.at(*l_.x) : Tensor(), w = l_.w ? in.at(*l_.w) : Tensor();
    const Shape& input_shape = l_.x ? x.sizes() : l_.input_shape;
    const Shape& weight_shape = l_.w ? w.sizes() : l_.weight_shape;
    // A one-pixel conv's GEMMs, else oneDNN's primitives where it has them for this conv (several input
    // channels), else kiln's own pass.
    const Tensor& g = in.at(l_.grad);
    std::optional<kiln::cpu::ConvGrads> r = kiln::cpu::one_pixel_conv2d_backward(
        g, x, w, input_shape, weight_shape, l_.attrs, need_input, need_weight, need_bias);
    if (!r)
      r = kiln::cpu::onednn_conv2d_backward(g, x, w, input_shape, weight_shape, l_.attrs, need_input, need_weight,
                                            need_bias);
    if (!r)
      r = kiln::cpu::conv2d_backward(g, x, w, input_shape, weight_shape, l_.attrs, need_input, need_weight, need_bias);
    if (r) {
      Tensors out;
      for (Grad k : l_.outputs) out.push_back(k == Grad::Input ? r->input : k == Grad::Weight ? r->weight : r->bias);
      return out;
    }
    // Operands the one-pass kernel does not take: the members one by one.
    std::vector<IValue> args(in.begin(), in.end());
    Tensors out;
    for (IValue& v : interp::run(plan_, args)) out.push_back(v.to_tensor());
    return out;
  }

 private:
  std::string name_;
  ConvLayout l_;
  std::unique_ptr<ir::Graph> graph_;
  interp::Plan plan_;  // reads *graph_
};

}  // namespace

std::shared_ptr<FusedKernel> compile_conv_backward_group(const ir::Graph& group, const std::string& name,
                                                         std::string* why_not) {
  std::optional<ConvLayout> l = read_layout(group, why_not);
  if (!l) return nullptr;
  return std::make_shared<ConvBackwardKernel>(name, std::move(*l), group.copy());
}

}  // namespace kiln::backends::cpu
