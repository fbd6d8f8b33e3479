#pragma once
// The torch.nn loss layers: forward(input, target), torch's constructor arguments and defaults (without the
// deprecated size_average / reduce), `weight` and `pos_weight` as buffers (in state_dict when given, as
// torch). Each forward is the composite its F.* function runs (eager/composite_losses.h).
#include <string>

#include "eager/nn/module.h"

namespace kiln::nn {

class Loss : public Module {
 public:
  // reduction is checked here, when the layer is made (torch checks it at the first call)
  Loss(const char* layer, std::string reduction, bool batchmean = false);
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  // A loss takes two tensors; the one-tensor forward of Module raises saying so.
  Tensor forward(const Tensor& x) override;
  using Module::operator();
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  std::string reduction;

 protected:
  Tensor optional_buffer(const char* name, Tensor t);  // registered when given (torch's None buffer is absent)
};

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(Tensor weight = {}, int64_t ignore_index = -100, std::string reduction = "mean",
                            double label_smoothing = 0.0);
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "CrossEntropyLoss"; }
  Tensor weight;
  int64_t ignore_index;
  double label_smoothing;
};

class NLLLoss : public Loss {
 public:
  explicit NLLLoss(Tensor weight = {}, int64_t ignore_index = -100, std::string reduction = "mean");
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "NLLLoss"; }
  Tensor weight;
  int64_t ignore_index;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(std::string reduction = "mean") : Loss("MSELoss", std::move(reduction)) {}
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "MSELoss"; }
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(std::string reduction = "mean") : Loss("L1Loss", std::move(reduction)) {}
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "L1Loss"; }
};

class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(std::string reduction = "mean", double beta = 1.0) : Loss("SmoothL1Loss", std::move(reduction)), beta(beta) {}
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "SmoothL1Loss"; }
  double beta;
};

class HuberLoss : public Loss {
 public:
  explicit HuberLoss(std::string reduction = "mean", double delta = 1.0) : Loss("HuberLoss", std::move(reduction)), delta(delta) {}
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "HuberLoss"; }
  double delta;
};

class BCELoss : public Loss {
 public:
  explicit BCELoss(Tensor weight = {}, std::string reduction = "mean");
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "BCELoss"; }
  Tensor weight;
};

class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(Tensor weight = {}, std::string reduction = "mean", Tensor pos_weight = {});
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "BCEWithLogitsLoss"; }
  Tensor weight, pos_weight;
};

class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false) : Loss("KLDivLoss", std::move(reduction), true), log_target(log_target) {}
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string name() const override { return "KLDivLoss"; }
  bool log_target;
};

// The loss layers' registry entries (eager/nn/registry.h), appended to layer_registry().
void register_losses(std::vector<struct LayerSpec>& r);

}  // namespace kiln::nn
