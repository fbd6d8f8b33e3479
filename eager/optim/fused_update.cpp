#include "eager/optim/fused_update.h"

#include "eager/cpu/isa_kernels.h"

namespace kiln::optim {

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
  cpu::isa_kernels().fused_sgd(p.dtype(), p.raw_data(), g.raw_data(), buf.defined() ? buf.raw_data() : nullptr,
                               p.numel(), s);
  p.bump_version();
}

void fused_adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamStep& s) {
  cpu::isa_kernels().fused_adam(p.dtype(), p.raw_data(), g.raw_data(), m.raw_data(), v.raw_data(), p.numel(), s);
  p.bump_version();
}

}  // namespace kiln::optim
