// The recurrent layers and cells (eager/nn/recurrent.h over eager/composites_rnn.h and the rnn_layer row):
// values against a float64 reference written here step by step, gradcheck of the row in every mode and of the
// layers through their states, torch's errors, and the IR they leave: one rnn_layer node per layer and
// direction whether traced, scripted or compiled. tests/script/rnn.py compares them with PyTorch.
#include <cmath>

#include "core/rnn_mode.h"
#include "eager/autograd/gradcheck.h"
#include "eager/dispatch.h"
#include "eager/nn/recurrent.h"
#include "jit/compiled_function.h"
#include "jit/serialize.h"
#include "script_frontend/script.h"
#include "support.h"
#include "tracer/trace.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::flat;
using kiln::test::values;

namespace {

using Vec = std::vector<double>;

double sg(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// One step of a cell for one sample: h (and c) replaced by the next state.
void step(const std::string& mode, const Vec& x, Vec& h, Vec& c, const nn::RnnParams& p, int64_t H) {
  const int64_t I = int64_t(x.size());
  const int64_t G = mode == "lstm" ? 4 : mode == "gru" ? 3 : 1;
  Vec wih = values(p.weight_ih), whh = values(p.weight_hh);
  Vec bih = p.bias_ih.defined() ? values(p.bias_ih) : Vec(size_t(G * H), 0.0);
  Vec bhh = p.bias_hh.defined() ? values(p.bias_hh) : Vec(size_t(G * H), 0.0);
  Vec gi(size_t(G * H)), gh(size_t(G * H));
  for (int64_t r = 0; r < G * H; ++r) {
    gi[size_t(r)] = bih[size_t(r)];
    gh[size_t(r)] = bhh[size_t(r)];
    for (int64_t k = 0; k < I; ++k) gi[size_t(r)] += wih[size_t(r * I + k)] * x[size_t(k)];
    for (int64_t k = 0; k < H; ++k) gh[size_t(r)] += whh[size_t(r * H + k)] * h[size_t(k)];
  }
  Vec hn(static_cast<size_t>(H), 0.0);
  for (int64_t j = 0; j < H; ++j) {
    auto a = [&](int64_t k) { return gi[size_t(k * H + j)] + gh[size_t(k * H + j)]; };
    if (mode == "lstm") {
      double i = sg(a(0)), f = sg(a(1)), g = std::tanh(a(2)), o = sg(a(3));
      c[size_t(j)] = f * c[size_t(j)] + i * g;
      hn[size_t(j)] = o * std::tanh(c[size_t(j)]);
    } else if (mode == "gru") {
      double r = sg(a(0)), z = sg(a(1));
      double n = std::tanh(gi[size_t(2 * H + j)] + r * gh[size_t(2 * H + j)]);
      hn[size_t(j)] = (1 - z) * n + z * h[size_t(j)];
    } else {
      hn[size_t(j)] = mode == "rnn_relu" ? std::max(a(0), 0.0) : std::tanh(a(0));
    }
  }
  h = hn;
}

struct RefOut {
  Vec out, hn, cn;  // out [T, N, D*H], hn and cn [L*D, N, H]
};

// The whole layer, time-major: x [T, N, I], h0 and c0 [L*D, N, H] (empty: zeros).
RefOut reference(const nn::RNNBase& m, const Vec& x, int64_t T, int64_t N, const Vec& h0, const Vec& c0) {
  const int64_t H = m.hidden_size, D = m.bidirectional ? 2 : 1;
  Vec in = x;
  int64_t I = m.input_size;
  RefOut r;
  r.hn.assign(size_t(m.num_layers * D * N * H), 0.0);
  r.cn = r.hn;
  for (int64_t l = 0; l < m.num_layers; ++l) {
    Vec out(size_t(T * N * D * H));
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = l * D + d;
      for (int64_t n = 0; n < N; ++n) {
        Vec h(size_t(H), 0.0), c(size_t(H), 0.0);
        for (int64_t j = 0; j < H; ++j) {
          if (!h0.empty()) h[size_t(j)] = h0[size_t((k * N + n) * H + j)];
          if (!c0.empty()) c[size_t(j)] = c0[size_t((k * N + n) * H + j)];
        }
        for (int64_t s = 0; s < T; ++s) {
          int64_t t = d ? T - 1 - s : s;
          Vec xt(in.begin() + (t * N + n) * I, in.begin() + (t * N + n + 1) * I);
          step(m.mode, xt, h, c, m.params[size_t(k)], H);
          for (int64_t j = 0; j < H; ++j) out[size_t((t * N + n) * D * H + d * H + j)] = h[size_t(j)];
        }
        for (int64_t j = 0; j < H; ++j) {
          r.hn[size_t((k * N + n) * H + j)] = h[size_t(j)];
          r.cn[size_t((k * N + n) * H + j)] = c[size_t(j)];
        }
      }
    }
    in = out;
    I = D * H;
  }
  r.out = in;
  return r;
}

Tensor f64(const Vec& v, const Shape& s) { return tensor(v, s, DType::Float64); }

int count_ops(const ir::Graph& g, OpId op) {
  int n = 0;
  for (const ir::Node* node : g.block()->nodes())
    if (node->is_op(op)) ++n;
  return n;
}

}  // namespace

TEST_CASE("rnn layers: LSTM, GRU and RNN equal a float64 step-by-step reference") {
  struct C {
    std::shared_ptr<nn::RNNBase> m;
    int64_t T, N;
    bool with_state, unbatched;
  };
  manual_seed(3);
  const C cases[] = {
      {std::make_shared<nn::LSTM>(3, 4, 2, true, false, 0.0, true), 5, 2, true, false},   // 2 layers, both ways
      {std::make_shared<nn::GRU>(3, 4, 1, false, true), 4, 3, false, false},             // batch_first, no bias
      {std::make_shared<nn::GRU>(2, 3, 2, true, false, 0.0, true), 3, 2, true, false},
      {std::make_shared<nn::RNN>(3, 2, 2, "relu"), 5, 1, true, true},                    // unbatched
      {std::make_shared<nn::RNN>(3, 4, 1, "tanh", true, false, 0.0, true), 1, 2, false, false},  // T = 1
      {std::make_shared<nn::LSTM>(2, 3, 1, true, true), 4, 1, true, true},               // unbatched, batch_first ignored
  };
  for (const C& c : cases) {
    nn::RNNBase& m = *c.m;
    CAPTURE(m.layer);
    CAPTURE(m.num_layers);
    CAPTURE(m.bidirectional);
    m.to(DType::Float64);
    const int64_t D = m.bidirectional ? 2 : 1, LD = m.num_layers * D, H = m.hidden_size;
    const bool lstm = m.mode == "lstm";
    Tensor x = randn({c.T, c.N, m.input_size}, DType::Float64);
    Tensor h0 = randn({LD, c.N, H}, DType::Float64), c0 = randn({LD, c.N, H}, DType::Float64);
    RefOut ref = reference(m, values(x), c.T, c.N, c.with_state ? values(h0) : Vec{}, c.with_state && lstm ? values(c0) : Vec{});
    Tensor xin = m.batch_first && !c.unbatched ? x.transpose(0, 1) : x;
    if (c.unbatched) xin = xin.squeeze(1), h0 = h0.squeeze(1), c0 = c0.squeeze(1);
    Tensors hx;
    if (c.with_state) hx = lstm ? Tensors{h0, c0} : Tensors{h0};
    Tensors r = m.forward_with_state(xin, hx);
    REQUIRE(r.size() == (lstm ? 3u : 2u));
    Tensor out = f64(ref.out, {c.T, c.N, D * H}), hn = f64(ref.hn, {LD, c.N, H}), cn = f64(ref.cn, {LD, c.N, H});
    if (m.batch_first && !c.unbatched) out = out.transpose(0, 1);
    if (c.unbatched) out = out.squeeze(1), hn = hn.squeeze(1), cn = cn.squeeze(1);
    check_close(r[0], out, 1e-12, 1e-12);
    check_close(r[1], hn, 1e-12, 1e-12);
    if (lstm) check_close(r[2], cn, 1e-12, 1e-12);
    if (!c.with_state) check_close(m.forward(xin), r[0], 0, 0);
  }
}

TEST_CASE("rnn cells: LSTMCell, GRUCell and RNNCell equal the reference step, batched or not") {
  manual_seed(4);
  std::shared_ptr<nn::RNNCellBase> cells[] = {std::make_shared<nn::LSTMCell>(3, 4), std::make_shared<nn::GRUCell>(3, 4, false),
                                              std::make_shared<nn::RNNCell>(3, 4, true, "relu")};
  for (auto& cp : cells) {
    nn::RNNCellBase& m = *cp;
    CAPTURE(m.layer);
    m.to(DType::Float64);
    const bool lstm = m.mode == "lstm";
    Tensor x = randn({2, 3}, DType::Float64), h = randn({2, 4}, DType::Float64), c = randn({2, 4}, DType::Float64);
    Tensors r = m.forward_with_state(x, lstm ? Tensors{h, c} : Tensors{h});
    Vec hs, cs;
    for (int64_t n = 0; n < 2; ++n) {
      Vec xv = values(x.select(0, n)), hv = values(h.select(0, n)), cv = values(c.select(0, n));
      step(m.mode, xv, hv, cv, m.params, 4);
      hs.insert(hs.end(), hv.begin(), hv.end());
      cs.insert(cs.end(), cv.begin(), cv.end());
    }
    check_close(r[0], f64(hs, {2, 4}), 1e-12, 1e-12);
    if (lstm) check_close(r[1], f64(cs, {2, 4}), 1e-12, 1e-12);
    // unbatched and zero states
    Vec xv = values(x.select(0, 1)), hv(4, 0.0), cv(4, 0.0);
    step(m.mode, xv, hv, cv, m.params, 4);
    Tensors u = m.forward_with_state(x.select(0, 1));
    check_close(u[0], f64(hv, {4}), 1e-12, 1e-12);
    if (lstm) check_close(u[1], f64(cv, {4}), 1e-12, 1e-12);
  }
}

TEST_CASE("rnn_layer: gradcheck in every mode, both directions, with and without bias and state") {
  for (const char* mode : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    const int64_t G = rnn_mode(mode)->gates, S = rnn_mode(mode)->states;
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(mode);
      CAPTURE(variant);
      bool reverse = variant == 1, bias = variant != 2, state = variant != 2;
      manual_seed(uint64_t(10 + variant));
      Tensors in{randn({3, 2, G * 2}, DType::Float64), mul(randn({G * 2, 2}, DType::Float64), 0.7)};
      if (bias) in.push_back(randn({G * 2}, DType::Float64));
      if (state) in.push_back(randn({S, 2, 2}, DType::Float64));
      // relu's kink: keep pre-activations away from 0
      if (std::string(mode) == "rnn_relu") in[0] = add(in[0], mul(sign(in[0]), 0.5));
      for (Tensor& t : in) t.requires_grad_();
      Attrs a = Attrs().set("mode", std::string(mode)).set("reverse", reverse).set("bias", bias);
      CHECK_NOTHROW(gradcheck([&](const Tensors& x) { return dispatch1(OpId::RnnLayer, x, a); }, in));
    }
  }
}

TEST_CASE("rnn layers: gradients through the states, the dropout between layers, and float32") {
  manual_seed(5);
  nn::LSTM lstm(2, 3, 2, true, false, 0.0, true);
  lstm.to(DType::Float64);
  Tensor x = randn({3, 2, 2}, DType::Float64).requires_grad_();
  Tensor h0 = randn({4, 2, 3}, DType::Float64).requires_grad_(), c0 = randn({4, 2, 3}, DType::Float64).requires_grad_();
  Tensor w1 = randn({3, 2, 6}, DType::Float64), w2 = randn({4, 2, 3}, DType::Float64), w3 = randn({4, 2, 3}, DType::Float64);
  CHECK_NOTHROW(gradcheck(
      [&](const Tensors& in) {
        Tensors r = lstm.forward_with_state(in[0], {in[1], in[2]});
        return add(add(sum(mul(r[0], w1)), sum(mul(r[1], w2))), sum(mul(r[2], w3)));
      },
      {x, h0, c0}));
  nn::GRU gru(2, 3, 1, true, true);
  gru.to(DType::Float64);
  Tensor xb = randn({2, 4, 2}, DType::Float64).requires_grad_();
  CHECK_NOTHROW(gradcheck([&](const Tensors& in) { return gru.forward_with_state(in[0])[1]; }, {xb}));  // h_n only

  // dropout between layers: in training the first layer's output is masked, never the last one's
  nn::RNN drop(3, 4, 2, "tanh", true, false, 1.0);
  Tensor xs = randn({4, 2, 3});
  drop.eval();
  Tensor ye = drop.forward(xs);
  drop.train();
  Tensor yt = drop.forward(xs);  // p = 1: the second layer reads zeros
  nn::RNN second(4, 4);
  std::map<std::string, Tensor> sd;
  for (const auto& [k, v] : drop.state_dict())
    if (k.find("_l1") != std::string::npos) sd[k.substr(0, k.size() - 1) + "0"] = v;
  second.load_state_dict(sd);
  check_close(yt, second.forward(zeros({4, 2, 4})), 1e-6, 1e-6);
  CHECK(max(abs(sub(ye, yt))).item<double>() > 1e-3);

  // under bf16 autocast the layer runs in bf16 (its gates in float32), close to float32, float32 gradients
  {
    nn::LSTM la(3, 5);
    Tensor xa = randn({4, 2, 3});
    Tensor want = la.forward(xa);
    Tensors got;
    {
      AutocastGuard guard(DType::BFloat16);
      got = la.forward_with_state(xa);
    }
    CHECK(got[0].dtype() == DType::BFloat16);
    CHECK(got[2].dtype() == DType::BFloat16);
    check_close(got[0].to(DType::Float32), want, 0.05, 0.02);
    sum(got[0].to(DType::Float32)).backward();
    CHECK(la.params[0].weight_hh.grad().dtype() == DType::Float32);
  }
  // float32 runs in float32 and agrees with float64
  nn::LSTM l32(3, 5);
  Tensor x32 = randn({6, 2, 3});
  Tensor y32 = l32.forward(x32);
  CHECK(y32.dtype() == DType::Float32);
  nn::LSTM l64(3, 5);
  l64.load_state_dict(l32.state_dict());
  l64.to(DType::Float64);
  check_close(y32, l64.forward(x32.to(DType::Float64)).to(DType::Float32), 1e-5, 1e-6);
}

TEST_CASE("rnn layers: torch's parameter names, shapes and initialisation") {
  manual_seed(6);
  nn::LSTM m(10, 20, 2, true, false, 0.0, true);
  auto sd = m.state_dict();
  CHECK(sd.size() == 16);
  CHECK(sd.at("weight_ih_l0").sizes() == Shape{80, 10});
  CHECK(sd.at("weight_hh_l0").sizes() == Shape{80, 20});
  CHECK(sd.at("bias_ih_l1_reverse").sizes() == Shape{80});
  CHECK(sd.at("weight_ih_l1").sizes() == Shape{80, 40});
  CHECK(sd.at("weight_hh_l1_reverse").sizes() == Shape{80, 20});
  double bound = 1.0 / std::sqrt(20.0), lo = 1, hi = -1;
  for (const auto& [k, t] : sd)
    for (double v : values(t)) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo >= -bound);
  CHECK(hi <= bound);
  CHECK(lo < -0.9 * bound);
  CHECK(hi > 0.9 * bound);
  nn::GRU g(4, 3, 1, false);
  CHECK(g.state_dict().size() == 2);
  CHECK(g.state_dict().at("weight_ih_l0").sizes() == Shape{9, 4});
  nn::LSTMCell cell(4, 3);
  CHECK(cell.state_dict().at("weight_hh").sizes() == Shape{12, 3});
  CHECK(cell.state_dict().at("bias_ih").sizes() == Shape{12});
}

TEST_CASE("rnn layers: torch's errors") {
  nn::LSTM lstm(4, 3, 2);
  nn::GRU gru(4, 3);
  check_error([&] { lstm.forward(randn({2, 3, 4, 5})); }, "LSTM: input must have 3 dimensions (2 unbatched), got 4 (shape [2, 3, 4, 5])");
  check_error([&] { lstm.forward(randn({2, 3, 5})); }, "LSTM: input.size(-1) must be equal to input_size. Expected 4, got 5");
  check_error([&] { lstm.forward_with_state(randn({2, 3, 4}), {randn({1, 3, 3}), randn({2, 3, 3})}); },
              "LSTM: expected hidden[0] size (2, 3, 3), got [1, 3, 3]");
  check_error([&] { lstm.forward_with_state(randn({2, 3, 4}), {randn({2, 3, 3}), randn({2, 2, 3})}); },
              "LSTM: expected hidden[1] size (2, 3, 3), got [2, 2, 3]");
  check_error([&] { lstm.forward_with_state(randn({2, 3, 4}), {randn({2, 3, 3})}); }, "LSTM: expected hx as (h_0, c_0), got 1 tensors");
  check_error([&] { gru.forward_with_state(randn({2, 3, 4}), {randn({2, 3, 3})}); }, "GRU: expected hidden size (1, 3, 3), got [2, 3, 3]");
  check_error([&] { lstm.forward_with_state(randn({2, 4}), {randn({2, 1, 3}), randn({2, 1, 3})}); },
              "LSTM: for unbatched 2-D input, hx and cx should also be 2-D but got (3-D, 3-D) tensors");
  check_error([&] { gru.forward(randn({0, 3, 4})); }, "GRU: expected sequence length to be larger than 0");
  CHECK(gru.forward_with_state(randn({2, 0, 4}))[1].sizes() == Shape{1, 0, 3});  // an empty batch is fine
  check_error([&] { gru.forward(randn({2, 3, 4}, DType::Float64)); }, "dtype");
  nn::LSTMCell cell(4, 3);
  nn::GRUCell gcell(4, 3);
  check_error([&] { cell.forward(randn({3, 5})); }, "LSTMCell: input has inconsistent input_size: got 5 expected 4");
  check_error([&] { cell.forward_with_state(randn({3, 4}), {randn({2, 3}), randn({3, 3})}); },
              "LSTMCell: input batch size 3 doesn't match hidden0 batch size 2");
  check_error([&] { gcell.forward(randn({3, 4, 1})); }, "GRUCell: expected input to be 1-D or 2-D but received 3-D tensor of shape [3, 4, 1]");
  check_error([&] { gcell.forward_with_state(randn({3, 4}), {randn({3, 4})}); }, "GRUCell: hidden0 has inconsistent hidden_size: got 4, expected 3");
  check_error([] { nn::LSTM(4, 3, 1, true, false, 2.0); },
              "LSTM: dropout should be a number in range [0, 1] representing the probability of an element being zeroed");
  check_error([] { nn::RNN(4, 3, 1, "sigmoid"); }, "RNN: unknown nonlinearity 'sigmoid'");
  check_error([] { nn::GRU(4, 0); }, "GRU: hidden_size must be greater than zero, got 0");
  check_error([] { nn::LSTM(4, 3, 0); }, "LSTM: num_layers must be greater than zero, got 0");
  const nn::LayerSpec* spec = nn::find_layer("LSTM");
  REQUIRE(spec);
  check_error([&] { spec->make(nn::bind_layer_args(*spec, {IValue(4), IValue(3)}, {{"proj_size", IValue(2)}})); },
              "nn.LSTM: proj_size is not supported");
  // a gradient of a gradient through the layer raises rather than leaving out the path through time
  nn::GRU g2(2, 3);
  Tensor xg = randn({3, 1, 2}).requires_grad_();
  Tensor gx = grad({sum(mul(g2.forward(xg), g2.forward(xg)))}, {xg}, {}, false, true)[0];
  check_error([&] { sum(mul(gx, gx)).backward(); }, "rnn_layer_backward: double backward through a recurrent layer is not supported");
  // the row's own checks
  Attrs a = Attrs().set("mode", std::string("lstm"));
  check_error([&] { dispatch1(OpId::RnnLayer, {randn({2, 3, 8}), randn({8, 3})}, a.set("bias", false)); },
              "rnn_layer: expected w_hh of shape [12, 3] (4 gates of hidden size 3), got [8,3]");
  check_error([&] { dispatch1(OpId::RnnLayer, {randn({2, 3, 8}), randn({8, 2}), randn({8}), randn({1, 3, 2})}, Attrs().set("mode", std::string("lstm"))); },
              "rnn_layer: expected state0 of shape [2,3,2], got [1,3,2]");
  check_error([&] { dispatch1(OpId::RnnLayer, {randn({2, 3, 8}), randn({8, 2})}, Attrs().set("mode", std::string("lstm2")).set("bias", false)); },
              "rnn_layer: mode must be lstm, gru, rnn_tanh or rnn_relu, got 'lstm2'");
}

TEST_CASE("rnn layers: one rnn_layer node per layer and direction, traced, scripted and compiled") {
  manual_seed(7);
  nn::LSTM lstm(3, 4, 2, true, false, 0.0, true);
  for (Tensor p : lstm.parameters()) p.requires_grad_(false);  // captured as constants on purpose
  Tensor x = randn({6, 2, 3});
  Function f = trace([&](const Tensors& in) { return lstm.forward_with_state(in[0]); }, {x});
  CHECK(count_ops(f.graph(), OpId::RnnLayer) == 4);
  CHECK(count_ops(f.graph(), OpId::Matmul) == 4);  // the input projection of all steps, once per layer and direction
  // saved and loaded (the mode attribute a string), the same values
  std::string path = test::scratch_path("rnn", "lstm.kiln");
  kiln::save(f, path);
  Function back = kiln::load(path);
  Tensors a = f({x}), b = back({x});
  REQUIRE(a.size() == 3);
  for (size_t i = 0; i < 3; ++i) check_close(b[i], a[i], 0, 0);

  const char* src =
      "import torch\nimport torch.nn as nn\n\n\n"
      "class LM(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.emb = nn.Embedding(10, 3)\n"
      "        self.lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True)\n"
      "        self.gru = nn.GRU(4, 2, bidirectional=True)\n"
      "        self.fc = nn.Linear(4, 10)\n\n"
      "    def forward(self, tokens, h0, c0):\n"
      "        out, (h, c) = self.lstm(self.emb(tokens), (h0, c0))\n"
      "        y, hg = self.gru(out)\n"
      "        return self.fc(y).sum() + h.sum() + c.sum() + hg.sum()\n";
  auto net = script_source(src, "lm.py").module("LM");
  Tensor tokens = randint(0, 10, {2, 5}), h0 = randn({2, 2, 4}), c0 = randn({2, 2, 4});
  Tensor ys = net->call({IValue(tokens), IValue(h0), IValue(c0)})[0].to_tensor();
  // the same computation in eager, from the scripted parameters
  nn::LSTM el(3, 4, 2, true, true);
  nn::GRU eg(4, 2, 1, true, false, 0.0, true);
  std::map<std::string, Tensor> sl, sg_;
  Tensor emb;
  for (const auto& [k, v] : net->state_dict()) {
    if (k.rfind("lstm.", 0) == 0) sl[k.substr(5)] = v;
    if (k.rfind("gru.", 0) == 0) sg_[k.substr(4)] = v;
  }
  el.load_state_dict(sl);
  eg.load_state_dict(sg_);
  Tensor e = index_select(net->state_dict().at("emb.weight"), 0, tokens.reshape({-1})).reshape({2, 5, 3});
  Tensors rl = el.forward_with_state(e, {h0, c0});
  Tensors rg = eg.forward_with_state(rl[0]);
  Tensor fc = linear(rg[0], net->state_dict().at("fc.weight"), net->state_dict().at("fc.bias"));
  check_close(ys, add(add(add(sum(fc), sum(rl[1])), sum(rl[2])), sum(rg[1])), 1e-5, 1e-5);
  CHECK(count_ops(net->method("forward").graph(), OpId::RnnLayer) == 4);
}

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";



// make_rnn_fixtures.py's loss
Tensor loss_of(const Tensors& outs, const Tensor& target) {
  return add(add(cross_entropy(flatten(outs[0], 0, -2), target), mul(sum(outs[1]), 0.1)), mul(sum(outs[2]), 0.05));
}

}  // namespace

TEST_CASE("rnn model files: PyTorch's outputs, gradients and SGD steps, interpreted, compiled and as a compiled step") {
  struct C {
    const char* file;
    const char* cls;
    std::vector<IValue> args;
    std::function<std::vector<IValue>(const Tensors&)> call;  // the fixture's tensors as forward's arguments
  };
  auto as_is = [](const Tensors& ts) { return std::vector<IValue>(ts.begin(), ts.end()); };
  auto state_tuple = [](const Tensors& ts) { return std::vector<IValue>{ts[0], IValue::tuple({ts[1], ts[2]})}; };
  // the language model as word_language_model writes it, dropout 0 (kiln's masks are not torch's)
  const C cases[] = {{"rnn_lm", "RNNModel", {IValue(30), IValue(8), IValue(12), IValue(2), IValue(0.0)}, state_tuple},
                     {"rnn_tagger", "Tagger", {IValue(5), IValue(6), IValue(4)}, as_is}};
  for (const C& c : cases) {
    CAPTURE(c.file);
    std::map<std::string, Tensor> data = load_safetensors(kModels + "data/" + c.file + ".safetensors");
    auto net = script_file(kModels + c.file + ".py").module(c.cls, c.args);
    net->load_state_dict(kiln::test::with_prefix(data, "state."));
    Tensors inputs = {data.at("input.0")};
    for (int i = 1; data.count("input." + std::to_string(i)); ++i) inputs.push_back(data.at("input." + std::to_string(i)));
    std::vector<IValue> in = c.call(inputs);
    const Tensor& target = data.at("target.0");
    Function compiled = compile(net->method());
    const int layers = std::string(c.file) == "rnn_lm" ? 2 : 5;  // the tagger: GRU both ways, 2 RNN layers, a cell
    CHECK(count_ops(compiled.graph(), OpId::RnnLayer) == layers);
    {
      NoGradGuard no_grad;
      Tensors a = flat(net->call(in)), b = flat(compiled.call(in));
      REQUIRE(a.size() == 3);
      REQUIRE(b.size() == 3);
      for (size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        check_close(a[i], data.at("output." + std::to_string(i)), 1e-4, 1e-5);
        check_close(b[i], data.at("output." + std::to_string(i)), 1e-4, 1e-5);
      }
    }
    // one backward: every parameter's gradient as PyTorch's
    net->zero_grad();
    loss_of(flat(net->call(in)), target).backward();
    std::map<std::string, Tensor> grads = kiln::test::with_prefix(data, "grad.");
    for (const auto& [name, p] : net->named_parameters()) {
      CAPTURE(name);
      REQUIRE(grads.count(name));
      REQUIRE(p.grad().defined());
      check_close(p.grad(), grads.at(name), 1e-4, 1e-5);
    }
    // three SGD steps as one compiled training step, and the same steps in eager
    net->load_state_dict(kiln::test::with_prefix(data, "state."));
    optim::SGD opt(net->parameters(), {0.1});
    CompiledTrainStep step(*net, [&](const Tensors& batch) {
      return loss_of(flat(net->call(c.call(batch))), target);
    }, opt);
    for (int s = 0; s < 3; ++s) step(inputs);
    CHECK(step.traces() == 1);
    CHECK_FALSE(step.running_eagerly());
    CHECK(count_ops(step.function().graph(), OpId::RnnLayer) == layers);
    for (const auto& [k, v] : kiln::test::with_prefix(data, "trained.")) {
      CAPTURE(k);
      check_close(net->state_dict().at(k), v, 1e-4, 1e-5);
    }
  }
}

TEST_CASE("rnn layers in a script: torch's errors with the file, line and column") {
  const char* src = "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.lstm = nn.LSTM(4, 3)\n\n"
                    "    def forward(self, x, h):\n        out, (hn, cn) = self.lstm(x, h)\n        return out\n";
  // the unannotated h is typed by each call's arguments: an (h, c) tuple works, one tensor is torch's error
  auto one = script_source(src, "one_state.py").module("Net");
  CHECK(one->call({randn({2, 3, 4}), IValue::tuple({zeros({1, 3, 3}), zeros({1, 3, 3})})})[0].to_tensor().sizes() == Shape{2, 3, 3});
  check_error([&] { one->call({randn({2, 3, 4}), zeros({1, 3, 3})}); },
              "one_state.py:11:30: error: LSTM: expected hx as (h_0, c_0), got 1 tensors");
  const char* ok = "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
                   "        super().__init__()\n        self.gru = nn.GRU(4, 3)\n\n"
                   "    def forward(self, x):\n        out, h = self.gru(x, None)\n        return out + h.sum()\n";
  auto net = script_source(ok, "gru.py").module("Net");
  check_error([&] { (*net)(randn({2, 3, 5})); }, "GRU: input.size(-1) must be equal to input_size. Expected 4");
  check_error([&] { script_source(std::string(ok).replace(std::string(ok).find("nn.GRU(4, 3)"), 12, "nn.GRU(4, 3, proj_size=1)"), "p.py").module("Net"); },
              "p.py:8:23: error: nn.GRU: proj_size is not supported");
}

TEST_CASE("rnn sweep: layers and cells in twelve configurations equal PyTorch's outputs and gradients") {
  // make_rnn_fixtures.py's SWEEP: each case's configuration, parameters, inputs, outputs and gradients
  std::map<std::string, Tensor> data = load_safetensors(kModels + "data/rnn_sweep.safetensors");
  int cases = 0;
  for (int i = 0; data.count("sweep." + std::to_string(i) + ".config"); ++i, ++cases) {
    auto key = [i](const std::string& k) { return "sweep." + std::to_string(i) + "." + k; };
    std::vector<double> cfg = values(data.at(key("config")));
    CAPTURE(i);
    const int kind = int(cfg[0]);
    const int64_t in = int64_t(cfg[1]), hid = int64_t(cfg[2]), layers = int64_t(cfg[3]);
    const bool bias = cfg[4] != 0, bf = cfg[5] != 0, bidir = cfg[6] != 0;
    const std::string nl = cfg[7] != 0 ? "relu" : "tanh";
    std::shared_ptr<nn::Module> m;
    std::function<Tensors(const Tensor&, const Tensors&)> run;
    if (kind < 3) {
      std::shared_ptr<nn::RNNBase> l;
      if (kind == 0) l = std::make_shared<nn::RNN>(in, hid, layers, nl, bias, bf, 0.0, bidir);
      if (kind == 1) l = std::make_shared<nn::LSTM>(in, hid, layers, bias, bf, 0.0, bidir);
      if (kind == 2) l = std::make_shared<nn::GRU>(in, hid, layers, bias, bf, 0.0, bidir);
      run = [l](const Tensor& x, const Tensors& hx) { return l->forward_with_state(x, hx); };
      m = l;
    } else {
      std::shared_ptr<nn::RNNCellBase> c;
      if (kind == 3) c = std::make_shared<nn::RNNCell>(in, hid, bias, nl);
      if (kind == 4) c = std::make_shared<nn::LSTMCell>(in, hid, bias);
      if (kind == 5) c = std::make_shared<nn::GRUCell>(in, hid, bias);
      run = [c](const Tensor& x, const Tensors& hx) { return c->forward_with_state(x, hx); };
      m = c;
    }
    CAPTURE(m->name());
    m->load_state_dict(kiln::test::with_prefix(data, key("state.")));
    Tensor x = data.at(key("x")).detach().clone().requires_grad_();
    Tensors hx;
    for (int k = 0; data.count(key("hx." + std::to_string(k))); ++k)
      hx.push_back(data.at(key("hx." + std::to_string(k))).detach().clone().requires_grad_());
    Tensors outs = run(x, hx);
    Tensor loss = zeros({});
    for (size_t k = 0; k < outs.size(); ++k) {
      CAPTURE(k);
      REQUIRE(data.count(key("out." + std::to_string(k))));
      check_close(outs[k], data.at(key("out." + std::to_string(k))), 1e-4, 1e-5);
      loss = add(loss, sum(mul(outs[k], data.at(key("w." + std::to_string(k))))));
    }
    CHECK_FALSE(data.count(key("out." + std::to_string(outs.size()))));
    loss.backward();
    check_close(x.grad(), data.at(key("grad.x")), 1e-4, 1e-5);
    for (size_t k = 0; k < hx.size(); ++k) check_close(hx[k].grad(), data.at(key("grad.hx." + std::to_string(k))), 1e-4, 1e-5);
    for (const auto& [name, p] : m->named_parameters()) {
      CAPTURE(name);
      check_close(p.grad(), data.at(key("grad." + name)), 1e-4, 1e-5);
    }
  }
  CHECK(cases == 12);
}
