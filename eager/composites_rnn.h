#pragma once
// The recurrent layers and cells of torch.nn (RNN, LSTM, GRU and their cells) as composites over a builder
// (eager/builder.h), so eager, the tracer and the script frontend record the same nodes: per layer and
// direction one GEMM for the input projection of every step (linear) and one rnn_layer node for the steps
// (core/ops.def), whose output [T+S,N,H] is sliced into the step outputs, h_n and c_n.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "core/rnn_mode.h"
#include "eager/autograd/graph.h"
#include "eager/composites.h"

namespace kiln::composite {

// One layer and direction's parameters, torch's weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}.
template <class B>
struct RnnWeights {
  Val<B> w_ih, w_hh, b_ih, b_hh;
};

struct RnnConfig {
  std::string layer;  // torch's class name, for errors
  std::string mode;   // rnn_layer's mode: lstm, gru, rnn_tanh, rnn_relu
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bias = true, batch_first = false, bidirectional = false;
  double dropout = 0.0;
  bool training = false;
};

namespace rnn_detail {

template <class B>
Val<B> slice0(B& b, Val<B> x, int64_t start, std::optional<int64_t> end) {
  Attrs a = Attrs().set("dim", int64_t(0)).set("start", start).set("step", int64_t(1));
  if (end) a.set("end", *end);
  return b.op(OpId::Slice, {x}, a);
}

template <class B>
Val<B> unsqueeze(B& b, Val<B> x, int64_t d) {
  return b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", d));
}

template <class B>
Val<B> squeeze(B& b, Val<B> x, int64_t d) {
  return b.op(OpId::Squeeze, {x}, Attrs().set("dims", Shape{d}));
}

template <class B>
Val<B> cat(B& b, const std::vector<Val<B>>& xs, int64_t d) {
  return xs.size() == 1 ? xs[0] : b.op(OpId::Cat, xs, Attrs().set("dim", d));
}

template <class B>
Val<B> permute01(B& b, Val<B> x) {
  return b.op(OpId::Permute, {x}, Attrs().set("dims", Shape{1, 0, 2}));
}

// The rnn_layer node over the projected inputs xp [T,N,G*H] and the initial state [S,N,H] (absent: zeros):
// its output [T+S,N,H], then the step outputs [T,N,H] and each final state [1,N,H].
// With lengths [N] (a packed sequence's, any order), row n runs only at steps t < lengths[n].
template <class B>
std::vector<Val<B>> layer(B& b, const std::string& mode, bool reverse, Val<B> xp, Val<B> w_hh, Val<B> b_hh, Val<B> state0,
                          Val<B> lengths = {}) {
  const int64_t S = rnn_mode(mode)->states;
  std::vector<Val<B>> in{xp, w_hh};
  if (present(b_hh)) in.push_back(b_hh);
  if (present(state0)) in.push_back(state0);
  if (present(lengths)) in.push_back(lengths);
  Attrs a = Attrs().set("mode", mode).set("reverse", reverse).set("bias", present(b_hh));
  if (present(lengths)) a.set("lengths", true);
  // The steps are kept for the backward wherever one may follow: in a graph always (whether it is differentiated
  // is decided later), in eager when grad mode is on and an input requires grad (an LSTM in eval keeps nothing).
  bool keep = true;
  if constexpr (std::is_same_v<B, EagerBuilder>)
    keep = GradMode::enabled() && std::any_of(in.begin(), in.end(), [](const Tensor& t) { return t.requires_grad(); });
  a.set("keep", keep);
  Val<B> out = b.op(OpId::RnnLayer, in, a);
  std::vector<Val<B>> r{slice0(b, out, 0, -S)};
  for (int64_t s = S; s >= 1; --s) r.push_back(slice0(b, out, -s, s > 1 ? std::optional<int64_t>(1 - s) : std::nullopt));
  return r;
}

inline std::string dims_str(const std::optional<Shape>& s) {
  if (!s) return "another shape";
  std::string r = "[";
  for (size_t i = 0; i < s->size(); ++i) r += (i ? ", " : "") + std::to_string((*s)[i]);
  return r + "]";
}

}  // namespace rnn_detail

// torch.nn.RNN / LSTM / GRU's forward: x [T,N,input_size] ([N,T,..] batch_first, [T,input_size] unbatched),
// h0 (and c0 for an LSTM) [num_layers * directions, N, H] or absent (zeros). Returns output, h_n and, for an
// LSTM, c_n, shaped as torch's. With lengths [N] (integer, any order; a packed sequence's, see
// eager/nn/rnn_utils.h) x is batched, each row runs its own number of steps, its output is zero after them,
// and its h_n and c_n are its state after its own last step (the reverse direction starts there).
template <class B>
std::vector<Val<B>> rnn(B& b, const RnnConfig& c, Val<B> x, Val<B> h0, Val<B> c0, const std::vector<RnnWeights<B>>& w,
                        Val<B> lengths = {}) {
  using namespace rnn_detail;
  const RnnMode mode = *rnn_mode(c.mode);
  const bool lstm = mode.cell == RnnCell::Lstm;
  const int64_t D = c.bidirectional ? 2 : 1, LD = c.num_layers * D, H = c.hidden_size;
  const std::string& L = c.layer;
  std::optional<int64_t> rank = b.rank(x);
  if (rank && *rank != 2 && *rank != 3)
    b.fail(fmt::format("{}: input must have 3 dimensions (2 unbatched), got {}{}", L, *rank,
                       b.shape(x) ? " (shape " + dims_str(b.shape(x)) + ")" : std::string()));
  if (!rank)
    b.check_rank(x, {3}, [&](const std::optional<Shape>& s) {
      return s ? fmt::format("{}: input must have 3 dimensions, got {}", L, s->size())
               : fmt::format("{}: input must have 3 dimensions (a 2-D unbatched input needs its rank known when the graph "
                             "is built)", L);
    });
  b.check_shape(x, {c.input_size}, true, [&](const std::optional<Shape>& s) {
    return fmt::format("{}: input.size(-1) must be equal to input_size. Expected {}{}", L, c.input_size,
                       s && !s->empty() ? ", got " + std::to_string(s->back()) : std::string());
  });
  const bool unbatched = rank == std::optional<int64_t>(2);
  if (unbatched && present(lengths)) b.fail(fmt::format("{}: a packed sequence's input must be batched (3-D)", L));
  Val<B> states[2] = {h0, c0};
  const int n_states = lstm ? 2 : 1;
  if (unbatched) {
    x = unsqueeze(b, x, 1);
    for (int i = 0; i < n_states; ++i) {
      if (!present(states[i])) continue;
      std::optional<int64_t> r = b.rank(states[i]);
      if (r && *r != 2)
        b.fail(lstm ? fmt::format("{}: for unbatched 2-D input, hx and cx should also be 2-D but got ({}-D, {}-D) tensors", L,
                                  b.rank(states[0]).value_or(0), b.rank(states[1]).value_or(0))
                    : fmt::format("{}: for unbatched 2-D input, hx should also be 2-D but got {}-D tensor", L, *r));
      states[i] = unsqueeze(b, states[i], 1);
    }
  } else if (c.batch_first) {
    x = permute01(b, x);
  }
  // x is [T, N, input_size] from here on
  std::optional<Shape> xs = b.shape(x);
  if (xs && (*xs)[0] == 0) b.fail(fmt::format("{}: expected sequence length to be larger than 0", L));
  for (int i = 0; i < n_states; ++i) {
    if (!present(states[i])) continue;
    std::string which = lstm ? fmt::format("hidden[{}] ", i) : std::string("hidden ");
    if (xs) {
      Shape want{LD, (*xs)[1], H};
      b.check_shape(states[i], want, false, [&](const std::optional<Shape>& s) {
        return fmt::format("{}: expected {}size ({}, {}, {}), got {}", L, which, want[0], want[1], want[2], dims_str(s));
      });
    } else {
      b.check_rank(states[i], {3}, [&](const std::optional<Shape>& s) {
        return fmt::format("{}: expected {}of 3 dims, got {}", L, which, dims_str(s));
      });
    }
  }
  Val<B> input = x;
  std::vector<Val<B>> hn, cn;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::vector<Val<B>> outs;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = l * D + d;
      const RnnWeights<B>& p = w.at(size_t(k));
      Val<B> xp = linear(b, input, p.w_ih, c.bias ? p.b_ih : Val<B>{});
      Val<B> state0{};
      if (present(states[0])) {
        std::vector<Val<B>> parts;
        for (int i = 0; i < n_states; ++i) parts.push_back(slice0(b, states[i], k, k + 1));
        state0 = cat(b, parts, 0);
      }
      std::vector<Val<B>> r = layer(b, c.mode, d == 1, xp, p.w_hh, c.bias ? p.b_hh : Val<B>{}, state0, lengths);
      outs.push_back(r[0]);
      hn.push_back(r[1]);
      if (lstm) cn.push_back(r[2]);
    }
    input = cat(b, outs, 2);
    if (l + 1 < c.num_layers) input = dropout(b, input, c.dropout, c.training);
  }
  std::vector<Val<B>> result{input, cat(b, hn, 0)};
  if (lstm) result.push_back(cat(b, cn, 0));
  if (unbatched) {
    for (Val<B>& v : result) v = squeeze(b, v, 1);
  } else if (c.batch_first) {
    result[0] = permute01(b, result[0]);
  }
  return result;
}

// torch.nn.RNNCell / LSTMCell / GRUCell's forward: x [N, input_size] or [input_size], h0 (and c0) [N, H] or
// [H] or absent (zeros). One rnn_layer node of one step over x seen as [N', input_size] (N' = 1 unbatched), so
// a script graph needs no rank when lowering: the results take x's leading dims back. Returns h' and, for an
// LSTM, c'.
template <class B>
std::vector<Val<B>> rnn_cell(B& b, const RnnConfig& c, Val<B> x, Val<B> h0, Val<B> c0, const RnnWeights<B>& w) {
  using namespace rnn_detail;
  const RnnMode mode = *rnn_mode(c.mode);
  const bool lstm = mode.cell == RnnCell::Lstm;
  const int n_states = lstm ? 2 : 1;
  const std::string& L = c.layer;
  const int64_t H = c.hidden_size;
  std::optional<int64_t> rank = b.rank(x);
  if (rank && *rank != 1 && *rank != 2)
    b.fail(fmt::format("{}: expected input to be 1-D or 2-D but received {}-D tensor{}", L, *rank,
                       b.shape(x) ? " of shape " + dims_str(b.shape(x)) : std::string()));
  if (!rank)
    b.check_rank(x, {1, 2}, [&](const std::optional<Shape>& s) {
      return fmt::format("{}: expected input to be 1-D or 2-D but received {}", L, dims_str(s));
    });
  b.check_shape(x, {c.input_size}, true, [&](const std::optional<Shape>& s) {
    return s && !s->empty()
               ? fmt::format("{}: input has inconsistent input_size: got {} expected {}", L, s->back(), c.input_size)
               : fmt::format("{}: input has inconsistent input_size: expected {}", L, c.input_size);
  });
  Val<B> states[2] = {h0, c0};
  std::optional<Shape> xs = b.shape(x);
  for (int i = 0; i < n_states; ++i) {
    if (!present(states[i])) continue;
    std::optional<Shape> s = b.shape(states[i]);
    if (!xs || !s) continue;  // the rnn_layer node checks the batch when the graph runs
    if (s->size() != xs->size())
      b.fail(fmt::format("{}: expected hidden{} to be {}-D as the input, got {}", L, i, xs->size(), dims_str(s)));
    if (s->back() != H)
      b.fail(fmt::format("{}: hidden{} has inconsistent hidden_size: got {}, expected {}", L, i, s->back(), H));
    if (s->size() == 2 && (*s)[0] != (*xs)[0])
      b.fail(fmt::format("{}: input batch size {} doesn't match hidden{} batch size {}", L, (*xs)[0], i, (*s)[0]));
  }
  auto rows = [&](Val<B> v, int64_t n) { return b.op(OpId::Reshape, {v}, Attrs().set("shape", Shape{-1, n})); };
  Val<B> xp = unsqueeze(b, linear(b, rows(x, c.input_size), w.w_ih, c.bias ? w.b_ih : Val<B>{}), 0);
  Val<B> state0{};
  if (present(states[0])) {
    std::vector<Val<B>> parts;
    for (int i = 0; i < n_states; ++i) parts.push_back(unsqueeze(b, rows(states[i], H), 0));
    state0 = cat(b, parts, 0);
  }
  std::vector<Val<B>> r = layer(b, c.mode, false, xp, w.w_hh, c.bias ? w.b_hh : Val<B>{}, state0);
  // x's leading dims ([N] or none) followed by H
  Val<B> lead = b.op(OpId::Select, {x}, Attrs().set("dim", int64_t(-1)).set("index", int64_t(0)));
  std::vector<Val<B>> result;
  for (int i = 0; i < n_states; ++i) result.push_back(b.reshape_like(r[size_t(1 + i)], lead, {H}));
  return result;
}

}  // namespace kiln::composite
