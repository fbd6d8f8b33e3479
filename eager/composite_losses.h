#pragma once
// The loss functions of torch.nn.functional, each written once over a builder (eager/builder.h) as the
// other composites are: eager's F.* functions, the nn.*Loss layers and scripted F.* calls all run these.
// Values follow PyTorch 1.13 (weights, ignore_index, label smoothing, the reductions); the eager entry
// points (eager/losses.cpp) also check what needs the values (target bounds), which a graph cannot.
#include <string>

#include "eager/composites.h"

namespace kiln::composite {

enum class Reduction { None, Mean, Sum, BatchMean };

template <class B>
Reduction reduction_of(B& b, const char* op, const std::string& r, bool batchmean = false) {
  if (r == "none") return Reduction::None;
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (batchmean && r == "batchmean") return Reduction::BatchMean;
  b.fail(fmt::format("{}: reduction must be {}'mean', 'sum' or 'none', got '{}'", op, batchmean ? "'batchmean', " : "", r));
  __builtin_unreachable();  // every builder's fail raises; a builder reached through a base may hide it
}

// The mean of every element: a 0-d value (NaN for no elements, as torch).
template <class B>
Val<B> mean_all(B& b, Val<B> x) {
  Val<B> flat = b.flatten(x, 0, -1);
  Val<B> n = b.count(flat, {0}, -1, [](const std::optional<Shape>&) { return std::string(); });
  return b.op(OpId::Reshape, {mean_keep(b, flat, {0}, n)}, Attrs().set("shape", Shape{}));
}

template <class B>
Val<B> reduce_loss(B& b, Val<B> loss, Reduction r) {
  if (r == Reduction::None) return loss;
  if (r == Reduction::Sum) return b.op(OpId::Sum, {loss}, Attrs().set("dims", Shape{}).set("keepdim", false));
  return mean_all(b, loss);
}

template <class B>
Val<B> times_weight(B& b, Val<B> loss, Val<B> weight) {
  return present(weight) ? b.op(OpId::Mul, {loss, weight}) : loss;
}

// The class dim: 1, or 0 for one unbatched sample (a 1-D input). A graph whose input rank is not known
// when it is built takes the batched form.
template <class B>
int64_t class_dim(B& b, Val<B> x, const char* op) {
  std::optional<int64_t> r = b.rank(x);
  if (r == std::optional<int64_t>(0)) b.fail(fmt::format("{}: expected input with at least 1 dimension, got a 0-d tensor", op));
  return r == std::optional<int64_t>(1) ? 0 : 1;
}

// Checks a class-index target against the input when both shapes are known now: torch's shape, dtype
// and weight-length errors.
template <class B>
void check_class_target(B& b, const char* op, Val<B> input, Val<B> target, Val<B> weight, int64_t cdim) {
  if (std::optional<DType> dt = b.dtype(target); dt && *dt != DType::Int64)
    b.fail(fmt::format("{}: expected target of dtype int64, got {}", op, dtype_name(*dt)));
  std::optional<Shape> in = b.shape(input), t = b.shape(target);
  if (!in) return;
  if (t) {
    Shape want = *in;
    want.erase(want.begin() + cdim);
    if (*t != want)
      b.fail(fmt::format("{}: expected target of shape {} for input of shape {}, got {}", op, shape_str(want), shape_str(*in),
                         shape_str(*t)));
  }
  if (present(weight))
    if (std::optional<Shape> w = b.shape(weight); w && (*w != Shape{(*in)[cdim]}))
      b.fail(fmt::format("{}: weight of shape {} does not match the {} classes of the input", op, shape_str(*w), (*in)[cdim]));
}

// Each target's weight (1 without one), 0 where the target is ignore_index.
template <class B>
Val<B> target_weights(B& b, Val<B> target, Val<B> weight, Val<B> keep) {
  Val<B> safe = b.op(OpId::Where, {keep, target, b.scalar(int64_t(0))});
  Val<B> w = present(weight) ? b.reshape_like(b.op(OpId::IndexSelect, {weight, b.flatten(safe, 0, -1)}, Attrs().set("dim", int64_t(0))), safe, {})
                             : b.scalar(1.0);
  return b.op(OpId::Where, {keep, w, b.scalar(0.0)});
}

// -log_probs[target] (times weight[target]); ignore_index adds nothing and is not counted. "mean" divides
// by the summed weights of the counted targets (their number without weight).
template <class B>
Val<B> nll_loss(B& b, Val<B> log_probs_in, Val<B> target, Val<B> weight_in, int64_t ignore_index, Reduction r) {
  std::vector<Val<B>> cast = b.autocast("nll_loss", {log_probs_in, weight_in});
  Val<B> lp = cast[0], weight = cast[1];
  int64_t cdim = class_dim(b, lp, "nll_loss");
  check_class_target(b, "nll_loss", lp, target, weight, cdim);
  Val<B> keep = b.op(OpId::Ne, {target, b.scalar(ignore_index)});
  Val<B> safe = b.op(OpId::Where, {keep, target, b.scalar(int64_t(0))});
  Val<B> picked = b.op(OpId::Gather, {lp, b.op(OpId::Unsqueeze, {safe}, Attrs().set("dim", cdim))}, Attrs().set("dim", cdim));
  picked = b.op(OpId::Squeeze, {picked}, Attrs().set("dims", Shape{cdim}));
  // the loss is masked by where, never by a product with 0, so an ignored position whose log-probability
  // is -inf adds 0, not NaN
  Val<B> w = target_weights(b, target, weight, keep);
  Val<B> loss = b.op(OpId::Where, {keep, b.op(OpId::Mul, {b.op(OpId::Neg, {picked}), w}), b.scalar(0.0)});
  if (r == Reduction::None) return loss;
  Attrs all = Attrs().set("dims", Shape{}).set("keepdim", false);
  Val<B> total = b.op(OpId::Sum, {loss}, all);
  if (r == Reduction::Sum) return total;
  return b.op(OpId::Div, {total, b.op(OpId::Sum, {w}, all)});
}

// Class indices (int64, the input's shape without the class dim) or class probabilities (the input's
// shape). label_smoothing mixes the target with the uniform distribution over the C classes.
template <class B>
Val<B> cross_entropy(B& b, Val<B> logits_in, Val<B> target, Val<B> weight, int64_t ignore_index, Reduction r,
                     double label_smoothing) {
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    b.fail(fmt::format("cross_entropy: label_smoothing must be between 0.0 and 1.0, got {}", label_smoothing));
  Val<B> logits = b.autocast("cross_entropy", {logits_in})[0];
  int64_t cdim = class_dim(b, logits, "cross_entropy");
  Val<B> lp = log_softmax(b, logits, cdim);
  std::optional<DType> tdt = b.dtype(target);
  // sum over the classes of lp * v, v optionally times the weight: with the class dim moved last, a [C]
  // weight broadcasts whatever the rank (known or not when the graph is built)
  auto class_sum = [&](Val<B> v, Val<B> w) {
    Val<B> last = cdim == 0 ? v : b.transpose(v, cdim, -1);
    if (present(w)) last = b.op(OpId::Mul, {last, w});
    return b.op(OpId::Sum, {last}, Attrs().set("dims", Shape{-1}).set("keepdim", false));
  };
  if (tdt && is_floating(*tdt)) {
    if (std::optional<Shape> s = b.shape(target), in = b.shape(logits); s && in && *s != *in)
      b.fail(fmt::format("cross_entropy: class-probability target of shape {} must match input shape {}", shape_str(*s),
                         shape_str(*in)));
    Val<B> t = target;
    if (label_smoothing > 0) {
      Val<B> classes = b.count(lp, {cdim}, 0, [](const std::optional<Shape>&) { return std::string("cross_entropy: no classes"); });
      // (t (1 - eps) C + eps) / C: every step in t's dtype (eps / C of two wrapped numbers would be float32)
      t = b.op(OpId::Div, {b.op(OpId::Add, {b.op(OpId::Mul, {b.op(OpId::Mul, {t, b.scalar(1.0 - label_smoothing)}), classes}),
                                            b.scalar(label_smoothing)}),
                           classes});
    }
    Val<B> loss = b.op(OpId::Neg, {class_sum(b.op(OpId::Mul, {lp, t}), weight)});
    if (r != Reduction::Mean) return reduce_loss(b, loss, r);
    // mean over the samples: the elements of the loss, whatever the weights
    return mean_all(b, loss);
  }
  Val<B> nll = nll_loss(b, lp, target, weight, ignore_index, r);
  if (label_smoothing == 0.0) return nll;
  // torch: (1 - eps) * nll + eps / C * smooth, smooth = -sum_c lp[c] (* weight[c]), 0 where ignored, and
  // for "mean" divided by the weights of the counted targets
  Val<B> smooth = b.op(OpId::Neg, {class_sum(lp, weight)});
  Val<B> keep = b.op(OpId::Ne, {target, b.scalar(ignore_index)});
  smooth = b.op(OpId::Where, {keep, smooth, b.scalar(0.0)});
  Val<B> ret = smooth;
  Attrs all = Attrs().set("dims", Shape{}).set("keepdim", false);
  if (r == Reduction::Sum) ret = b.op(OpId::Sum, {smooth}, all);
  if (r == Reduction::Mean) {
    Val<B> counted = target_weights(b, target, weight, keep);
    ret = b.op(OpId::Div, {b.op(OpId::Sum, {smooth}, all), b.op(OpId::Sum, {counted}, all)});
  }
  Val<B> classes = b.count(lp, {cdim}, 0, [](const std::optional<Shape>&) { return std::string("cross_entropy: no classes"); });
  return b.op(OpId::Add, {b.op(OpId::Mul, {nll, b.scalar(1.0 - label_smoothing)}),
                          b.op(OpId::Div, {b.op(OpId::Mul, {ret, b.scalar(label_smoothing)}), classes})});
}

// The binary cross entropies require one shape, as torch (the regression losses broadcast, as torch does
// after its warning).
template <class B>
void check_same_shape(B& b, const char* op, Val<B> input, Val<B> target) {
  std::optional<Shape> a = b.shape(input), t = b.shape(target);
  if (a && t && *a != *t)
    b.fail(fmt::format("{}: target size {} must be the same as input size {}", op, shape_str(*t), shape_str(*a)));
}

template <class B>
Val<B> mse_loss(B& b, Val<B> input, Val<B> target, Reduction r) {
  std::vector<Val<B>> in = b.autocast("mse_loss", {input, target});
  Val<B> d = b.op(OpId::Sub, {in[0], in[1]});
  return reduce_loss(b, b.op(OpId::Mul, {d, d}), r);
}

template <class B>
Val<B> l1_loss(B& b, Val<B> input, Val<B> target, Reduction r) {
  std::vector<Val<B>> in = b.autocast("l1_loss", {input, target});
  return reduce_loss(b, b.op(OpId::Abs, {b.op(OpId::Sub, {in[0], in[1]})}), r);
}

// |d| < beta: 0.5 d^2 / beta, else |d| - 0.5 beta; beta == 0 is the L1 loss.
template <class B>
Val<B> smooth_l1_loss(B& b, Val<B> input, Val<B> target, Reduction r, double beta) {
  if (beta < 0) b.fail(fmt::format("smooth_l1_loss: beta must be non-negative, got {}", beta));
  std::vector<Val<B>> in = b.autocast("smooth_l1_loss", {input, target});
  Val<B> ad = b.op(OpId::Abs, {b.op(OpId::Sub, {in[0], in[1]})});
  if (beta == 0.0) return reduce_loss(b, ad, r);
  Val<B> quad = b.op(OpId::Mul, {b.op(OpId::Mul, {ad, ad}), b.scalar(0.5 / beta)});
  Val<B> lin = b.op(OpId::Sub, {ad, b.scalar(0.5 * beta)});
  return reduce_loss(b, b.op(OpId::Where, {b.op(OpId::Lt, {ad, b.scalar(beta)}), quad, lin}), r);
}

// |d| <= delta: 0.5 d^2, else delta (|d| - 0.5 delta).
template <class B>
Val<B> huber_loss(B& b, Val<B> input, Val<B> target, Reduction r, double delta) {
  if (!(delta > 0)) b.fail(fmt::format("huber_loss: delta must be positive, got {}", delta));
  std::vector<Val<B>> in = b.autocast("huber_loss", {input, target});
  Val<B> ad = b.op(OpId::Abs, {b.op(OpId::Sub, {in[0], in[1]})});
  Val<B> quad = b.op(OpId::Mul, {b.op(OpId::Mul, {ad, ad}), b.scalar(0.5)});
  Val<B> lin = b.op(OpId::Mul, {b.op(OpId::Sub, {ad, b.scalar(0.5 * delta)}), b.scalar(delta)});
  return reduce_loss(b, b.op(OpId::Where, {b.op(OpId::Le, {ad, b.scalar(delta)}), quad, lin}), r);
}

// -w (t log x + (1 - t) log(1 - x)), each log clamped to >= -100 as torch does, so x = 0 or 1 stays finite.
template <class B>
Val<B> binary_cross_entropy(B& b, Val<B> input, Val<B> target, Val<B> weight, Reduction r) {
  check_same_shape(b, "binary_cross_entropy", input, target);
  std::vector<Val<B>> in = b.autocast("binary_cross_entropy", {input, target, weight});
  Val<B> x = in[0], t = in[1];
  auto clamped_log = [&](Val<B> v) { return b.op(OpId::Maximum, {b.op(OpId::Log, {v}), b.scalar(-100.0)}); };
  Val<B> one_minus_x = b.op(OpId::Sub, {b.scalar(1.0), x});
  Val<B> one_minus_t = b.op(OpId::Sub, {b.scalar(1.0), t});
  Val<B> ll = b.op(OpId::Add, {b.op(OpId::Mul, {t, clamped_log(x)}), b.op(OpId::Mul, {one_minus_t, clamped_log(one_minus_x)})});
  return reduce_loss(b, times_weight(b, b.op(OpId::Neg, {ll}), in[2]), r);
}

// On logits, stable for any x: (1 - t) x + lw (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t.
template <class B>
Val<B> binary_cross_entropy_with_logits(B& b, Val<B> input, Val<B> target, Val<B> weight, Val<B> pos_weight, Reduction r) {
  check_same_shape(b, "binary_cross_entropy_with_logits", input, target);
  std::vector<Val<B>> in = b.autocast("binary_cross_entropy_with_logits", {input, target, weight, pos_weight});
  Val<B> x = in[0], t = in[1];
  Val<B> softplus_neg = b.op(OpId::Add, {b.op(OpId::Log1p, {b.op(OpId::Exp, {b.op(OpId::Neg, {b.op(OpId::Abs, {x})})})}),
                                         b.op(OpId::Maximum, {b.op(OpId::Neg, {x}), b.scalar(0.0)})});
  if (present(in[3]))
    softplus_neg = b.op(OpId::Mul, {softplus_neg, b.op(OpId::Add, {b.scalar(1.0), b.op(OpId::Mul, {b.op(OpId::Sub, {in[3], b.scalar(1.0)}), t})})});
  Val<B> loss = b.op(OpId::Add, {b.op(OpId::Mul, {b.op(OpId::Sub, {b.scalar(1.0), t}), x}), softplus_neg});
  return reduce_loss(b, times_weight(b, loss, in[2]), r);
}

// target (log q or q) against input (log p): q (log q - log p), 0 where q == 0 (torch's xlogy).
// "batchmean" divides the sum by the first dim; "mean" by every element, as torch.
template <class B>
Val<B> kl_div(B& b, Val<B> input, Val<B> target, Reduction r, bool log_target) {
  std::vector<Val<B>> in = b.autocast("kl_div", {input, target});
  Val<B> x = in[0], t = in[1];
  Val<B> loss;
  if (log_target) {
    loss = b.op(OpId::Mul, {b.op(OpId::Exp, {t}), b.op(OpId::Sub, {t, x})});
  } else {
    Val<B> nonzero = b.op(OpId::Ne, {t, b.scalar(0.0)});  // a negative q gives NaN, as torch's xlogy
    Val<B> safe = b.op(OpId::Where, {nonzero, t, b.scalar(1.0)});
    Val<B> tlogt = b.op(OpId::Where, {nonzero, b.op(OpId::Mul, {t, b.op(OpId::Log, {safe})}), b.scalar(0.0)});
    loss = b.op(OpId::Sub, {tlogt, b.op(OpId::Mul, {t, x})});
  }
  if (r != Reduction::BatchMean) return reduce_loss(b, loss, r);
  Val<B> total = reduce_loss(b, loss, Reduction::Sum);
  if (b.rank(x) == std::optional<int64_t>(0)) return total;
  Val<B> n = b.count(x, {0}, -1, [](const std::optional<Shape>&) { return std::string(); });
  return b.op(OpId::Div, {total, n});
}

}  // namespace kiln::composite
