#include "eager/nn/init.h"

#include <cmath>

#include "eager/autograd/graph.h"
#include "eager/ops.h"

namespace kiln::nn::init {

std::pair<int64_t, int64_t> fans(const Tensor& w) {
  if (w.dim() < 2) fail("init: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions, got shape {}", shape_str(w.sizes()));
  int64_t receptive = 1;
  for (int64_t i = 2; i < w.dim(); ++i) receptive *= w.size(i);
  return {w.size(1) * receptive, w.size(0) * receptive};
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "conv2d" || nl == "sigmoid") return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1 + param * param));
  if (nl == "selu") return 0.75;
  fail("calculate_gain: unsupported nonlinearity '{}'", nl);
}

void uniform_(Tensor& t, double lo, double hi) {
  NoGradGuard ng;
  t.copy_(rand(t.sizes(), t.dtype()) * (hi - lo) + lo);
}

void normal_(Tensor& t, double mean, double std) {
  NoGradGuard ng;
  t.copy_(randn(t.sizes(), t.dtype()) * std + mean);
}

void zeros_(Tensor& t) {
  NoGradGuard ng;
  t.zero_();
}

void ones_(Tensor& t) {
  NoGradGuard ng;
  t.fill_(1);
}

namespace {
double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  auto [fan_in, fan_out] = fans(t);
  if (mode != "fan_in" && mode != "fan_out") fail("kaiming: mode must be 'fan_in' or 'fan_out', got '{}'", mode);
  int64_t fan = mode == "fan_in" ? fan_in : fan_out;
  return calculate_gain(nl, a) / std::sqrt(double(fan));
}
}  // namespace

void kaiming_uniform_(Tensor& t, double a, const std::string& mode, const std::string& nl) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  uniform_(t, -bound, bound);
}

void kaiming_normal_(Tensor& t, double a, const std::string& mode, const std::string& nl) {
  normal_(t, 0, kaiming_std(t, a, mode, nl));
}

void xavier_uniform_(Tensor& t, double gain) {
  auto [fi, fo] = fans(t);
  double bound = gain * std::sqrt(6.0 / double(fi + fo));
  uniform_(t, -bound, bound);
}

void xavier_normal_(Tensor& t, double gain) {
  auto [fi, fo] = fans(t);
  normal_(t, 0, gain * std::sqrt(2.0 / double(fi + fo)));
}

}  // namespace kiln::nn::init
