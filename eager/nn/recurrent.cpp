#include "eager/nn/recurrent.h"

#include <cmath>

#include "eager/composites_rnn.h"
#include "eager/nn/init.h"
#include "eager/ops.h"

namespace kiln::nn {

template <class B>
using Val = composite::Val<B>;

namespace {

int64_t gates_of(const std::string& mode) { return rnn_mode(mode)->gates; }

RnnParams make_params(const std::function<Tensor(const std::string&, Tensor)>& reg, int64_t G, int64_t in, int64_t H,
                      bool bias, const std::string& suffix) {
  std::string sfx = suffix.empty() ? "" : "_" + suffix;
  RnnParams p;
  p.suffix = suffix;
  p.weight_ih = reg("weight_ih" + sfx, empty({G * H, in}));
  p.weight_hh = reg("weight_hh" + sfx, empty({G * H, H}));
  if (bias) {
    p.bias_ih = reg("bias_ih" + sfx, empty({G * H}));
    p.bias_hh = reg("bias_hh" + sfx, empty({G * H}));
  }
  double bound = 1.0 / std::sqrt(double(H));
  for (Tensor* t : {&p.weight_ih, &p.weight_hh, &p.bias_ih, &p.bias_hh})
    if (t->defined()) init::uniform_(*t, -bound, bound);
  return p;
}

void check_sizes(const std::string& layer, int64_t input_size, int64_t hidden_size) {
  if (input_size <= 0) fail("{}: input_size must be greater than zero, got {}", layer, input_size);
  if (hidden_size <= 0) fail("{}: hidden_size must be greater than zero, got {}", layer, hidden_size);
}

template <class B>
composite::RnnWeights<B> weights_of(B& b, const RnnParams& p) {
  std::string sfx = p.suffix.empty() ? "" : "_" + p.suffix;
  return {b.parameter(p.weight_ih, "weight_ih" + sfx), b.parameter(p.weight_hh, "weight_hh" + sfx),
          b.parameter(p.bias_ih, "bias_ih" + sfx), b.parameter(p.bias_hh, "bias_hh" + sfx)};
}

template <class B>
Val<B> state(const std::vector<Val<B>>& hx, size_t i) {
  return i < hx.size() ? hx[i] : Val<B>{};
}

// through the builder, so that a script's error carries its file and line
template <class B>
void check_hx(B& b, const std::string& layer, const std::string& mode, size_t n) {
  bool lstm = mode == "lstm";
  if (n != 0 && n != (lstm ? 2u : 1u))
    b.fail(fmt::format("{}: expected hx as {}, got {} tensors", layer, lstm ? "(h_0, c_0)" : "one tensor h_0", n));
}

}  // namespace

RNNBase::RNNBase(std::string layer_, std::string mode_, int64_t input_size_, int64_t hidden_size_, int64_t num_layers_,
                 bool bias_, bool batch_first_, double dropout_, bool bidirectional_)
    : layer(std::move(layer_)), mode(std::move(mode_)), input_size(input_size_), hidden_size(hidden_size_),
      num_layers(num_layers_), bias(bias_), batch_first(batch_first_), dropout(dropout_), bidirectional(bidirectional_) {
  if (!(dropout >= 0.0 && dropout <= 1.0))
    fail("{}: dropout should be a number in range [0, 1] representing the probability of an element being zeroed", layer);
  check_sizes(layer, input_size, hidden_size);
  if (num_layers <= 0) fail("{}: num_layers must be greater than zero, got {}", layer, num_layers);
  const int64_t D = bidirectional ? 2 : 1;
  auto reg = [this](const std::string& n, Tensor t) { return register_parameter(n, std::move(t)); };
  for (int64_t l = 0; l < num_layers; ++l)
    for (int64_t d = 0; d < D; ++d)
      params.push_back(make_params(reg, gates_of(mode), l == 0 ? input_size : hidden_size * D, hidden_size, bias,
                                   fmt::format("l{}{}", l, d ? "_reverse" : "")));
}

// lengths present: x is a packed batch's padded steps [T, N, F] (never batch_first) and lengths [N] (integer)
template <class B>
std::vector<Val<B>> forward_with_state(B& b, RNNBase& m, Val<B> x, const std::vector<Val<B>>& hx, Val<B> lengths = {}) {
  check_hx(b, m.layer, m.mode, hx.size());
  composite::RnnConfig c{m.layer, m.mode, m.input_size, m.hidden_size, m.num_layers, m.bias,
                         m.batch_first && !composite::present(lengths), m.bidirectional, m.dropout, m.is_training()};
  std::vector<composite::RnnWeights<B>> w;
  for (const RnnParams& p : m.params) w.push_back(weights_of(b, p));
  return composite::rnn(b, c, x, state<B>(hx, 0), state<B>(hx, 1), w, lengths);
}
template <class B>
Val<B> forward_with(B& b, RNNBase& m, Val<B> x) {
  return forward_with_state(b, m, x, {})[0];
}
Tensors RNNBase::forward_with_state(const Tensor& x, const Tensors& hx) {
  EagerBuilder b;
  return nn::forward_with_state(b, *this, x, hx);
}
Tensor RNNBase::forward(const Tensor& x) { return eager_forward(*this, x); }

// The packed data as padded steps in packed order (longest first, so each step's running rows are a
// prefix), one rnn_layer node per layer and direction with the lengths, then packed again; the states
// go in and come out in the caller's batch order, as torch's do.
std::pair<utils::rnn::PackedSequence, Tensors> RNNBase::forward_with_state(const utils::rnn::PackedSequence& input,
                                                                           const Tensors& hx) {
  auto [padded, lengths] = utils::rnn::padded_in_packed_order(input);
  auto reorder = [](const Tensor& t, const Tensor& index) {
    return index.defined() ? index_select(t, 1, index.to(t.device())) : t;
  };
  Tensors states;
  for (const Tensor& h : hx) states.push_back(reorder(h, input.sorted_indices));
  EagerBuilder b;
  Tensors r = nn::forward_with_state(b, *this, padded, states, lengths);
  utils::rnn::PackedSequence out{utils::rnn::packed_data_of(r[0], input.batch_sizes), input.batch_sizes,
                                 input.sorted_indices, input.unsorted_indices};
  Tensors final_states;
  for (size_t i = 1; i < r.size(); ++i) final_states.push_back(reorder(r[i], input.unsorted_indices));
  return {out, final_states};
}

RNN::RNN(int64_t in, int64_t hidden, int64_t layers, const std::string& nonlinearity, bool bias, bool batch_first,
         double dropout, bool bidirectional)
    : RNNBase("RNN", nonlinearity == "relu" ? "rnn_relu" : "rnn_tanh", in, hidden, layers, bias, batch_first, dropout,
              bidirectional) {
  if (nonlinearity != "tanh" && nonlinearity != "relu") fail("RNN: unknown nonlinearity '{}'", nonlinearity);
}
LSTM::LSTM(int64_t in, int64_t hidden, int64_t layers, bool bias, bool batch_first, double dropout, bool bidirectional)
    : RNNBase("LSTM", "lstm", in, hidden, layers, bias, batch_first, dropout, bidirectional) {}
GRU::GRU(int64_t in, int64_t hidden, int64_t layers, bool bias, bool batch_first, double dropout, bool bidirectional)
    : RNNBase("GRU", "gru", in, hidden, layers, bias, batch_first, dropout, bidirectional) {}

RNNCellBase::RNNCellBase(std::string layer_, std::string mode_, int64_t input_size_, int64_t hidden_size_, bool bias_)
    : layer(std::move(layer_)), mode(std::move(mode_)), input_size(input_size_), hidden_size(hidden_size_), bias(bias_) {
  check_sizes(layer, input_size, hidden_size);
  auto reg = [this](const std::string& n, Tensor t) { return register_parameter(n, std::move(t)); };
  params = make_params(reg, gates_of(mode), input_size, hidden_size, bias, "");
}

template <class B>
std::vector<Val<B>> forward_with_state(B& b, RNNCellBase& m, Val<B> x, const std::vector<Val<B>>& hx) {
  check_hx(b, m.layer, m.mode, hx.size());
  composite::RnnConfig c{m.layer, m.mode, m.input_size, m.hidden_size, 1, m.bias, false, false, 0.0, false};
  return composite::rnn_cell(b, c, x, state<B>(hx, 0), state<B>(hx, 1), weights_of(b, m.params));
}
template <class B>
Val<B> forward_with(B& b, RNNCellBase& m, Val<B> x) {
  return forward_with_state(b, m, x, {})[0];
}
Tensors RNNCellBase::forward_with_state(const Tensor& x, const Tensors& hx) {
  EagerBuilder b;
  return nn::forward_with_state(b, *this, x, hx);
}
Tensor RNNCellBase::forward(const Tensor& x) { return eager_forward(*this, x); }

RNNCell::RNNCell(int64_t in, int64_t hidden, bool bias, const std::string& nonlinearity)
    : RNNCellBase("RNNCell", nonlinearity == "relu" ? "rnn_relu" : "rnn_tanh", in, hidden, bias) {
  if (nonlinearity != "tanh" && nonlinearity != "relu") fail("RNNCell: unknown nonlinearity '{}'", nonlinearity);
}
LSTMCell::LSTMCell(int64_t in, int64_t hidden, bool bias) : RNNCellBase("LSTMCell", "lstm", in, hidden, bias) {}
GRUCell::GRUCell(int64_t in, int64_t hidden, bool bias) : RNNCellBase("GRUCell", "gru", in, hidden, bias) {}

namespace {

template <class L, class Base>
LayerSpec with_state(LayerSpec s, int results) {
  s.results = results;
  s.lower_with_state = [](GraphBuilder& b, Module& m, GraphBuilder::V x, const std::vector<GraphBuilder::V>& hx) {
    return forward_with_state(b, static_cast<Base&>(static_cast<L&>(m)), x, hx);
  };
  if constexpr (std::is_same_v<Base, RNNBase>)
    s.lower_packed = [](GraphBuilder& b, Module& m, GraphBuilder::V padded, GraphBuilder::V lengths,
                        const std::vector<GraphBuilder::V>& hx) {
      return forward_with_state(b, static_cast<RNNBase&>(static_cast<L&>(m)), padded, hx, lengths);
    };
  return s;
}

std::string nonlinearity(const LayerArgs& a) {
  std::string n = a.str("nonlinearity");
  if (n != "tanh" && n != "relu") a.fail(fmt::format("unknown nonlinearity '{}'", n));
  return n;
}

double dropout_arg(const LayerArgs& a) {
  double p = a.number("dropout");
  if (!(p >= 0.0 && p <= 1.0))
    a.fail("dropout should be a number in range [0, 1] representing the probability of an element being zeroed");
  return p;
}

}  // namespace

void add_recurrent_layers(std::vector<LayerSpec>& r) {
  auto seq = [](Shape s) { return [s] { return randn(s); }; };
  const std::vector<LayerParam> layer_params = {{"input_size"}, {"hidden_size"}, {"num_layers", 1}, {"bias", true},
                                                {"batch_first", false}, {"dropout", 0.0}, {"bidirectional", false},
                                                {"proj_size", 0}, {"device", IValue()}, {"dtype", IValue()}};
  auto common = [](const LayerArgs& a) {
    if (a.integer("proj_size") != 0) a.fail("proj_size is not supported");
    if (!a.is_none("device") || !a.is_none("dtype")) a.fail("device and dtype arguments are not supported");
  };
  // RNN's nonlinearity comes after num_layers, as in torch's signature
  std::vector<LayerParam> rnn_params = layer_params;
  rnn_params.insert(rnn_params.begin() + 3, LayerParam{"nonlinearity", IValue("tanh")});
  r.push_back(with_state<RNN, RNNBase>(layer_spec<RNN>(
      "RNN", rnn_params,
      [common](const LayerArgs& a) {
        common(a);
        return std::make_shared<RNN>(a.positive("input_size"), a.positive("hidden_size"), a.positive("num_layers"),
                                     nonlinearity(a), a.flag("bias"), a.flag("batch_first"), dropout_arg(a),
                                     a.flag("bidirectional"));
      },
      {{"input_size", 3}, {"hidden_size", 4}, {"num_layers", 2}, {"nonlinearity", "relu"}}, seq({5, 2, 3})), 2));
  r.push_back(with_state<LSTM, RNNBase>(layer_spec<LSTM>(
      "LSTM", layer_params,
      [common](const LayerArgs& a) {
        common(a);
        return std::make_shared<LSTM>(a.positive("input_size"), a.positive("hidden_size"), a.positive("num_layers"),
                                      a.flag("bias"), a.flag("batch_first"), dropout_arg(a), a.flag("bidirectional"));
      },
      {{"input_size", 3}, {"hidden_size", 4}, {"num_layers", 2}, {"bidirectional", true}}, seq({5, 2, 3})), 3));
  r.push_back(with_state<GRU, RNNBase>(layer_spec<GRU>(
      "GRU", layer_params,
      [common](const LayerArgs& a) {
        common(a);
        return std::make_shared<GRU>(a.positive("input_size"), a.positive("hidden_size"), a.positive("num_layers"),
                                     a.flag("bias"), a.flag("batch_first"), dropout_arg(a), a.flag("bidirectional"));
      },
      {{"input_size", 3}, {"hidden_size", 4}, {"batch_first", true}}, seq({2, 5, 3})), 2));
  const std::vector<LayerParam> cell_params = {{"input_size"}, {"hidden_size"}, {"bias", true}, {"device", IValue()},
                                               {"dtype", IValue()}};
  std::vector<LayerParam> rnn_cell_params = cell_params;
  rnn_cell_params.insert(rnn_cell_params.begin() + 3, LayerParam{"nonlinearity", IValue("tanh")});
  r.push_back(with_state<RNNCell, RNNCellBase>(layer_spec<RNNCell>(
      "RNNCell", rnn_cell_params,
      [](const LayerArgs& a) {
        return std::make_shared<RNNCell>(a.positive("input_size"), a.positive("hidden_size"), a.flag("bias"), nonlinearity(a));
      },
      {{"input_size", 3}, {"hidden_size", 4}}, seq({2, 3})), 1));
  r.push_back(with_state<LSTMCell, RNNCellBase>(layer_spec<LSTMCell>(
      "LSTMCell", cell_params,
      [](const LayerArgs& a) { return std::make_shared<LSTMCell>(a.positive("input_size"), a.positive("hidden_size"), a.flag("bias")); },
      {{"input_size", 3}, {"hidden_size", 4}}, seq({2, 3})), 2));
  r.push_back(with_state<GRUCell, RNNCellBase>(layer_spec<GRUCell>(
      "GRUCell", cell_params,
      [](const LayerArgs& a) { return std::make_shared<GRUCell>(a.positive("input_size"), a.positive("hidden_size"), a.flag("bias")); },
      {{"input_size", 3}, {"hidden_size", 4}, {"bias", false}}, seq({3})), 1));
}

}  // namespace kiln::nn
