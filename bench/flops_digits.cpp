// kiln's FLOPs for the digits MLP and CNN (batch 32), forward and forward + backward, by op, as JSON
// for bench/flops_vs_torch.py to set beside torch.utils.flop_counter's.
#include <kiln/kiln.h>

#include <fmt/format.h>

#include "samples/digits_models.h"

using namespace kiln;

namespace {

std::string counts(const Profiler& p) {
  std::string out = "{";
  for (const OpProfile& r : p.ops()) out += fmt::format("\"{}\": {}, ", r.name, r.flops);
  return out + fmt::format("\"total\": {}}}", p.total_flops());
}

std::string model_flops(nn::Module& model, const Tensor& x) {
  Tensor labels = randint(0, 10, {x.size(0)});
  Profiler fwd = profile([&] { cross_entropy(model(x), labels); });
  Profiler both = profile([&] { cross_entropy(model(x), labels).backward(); });
  return fmt::format("{{\"forward\": {}, \"forward_backward\": {}}}", counts(fwd), counts(both));
}

}  // namespace

int main() {
  manual_seed(0);
  auto mlp = samples::digits_mlp();
  auto cnn = samples::digits_cnn();
  fmt::print("{{\"mlp\": {}, \"cnn\": {}}}\n", model_flops(*mlp, randn({32, 64})), model_flops(*cnn, randn({32, 1, 8, 8})));
}
