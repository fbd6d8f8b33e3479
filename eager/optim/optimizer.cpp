#include "eager/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "eager/autograd/graph.h"
#include "eager/optim/fused_update.h"
#include "eager/ops.h"
#include "eager/profiler/profile_hooks.h"

namespace kiln::optim {

namespace {
std::vector<ParamGroup> one_group(std::vector<Tensor> params) { return {ParamGroup{std::move(params), {}, {}}}; }
}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay) {
  if (groups.empty()) fail("optimizer: no parameter groups");
  for (auto& g : groups) {
    double glr = g.lr.value_or(lr);
    if (glr < 0) fail("optimizer: invalid learning rate {}", glr);
    size_t begin = params_.size();
    for (Tensor& p : g.params) params_.push_back(std::move(p));
    groups_.push_back({begin, params_.size(), glr, g.weight_decay.value_or(weight_decay), glr});
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (params_[j].is_same(params_[i])) fail("optimizer: parameter {} appears twice (also as {})", i, j);
    if (!params_[i].requires_grad()) fail("optimizer: parameter {} does not require grad", i);
    set_memory_category(params_[i], MemoryCategory::Parameter);  // also tensors trained outside a Module
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

void Optimizer::set_lr(double lr) {
  for (Group& g : groups_) g.lr = lr;
}

IValue Optimizer::groups_value(const std::vector<std::pair<IValue, IValue>>& own) const {
  std::vector<IValue> out;
  for (const Group& g : groups_) {
    std::vector<std::pair<IValue, IValue>> items = {{"lr", g.lr}};
    for (auto& kv : own) items.push_back(kv);
    items.emplace_back("weight_decay", g.weight_decay);
    items.emplace_back("initial_lr", g.initial_lr);
    std::vector<IValue> idx;
    for (size_t i = g.begin; i < g.end; ++i) idx.emplace_back(int64_t(i));
    items.emplace_back("params", IValue::list(std::move(idx)));
    out.push_back(IValue::dict(std::move(items)));
  }
  return IValue::list(std::move(out));
}

const IValue& Optimizer::load_groups(const IValue& state, const char* who,
                                     const std::function<void(size_t, const IValue&)>& param_state) {
  if (!state.is_dict()) fail("{}.load_state_dict: expected a dict, got {}", who, state.type_name());
  const IValue* groups = state.find("param_groups");
  const IValue* per_param = state.find("state");
  if (!groups || !per_param || !groups->is_list() || !per_param->is_dict())
    fail("{}.load_state_dict: expected a dict with 'state' (a dict) and 'param_groups' (a list)", who);
  const auto& gs = groups->elements();
  if (gs.size() != groups_.size())
    fail("{}.load_state_dict: the state has {} parameter groups, this optimizer {}", who, gs.size(), groups_.size());
  // Saved indices map onto this optimizer's parameters in group order, as torch maps them.
  std::vector<std::pair<int64_t, size_t>> index;
  for (size_t k = 0; k < gs.size(); ++k) {
    const IValue* ps = gs[k].is_dict() ? gs[k].find("params") : nullptr;
    if (!ps || !ps->is_list()) fail("{}.load_state_dict: parameter group {} has no 'params' list", who, k);
    size_t n = groups_[k].end - groups_[k].begin;
    if (ps->elements().size() != n)
      fail("{}.load_state_dict: parameter group {} has {} parameters in the state, {} in this optimizer", who, k,
           ps->elements().size(), n);
    for (size_t j = 0; j < n; ++j) index.emplace_back(ps->elements()[j].to_int(), groups_[k].begin + j);
  }
  for (auto& [key, v] : per_param->items()) {
    if (!key.is_int() || !v.is_dict()) fail("{}.load_state_dict: state entry {} is not index: dict", who, key.repr());
    auto it = std::find_if(index.begin(), index.end(), [&](auto& e) { return e.first == key.to_int(); });
    if (it == index.end()) fail("{}.load_state_dict: state for parameter {}, which no group lists", who, key.to_int());
    param_state(it->second, v);
  }
  for (size_t k = 0; k < gs.size(); ++k) {
    auto num = [&](const char* name) {
      const IValue* v = gs[k].find(name);
      if (!v) fail("{}.load_state_dict: parameter group {} lacks '{}'", who, k, name);
      return v->to_double();
    };
    groups_[k].lr = num("lr");
    groups_[k].weight_decay = num("weight_decay");
    const IValue* init = gs[k].find("initial_lr");
    groups_[k].initial_lr = init ? init->to_double() : groups_[k].lr;
  }
  return gs[0];
}

Tensor Optimizer::state_tensor(const IValue& v, size_t i, const char* key, const char* who) const {
  if (!v.is_tensor()) fail("{}.load_state_dict: state {} '{}' is a {}, not a Tensor", who, i, key, v.type_name());
  const Tensor& p = params_[i];
  const Tensor& t = v.to_tensor();
  if (t.sizes() != p.sizes())
    fail("{}.load_state_dict: state {} '{}' has shape {} but the parameter has shape {}", who, i, key,
         shape_str(t.sizes()), shape_str(p.sizes()));
  MemoryCategoryScope state(MemoryCategory::OptimizerState);
  return t.detach().to(p.dtype()).to(p.device()).contiguous().clone();
}

SGD::SGD(std::vector<Tensor> params, SGDOptions opt) : SGD(one_group(std::move(params)), opt) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions opt)
    : Optimizer(std::move(groups), opt.lr, opt.weight_decay), opt_(opt) {
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
    fail("SGD: nesterov momentum requires a momentum and zero dampening");
  momentum_.resize(params_.size());
}

void SGD::step() {
  NoGradGuard ng;
  ProfileScope scope("SGD.step");
  for_each_gradient([&](size_t i, Tensor& p, Tensor g, double lr, double wd) {
    if (opt_.fused && can_fuse_update(p, g, {})) {
      bool first = opt_.momentum != 0 && !momentum_[i].defined();
      if (first) {
        MemoryCategoryScope state(MemoryCategory::OptimizerState);
        momentum_[i] = empty_like(p);
      }
      if (first || !momentum_[i].defined() || can_fuse_update(p, g, {&momentum_[i]})) {
        fused_sgd(p, g, momentum_[i], {lr, opt_.momentum, opt_.dampening, wd, opt_.nesterov, first});
        return;
      }
    }
    if (wd != 0) g = g + p * wd;
    if (opt_.momentum != 0) {
      Tensor& buf = momentum_[i];
      if (!buf.defined()) {
        MemoryCategoryScope state(MemoryCategory::OptimizerState);
        buf = g.clone();
      } else buf.mul_(opt_.momentum).add_(g * (1 - opt_.dampening));
      g = opt_.nesterov ? g + buf * opt_.momentum : buf;
    }
    p.sub_(g * lr);
  });
}

IValue SGD::state_dict() const {
  std::vector<std::pair<IValue, IValue>> state;
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined())
      state.emplace_back(int64_t(i), IValue::dict({{"momentum_buffer", momentum_[i]}}));
  IValue groups = groups_value({{"momentum", opt_.momentum},
                                {"dampening", opt_.dampening},
                                {"nesterov", opt_.nesterov},
                                {"maximize", false},
                                {"foreach", IValue()},
                                {"differentiable", false}});
  return IValue::dict({{"state", IValue::dict(std::move(state))}, {"param_groups", groups}});
}

void SGD::load_state_dict(const IValue& state) {
  std::vector<Tensor> momentum(params_.size());
  const IValue& g0 = load_groups(state, "SGD", [&](size_t i, const IValue& s) {
    const IValue* buf = s.find("momentum_buffer");
    if (buf && !buf->is_none()) momentum[i] = state_tensor(*buf, i, "momentum_buffer", "SGD");
  });
  for (const char* flag : {"maximize", "differentiable"})
    if (const IValue* v = g0.find(flag); v && v->to_bool()) fail("SGD.load_state_dict: {}=True is not supported", flag);
  if (const IValue* v = g0.find("momentum")) opt_.momentum = v->to_double();
  if (const IValue* v = g0.find("dampening")) opt_.dampening = v->to_double();
  if (const IValue* v = g0.find("nesterov")) opt_.nesterov = v->to_bool();
  momentum_ = std::move(momentum);
}

Adam::Adam(std::vector<Tensor> params, AdamOptions opt, bool decoupled)
    : Adam(one_group(std::move(params)), opt, decoupled) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions opt, bool decoupled)
    : Optimizer(std::move(groups), opt.lr, opt.weight_decay), opt_(opt), decoupled_(decoupled) {
  if (opt.beta1 < 0 || opt.beta1 >= 1 || opt.beta2 < 0 || opt.beta2 >= 1)
    fail("Adam: invalid betas ({}, {}), each must be in [0, 1)", opt.beta1, opt.beta2);
  steps_.resize(params_.size());
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::step() {
  NoGradGuard ng;
  ProfileScope scope(decoupled_ ? "AdamW.step" : "Adam.step");
  for_each_gradient([&](size_t i, Tensor& p, Tensor g, double lr, double wd) {
    int64_t t = ++steps_[i];
    double bc1 = 1 - std::pow(opt_.beta1, double(t)), bc2 = 1 - std::pow(opt_.beta2, double(t));
    if (!m_[i].defined()) {
      MemoryCategoryScope state(MemoryCategory::OptimizerState);
      m_[i] = zeros_like(p);
      v_[i] = zeros_like(p);
    }
    if (opt_.fused && can_fuse_update(p, g, {&m_[i], &v_[i]})) {
      fused_adam(p, g, m_[i], v_[i], {lr, opt_.beta1, opt_.beta2, opt_.eps, wd, decoupled_, bc1, bc2});
      return;
    }
    if (wd != 0) {
      if (decoupled_) p.mul_(1 - lr * wd);
      else g = g + p * wd;
    }
    m_[i].mul_(opt_.beta1).add_(g * (1 - opt_.beta1));
    v_[i].mul_(opt_.beta2).add_(g * g * (1 - opt_.beta2));
    Tensor denom = sqrt(v_[i]) / std::sqrt(bc2) + opt_.eps;
    p.sub_(m_[i] / denom * (lr / bc1));
  });
}

IValue Adam::state_dict() const {
  std::vector<std::pair<IValue, IValue>> state;
  for (size_t i = 0; i < params_.size(); ++i)
    if (m_[i].defined())
      // torch keeps the step as a float32 tensor
      state.emplace_back(int64_t(i), IValue::dict({{"step", scalar_tensor(double(steps_[i]), DType::Float32)},
                                                   {"exp_avg", m_[i]},
                                                   {"exp_avg_sq", v_[i]}}));
  IValue groups = groups_value({{"betas", IValue::tuple({opt_.beta1, opt_.beta2})},
                                {"eps", opt_.eps},
                                {"amsgrad", false},
                                {"maximize", false},
                                {"foreach", IValue()},
                                {"capturable", false},
                                {"differentiable", false},
                                {"fused", false}});
  return IValue::dict({{"state", IValue::dict(std::move(state))}, {"param_groups", groups}});
}

void Adam::load_state_dict(const IValue& state) {
  const char* who = decoupled_ ? "AdamW" : "Adam";
  std::vector<Tensor> m(params_.size()), v(params_.size());
  std::vector<int64_t> steps(params_.size());
  const IValue& g0 = load_groups(state, who, [&](size_t i, const IValue& s) {
    const IValue *st = s.find("step"), *a = s.find("exp_avg"), *b = s.find("exp_avg_sq");
    if (!st || !a || !b) fail("{}.load_state_dict: state {} lacks 'step', 'exp_avg' or 'exp_avg_sq'", who, i);
    steps[i] = st->is_tensor() ? int64_t(st->to_tensor().item<double>()) : int64_t(st->to_double());
    m[i] = state_tensor(*a, i, "exp_avg", who);
    v[i] = state_tensor(*b, i, "exp_avg_sq", who);
  });
  for (const char* flag : {"amsgrad", "maximize", "differentiable"})
    if (const IValue* f = g0.find(flag); f && f->to_bool()) fail("{}.load_state_dict: {}=True is not supported", who, flag);
  if (const IValue* betas = g0.find("betas")) {
    if (betas->elements().size() != 2) fail("{}.load_state_dict: betas must hold two numbers", who);
    opt_.beta1 = betas->elements()[0].to_double();
    opt_.beta2 = betas->elements()[1].to_double();
  }
  if (const IValue* eps = g0.find("eps")) opt_.eps = eps->to_double();
  steps_ = std::move(steps);
  m_ = std::move(m);
  v_ = std::move(v);
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : opt_(opt), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) fail("StepLR: step_size must be positive, got {}", step_size);
}
void StepLR::step() {
  ++epoch_;
  for (auto& g : opt_.param_groups()) g.lr = g.initial_lr * std::pow(gamma_, double(epoch_ / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : opt_(opt), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0) fail("CosineAnnealingLR: T_max must be positive, got {}", t_max);
}
void CosineAnnealingLR::step() {
  ++epoch_;
  for (auto& g : opt_.param_groups())
    g.lr = eta_min_ + (g.initial_lr - eta_min_) * (1 + std::cos(M_PI * double(epoch_) / double(t_max_))) / 2;
}

}  // namespace kiln::optim
