// torch.nn.utils.rnn (eager/nn/rnn_utils.h) and packed batches through the recurrent layers: the rnn_layer
// row's lengths input under gradcheck, PyTorch 1.13's values and gradients
// (tests/script/models/make_packed_fixtures.py), torch's errors, and a scripted packed-sequence classifier.
#include "core/rnn_mode.h"
#include "eager/autograd/gradcheck.h"
#include "eager/dispatch.h"
#include "eager/nn/recurrent.h"
#include "eager/nn/rnn_utils.h"
#include "jit/compiled_function.h"
#include "script_frontend/script.h"
#include "support.h"
#include "tracer/trace.h"

using namespace kiln;
using namespace kiln::nn::utils::rnn;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::flat;
using kiln::test::values;

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";


int count_ops(const ir::Graph& g, OpId op) {
  int n = 0;
  for (const ir::Node* node : g.block()->nodes())
    if (node->is_op(op)) ++n;
  return n;
}

void check_equal_ints(const Tensor& a, const Tensor& b) {
  REQUIRE(a.defined());
  CHECK(a.sizes() == b.sizes());
  CHECK(values(a) == values(b));
}

}  // namespace

TEST_CASE("rnn_layer with lengths: gradcheck in every mode, both directions, unsorted lengths, outputs zero past them") {
  for (const char* mode : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    const int64_t G = rnn_mode(mode)->gates, S = rnn_mode(mode)->states;
    for (auto [reverse, keep] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      CAPTURE(mode);
      CAPTURE(reverse);
      CAPTURE(keep);  // the backward from the steps the forward kept, or running the forward again
      manual_seed(21);
      Tensors in{randn({3, 3, G * 2}, DType::Float64), mul(randn({G * 2, 2}, DType::Float64), 0.7),
                 randn({G * 2}, DType::Float64), randn({S, 3, 2}, DType::Float64)};
      if (std::string(mode) == "rnn_relu") in[0] = add(in[0], mul(sign(in[0]), 0.5));
      for (Tensor& t : in) t.requires_grad_();
      Tensor lengths = tensor(std::vector<int64_t>{2, 3, 1});
      Attrs a = Attrs().set("mode", std::string(mode)).set("reverse", reverse).set("bias", true).set("lengths", true).set("keep", keep);
      auto run = [&](const Tensors& x) {
        Tensors args = x;
        args.push_back(lengths);
        return dispatch1(OpId::RnnLayer, args, a);
      };
      CHECK_NOTHROW(gradcheck(run, in));
      NoGradGuard no_grad;
      Tensor out = run(in);  // [T+S, N, H]: row 2 (length 1) is zero at steps 1 and 2, row 0 at step 2
      CHECK(values(out.select(0, 2).select(0, 0)) == std::vector<double>{0.0, 0.0});
      CHECK(values(out.select(0, 1).select(0, 2)) == std::vector<double>{0.0, 0.0});
    }
  }
}

TEST_CASE("packed rnn sweep: LSTM, GRU and RNN over packed batches equal PyTorch's outputs and gradients") {
  std::map<std::string, Tensor> data = load_safetensors(kModels + "data/packed_sweep.safetensors");
  int cases = 0;
  for (int i = 0; data.count("sweep." + std::to_string(i) + ".config"); ++i, ++cases) {
    auto key = [i](const std::string& k) { return "sweep." + std::to_string(i) + "." + k; };
    std::vector<double> cfg = values(data.at(key("config")));
    CAPTURE(i);
    const int kind = int(cfg[0]);
    const int64_t in = int64_t(cfg[1]), hid = int64_t(cfg[2]), layers = int64_t(cfg[3]);
    const bool bias = cfg[4] != 0, bf = cfg[5] != 0, bidir = cfg[6] != 0, enforce = cfg[9] != 0;
    std::shared_ptr<nn::RNNBase> m;
    if (kind == 0) m = std::make_shared<nn::RNN>(in, hid, layers, cfg[7] != 0 ? "relu" : "tanh", bias, bf, 0.0, bidir);
    if (kind == 1) m = std::make_shared<nn::LSTM>(in, hid, layers, bias, bf, 0.0, bidir);
    if (kind == 2) m = std::make_shared<nn::GRU>(in, hid, layers, bias, bf, 0.0, bidir);
    CAPTURE(m->name());
    m->load_state_dict(kiln::test::with_prefix(data, key("state.")));
    Tensor x = data.at(key("x")).detach().clone().requires_grad_();
    Tensors hx;
    for (int k = 0; data.count(key("hx." + std::to_string(k))); ++k)
      hx.push_back(data.at(key("hx." + std::to_string(k))).detach().clone().requires_grad_());
    PackedSequence packed = pack_padded_sequence(x, data.at(key("lengths")), bf, enforce);
    check_close(packed.data, data.at(key("packed_x")), 0, 0);
    check_equal_ints(packed.batch_sizes, data.at(key("batch_sizes")));
    CHECK(packed.sorted_indices.defined() == !enforce);
    auto [y, finals] = m->forward_with_state(packed, hx);
    check_close(y.data, data.at(key("out.data")), 1e-4, 1e-5);
    auto [padded, lengths] = pad_packed_sequence(y, bf);
    check_close(padded, data.at(key("out.padded")), 1e-4, 1e-5);
    check_equal_ints(lengths, data.at(key("out.lengths")));
    Tensor loss = sum(mul(padded, data.at(key("w.0"))));
    REQUIRE(finals.size() == (kind == 1 ? 2u : 1u));
    for (size_t k = 0; k < finals.size(); ++k) {
      CAPTURE(k);
      check_close(finals[k], data.at(key("out." + std::to_string(k + 1))), 1e-4, 1e-5);
      loss = add(loss, sum(mul(finals[k], data.at(key("w." + std::to_string(k + 1))))));
    }
    loss.backward();
    check_close(x.grad(), data.at(key("grad.x")), 1e-4, 1e-5);
    for (size_t k = 0; k < hx.size(); ++k) check_close(hx[k].grad(), data.at(key("grad.hx." + std::to_string(k))), 1e-4, 1e-5);
    for (const auto& [name, p] : m->named_parameters()) {
      CAPTURE(name);
      check_close(p.grad(), data.at(key("grad." + name)), 1e-4, 1e-5);
    }
  }
  CHECK(cases == 5);
}

TEST_CASE("packed sequences: pack_sequence, pad_sequence and pad_packed_sequence's padding_value and total_length") {
  std::map<std::string, Tensor> data = load_safetensors(kModels + "data/packed_sweep.safetensors");
  std::vector<Tensor> seqs = {data.at("seq.0"), data.at("seq.1"), data.at("seq.2")};
  PackedSequence p = pack_sequence(seqs, false);
  check_close(p.data, data.at("seq.packed.data"), 0, 0);
  check_equal_ints(p.batch_sizes, data.at("seq.packed.batch_sizes"));
  check_equal_ints(p.sorted_indices, data.at("seq.packed.sorted_indices"));
  check_equal_ints(p.unsorted_indices, data.at("seq.packed.unsorted_indices"));
  check_close(pad_sequence(seqs, true, -1.0), data.at("seq.padded_bf"), 0, 0);
  auto [padded, lengths] = pad_packed_sequence(p, false, 2.5, 6);
  check_close(padded, data.at("seq.unpacked"), 0, 0);
  check_equal_ints(lengths, data.at("seq.unpacked.lengths"));
}

TEST_CASE("packed sequences: torch's errors") {
  Tensor x = randn({3, 2, 4});
  check_error([&] { pack_padded_sequence(x, std::vector<int64_t>{2, 3}); },
              "pack_padded_sequence: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True, "
              "got lengths[1] = 3 after 2");
  check_error([&] { pack_padded_sequence(x, std::vector<int64_t>{3, 0}, false, false); },
              "pack_padded_sequence: length of all samples has to be greater than 0, but found an element in 'lengths' "
              "that is <= 0 (lengths[1] = 0)");
  check_error([&] { pack_padded_sequence(x, std::vector<int64_t>{4, 2}); },
              "pack_padded_sequence: lengths[0] = 4 is greater than the input's 3 steps (dim 0)");
  check_error([&] { pack_padded_sequence(x, std::vector<int64_t>{3, 2, 1}); },
              "pack_padded_sequence: expected `len(lengths)` to be equal to batch_size, but got 3 (batch_size=2)");
  check_error([&] { pack_padded_sequence(x, tensor({2.0, 1.0})); },
              "pack_padded_sequence: expected lengths of an integer dtype, got float32");
  PackedSequence p = pack_padded_sequence(x, std::vector<int64_t>{3, 2});
  check_error([&] { pad_packed_sequence(p, false, 0.0, 2); },
              "pad_packed_sequence: expected total_length to be at least the length of the longest sequence in input, "
              "but got total_length=2 and max sequence length being 3");
  nn::LSTM lstm(5, 3);
  check_error([&] { lstm.forward_with_state(p); }, "LSTM: input.size(-1) must be equal to input_size. Expected 5, got 4");
}

TEST_CASE("packed model file: a scripted packed-sequence classifier equals PyTorch, interpreted and compiled") {
  std::map<std::string, Tensor> data = load_safetensors(kModels + "data/packed_classifier.safetensors");
  auto net = script_file(kModels + "packed_classifier.py").module("PackedClassifier", {IValue(20), IValue(5), IValue(6), IValue(3)});
  net->load_state_dict(kiln::test::with_prefix(data, "state."));
  net->eval();
  std::vector<IValue> in{data.at("input.0"), data.at("input.1")};
  CHECK(count_ops(net->method("forward").graph(), OpId::RnnLayer) == 4);  // 2 layers, both directions
  Function compiled = compile(net->method());
  NoGradGuard no_grad;
  Tensors a = flat(net->call(in)), b = flat(compiled.call(in));
  REQUIRE(a.size() == 3);
  REQUIRE(b.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    check_close(a[i], data.at("output." + std::to_string(i)), 1e-4, 1e-5);
    check_close(b[i], data.at("output." + std::to_string(i)), 1e-4, 1e-5);
  }
  check_error([&] { net->call({data.at("input.0"), tensor(std::vector<int64_t>{7, 5, 3, 2})}); },
              "pack_padded_sequence: a length is greater than the input's steps (dim 1)");
}

TEST_CASE("packed sequences in a script: nn.utils.rnn's names, padding_value, total_length and torch's errors") {
  const char* src =
      "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
      "        super().__init__()\n        self.gru = nn.GRU(2, 3, bidirectional=True)\n\n"
      "    def forward(self, x, lengths):\n"
      "        packed = nn.utils.rnn.pack_padded_sequence(x, lengths)\n"
      "        out, h = self.gru(packed)\n"
      "        y, n = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, padding_value=-1.0, total_length=5)\n"
      "        return y, h, n\n";
  auto net = script_source(src, "packed.py").module("Net");
  nn::GRU gru(2, 3, 1, true, false, 0.0, true);
  gru.load_state_dict(kiln::test::with_prefix(net->state_dict(), "gru."));
  manual_seed(7);
  Tensor x = randn({4, 3, 2}), lengths = tensor(std::vector<int64_t>{4, 2, 1});
  Tensor xs = x.detach().clone().requires_grad_(), xe = x.detach().clone().requires_grad_();
  Tensors got = flat(net->call({xs, lengths}));
  auto [y, finals] = gru.forward_with_state(pack_padded_sequence(xe, lengths));
  auto [want, n] = pad_packed_sequence(y, true, -1.0, 5);
  check_close(got[0], want, 1e-6, 1e-6);
  check_close(got[1], finals[0], 1e-6, 1e-6);
  check_equal_ints(got[2], n);
  // the same gradients for the input and the weights
  Tensor w = randn({3, 5, 6});
  add(sum(mul(got[0], w)), sum(got[1])).backward();
  add(sum(mul(want, w)), sum(finals[0])).backward();
  check_close(xs.grad(), xe.grad(), 1e-5, 1e-6);
  std::map<std::string, Tensor> scripted;
  for (const auto& [name, p] : net->named_parameters()) scripted[name] = p;
  for (const auto& [name, p] : gru.named_parameters()) {
    CAPTURE(name);
    REQUIRE(scripted.count("gru." + name));
    check_close(scripted.at("gru." + name).grad(), p.grad(), 1e-5, 1e-6);
  }
  NoGradGuard no_grad;
  check_error([&] { net->call({x, tensor(std::vector<int64_t>{2, 4, 1})}); },
              "pack_padded_sequence: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True");
  check_error([&] { net->call({x, tensor(std::vector<int64_t>{4, 2, 0})}); },
              "pack_padded_sequence: length of all samples has to be greater than 0");
  check_error([&] { net->call({x, tensor(std::vector<int64_t>{4, 2})}); },
              "pack_padded_sequence: expected `len(lengths)` to be equal to batch_size");
  // sorted_indices / unsorted_indices: None packed with enforce_sorted, else torch's order and its inverse, kept by the
  // layer's output
  auto returning = [&](const std::string& what, bool sorted) {
    std::string s = std::string(src).replace(std::string(src).find("return y, h, n"), 14, "return " + what);
    if (!sorted) s.replace(s.find("(x, lengths)\n"), 13, "(x, lengths, enforce_sorted=False)\n");
    return script_source(s, "indices.py").module("Net");
  };
  std::vector<IValue> none = returning("out.sorted_indices is None and out.unsorted_indices is None", true)->call({x, lengths});
  REQUIRE(none.size() == 1);
  CHECK(none[0].to_bool());
  Tensor unsorted = tensor(std::vector<int64_t>{2, 4, 4});
  PackedSequence eager = pack_padded_sequence(x, unsorted, false, false);
  Tensors idx = flat(returning("out.sorted_indices, out.unsorted_indices", false)->call({x, unsorted}));
  check_equal_ints(idx.at(0), eager.sorted_indices);
  check_equal_ints(idx.at(1), eager.unsorted_indices);
  check_error([&] { returning("out.lengths", true); },
              "PackedSequence.lengths is not available in kiln script (data, batch_sizes, sorted_indices and unsorted_indices are)");
}

TEST_CASE("packed sequences traced and compiled: one rnn_layer node per layer and direction, the same values") {
  manual_seed(9);
  nn::GRU gru(3, 4, 1, true, true, 0.0, true);
  for (Tensor p : gru.parameters()) p.requires_grad_(false);
  Tensor x = randn({3, 5, 3});
  const std::vector<int64_t> lengths{3, 5, 2};  // fixed by the trace, as torch.jit.trace fixes them
  auto run = [&](const Tensors& in) {
    auto [y, finals] = gru.forward_with_state(pack_padded_sequence(in[0], lengths, true, false));
    return Tensors{pad_packed_sequence(y, true).first, finals[0]};
  };
  Function f = trace(run, {x});
  CHECK(count_ops(f.graph(), OpId::RnnLayer) == 2);
  Function compiled = compile(f);
  Tensors want = run({x}), a = f({x}), b = compiled({x});
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    check_close(a[i], want[i], 0, 0);
    check_close(b[i], want[i], 1e-6, 1e-6);
  }
}

TEST_CASE("rnn_layer split over two threads (hidden units per thread) equals one thread, packed or not") {
  const int saved = get_num_threads();
  for (const char* mode : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    const int64_t G = rnn_mode(mode)->gates, S = rnn_mode(mode)->states, H = 64, N = 16;
    for (auto [reverse, packed] : {std::pair{false, false}, {true, true}, {false, true}}) {
      CAPTURE(mode);
      CAPTURE(reverse);
      CAPTURE(packed);
      manual_seed(5);
      Tensors in{randn({4, N, G * H}), mul(randn({G * H, H}), 0.2), randn({G * H}), randn({S, N, H})};
      Tensor weights = randn({4 + S, N, H});
      std::vector<int64_t> len(size_t(N), 4);
      for (int64_t n = 0; n < N; ++n) len[size_t(n)] = 4 - n % 4;  // unsorted, as a batch before packing
      Attrs a = Attrs().set("mode", std::string(mode)).set("reverse", reverse).set("bias", true).set("keep", true);
      if (packed) a.set("lengths", true);
      std::vector<Tensors> results;
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        Tensors x;
        for (const Tensor& t : in) x.push_back(t.detach().requires_grad_());
        Tensors args = x;
        if (packed) args.push_back(tensor(len));
        Tensor out = dispatch1(OpId::RnnLayer, args, a);
        Tensors r{out.detach()};
        for (const Tensor& g : grad({sum(mul(out, weights))}, x)) r.push_back(g);
        results.push_back(r);
        CHECK(get_num_threads() == threads);  // the split's threads ran one each, this one's count is as it was
      }
      set_num_threads(saved);
      for (size_t i = 0; i < results[0].size(); ++i) check_close(results[1][i], results[0][i], 1e-5, 1e-5);
    }
  }
}

TEST_CASE("packed sequences in a script: an LSTM's packed output read through .data and .batch_sizes, with gradients") {
  // tests/script/packed_sequences.py compares .data, .batch_sizes, pad_sequence and pack_sequence with PyTorch
  const char* src =
      "import torch\nimport torch.nn as nn\nfrom torch.nn.utils.rnn import pack_padded_sequence\n\n\n"
      "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lstm = nn.LSTM(2, 3)\n\n"
      "    def forward(self, x, lengths):\n"
      "        out, _ = self.lstm(pack_padded_sequence(x, lengths, enforce_sorted=False))\n"
      "        return out.data, out.batch_sizes\n";
  auto net = script_source(src, "packed_data.py").module("Net");
  nn::LSTM lstm(2, 3);
  lstm.load_state_dict(kiln::test::with_prefix(net->state_dict(), "lstm."));
  manual_seed(8);
  Tensor x = randn({4, 3, 2}), lengths = tensor(std::vector<int64_t>{2, 4, 1});
  Tensor xs = x.detach().clone().requires_grad_(), xe = x.detach().clone().requires_grad_();
  Tensors got = flat(net->call({xs, lengths}));
  PackedSequence want = lstm.forward_with_state(pack_padded_sequence(xe, lengths, false, false)).first;
  check_close(got[0], want.data, 1e-6, 1e-6);
  check_equal_ints(got[1], want.batch_sizes);
  Tensor w = randn(want.data.sizes());
  sum(mul(got[0], w)).backward();
  sum(mul(want.data, w)).backward();
  check_close(xs.grad(), xe.grad(), 1e-5, 1e-6);
}
