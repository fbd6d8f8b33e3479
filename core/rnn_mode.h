#pragma once
// The recurrent cells of the rnn_layer row (core/ops.def), by the name its "mode" attribute gives: how many
// gate blocks of H rows W_hh has (torch's order: LSTM i,f,g,o; GRU r,z,n) and how many [N,H] states the
// layer carries (h, and c for an LSTM).
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class RnnCell : uint8_t { Lstm, Gru, Tanh, Relu };

struct RnnMode {
  RnnCell cell;
  int64_t gates;
  int64_t states;
};

inline std::optional<RnnMode> rnn_mode(std::string_view name) {
  if (name == "lstm") return RnnMode{RnnCell::Lstm, 4, 2};
  if (name == "gru") return RnnMode{RnnCell::Gru, 3, 1};
  if (name == "rnn_tanh") return RnnMode{RnnCell::Tanh, 1, 1};
  if (name == "rnn_relu") return RnnMode{RnnCell::Relu, 1, 1};
  return std::nullopt;
}

}  // namespace kiln
