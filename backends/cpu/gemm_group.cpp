#include "backends/cpu/gemm_group.h"

#include "core/log.h"

#include <unordered_map>

#include "backends/interp/interpreter.h"
#include "core/ir/match.h"
#include "eager/cpu/gemm_epilogue.h"
#include "eager/dispatch.h"

namespace kiln::backends::cpu {

namespace {

// A gemm group's block read back: which arguments the matmul multiplies, the epilogue's steps and the
// argument each add reads.
struct GemmLayout {
  size_t a = 0, b = 0;
  const ir::Node* matmul = nullptr;
  std::vector<kiln::cpu::GemmPostOp> ops;
  std::vector<size_t> addends;
};

std::optional<GemmLayout> read_layout(const ir::Graph& g, std::string* why) {
  auto no = [&](std::string s) -> std::optional<GemmLayout> {
    if (why) *why = std::move(s);
    return std::nullopt;
  };
  GemmLayout l;
  const ir::Value* cur = nullptr;
  for (const ir::Node* n : g.block()->nodes()) {
    if (!l.matmul) {
      if (!n->is_op(OpId::Matmul) || n->inputs().size() != 2) return no(fmt::format("starts with {}, not matmul", n->kind_name()));
      auto a = argument_index(g, n->input(0)), b = argument_index(g, n->input(1));
      if (!a || !b) return no("the matmul does not read the group's arguments");
      l = {*a, *b, n, {}, {}};
      cur = n->output();
      continue;
    }
    if (n->outputs().size() != 1) return no(fmt::format("{} has {} outputs", n->kind_name(), n->outputs().size()));
    if ((n->is_op(OpId::Add) || n->is_op(OpId::Mul)) && n->inputs().size() == 2) {
      const ir::Value* other = n->input(0) == cur ? n->input(1) : n->input(1) == cur ? n->input(0) : nullptr;
      auto i = other ? argument_index(g, other) : std::nullopt;
      if (!i) return no(fmt::format("{} of the epilogue does not read the previous step and an argument", n->kind_name()));
      l.ops.push_back(n->is_op(OpId::Add) ? kiln::cpu::GemmPostOp::Add : kiln::cpu::GemmPostOp::Mul);
      l.addends.push_back(*i);
    } else if ((n->is_op(OpId::Relu) || n->is_op(OpId::Gelu)) && n->input(0) == cur) {
      l.ops.push_back(n->is_op(OpId::Relu) ? kiln::cpu::GemmPostOp::Relu : kiln::cpu::GemmPostOp::Gelu);
    } else {
      return no(fmt::format("{} is not an epilogue step (add, mul, relu, gelu of the previous step)", n->kind_name()));
    }
    cur = n->output();
  }
  if (!l.matmul) return no("the block has no matmul");
  if (g.outputs().size() != 1 || g.outputs()[0] != cur) return no("the block does not return its last step alone");
  return l;
}

// The epilogue alone, as a fusion group's graph: its first argument is the matmul's result, the
// others are the addends (`args` says which group argument each was).
std::unique_ptr<ir::Graph> epilogue_graph(const ir::Graph& g, const GemmLayout& l, std::vector<size_t>& args) {
  auto e = std::make_unique<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> env;
  env[l.matmul->output()] = e->add_input(l.matmul->output()->type());
  for (const ir::Node* n : g.block()->nodes()) {
    if (n == l.matmul) continue;
    for (const ir::Value* v : n->inputs())
      if (!env.count(v)) {
        env[v] = e->add_input(v->type());
        args.push_back(*argument_index(g, v));
      }
    ir::Node* c = e->create_op(n->op(), {}, n->attrs(), 0);
    for (const ir::Value* v : n->inputs()) c->add_input(env.at(v));
    env[n->output()] = c->add_output(n->output()->type());
    e->block()->append(c);
  }
  e->register_output(env.at(g.outputs()[0]));
  return e;
}

class GemmKernel final : public FusedKernel {
 public:
  GemmKernel(std::string name, GemmLayout l, std::unique_ptr<ir::Graph> epilogue, std::vector<size_t> epilogue_args,
             std::shared_ptr<FusedKernel> compiled_epilogue)
      : name_(std::move(name)),
        l_(std::move(l)),
        epilogue_(std::move(epilogue)),
        plan_(*epilogue_),
        epilogue_args_(std::move(epilogue_args)),
        compiled_epilogue_(std::move(compiled_epilogue)) {}

  const std::string& name() const override { return name_; }

  Tensors run(const Tensors& in) const override {
    const Tensor &a = in.at(l_.a), &b = in.at(l_.b);
    // A [..., M, K] by a [K, N] (a Linear on [B, T, C]): the leading dims are more rows of one GEMM, and
    // the addends (a bias, or a residual of the result's shape) flatten alike.
    const bool rows = a.dim() > 2 && b.dim() == 2;
    Tensors adds;
    adds.reserve(l_.addends.size());
    for (size_t i : l_.addends) {
      const Tensor& x = in.at(i);
      adds.push_back(rows && x.dim() > 2 ? x.reshape({-1, x.sizes().back()}) : x);
    }
    if (std::optional<Tensor> y =
            kiln::cpu::gemm_epilogue(rows ? a.reshape({-1, a.sizes().back()}) : a, b, l_.ops, adds)) {
      if (!rows) return {std::move(*y)};
      Shape out = a.sizes();
      out.back() = b.sizes()[1];
      return {y->reshape(out)};
    }
    // oneDNN absent, off, or declining these operands: the matmul, then the epilogue.
    Tensor y = dispatch1(OpId::Matmul, {in.at(l_.a), in.at(l_.b)});
    if (compiled_epilogue_ && y.device().is_cpu()) {
      Tensors ein{std::move(y)};
      for (size_t i : epilogue_args_) ein.push_back(in.at(i));
      return compiled_epilogue_->run(ein);
    }
    std::vector<IValue> ein{IValue(std::move(y))};
    for (size_t i : epilogue_args_) ein.emplace_back(in.at(i));
    std::vector<IValue> r = interp::run(plan_, ein);
    return {r.at(0).to_tensor()};
  }

 private:
  std::string name_;
  GemmLayout l_;
  std::unique_ptr<ir::Graph> epilogue_;
  interp::Plan plan_;  // reads *epilogue_
  std::vector<size_t> epilogue_args_;
  std::shared_ptr<FusedKernel> compiled_epilogue_;
};

}  // namespace

std::shared_ptr<FusedKernel> compile_gemm_group(const ir::Graph& group, const std::string& name,
                                                const GroupCompiler& epilogue_backend, std::string* why_not) {
  std::optional<GemmLayout> l = read_layout(group, why_not);
  if (!l) return nullptr;
  std::vector<size_t> args;
  std::unique_ptr<ir::Graph> epilogue = epilogue_graph(group, *l, args);
  // With oneDNN on, the epilogue runs apart only for operands it declines (another device, an odd
  // shape): not worth generating code for at every compile.
  std::shared_ptr<FusedKernel> compiled;
  if (!kiln::cpu::onednn_gemm_enabled() && epilogue_backend) {
    std::string why;
    compiled = epilogue_backend(*epilogue, name + "_epilogue", &why);
    if (!compiled) kiln::logger().debug("{}: the epilogue runs on the interpreter: {}", name, why);
  }
  return std::make_shared<GemmKernel>(name, std::move(*l), std::move(epilogue), std::move(args), std::move(compiled));
}

}  // namespace kiln::backends::cpu
