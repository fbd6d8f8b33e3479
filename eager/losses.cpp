// The eager entry points of the loss composites (eager/composite_losses.h). A class-index target is also
// checked against the number of classes here, where its values can be read (a graph cannot).
#include "eager/losses.h"

#include "eager/builder.h"
#include "eager/composite_losses.h"
#include "eager/dispatch.h"
#include "core/trace_hooks.h"

namespace kiln {
namespace {

using composite::Reduction;

void check_bounds(const char* op, const Tensor& input, const Tensor& target, int64_t ignore_index) {
  if (input.dim() == 0 || !target.defined() || target.dtype() != DType::Int64) return;
  int64_t classes = input.size(input.dim() == 1 ? 0 : 1);
  QuietTraceReads quiet;  // a bounds check: the graph does not depend on it
  Tensor t = target.host_contiguous();  // a device target is read back once, untraced
  const int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (p[i] != ignore_index && (p[i] < 0 || p[i] >= classes))
      fail("{}: target {} is out of bounds for {} classes", op, p[i], classes);
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction) {
  return nll_loss(log_probs, target, Tensor(), -100, reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                const std::string& reduction) {
  EagerBuilder b;
  Reduction r = composite::reduction_of(b, "nll_loss", reduction);
  check_bounds("nll_loss", log_probs, target, ignore_index);
  return composite::nll_loss(b, log_probs, target, weight, ignore_index, r);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction) {
  return cross_entropy(logits, target, Tensor(), -100, reduction, 0.0);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     const std::string& reduction, double label_smoothing) {
  EagerBuilder b;
  Reduction r = composite::reduction_of(b, "cross_entropy", reduction);
  if (!is_floating(target.dtype())) {
    if (logits.dim() > 0) composite::check_class_target(b, "cross_entropy", logits, target, weight, logits.dim() == 1 ? 0 : 1);
    check_bounds("cross_entropy", logits, target, ignore_index);
  }
  return composite::cross_entropy(b, logits, target, weight, ignore_index, r, label_smoothing);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  EagerBuilder b;
  return composite::mse_loss(b, input, target, composite::reduction_of(b, "mse_loss", reduction));
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  EagerBuilder b;
  return composite::l1_loss(b, input, target, composite::reduction_of(b, "l1_loss", reduction));
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  EagerBuilder b;
  return composite::smooth_l1_loss(b, input, target, composite::reduction_of(b, "smooth_l1_loss", reduction), beta);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  EagerBuilder b;
  return composite::huber_loss(b, input, target, composite::reduction_of(b, "huber_loss", reduction), delta);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction) {
  EagerBuilder b;
  return composite::binary_cross_entropy(b, input, target, weight, composite::reduction_of(b, "binary_cross_entropy", reduction));
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const std::string& reduction, const Tensor& pos_weight) {
  EagerBuilder b;
  return composite::binary_cross_entropy_with_logits(
      b, input, target, weight, pos_weight, composite::reduction_of(b, "binary_cross_entropy_with_logits", reduction));
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  EagerBuilder b;
  return composite::kl_div(b, input, target, composite::reduction_of(b, "kl_div", reduction, true), log_target);
}

}  // namespace kiln
