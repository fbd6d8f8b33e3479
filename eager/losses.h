#pragma once
// torch.nn.functional's loss functions on eager tensors, with torch's arguments and defaults (the
// deprecated size_average / reduce are not taken). reduction: "mean" (default), "sum" or "none"
// (kl_div also "batchmean"). Each runs the composite of eager/composite_losses.h, which the nn.*Loss
// layers and scripted F.* calls run too.
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace kiln {

// input: log-probabilities [N, C, ...] or [C]; target: int64 class indices of the input's shape without C
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction = "mean");
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, int64_t ignore_index = -100,
                const std::string& reduction = "mean");
// target: class indices (as nll_loss) or class probabilities of the input's shape
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction = "mean");
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index = -100,
                     const std::string& reduction = "mean", double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double beta = 1.0);
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double delta = 1.0);
// input: probabilities in [0, 1]; weight (optional) broadcasts against it
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const std::string& reduction = "mean", const Tensor& pos_weight = {});
// input: log-probabilities; target: probabilities (log-probabilities with log_target)
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", bool log_target = false);

}  // namespace kiln
