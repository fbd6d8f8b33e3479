#pragma once
// Optimizers (torch.optim): SGD, Adam, AdamW, with torch's update rules; and the LR schedulers
// StepLR and CosineAnnealingLR. Steps run without recording.
#include <vector>

#include "core/tensor.h"

namespace kiln::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();  // sets every .grad to undefined (torch's set_to_none default)
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  double initial_lr() const { return initial_lr_; }
  const std::vector<Tensor>& params() const { return params_; }  // torch's param_groups, flattened

 protected:
  std::vector<Tensor> params_;
  double lr_, initial_lr_;
};

// fused: update each CPU float parameter in one pass (eager/optim/fused_update.h); false runs the
// op-by-op formulas (the reference the fused loops are tested against).
struct SGDOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  bool fused = true;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions opt);
  void step() override;

 private:
  SGDOptions opt_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool fused = true;
};
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions opt, bool decoupled_weight_decay = false);
  void step() override;

 private:
  AdamOptions opt_;
  bool decoupled_;
  int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
};
// AdamW: Adam with decoupled weight decay (default 0.01, as torch).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions opt = {1e-3, 0.9, 0.999, 1e-8, 0.01}) : Adam(std::move(params), opt, true) {}
};

class StepLR {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  void step();  // call once per epoch

 private:
  Optimizer& opt_;
  int64_t step_size_, epoch_ = 0;
  double gamma_;
};

class CosineAnnealingLR {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0);
  void step();

 private:
  Optimizer& opt_;
  int64_t t_max_, epoch_ = 0;
  double eta_min_;
};

}  // namespace kiln::optim
