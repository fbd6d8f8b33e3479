#pragma once
// GradScaler (torch.amp.GradScaler): loss scaling for float16 training, where small gradients would
// flush to zero. scale(loss) multiplies by the scale; step(opt) divides the gradients back (unscale)
// and skips the step when any is inf or nan; update() halves the scale after a skipped step and
// doubles it after `growth_interval` clean ones.
#include <cstdint>

#include "core/tensor.h"
#include "eager/optim/optimizer.h"

namespace kiln {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16, as torch
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // false: scale() and unscale_() do nothing, step() always steps
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions opt = {});
  Tensor scale(const Tensor& loss) const;
  // Divides every parameter's gradient by the scale, once per step, and notes whether any is inf/nan.
  void unscale_(optim::Optimizer& opt);
  // Unscales if unscale_ was not called, then steps unless a gradient was inf/nan; true if it stepped.
  bool step(optim::Optimizer& opt);
  // Adjusts the scale from the last step's finding and starts a new step.
  void update();
  void update(double new_scale);
  double get_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool found_inf() const { return found_inf_; }  // in the last unscale_
  bool is_enabled() const { return opt_.enabled; }

 private:
  GradScalerOptions opt_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool unscaled_ = false, found_inf_ = false, stepped_ = false;
};

}  // namespace kiln
