#include "eager/autocast/grad_scaler.h"

#include <cmath>

#include "core/error.h"
#include "eager/autograd/graph.h"
#include "eager/ops.h"

namespace kiln {

GradScaler::GradScaler(GradScalerOptions opt) : opt_(opt), scale_(opt.init_scale) {
  if (!(opt.init_scale > 0) || !std::isfinite(opt.init_scale))
    fail("grad_scaler: init_scale must be a positive finite number, got {}", opt.init_scale);
  if (!(opt.growth_factor > 1)) fail("grad_scaler: growth_factor must be above 1, got {}", opt.growth_factor);
  if (!(opt.backoff_factor > 0 && opt.backoff_factor < 1))
    fail("grad_scaler: backoff_factor must be in (0, 1), got {}", opt.backoff_factor);
  if (opt.growth_interval <= 0) fail("grad_scaler: growth_interval must be positive, got {}", opt.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!opt_.enabled) return loss;
  if (!loss.defined()) fail("grad_scaler: scale() got an undefined tensor");
  if (!is_floating(loss.dtype())) fail("grad_scaler: scale() expects a floating loss, got {}", dtype_name(loss.dtype()));
  // In float32 so that 2^16 times an f16 loss does not overflow before backward even starts.
  return mul(loss.to(DType::Float32), scale_);
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!opt_.enabled) return;
  if (unscaled_) fail("grad_scaler: unscale_() has already been called on this optimizer since the last update()");
  NoGradGuard no_grad;
  bool inf = false;
  double inv = 1.0 / scale_;
  for (const Tensor& p : opt.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    // NaN wins amax, and an inf stays inf: one reduction answers both.
    double m = amax(abs(g)).item<double>();
    if (!std::isfinite(m)) inf = true;
  }
  found_inf_ = inf;
  unscaled_ = true;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!opt_.enabled) {
    opt.step();
    return true;
  }
  if (stepped_) fail("grad_scaler: step() has already been called since the last update()");
  if (!unscaled_) unscale_(opt);
  stepped_ = true;
  if (found_inf_) return false;
  opt.step();
  return true;
}

void GradScaler::update() {
  if (!opt_.enabled) return;
  if (found_inf_) {
    scale_ *= opt_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == opt_.growth_interval) {
    scale_ *= opt_.growth_factor;
    growth_tracker_ = 0;
  }
  unscaled_ = stepped_ = found_inf_ = false;
}

void GradScaler::update(double new_scale) {
  if (!opt_.enabled) return;
  if (!(new_scale > 0) || !std::isfinite(new_scale))
    fail("grad_scaler: update() expects a positive finite scale, got {}", new_scale);
  scale_ = new_scale;
  growth_tracker_ = 0;
  unscaled_ = stepped_ = found_inf_ = false;
}

}  // namespace kiln
