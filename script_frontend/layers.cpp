// torch.nn layers called in a method (`self.fc(x)`), lowered to op-table rows with the layer's
// parameters and buffers as bound graph inputs, computing what kiln's eager layers compute. The composites
// (softmax, layer norm, dropout, linear) are eager's own (eager/composites.h), lowered through a
// LoweringBuilder; they serve torch.nn.functional too.
#include <fmt/format.h>

#include "eager/composites.h"
#include "eager/nn/layers.h"
#include "eager/nn/registry.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/lowering_builder.h"

namespace kiln::script {

using ir::Prim;
using Kind = Static::Kind;

namespace {
const Type kInt = Type::scalar(TypeKind::Int);

Value* number(Lowerer& L, double v) { return L.number_to_tensor(L.constant(v)); }

// mean over dims with keepdim, dividing by the product of the reduced sizes read at run time.
Value* mean_keep(Lowerer& L, Value* x, const Shape& dims, Value** count) {
  Value* s = L.op(OpId::Sum, {x}, Attrs().set("dims", dims).set("keepdim", true));
  Value* n = nullptr;
  for (int64_t d : dims) {
    Value* sz = L.prim(Prim::Size, {x, L.constant(d)}, kInt);
    n = n ? L.prim(Prim::NumMul, {n, sz}, kInt) : sz;
  }
  if (count) *count = n;
  return L.op(OpId::Div, {s, L.number_to_tensor(n)});
}

}  // namespace

Value* softmax_of(Lowerer& L, Value* x, int64_t dim, bool log) {
  LoweringBuilder b(L);
  return log ? composite::log_softmax(b, x, dim) : composite::softmax(b, x, dim);
}

Value* dropout_of(Lowerer& L, Value* x, double p, bool training) {
  LoweringBuilder b(L);
  return composite::dropout(b, x, p, training);
}

Value* layer_norm_of(Lowerer& L, Value* x, const Shape& normalized_shape, Value* weight, Value* bias, double eps) {
  LoweringBuilder b(L);
  return composite::layer_norm(b, x, normalized_shape, weight, bias, eps);
}

Value* linear_of(Lowerer& L, Value* x, Value* weight, Value* bias) {
  LoweringBuilder b(L);
  return composite::linear(b, x, weight, bias);
}

Value* call_layer(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, SourceLoc loc) {
  if (o.layer == Layer::ModuleList) L.fail(loc, "a ModuleList is not callable; iterate over it or index it");
  // Every layer's forward takes one input (named `input`, as in PyTorch).
  if (a.pos.size() + a.kw.size() != 1 || (!a.kw.empty() && a.kw[0].name != "input"))
    L.fail(loc, fmt::format("{}.forward() takes one argument (input), got {}", o.cls, a.pos.size() + a.kw.size()));
  Value* x = a.pos.empty() ? a.kw[0].value : a.pos[0];
  SourceLoc xloc = a.pos.empty() ? a.kw[0].loc : a.pos_locs[0];
  if (o.layer == Layer::Sequential) {
    for (const ObjectPtr& item : o.items) {
      Lowerer::CallArgs next;
      next.pos = {x};
      next.pos_locs = {xloc};
      x = L.call_object(*item, next, loc);
      if (!x->type().is_tensor())
        L.fail(loc, fmt::format("{} in a Sequential returns {}, not a Tensor", item->cls, x->type().str()));
    }
    return x;
  }
  if (!x->type().is_tensor()) L.fail(xloc, fmt::format("{}.forward() expects a Tensor, got {}", o.cls, x->type().str()));
  nn::Module& m = *o.module;
  std::string prefix = o.path.empty() ? "" : o.path + ".";
  if (o.layer == Layer::Registered) {
    LoweringBuilder b(L, prefix);
    return o.spec->lower(b, m, x);
  }
  auto param = [&](const Tensor& t, const char* name) -> Value* {
    if (!t.defined()) return nullptr;
    return L.tensor_of(Static::of_tensor(t, true), prefix + name);
  };
  bool training = m.is_training();
  switch (o.layer) {
    case Layer::Conv2d: {
      auto& c = static_cast<nn::Conv2d&>(m);
      std::vector<Value*> ins = {x, param(c.weight, "weight")};
      if (c.bias.defined()) ins.push_back(param(c.bias, "bias"));
      return L.op(OpId::Conv2d, ins,
                  Attrs().set("stride", c.stride).set("padding", c.padding).set("dilation", c.dilation).set("groups", c.groups));
    }
    case Layer::Conv1d: {
      // conv2d over a height of 1, as eager conv1d
      auto& c = static_cast<nn::Conv1d&>(m);
      std::vector<Value*> ins = {L.op(OpId::Unsqueeze, {x}, Attrs().set("dim", int64_t(2))),
                                 L.op(OpId::Unsqueeze, {param(c.weight, "weight")}, Attrs().set("dim", int64_t(2)))};
      if (c.bias.defined()) ins.push_back(param(c.bias, "bias"));
      Value* y = L.op(OpId::Conv2d, ins,
                      Attrs()
                          .set("stride", Shape{1, c.stride})
                          .set("padding", Shape{0, c.padding})
                          .set("dilation", Shape{1, c.dilation})
                          .set("groups", c.groups));
      return L.op(OpId::Squeeze, {y}, Attrs().set("dims", Shape{2}));
    }
    case Layer::BatchNorm1d:
    case Layer::BatchNorm2d: {
      auto& bn = static_cast<nn::BatchNorm2d&>(m);
      int64_t C = bn.running_mean.numel();
      Shape cs{C, 1, 1};
      Value* rank = L.prim(Prim::Len, {L.prim(Prim::Shape, {x}, Type::list(kInt))}, kInt);
      Value* x_in = x;
      if (o.layer == Layer::BatchNorm1d) {
        // (N, C) and (N, C, L) as (N, C, L', 1): the same statistics per channel
        Value* ok = L.if_value(L.prim(Prim::NumEq, {rank, L.constant(int64_t(2))}, Type::scalar(TypeKind::Bool)),
                               [&] { return L.constant(true); },
                               [&] { return L.prim(Prim::NumEq, {rank, L.constant(int64_t(3))}, Type::scalar(TypeKind::Bool)); },
                               loc);
        L.check(ok, "BatchNorm1d: expected 2D or 3D input");
        Type li = Type::list(kInt);
        Value* shape4 = L.prim(Prim::ListConstruct,
                               {L.prim(Prim::Size, {x, L.constant(int64_t(0))}, kInt), L.prim(Prim::Size, {x, L.constant(int64_t(1))}, kInt),
                                L.constant(int64_t(-1)), L.constant(int64_t(1))},
                               li);
        x = L.prim(Prim::Reshape, {x, shape4}, Type::tensor());
      } else {
        L.check(L.prim(Prim::NumEq, {rank, L.constant(int64_t(4))}, Type::scalar(TypeKind::Bool)), "BatchNorm2d: expected 4D input");
      }
      auto per_channel = [&](Value* v) { return L.op(OpId::Reshape, {v}, Attrs().set("shape", cs)); };
      Value* rm = param(bn.running_mean, "running_mean");
      Value* rv = param(bn.running_var, "running_var");
      Value *mean = nullptr, *var = nullptr;
      if (training) {
        Value* n = nullptr;
        mean = mean_keep(L, x, {0, 2, 3}, &n);
        Value* xc0 = L.op(OpId::Sub, {x, mean});
        var = mean_keep(L, L.op(OpId::Mul, {xc0, xc0}), {0, 2, 3}, nullptr);
        L.check(L.prim(Prim::NumGt, {n, L.constant(int64_t(1))}, Type::scalar(TypeKind::Bool)),
                "BatchNorm2d: expected more than 1 value per channel when training");
        // The running estimates take the unbiased variance and are written back after the call.
        double mom = bn.momentum;
        Value* flat_m = L.op(OpId::Reshape, {mean}, Attrs().set("shape", Shape{C}));
        Value* flat_v = L.op(OpId::Reshape, {var}, Attrs().set("shape", Shape{C}));
        Value* nf = L.prim(Prim::ToFloat, {n}, Type::scalar(TypeKind::Float));
        Value* nm1 = L.prim(Prim::NumSub, {nf, L.constant(1.0)}, Type::scalar(TypeKind::Float));
        Value* corr = L.number_to_tensor(L.prim(Prim::NumDiv, {nf, nm1}, Type::scalar(TypeKind::Float)));
        Value* rm_new = L.op(OpId::Add, {L.op(OpId::Mul, {rm, number(L, 1.0 - mom)}), L.op(OpId::Mul, {flat_m, number(L, mom)})});
        Value* unbiased = L.op(OpId::Mul, {flat_v, corr});
        Value* rv_new = L.op(OpId::Add, {L.op(OpId::Mul, {rv, number(L, 1.0 - mom)}), L.op(OpId::Mul, {unbiased, number(L, mom)})});
        Value* nbt = param(bn.num_batches_tracked, "num_batches_tracked");
        Value* nbt_new = L.op(OpId::Add, {nbt, L.number_to_tensor(L.constant(int64_t(1)))});
        L.update_buffer(bn.running_mean, rm_new);
        L.update_buffer(bn.running_var, rv_new);
        L.update_buffer(bn.num_batches_tracked, nbt_new);
      } else {
        mean = per_channel(rm);
        var = per_channel(rv);
      }
      Value* y = L.op(OpId::Mul, {L.op(OpId::Sub, {x, mean}), L.op(OpId::Rsqrt, {L.op(OpId::Add, {var, number(L, bn.eps)})})});
      if (bn.weight.defined()) y = L.op(OpId::Mul, {y, per_channel(param(bn.weight, "weight"))});
      if (bn.bias.defined()) y = L.op(OpId::Add, {y, per_channel(param(bn.bias, "bias"))});
      if (o.layer == Layer::BatchNorm1d) y = L.prim(Prim::Reshape, {y, L.prim(Prim::Shape, {x_in}, Type::list(kInt))}, Type::tensor());
      return y;
    }
    case Layer::Embedding: {
      auto& em = static_cast<nn::Embedding&>(m);
      // index_select of the flattened indices, reshaped to indices.shape + [embedding_dim] at run time.
      Value* w = param(em.weight, "weight");
      Value* flat = L.op(OpId::Reshape, {x}, Attrs().set("shape", Shape{-1}));
      Value* rows = L.op(OpId::IndexSelect, {w, flat}, Attrs().set("dim", int64_t(0)));
      if (em.padding_idx) {
        // The padding row's value without a path back to the weight: it gets no gradient, as torch.
        Value* pad = L.op(OpId::Eq, {flat, L.number_to_tensor(L.constant(*em.padding_idx))});
        pad = L.op(OpId::Reshape, {pad}, Attrs().set("shape", Shape{-1, 1}));
        Value* fixed = L.op(OpId::IndexSelect, {L.prim(Prim::Detach, {w}, Type::tensor()), flat}, Attrs().set("dim", int64_t(0)));
        rows = L.op(OpId::Where, {pad, fixed, rows});
      }
      Type li = Type::list(kInt);
      Value* shape = L.prim(Prim::ListAdd,
                            {L.prim(Prim::Shape, {x}, li), L.prim(Prim::ListConstruct, {L.constant(em.weight.size(1))}, li)}, li);
      return L.prim(Prim::Reshape, {rows, shape}, Type::tensor());
    }
    case Layer::Identity: return x;
    case Layer::Registered:
    case Layer::User:
    case Layer::Sequential:
    case Layer::ModuleList: break;
  }
  L.fail(loc, fmt::format("internal error: {} has no lowering", o.cls));
}

}  // namespace kiln::script
