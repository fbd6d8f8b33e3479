#pragma once
// Optimizers (torch.optim): SGD, Adam, AdamW, with torch's update rules, parameter groups and
// state_dict layout; and the LR schedulers StepLR and CosineAnnealingLR. Steps run without recording.
//
// state_dict() is torch's: {"state": {index: {"step", "exp_avg", "exp_avg_sq"} or {"momentum_buffer"}},
// "param_groups": [{"lr", "betas", "eps", "weight_decay", ..., "params": [index, ...]}]}, parameters
// numbered across the groups in order; torch_save writes it so that torch's optimizer loads it, and
// load_state_dict takes torch's. The state tensors are the optimizer's own (save or copy them before
// stepping again). Hyperparameters other than lr and weight_decay are the optimizer's, not each group's:
// loading takes them from the first group.
#include <functional>
#include <optional>
#include <vector>

#include "core/ir/ivalue.h"
#include "core/tensor.h"

namespace kiln::optim {

// A parameter group as given to a constructor: lr and weight_decay default to the optimizer's options
// (nanoGPT's configure_optimizers: {decayed, {}, 0.1}, {biases_and_norms, {}, 0.0}).
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr, weight_decay;
};

class Optimizer {
 public:
  // A group's parameters are params()[begin, end).
  struct Group {
    size_t begin, end;
    double lr, weight_decay, initial_lr;
  };

  Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();  // sets every .grad to undefined (torch's set_to_none default)
  double lr() const { return groups_[0].lr; }  // the first group's
  void set_lr(double lr);                       // every group's
  double initial_lr() const { return groups_[0].initial_lr; }
  const std::vector<Tensor>& params() const { return params_; }  // every group's, in order
  std::vector<Group>& param_groups() { return groups_; }
  const std::vector<Group>& param_groups() const { return groups_; }

  virtual IValue state_dict() const = 0;
  virtual void load_state_dict(const IValue& state) = 0;

 protected:
  // The group entries every optimizer has ("lr", "weight_decay", "initial_lr", "params") with its own.
  IValue groups_value(const std::vector<std::pair<IValue, IValue>>& own) const;
  // Checks the layout against this optimizer's groups; sets each group's lr and weight_decay and calls
  // param_state(index, its dict) for each parameter with state. Returns the first group's dict.
  const IValue& load_groups(const IValue& state, const char* who,
                            const std::function<void(size_t, const IValue&)>& param_state);
  // f(index, parameter, its gradient, the group's lr and weight_decay) for each parameter with a gradient
  template <class F>
  void for_each_gradient(F&& f) {
    for (const Group& grp : groups_)
      for (size_t i = grp.begin; i < grp.end; ++i)
        if (Tensor g = params_[i].grad(); g.defined()) f(i, params_[i], g, grp.lr, grp.weight_decay);
  }
  // A saved state tensor as the parameter's dtype and device, owned by this optimizer.
  Tensor state_tensor(const IValue& v, size_t i, const char* key, const char* who) const;

  std::vector<Tensor> params_;
  std::vector<Group> groups_;
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
  SGD(std::vector<ParamGroup> groups, SGDOptions opt);
  void step() override;
  IValue state_dict() const override;
  void load_state_dict(const IValue& state) override;

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
  Adam(std::vector<ParamGroup> groups, AdamOptions opt, bool decoupled_weight_decay = false);
  void step() override;
  IValue state_dict() const override;
  void load_state_dict(const IValue& state) override;

 private:
  AdamOptions opt_;
  bool decoupled_;
  std::vector<int64_t> steps_;  // per parameter, as torch counts: a step without a gradient skips it
  std::vector<Tensor> m_, v_;
};
// AdamW: Adam with decoupled weight decay (default 0.01, as torch).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions opt = {1e-3, 0.9, 0.999, 1e-8, 0.01}) : Adam(std::move(params), opt, true) {}
  AdamW(std::vector<ParamGroup> groups, AdamOptions opt = {1e-3, 0.9, 0.999, 1e-8, 0.01})
      : Adam(std::move(groups), opt, true) {}
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
