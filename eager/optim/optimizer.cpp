#include "eager/optim/optimizer.h"

#include <cmath>

#include "eager/autograd/graph.h"
#include "eager/optim/fused_update.h"
#include "eager/ops.h"
#include "eager/profiler/profile_hooks.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr), initial_lr_(lr) {
  if (lr < 0) fail("optimizer: invalid learning rate {}", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].requires_grad()) fail("optimizer: parameter {} does not require grad", i);
    set_memory_category(params_[i], MemoryCategory::Parameter);  // also tensors trained outside a Module
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

SGD::SGD(std::vector<Tensor> params, SGDOptions opt) : Optimizer(std::move(params), opt.lr), opt_(opt) {
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
    fail("SGD: nesterov momentum requires a momentum and zero dampening");
  momentum_.resize(params_.size());
}

void SGD::step() {
  NoGradGuard ng;
  ProfileScope scope("SGD.step");
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (opt_.fused && can_fuse_update(p, g, {})) {
      bool first = opt_.momentum != 0 && !momentum_[i].defined();
      if (first) {
        MemoryCategoryScope state(MemoryCategory::OptimizerState);
        momentum_[i] = empty_like(p);
      }
      fused_sgd(p, g, momentum_[i], {lr_, opt_.momentum, opt_.dampening, opt_.weight_decay, opt_.nesterov, first});
      continue;
    }
    if (opt_.weight_decay != 0) g = g + p * opt_.weight_decay;
    if (opt_.momentum != 0) {
      Tensor& buf = momentum_[i];
      if (!buf.defined()) {
        MemoryCategoryScope state(MemoryCategory::OptimizerState);
        buf = g.clone();
      }
      else buf.mul_(opt_.momentum).add_(g * (1 - opt_.dampening));
      g = opt_.nesterov ? g + buf * opt_.momentum : buf;
    }
    p.sub_(g * lr_);
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions opt, bool decoupled)
    : Optimizer(std::move(params), opt.lr), opt_(opt), decoupled_(decoupled) {
  if (opt.beta1 < 0 || opt.beta1 >= 1 || opt.beta2 < 0 || opt.beta2 >= 1)
    fail("Adam: invalid betas ({}, {}), each must be in [0, 1)", opt.beta1, opt.beta2);
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::step() {
  NoGradGuard ng;
  ProfileScope scope(decoupled_ ? "AdamW.step" : "Adam.step");
  ++t_;
  double bc1 = 1 - std::pow(opt_.beta1, double(t_)), bc2 = 1 - std::pow(opt_.beta2, double(t_));
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (opt_.fused && can_fuse_update(p, g, {})) {
      if (!m_[i].defined()) {
        MemoryCategoryScope state(MemoryCategory::OptimizerState);
        m_[i] = zeros_like(p);
        v_[i] = zeros_like(p);
      }
      if (can_fuse_update(p, g, {&m_[i], &v_[i]})) {
        fused_adam(p, g, m_[i], v_[i], {lr_, opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay, decoupled_, bc1, bc2});
        continue;
      }
    }
    if (opt_.weight_decay != 0) {
      if (decoupled_) p.mul_(1 - lr_ * opt_.weight_decay);
      else g = g + p * opt_.weight_decay;
    }
    if (!m_[i].defined()) {
      MemoryCategoryScope state(MemoryCategory::OptimizerState);
      m_[i] = zeros_like(p);
      v_[i] = zeros_like(p);
    }
    m_[i].mul_(opt_.beta1).add_(g * (1 - opt_.beta1));
    v_[i].mul_(opt_.beta2).add_(g * g * (1 - opt_.beta2));
    Tensor denom = sqrt(v_[i]) / std::sqrt(bc2) + opt_.eps;
    p.sub_(m_[i] / denom * (lr_ / bc1));
  }
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : opt_(opt), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) fail("StepLR: step_size must be positive, got {}", step_size);
}
void StepLR::step() {
  ++epoch_;
  opt_.set_lr(opt_.initial_lr() * std::pow(gamma_, double(epoch_ / step_size_)));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : opt_(opt), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0) fail("CosineAnnealingLR: T_max must be positive, got {}", t_max);
}
void CosineAnnealingLR::step() {
  ++epoch_;
  double base = opt_.initial_lr();
  opt_.set_lr(eta_min_ + (base - eta_min_) * (1 + std::cos(M_PI * double(epoch_) / double(t_max_))) / 2);
}

}  // namespace kiln::optim
