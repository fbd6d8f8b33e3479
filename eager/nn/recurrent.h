#pragma once
// torch.nn's recurrent layers (RNN, LSTM, GRU) and cells (RNNCell, LSTMCell, GRUCell), with torch's arguments,
// parameter names (weight_ih_l0, weight_hh_l1_reverse, ...; weight_ih, bias_hh for a cell) and initialisation
// (every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))). Their forward is eager/composites_rnn.h.
#include <string>
#include <vector>

#include "eager/nn/module.h"
#include "eager/nn/registry.h"
#include "eager/nn/rnn_utils.h"

namespace kiln::nn {

// One layer and direction's parameters (bias_ih and bias_hh undefined without bias) and its name suffix.
struct RnnParams {
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;
  std::string suffix;  // "l0", "l1_reverse"; empty for a cell
};

class RNNBase : public Module {
 public:
  // mode: rnn_layer's (lstm, gru, rnn_tanh, rnn_relu); layer: torch's class name
  RNNBase(std::string layer, std::string mode, int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
          bool bias = true, bool batch_first = false, double dropout = 0.0, bool bidirectional = false);
  // output, h_n and, for an LSTM, c_n; hx: empty (zeros), {h_0}, or {h_0, c_0} for an LSTM
  Tensors forward_with_state(const Tensor& input, const Tensors& hx = {});
  // A packed batch (torch.nn.utils.rnn): the output packed as the input (same batch_sizes and indices), and
  // h_n (and c_n) at each sequence's own last step, in the input's batch order; hx in that order too.
  std::pair<utils::rnn::PackedSequence, Tensors> forward_with_state(const utils::rnn::PackedSequence& input,
                                                                    const Tensors& hx = {});
  Tensor forward(const Tensor& input) override;  // the output alone
  std::string name() const override { return layer; }
  std::string layer, mode;
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;
  std::vector<RnnParams> params;  // layer-major, the reverse direction after the forward one
};

class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, const std::string& nonlinearity = "tanh",
      bool bias = true, bool batch_first = false, double dropout = 0.0, bool bidirectional = false);
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
       double dropout = 0.0, bool bidirectional = false);
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
      double dropout = 0.0, bool bidirectional = false);
};

class RNNCellBase : public Module {
 public:
  RNNCellBase(std::string layer, std::string mode, int64_t input_size, int64_t hidden_size, bool bias = true);
  // h' and, for an LSTMCell, c'; hx: empty (zeros), {h}, or {h, c} for an LSTMCell
  Tensors forward_with_state(const Tensor& input, const Tensors& hx = {});
  Tensor forward(const Tensor& input) override;  // h'
  std::string name() const override { return layer; }
  std::string layer, mode;
  int64_t input_size, hidden_size;
  bool bias;
  RnnParams params;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh");
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
};

// Their registry entries (layer_registry() takes them).
void add_recurrent_layers(std::vector<LayerSpec>& r);

}  // namespace kiln::nn
