#include "eager/nn/losses.h"

#include "eager/composite_losses.h"
#include "eager/nn/registry.h"
#include "eager/ops.h"

namespace kiln::nn {

template <class B>
using Val = composite::Val<B>;

namespace {
// torch's reduction strings, checked when the layer is made rather than at its first call
std::string checked_reduction(const char* layer, std::string r, bool batchmean = false) {
  EagerBuilder b;
  composite::reduction_of(b, layer, r, batchmean);
  return r;
}
composite::Reduction reduction(GraphBuilder& b, const Loss& m) {
  return composite::reduction_of(b, m.name().c_str(), m.reduction, true);
}
template <class T>
struct Tag {
  using type = T;
};
}  // namespace

Loss::Loss(const char* layer, std::string r, bool batchmean) : reduction(checked_reduction(layer, std::move(r), batchmean)) {}
Tensor Loss::optional_buffer(const char* name, Tensor t) { return t.defined() ? register_buffer(name, std::move(t)) : t; }
Tensor Loss::forward(const Tensor&) { fail("{}: forward takes input and target, got one tensor", name()); }

CrossEntropyLoss::CrossEntropyLoss(Tensor w, int64_t ignore, std::string r, double smoothing)
    : Loss("CrossEntropyLoss", std::move(r)), ignore_index(ignore), label_smoothing(smoothing) {
  weight = optional_buffer("weight", std::move(w));
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing);
}
template <class B>
Val<B> forward_with(B& b, CrossEntropyLoss& m, const std::vector<Val<B>>& xs) {
  return composite::cross_entropy(b, xs[0], xs[1], b.parameter(m.weight, "weight"), m.ignore_index, reduction(b, m), m.label_smoothing);
}

NLLLoss::NLLLoss(Tensor w, int64_t ignore, std::string r) : Loss("NLLLoss", std::move(r)), ignore_index(ignore) {
  weight = optional_buffer("weight", std::move(w));
}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, weight, ignore_index, reduction);
}
template <class B>
Val<B> forward_with(B& b, NLLLoss& m, const std::vector<Val<B>>& xs) {
  return composite::nll_loss(b, xs[0], xs[1], b.parameter(m.weight, "weight"), m.ignore_index, reduction(b, m));
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }
template <class B>
Val<B> forward_with(B& b, MSELoss& m, const std::vector<Val<B>>& xs) {
  return composite::mse_loss(b, xs[0], xs[1], reduction(b, m));
}

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) { return l1_loss(input, target, reduction); }
template <class B>
Val<B> forward_with(B& b, L1Loss& m, const std::vector<Val<B>>& xs) {
  return composite::l1_loss(b, xs[0], xs[1], reduction(b, m));
}

Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) { return smooth_l1_loss(input, target, reduction, beta); }
template <class B>
Val<B> forward_with(B& b, SmoothL1Loss& m, const std::vector<Val<B>>& xs) {
  return composite::smooth_l1_loss(b, xs[0], xs[1], reduction(b, m), m.beta);
}

Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) { return huber_loss(input, target, reduction, delta); }
template <class B>
Val<B> forward_with(B& b, HuberLoss& m, const std::vector<Val<B>>& xs) {
  return composite::huber_loss(b, xs[0], xs[1], reduction(b, m), m.delta);
}

BCELoss::BCELoss(Tensor w, std::string r) : Loss("BCELoss", std::move(r)) {
  weight = optional_buffer("weight", std::move(w));
}
Tensor BCELoss::forward(const Tensor& input, const Tensor& target) { return binary_cross_entropy(input, target, weight, reduction); }
template <class B>
Val<B> forward_with(B& b, BCELoss& m, const std::vector<Val<B>>& xs) {
  return composite::binary_cross_entropy(b, xs[0], xs[1], b.parameter(m.weight, "weight"), reduction(b, m));
}

BCEWithLogitsLoss::BCEWithLogitsLoss(Tensor w, std::string r, Tensor pw) : Loss("BCEWithLogitsLoss", std::move(r)) {
  weight = optional_buffer("weight", std::move(w));
  pos_weight = optional_buffer("pos_weight", std::move(pw));
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight);
}
template <class B>
Val<B> forward_with(B& b, BCEWithLogitsLoss& m, const std::vector<Val<B>>& xs) {
  return composite::binary_cross_entropy_with_logits(b, xs[0], xs[1], b.parameter(m.weight, "weight"),
                                                     b.parameter(m.pos_weight, "pos_weight"), reduction(b, m));
}

Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) { return kl_div(input, target, reduction, log_target); }
template <class B>
Val<B> forward_with(B& b, KLDivLoss& m, const std::vector<Val<B>>& xs) {
  return composite::kl_div(b, xs[0], xs[1], reduction(b, m), m.log_target);
}

void register_losses(std::vector<LayerSpec>& r) {
  const std::vector<std::string> in_target = {"input", "target"};
  auto classes = [] { return Tensors{randn({4, 3}), tensor(std::vector<int64_t>{0, 2, 1, 2}, {4})}; };
  auto regression = [] { return Tensors{randn({3, 4}), randn({3, 4})}; };
  auto probs = [] { return Tensors{sigmoid(randn({3, 4})), rand({3, 4})}; };
  auto red = [](const LayerArgs& a) { return a.str("reduction"); };  // checked by the layer's constructor
  r.push_back(multi_input_layer_spec<CrossEntropyLoss>(
      "CrossEntropyLoss",
      {{"weight", IValue()}, {"size_average", IValue()}, {"ignore_index", -100}, {"reduce", IValue()}, {"reduction", "mean"},
       {"label_smoothing", 0.0}},
      [red](const LayerArgs& a) {
        if (!a.is_none("size_average") || !a.is_none("reduce")) a.fail("size_average and reduce are deprecated; use reduction");
        return std::make_shared<CrossEntropyLoss>(a.tensor_or_none("weight"), a.integer("ignore_index"), red(a), a.number("label_smoothing"));
      },
      in_target, {{"label_smoothing", 0.1}}, classes));
  r.push_back(multi_input_layer_spec<NLLLoss>(
      "NLLLoss", {{"weight", IValue()}, {"size_average", IValue()}, {"ignore_index", -100}, {"reduce", IValue()}, {"reduction", "mean"}},
      [red](const LayerArgs& a) {
        if (!a.is_none("size_average") || !a.is_none("reduce")) a.fail("size_average and reduce are deprecated; use reduction");
        return std::make_shared<NLLLoss>(a.tensor_or_none("weight"), a.integer("ignore_index"), red(a));
      },
      in_target, {{"ignore_index", 1}}, [] { return Tensors{log_softmax(randn({4, 3}), 1), tensor(std::vector<int64_t>{0, 2, 1, 2}, {4})}; }));
  auto simple = [&](auto tag, const char* name, std::vector<LayerParam> extra, auto make, std::function<Tensors()> sample) {
    using L = typename decltype(tag)::type;
    std::vector<LayerParam> params = {{"size_average", IValue()}, {"reduce", IValue()}, {"reduction", "mean"}};
    params.insert(params.end(), extra.begin(), extra.end());
    r.push_back(multi_input_layer_spec<L>(
        name, params,
        [make](const LayerArgs& a) -> std::shared_ptr<Module> {
          if (!a.is_none("size_average") || !a.is_none("reduce")) a.fail("size_average and reduce are deprecated; use reduction");
          return make(a);
        },
        in_target, {}, std::move(sample)));
  };
  simple(Tag<MSELoss>{}, "MSELoss", {}, [red](const LayerArgs& a) { return std::make_shared<MSELoss>(red(a)); }, regression);
  simple(Tag<L1Loss>{}, "L1Loss", {}, [red](const LayerArgs& a) { return std::make_shared<L1Loss>(red(a)); }, regression);
  simple(Tag<SmoothL1Loss>{}, "SmoothL1Loss", {{"beta", 1.0}},
         [red](const LayerArgs& a) { return std::make_shared<SmoothL1Loss>(red(a), a.number("beta")); }, regression);
  r.push_back(multi_input_layer_spec<HuberLoss>(
      "HuberLoss", {{"reduction", "mean"}, {"delta", 1.0}},
      [red](const LayerArgs& a) { return std::make_shared<HuberLoss>(red(a), a.number("delta")); }, in_target, {{"delta", 0.5}}, regression));
  r.push_back(multi_input_layer_spec<BCELoss>(
      "BCELoss", {{"weight", IValue()}, {"size_average", IValue()}, {"reduce", IValue()}, {"reduction", "mean"}},
      [red](const LayerArgs& a) {
        if (!a.is_none("size_average") || !a.is_none("reduce")) a.fail("size_average and reduce are deprecated; use reduction");
        return std::make_shared<BCELoss>(a.tensor_or_none("weight"), red(a));
      },
      in_target, {}, probs));
  r.push_back(multi_input_layer_spec<BCEWithLogitsLoss>(
      "BCEWithLogitsLoss",
      {{"weight", IValue()}, {"size_average", IValue()}, {"reduce", IValue()}, {"reduction", "mean"}, {"pos_weight", IValue()}},
      [red](const LayerArgs& a) {
        if (!a.is_none("size_average") || !a.is_none("reduce")) a.fail("size_average and reduce are deprecated; use reduction");
        return std::make_shared<BCEWithLogitsLoss>(a.tensor_or_none("weight"), red(a), a.tensor_or_none("pos_weight"));
      },
      in_target, {}, [] { return Tensors{randn({3, 4}), rand({3, 4})}; }));
  simple(Tag<KLDivLoss>{}, "KLDivLoss", {{"log_target", false}},
         [red](const LayerArgs& a) { return std::make_shared<KLDivLoss>(red(a), a.flag("log_target")); },
         [] { return Tensors{log_softmax(randn({3, 4}), 1), softmax(randn({3, 4}), 1)}; });
}

}  // namespace kiln::nn
