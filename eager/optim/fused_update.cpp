#include "eager/optim/fused_update.h"

#include <cmath>

namespace kiln::optim {

namespace {
// Below this many elements a loop is faster than waking the thread team.
constexpr int64_t kParallelGrain = 1 << 15;

template <typename T>
void sgd_loop(T* p, const T* g, T* buf, int64_t n, const SGDStep& s) {
  const T wd = T(s.weight_decay), mom = T(s.momentum), damp = T(1 - s.dampening), lr = T(s.lr);
  const bool decay = s.weight_decay != 0, momentum = s.momentum != 0;
#pragma omp parallel for simd if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T d = decay ? g[i] + p[i] * wd : g[i];
    if (momentum) {
      T b = s.first ? d : buf[i] * mom + d * damp;
      buf[i] = b;
      d = s.nesterov ? d + b * mom : b;
    }
    p[i] = p[i] - d * lr;
  }
}

template <typename T>
void adam_loop(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep& s) {
  const T b1 = T(s.beta1), b2 = T(s.beta2), c1 = T(1 - s.beta1), c2 = T(1 - s.beta2);
  const T sqrt_bc2 = T(std::sqrt(s.bias_correction2)), eps = T(s.eps), step = T(s.lr / s.bias_correction1);
  const T wd = T(s.weight_decay), shrink = T(1 - s.lr * s.weight_decay);
  const bool coupled = s.weight_decay != 0 && !s.decoupled, decoupled = s.weight_decay != 0 && s.decoupled;
#pragma omp parallel for simd if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T x = p[i];
    T d = coupled ? g[i] + x * wd : g[i];
    if (decoupled) x = x * shrink;
    T mi = m[i] * b1 + d * c1;
    T vi = v[i] * b2 + d * d * c2;
    m[i] = mi;
    v[i] = vi;
    p[i] = x - mi / (std::sqrt(vi) / sqrt_bc2 + eps) * step;
  }
}
}  // namespace

bool can_fuse_update(const Tensor& p, const Tensor& g, std::initializer_list<const Tensor*> state) {
  auto ok = [&](const Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.is_contiguous() && t.dtype() == p.dtype() && t.sizes() == p.sizes();
  };
  if (p.dtype() != DType::Float32 && p.dtype() != DType::Float64) return false;
  if (!ok(p) || !ok(g)) return false;
  for (const Tensor* s : state)
    if (!ok(*s)) return false;
  return true;
}

void fused_sgd(const Tensor& p, const Tensor& g, const Tensor& buf, const SGDStep& s) {
  if (p.dtype() == DType::Float32)
    sgd_loop(p.data_ptr<float>(), g.data_ptr<float>(), buf.defined() ? buf.data_ptr<float>() : nullptr, p.numel(), s);
  else
    sgd_loop(p.data_ptr<double>(), g.data_ptr<double>(), buf.defined() ? buf.data_ptr<double>() : nullptr, p.numel(), s);
  p.bump_version();
}

void fused_adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamStep& s) {
  if (p.dtype() == DType::Float32)
    adam_loop(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(), p.numel(), s);
  else
    adam_loop(p.data_ptr<double>(), g.data_ptr<double>(), m.data_ptr<double>(), v.data_ptr<double>(), p.numel(), s);
  p.bump_version();
}

}  // namespace kiln::optim
