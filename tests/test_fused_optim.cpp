// The optimizers' fused single-pass updates equal the op-by-op formulas (fused = false) step by step,
// for every option combination, float32 and float64; parameters the loop cannot take (strided) use
// the op-by-op path.
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

std::vector<Tensor> make_params(DType dt) {
  manual_seed(9);
  return {randn({37, 5}).to(dt).requires_grad_(), randn({70000}).to(dt).requires_grad_(),
          randn({3}).to(dt).requires_grad_()};
}

// Runs `steps` updates with gradients that change each step; returns the parameters.
template <typename Make>
std::vector<Tensor> run(DType dt, Make make_opt, int steps = 6) {
  std::vector<Tensor> ps = make_params(dt);
  auto opt = make_opt(ps);
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < ps.size(); ++i) ps[i].set_grad(sin(ps[i].detach() * double(s + 1) + double(i)));
    opt.step();
  }
  return ps;
}

template <typename Make>
void check_fused_equals_loop(Make make_opt) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype_name(dt));
    std::vector<Tensor> fused = run(dt, [&](std::vector<Tensor> ps) { return make_opt(ps, true); });
    std::vector<Tensor> loop = run(dt, [&](std::vector<Tensor> ps) { return make_opt(ps, false); });
    for (size_t i = 0; i < fused.size(); ++i)
      check_close(fused[i], loop[i], dt == DType::Float32 ? 2e-6 : 1e-13, dt == DType::Float32 ? 1e-6 : 1e-14);
  }
}

}  // namespace

TEST_CASE("fused optimizers: SGD with every option combination equals the op-by-op update") {
  for (double momentum : {0.0, 0.9})
    for (double dampening : {0.0, 0.3})
      for (double wd : {0.0, 0.01})
        for (bool nesterov : {false, true}) {
          if (nesterov && (momentum == 0 || dampening != 0)) continue;
          CAPTURE(momentum);
          CAPTURE(dampening);
          CAPTURE(wd);
          CAPTURE(nesterov);
          check_fused_equals_loop([&](std::vector<Tensor> ps, bool fused) {
            return optim::SGD(ps, {0.05, momentum, dampening, wd, nesterov, fused});
          });
        }
}

TEST_CASE("fused optimizers: Adam and AdamW equal the op-by-op update") {
  for (double wd : {0.0, 0.02}) {
    CAPTURE(wd);
    check_fused_equals_loop([&](std::vector<Tensor> ps, bool fused) {
      return optim::Adam(ps, {1e-2, 0.9, 0.999, 1e-8, wd, fused});
    });
    check_fused_equals_loop([&](std::vector<Tensor> ps, bool fused) {
      return optim::AdamW(ps, {1e-2, 0.8, 0.99, 1e-6, wd, fused});
    });
  }
}

TEST_CASE("fused optimizers: a strided parameter takes the op-by-op path and still updates") {
  Tensor base = randn({4, 6});
  Tensor p = base.t().contiguous().t().detach().requires_grad_();  // strided leaf
  REQUIRE(!p.is_contiguous());
  Tensor ref = p.detach().clone().requires_grad_();
  optim::Adam a({p}, {0.1}), b({ref}, {0.1, 0.9, 0.999, 1e-8, 0, false});
  p.set_grad(ones({4, 6}));
  ref.set_grad(ones({4, 6}));
  a.step();
  b.step();
  check_close(p, ref, 1e-6);
}
