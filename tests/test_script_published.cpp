// script(): model files written the way published code is (samples/gpt.py after nanoGPT, train_gpt's model,
// vae.py and dcgan.py after PyTorch's examples), built from the file as written, loaded with the
// state_dict tests/script/models/make_published_fixtures.py saved, and compared with eager PyTorch's
// outputs (torch.jit.script takes none of these files as published) on the interpreter and through compile().
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "jit/train_step.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

const std::string kModels = std::string(KILN_TEST_DATA) + "/../script/models/";

std::map<std::string, Tensor> fixture(const std::string& name) {
  return load_safetensors(kModels + "data/" + name + ".safetensors");
}

const Tensor& at(const std::map<std::string, Tensor>& data, const std::string& key) {
  auto it = data.find(key);
  REQUIRE_MESSAGE(it != data.end(), "fixture lacks " << key);
  return it->second;
}

// A method's results: the elements of the tuple it returns.
std::vector<IValue> results(const std::vector<IValue>& out) {
  if (out.size() == 1 && out[0].is_tuple()) return out[0].elements();
  return out;
}

void check_state(const nn::Module& net, const std::map<std::string, Tensor>& want) {
  std::map<std::string, Tensor> mine = net.state_dict();
  REQUIRE(mine.size() == want.size());
  for (const auto& [k, v] : want) {
    INFO(k);
    REQUIRE(mine.count(k));
    check_close(mine.at(k), v, 1e-4, 1e-5);
  }
}

// torch 1.13 has no F.scaled_dot_product_attention, so its GPT keeps the causal-mask buffers (`attn.bias`);
// kiln has it and takes nanoGPT's flash path, which keeps none: torch's state without them, as nanoGPT's
// from_pretrained drops them.
std::map<std::string, Tensor> without_masks(std::map<std::string, Tensor> state) {
  std::erase_if(state, [](const auto& kv) { return kv.first.ends_with(".attn.bias"); });
  return state;
}

}  // namespace

TEST_CASE("script published: nanoGPT's GPT (config dataclass, ModuleDict, tied weights, causal attention) matches PyTorch") {
  ScriptFile file = script_file(std::string(KILN_TEST_DATA) + "/../../samples/gpt.py");
  auto net = file.build("GPT", {file.value("GPTConfig(block_size=8, vocab_size=16, n_layer=2, n_head=2, n_embd=8, "
                                           "dropout=0.0, bias=True)")});
  std::map<std::string, Tensor> data = fixture("gpt");
  net->load_state_dict(without_masks(test::with_prefix(data, "state.")));  // both names of the tied matrix
  // The token embedding and the head are one parameter, listed once under its first name, as torch's.
  std::vector<std::string> names;
  for (const auto& [n, t] : net->named_parameters()) names.push_back(n);
  CHECK(std::count(names.begin(), names.end(), "transformer.wte.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "lm_head.weight") == 0);
  CHECK(names.size() == 28);  // torch's len(list(model.named_parameters()))

  const Tensor& idx = at(data, "input.0");
  const Tensor& targets = at(data, "input.1");
  net->eval();
  {
    NoGradGuard no_grad;
    Function compiled = compile(net->method());
    for (bool jit : {false, true}) {
      INFO("compiled: " << jit);
      auto call = [&](const std::vector<IValue>& in) { return results(jit ? compiled.call(in) : net->call(in)); };
      std::vector<IValue> r = call({idx, IValue()});  // no targets: the last position's logits, loss None
      check_close(r[0].to_tensor(), at(data, "output.0"), 1e-4, 1e-5);
      CHECK(r[1].is_none());
      r = call({idx, targets});  // every position's logits and the loss, -1 targets ignored
      check_close(r[0].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);
      check_close(r[1].to_tensor(), at(data, "output.2"), 1e-4, 1e-5);
    }
  }
  // Three SGD steps on the model's own loss: the tied matrix gets the gradient of both its uses.
  net->train();
  optim::SGD opt(net->parameters(), {0.1});
  for (int step = 0; step < 3; ++step) {
    Tensor loss = results(net->call({idx, targets}))[1].to_tensor();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  check_state(*net, without_masks(test::with_prefix(data, "trained.")));

  // bias=False: the Linears have none and LayerNorm's self.bias is None, passed to F.layer_norm as it is.
  auto nobias = file.build("GPT", {file.value("GPTConfig(block_size=8, vocab_size=16, n_layer=1, n_head=2, n_embd=8, "
                                              "dropout=0.1, bias=False)")});
  nobias->load_state_dict(without_masks(test::with_prefix(data, "nobias_state.")));
  nobias->eval();
  NoGradGuard no_grad;
  check_close(results(nobias->call({idx, targets}))[0].to_tensor(), at(data, "nobias_output.0"), 1e-4, 1e-5);
}

TEST_CASE("script published: the examples' VAE matches PyTorch; randn_like draws eps") {
  auto net = script_file(kModels + "vae.py").module("VAE", {int64_t(16), int64_t(12), int64_t(4)});
  std::map<std::string, Tensor> data = fixture("vae");
  net->load_state_dict(test::with_prefix(data, "state."));
  net->eval();
  NoGradGuard no_grad;
  const Tensor& x = at(data, "input.0");
  std::vector<IValue> r = results(net->call({x}));
  REQUIRE(r.size() == 3);
  check_close(r[1].to_tensor(), at(data, "output.0"), 1e-4, 1e-5);  // mu
  check_close(r[2].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);  // logvar
  std::vector<IValue> c = results(compile(net->method()).call({x}));
  check_close(c[1].to_tensor(), at(data, "output.0"), 1e-4, 1e-5);
  check_close(c[2].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);
  // The reconstruction decodes mu + eps * std with a fresh eps: a sigmoid's values, not decode(mu)'s.
  Tensor recon = r[0].to_tensor();
  CHECK(recon.sizes() == Shape{3, 16});
  std::vector<double> v = test::values(recon);
  CHECK(std::all_of(v.begin(), v.end(), [](double e) { return e > 0 && e < 1; }));
  CHECK(test::values(results(net->call({x}))[0].to_tensor()) != v);
  check_close(results(net->call({at(data, "output.0")}, "decode"))[0].to_tensor(), at(data, "output.2"), 1e-4, 1e-5);
}

TEST_CASE("script published: the examples' DCGAN Generator and Discriminator (weights_init, data_parallel with ngpu=2) match PyTorch") {
  ScriptFile file = script_file(kModels + "dcgan.py");
  // ngpu=1: `input.is_cuda and self.ngpu > 1` is False when lowering, so the data_parallel branch is not lowered
  auto g = file.module("Generator", {int64_t(1)}, {{"nz", int64_t(8)}, {"ngf", int64_t(4)}, {"nc", int64_t(3)}});
  auto d = file.module("Discriminator", {int64_t(1)}, {{"ndf", int64_t(4)}, {"nc", int64_t(3)}});
  std::map<std::string, Tensor> data = fixture("dcgan");
  g->load_state_dict(test::with_prefix(data, "state_g."));
  d->load_state_dict(test::with_prefix(data, "state_d."));
  g->eval();
  d->eval();
  const Tensor& z = at(data, "input.0");
  {
    NoGradGuard no_grad;
    Tensor fake = (*g)(z);
    check_close(fake, at(data, "output.0"), 1e-4, 1e-5);
    check_close(compile(g->method()).call({z})[0].to_tensor(), at(data, "output.0"), 1e-4, 1e-5);
    check_close((*d)(at(data, "output.0")), at(data, "output.1"), 1e-4, 1e-5);
    check_close(compile(d->method()).call({at(data, "output.0")})[0].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);
    // Training mode: batch statistics, and the running ones updated as torch's.
    g->train();
    check_close((*g)(z), at(data, "train_output.0"), 1e-4, 1e-5);
  }
  check_state(*g, test::with_prefix(data, "trained_g."));
  // With two GPUs the branch depends on the tensor (x.is_cuda, read when the graph runs), so both are lowered; the
  // data_parallel one is the module called on the input, the same maths on one device.
  auto g2 = file.module("Generator", {int64_t(2)}, {{"nz", int64_t(8)}, {"ngf", int64_t(4)}, {"nc", int64_t(3)}});
  auto d2 = file.module("Discriminator", {int64_t(2)}, {{"ndf", int64_t(4)}, {"nc", int64_t(3)}});
  g2->load_state_dict(test::with_prefix(data, "state_g."));
  d2->load_state_dict(test::with_prefix(data, "state_d."));
  g2->eval();
  d2->eval();
  NoGradGuard no_grad;
  check_close((*g2)(z), at(data, "output.0"), 1e-4, 1e-5);
  check_close((*d2)(at(data, "output.0")), at(data, "output.1"), 1e-4, 1e-5);
}

TEST_CASE("script published: three iterations of the examples' DCGAN training loop match PyTorch, eager and compiled") {
  ScriptFile file = script_file(kModels + "dcgan.py");
  std::map<std::string, Tensor> data = fixture("dcgan");
  for (bool compiled : {false, true}) {
    CAPTURE(compiled);
    auto g = file.module("Generator", {int64_t(1)}, {{"nz", int64_t(8)}, {"ngf", int64_t(4)}, {"nc", int64_t(3)}});
    auto d = file.module("Discriminator", {int64_t(1)}, {{"ndf", int64_t(4)}, {"nc", int64_t(3)}});
    g->load_state_dict(test::with_prefix(data, "state_g."));
    d->load_state_dict(test::with_prefix(data, "state_d."));
    g->train();
    d->train();
    optim::Adam opt_d(d->parameters(), {2e-4, 0.5, 0.999});
    optim::Adam opt_g(g->parameters(), {2e-4, 0.5, 0.999});
    // compiled: the forwards through compile() (recorded by autograd like any op), the loop as written
    Function gf = compile(g->method()), df = compile(d->method());
    auto G = [&](const Tensor& x) { return compiled ? gf.call({x})[0].to_tensor() : (*g)(x); };
    auto D = [&](const Tensor& x) { return compiled ? df.call({x})[0].to_tensor() : (*d)(x); };
    for (int i = 0; i < 3; ++i) {
      const Tensor& real = at(data, "gan_real." + std::to_string(i));
      const Tensor& noise = at(data, "gan_noise." + std::to_string(i));
      opt_d.zero_grad();
      Tensor err_real = binary_cross_entropy(D(real), ones({2}));
      err_real.backward();
      Tensor fake = G(noise);
      Tensor err_fake = binary_cross_entropy(D(fake.detach()), zeros({2}));
      err_fake.backward();
      opt_d.step();
      opt_g.zero_grad();
      Tensor err_g = binary_cross_entropy(D(fake), ones({2}));
      err_g.backward();
      opt_g.step();
      check_close(stack({err_real, err_fake, err_g}).detach(), at(data, "gan_loss." + std::to_string(i)), 1e-4, 1e-5);
    }
    check_state(*g, test::with_prefix(data, "gan_g."));
    check_state(*d, test::with_prefix(data, "gan_d."));
  }
}

TEST_CASE("script published: lambdas kept on self, in a dict and in a list (lambda_gan.py) match PyTorch, compiled and over 3 SGD steps") {
  ScriptFile file = script_file(kModels + "lambda_gan.py");
  std::map<std::string, Tensor> data = fixture("lambda_gan");
  auto g = file.module("Generator", {});
  auto d = file.module("Discriminator", {});
  auto logit = file.module("Discriminator", {}, {{"score", std::string("logit")}});
  auto plain = file.module("Generator", {}, {{"bn", false}, {"out", std::string("hard")}});
  g->load_state_dict(test::with_prefix(data, "state_g."));
  d->load_state_dict(test::with_prefix(data, "state_d."));
  logit->load_state_dict(test::with_prefix(data, "state_d."));
  plain->load_state_dict(test::with_prefix(data, "state_plain."));
  for (auto* m : {g.get(), d.get(), logit.get(), plain.get()}) m->eval();
  const Tensor& z = at(data, "input.0");
  {
    NoGradGuard no_grad;
    const Tensor& fake = at(data, "output.0");
    check_close((*g)(z), fake, 1e-4, 1e-5);
    check_close(compile(g->method()).call({z})[0].to_tensor(), fake, 1e-4, 1e-5);
    check_close((*d)(fake), at(data, "output.1"), 1e-4, 1e-5);
    check_close(compile(d->method()).call({fake})[0].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);
    check_close((*logit)(fake), at(data, "output.2"), 1e-4, 1e-5);
    check_close((*plain)(z), at(data, "output.3"), 1e-4, 1e-5);
  }
  g->train();
  d->train();
  std::vector<Tensor> params = g->parameters();
  for (const Tensor& p : d->parameters()) params.push_back(p);
  optim::SGD opt(params, {0.05});
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    Tensor loss = binary_cross_entropy((*d)((*g)(z)), ones({2}));
    loss.backward();
    opt.step();
    check_close(loss.detach(), at(data, "loss." + std::to_string(i)), 1e-4, 1e-5);
  }
  check_state(*g, test::with_prefix(data, "trained_g."));
  check_state(*d, test::with_prefix(data, "trained_d."));
}

TEST_CASE("script published: a U-Net (up path by transposed conv or bilinear upsampling, padded to the skip's size) matches PyTorch forward, compiled and over 3 SGD steps") {
  ScriptFile file = script_file(kModels + "unet.py");
  // bilinear: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True) on maps whose size the graph
  // reads when it runs (the source indices and weights computed there)
  for (bool bilinear : {false, true})
  for (bool compiled : {false, true}) {
    CAPTURE(bilinear);
    CAPTURE(compiled);
    std::map<std::string, Tensor> data = fixture(bilinear ? "unet_bilinear" : "unet");
    const Tensor &x = at(data, "input.0"), &y = at(data, "target.0");
    auto net = file.module("UNet", {int64_t(3), int64_t(4)}, {{"base", int64_t(8)}, {"bilinear", bilinear}});
    net->load_state_dict(test::with_prefix(data, "state."));
    net->eval();
    {
      NoGradGuard no_grad;
      Tensor out = compiled ? compile(net->method()).call({x})[0].to_tensor() : (*net)(x);
      check_close(out, at(data, "output.0"), 1e-4, 1e-5);  // 17x19: both up steps pad by one
    }
    net->train();
    optim::SGD opt(net->parameters(), {0.05});
    auto loss_of = [&](const Tensors& b) { return cross_entropy((*net)(b[0]), b[1]); };
    std::optional<CompiledTrainStep> step;
    if (compiled) step.emplace(*net, loss_of, opt);
    for (int i = 0; i < 3; ++i) {
      Tensor loss;
      if (compiled) {
        loss = (*step)({x, y});
      } else {
        loss = loss_of({x, y});
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
      check_close(loss.detach(), at(data, "loss." + std::to_string(i)), 1e-4, 1e-5);
    }
    check_state(*net, test::with_prefix(data, "trained."));
  }
}

TEST_CASE("script published: word_language_model's RNNModel (getattr(nn, rnn_type), tied decoder) matches PyTorch") {
  ScriptFile file = script_file(kModels + "word_lm.py");
  auto net = file.module("RNNModel", {std::string("GRU"), int64_t(20), int64_t(8), int64_t(8), int64_t(2), 0.2},
                         {{"tie_weights", true}});
  std::map<std::string, Tensor> data = fixture("word_lm");
  net->load_state_dict(test::with_prefix(data, "state."));
  CHECK(net->parameters().size() == 10);  // the decoder's weight is the encoder's
  net->eval();
  NoGradGuard no_grad;
  std::vector<IValue> r = results(net->call({at(data, "input.0"), at(data, "input.1")}));
  check_close(r[0].to_tensor(), at(data, "output.0"), 1e-4, 1e-5);
  check_close(r[1].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);
  std::vector<IValue> c = results(compile(net->method()).call({at(data, "input.0"), at(data, "input.1")}));
  check_close(c[0].to_tensor(), at(data, "output.0"), 1e-4, 1e-5);
  check_close(c[1].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);
}

TEST_CASE("script published: word_language_model's LSTM (an unannotated (h, c) state) and RNN_TANH / RNN_RELU (try in __init__) match PyTorch") {
  ScriptFile file = script_file(kModels + "word_lm.py");
  std::map<std::string, Tensor> data = fixture("word_lm");
  const Tensor& tokens = at(data, "input.0");
  NoGradGuard no_grad;
  // `hidden` is unannotated and given an (h, c) tuple: forward is typed by the call's arguments
  auto lstm = file.module("RNNModel", {std::string("LSTM"), int64_t(20), int64_t(8), int64_t(6), int64_t(2), 0.2});
  lstm->load_state_dict(test::with_prefix(data, "lstm_state."));
  lstm->eval();
  IValue state = IValue::tuple({at(data, "lstm_input.0"), at(data, "lstm_input.1")});
  std::vector<IValue> r = results(lstm->call({tokens, state}));
  REQUIRE(r.size() == 2);
  check_close(r[0].to_tensor(), at(data, "lstm_output.0"), 1e-4, 1e-5);
  std::vector<IValue> hc = r[1].elements();
  REQUIRE(hc.size() == 2);
  check_close(hc[0].to_tensor(), at(data, "lstm_output.1"), 1e-4, 1e-5);
  check_close(hc[1].to_tensor(), at(data, "lstm_output.2"), 1e-4, 1e-5);
  // init_hidden(bsz) gives the zero (h, c) forward takes, sized (nlayers, bsz, nhid)
  std::vector<IValue> zero = results(lstm->call({int64_t(3)}, "init_hidden"));
  REQUIRE(zero.size() == 2);
  CHECK(zero[0].to_tensor().sizes() == Shape{2, 3, 6});
  check_close(zero[1].to_tensor(), zeros({2, 3, 6}), 0, 0);
  CHECK(results(lstm->call({tokens, IValue::tuple(zero)}))[0].to_tensor().sizes() == Shape{15, 20});
  // compile(net->method()) of the forward its calls typed by their arguments: the graph call() runs, compiled
  Function compiled = compile(lstm->method());
  std::vector<IValue> c = results(compiled.call({tokens, state}));
  REQUIRE(c.size() == 2);
  check_close(c[0].to_tensor(), at(data, "lstm_output.0"), 1e-4, 1e-5);
  check_close(c[1].elements().at(1).to_tensor(), at(data, "lstm_output.2"), 1e-4, 1e-5);
  // never called: method() types `hidden` as a Tensor, and the error says how to type it
  auto fresh = file.module("RNNModel", {std::string("LSTM"), int64_t(20), int64_t(8), int64_t(6), int64_t(2), 0.2});
  test::check_error([&] { fresh->method(); }, "call it once with its arguments, and method() then gives the graph typed by them");

  for (std::string kind : {"RNN_TANH", "RNN_RELU"}) {
    INFO(kind);
    std::string key = kind == "RNN_TANH" ? "rnn_tanh" : "rnn_relu";
    auto net = file.module("RNNModel", {kind, int64_t(20), int64_t(8), int64_t(6), int64_t(1), 0.0});
    net->load_state_dict(test::with_prefix(data, key + "_state."));
    net->eval();
    Tensor h0 = at(data, "lstm_input.0").slice(0, 0, 1);
    std::vector<IValue> out = results(net->call({tokens, h0}));
    check_close(out[0].to_tensor(), at(data, key + "_output.0"), 1e-4, 1e-5);
    check_close(out[1].to_tensor(), at(data, key + "_output.1"), 1e-4, 1e-5);
  }
  // An unknown type: the dict lookup's KeyError is caught and the ValueError raised from it is the error.
  test::check_error([&] { file.module("RNNModel", {std::string("RNN_GELU"), int64_t(20), int64_t(8), int64_t(8), int64_t(2)}); },
                    "word_lm.py:23:17: error: ValueError: An invalid option for `--model` was supplied,");
}

TEST_CASE("script published: word_language_model's LSTM and GRU train compiled as a whole from init_hidden's state, as PyTorch") {
  // compile(forward) of the scripted model, its parameters requiring grad, and a compiled step: neither takes the
  // interpreter (the LSTM's input and state checks are decided by the call's shapes, its (h, c) argument and
  // result are tuples), each recurrent layer one rnn_layer node, and three SGD steps equal to eager's and PyTorch's
  ScriptFile file = script_file(kModels + "word_lm.py");
  std::map<std::string, Tensor> data = fixture("word_lm");
  const Tensor& tokens = at(data, "input.0");
  auto rnn_layers = [](const ir::Graph& g) {
    int n = 0;
    for (const ir::Node* node : g.block()->nodes()) n += node->is_op(OpId::RnnLayer);
    return n;
  };
  for (std::string kind : {"LSTM", "GRU"}) {
    INFO(kind);
    const std::string key = kind == "LSTM" ? "train_lstm" : "train_gru";
    const Tensor& target = at(data, key + "_target");
    auto make = [&] {
      auto net = file.module("RNNModel", {kind, int64_t(20), int64_t(8), int64_t(6), int64_t(2), 0.0});
      net->load_state_dict(test::with_prefix(data, key + "_state."));
      return net;
    };
    // the zero state the example's train() starts each batch from: (h, c) for the LSTM, h for the GRU
    auto hidden = [](ScriptedModule& m) { return m.call({int64_t(3)}, "init_hidden").at(0); };
    auto eager = make(), net = make();
    optim::SGD eager_opt(eager->parameters(), {0.1}), opt(net->parameters(), {0.1});
    net->call({tokens, hidden(*net)});  // types forward by its arguments
    Function compiled = compile(net->method());
    for (int i = 0; i < 3; ++i) {
      INFO("step " << i);
      Tensor want = nll_loss(results(eager->call({tokens, hidden(*eager)}))[0].to_tensor(), target);
      eager_opt.zero_grad();
      want.backward();
      eager_opt.step();
      Tensor got = nll_loss(results(compiled.call({tokens, hidden(*net)}))[0].to_tensor(), target);
      opt.zero_grad();
      got.backward();
      opt.step();
      check_close(got.detach(), want.detach(), 1e-6, 1e-6);
      check_close(got.detach(), at(data, key + "_loss." + std::to_string(i)), 1e-4, 1e-5);
    }
    check_state(*net, test::with_prefix(data, key + "_trained."));
    check_state(*eager, test::with_prefix(data, key + "_trained."));
    jit::CacheStats stats = compile_stats(compiled);
    CHECK(stats.eager_calls == 0);
    CHECK(stats.train_compiles == 1);
    std::shared_ptr<const ir::Graph> forward = compiled_graph(compiled, {tokens, hidden(*net)});
    CHECK(rnn_layers(*forward) == 2);
    for (const ir::Node* n : forward->block()->nodes()) CHECK((n->prim() != ir::Prim::If && n->prim() != ir::Prim::Loop));

    // the same steps as a CompiledTrainStep over the scripted model
    auto stepped = make();
    optim::SGD step_opt(stepped->parameters(), {0.1});
    CompiledTrainStep step(*stepped, [&](const Tensors& b) {
      return nll_loss(results(stepped->call({b[0], hidden(*stepped)}))[0].to_tensor(), b[1]);
    }, step_opt);
    for (int i = 0; i < 3; ++i) check_close(step({tokens, target}), at(data, key + "_loss." + std::to_string(i)), 1e-4, 1e-5);
    CHECK(step.traces() == 1);
    CHECK_FALSE(step.running_eagerly());
    CHECK(compile_stats(step.function()).eager_calls == 0);
    CHECK(rnn_layers(step.function().graph()) == 2);
    check_state(*stepped, test::with_prefix(data, key + "_trained."));
  }
}

TEST_CASE("script published: row-wise stochastic depth in training mode draws noise in the input's dtype, read when the graph runs") {
  // torchvision's stochastic_depth() draws its noise with torch.empty(size, dtype=input.dtype) and bernoulli_(p);
  // a graph serves float32 and float64 inputs, and eval mode returns the input
  const char* src = R"(
from typing import Tuple

import torch
import torch.nn as nn


class RowDrop(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x) -> Tuple[torch.Tensor, bool, bool]:
        if not self.training:
            return x, x.dtype == torch.float64, x.is_cuda
        keep = torch.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device)
        keep.bernoulli_(1.0 - self.p)
        keep.div_(1.0 - self.p)
        return x * keep, x.dtype == torch.float64, x.is_cuda
)";
  auto net = script_source(src, "row_drop.py").module("RowDrop", {0.5});
  manual_seed(3);
  for (DType dt : {DType::Float64, DType::Float32}) {
    Tensor x = randn({200, 3}, TensorOptions(dt)).abs() + 1.0;
    std::vector<IValue> r = results(net->call({x}));
    REQUIRE(r.size() == 3);
    Tensor y = r[0].to_tensor();
    CHECK(y.dtype() == dt);
    CHECK(r[1].to_bool() == (dt == DType::Float64));
    CHECK_FALSE(r[2].to_bool());
    // each row is dropped (zeros) or kept and scaled by 1 / (1 - p)
    std::vector<double> xs = test::values(x), ys = test::values(y);
    int kept = 0;
    for (size_t i = 0; i < 200; ++i) {
      bool zero = ys[3 * i] == 0 && ys[3 * i + 1] == 0 && ys[3 * i + 2] == 0;
      bool scaled = std::abs(ys[3 * i] - 2 * xs[3 * i]) < 1e-5 && std::abs(ys[3 * i + 2] - 2 * xs[3 * i + 2]) < 1e-5;
      CHECK((zero || scaled));
      kept += scaled;
    }
    CHECK(kept > 60);
    CHECK(kept < 140);
  }
  net->eval();
  Tensor x = randn({4, 3});
  check_close(results(net->call({x}))[0].to_tensor(), x, 0, 0);
}

TEST_CASE("script published: torchvision's StochasticDepth in training mode behaves as PyTorch's (p=0, p=1, row and batch draws)") {
  // torchvision/ops/stochastic_depth.py as python3-torchvision installs it (convnext, efficientnet and swin use it).
  // The draws differ from torch's, so what is checked is what torch guarantees: p=0 returns the input, p=1 zeros
  // (noise bernoulli_(0) and no division), "row" keeps whole rows scaled by 1 / (1 - p) about 1 - p of the time,
  // "batch" keeps or drops the whole input, the gradient is the noise, eval returns the input, and bad arguments
  // raise torch's ValueErrors.
  ScriptFile file = script_file("/usr/lib/python3/dist-packages/torchvision/ops/stochastic_depth.py");
  manual_seed(5);
  Tensor x = randn({400, 3}).abs() + 1.0;
  check_close(file.module("StochasticDepth", {0.0, std::string("row")})->forward(x), x, 0, 0);
  check_close(file.module("StochasticDepth", {1.0, std::string("batch")})->forward(x), zeros({400, 3}), 0, 0);
  auto row = file.module("StochasticDepth", {0.3, std::string("row")});
  Tensor xr = x.detach().clone().requires_grad_();
  Tensor y = row->forward(xr);
  sum(y).backward();
  std::vector<double> xs = test::values(x), ys = test::values(y), gs = test::values(xr.grad());
  int kept = 0;
  for (size_t i = 0; i < 400; ++i) {
    bool zero = ys[3 * i] == 0 && ys[3 * i + 1] == 0 && ys[3 * i + 2] == 0 && gs[3 * i] == 0 && gs[3 * i + 2] == 0;
    bool scaled = std::abs(ys[3 * i] - xs[3 * i] / 0.7) < 1e-5 && std::abs(ys[3 * i + 2] - xs[3 * i + 2] / 0.7) < 1e-5 &&
                  std::abs(gs[3 * i + 1] - 1 / 0.7) < 1e-5;
    CHECK((zero || scaled));
    kept += scaled;
  }
  CHECK(kept > 243);  // 280 expected, 4 standard deviations either side
  CHECK(kept < 317);
  auto batch = file.module("StochasticDepth", {0.3, std::string("batch")});
  Tensor small = x.slice(0, 0, 4);
  int whole = 0;
  for (int k = 0; k < 100; ++k) {
    std::vector<double> v = test::values(batch->forward(small)), s = test::values(small);
    bool none = std::all_of(v.begin(), v.end(), [](double e) { return e == 0; });
    bool all = true;
    for (size_t i = 0; i < v.size(); ++i) all = all && std::abs(v[i] - s[i] / 0.7) < 1e-5;
    CHECK((none || all));
    whole += all;
  }
  CHECK(whole > 51);  // 70 expected, 4 standard deviations either side
  CHECK(whole < 89);
  row->eval();
  check_close(row->forward(x), x, 0, 0);
  test::check_error([&] { file.module("StochasticDepth", {1.5, std::string("row")})->forward(x); },
                    "ValueError: drop probability has to be between 0 and 1, but got 1.5");
  test::check_error([&] { file.module("StochasticDepth", {0.5, std::string("col")})->forward(x); },
                    "ValueError: mode has to be either 'batch' or 'row', but got col");
}

TEST_CASE("script published: torchvision's weight enums given as strings resolve as StrEnumMeta.from_str does, or raise torch's errors") {
  // The evaluator runs what the builders run: WeightsEnum.verify's `type(obj) is str` and `obj.replace(...)`, the
  // metaclass's from_str (`self[member]`, KeyError turned into ValueError), `DEFAULT = IMAGENET1K_V1`, and the
  // members' `{**_COMMON_META, ...}`. A resolved member then needs a download, which kiln refuses by name.
  // a name that is no member fails in verify, before any model is built; twice from one file, since a second
  // build once followed a base class that the first build's reading had freed
  ScriptFile resnet = script_file("/usr/lib/python3/dist-packages/torchvision/models/resnet.py");
  for (int k = 0; k < 2; ++k)
    test::check_error([&] { resnet.build("resnet18", {}, {{"weights", ScriptValue(std::string("NOPE"))}}); },
                      "_utils.py:16:13: error: ValueError: Unknown value 'NOPE' for ResNet18_Weights.");
  // a member by its alias (DEFAULT = IMAGENET1K_V1): resolved, its metadata read, then the download refused
  // (squeezenet, the smallest model a builder makes with the weights' 1000 classes)
  ScriptFile squeeze = script_file("/usr/lib/python3/dist-packages/torchvision/models/squeezenet.py");
  test::check_error([&] { squeeze.build("squeezenet1_0", {}, {{"weights", ScriptValue(std::string("DEFAULT"))}}); },
                    "squeezenet.py:112:39: error: Weights.get_state_dict() downloads pretrained weights (torchvision's "
                    "WeightsEnum), which kiln script does not do");
  // the same machinery in a file of one's own: the member's value is read, num_classes from its metadata
  const char* src = R"(
import enum

import torch.nn as nn


class Meta(enum.EnumMeta):
    def from_str(self, member):
        try:
            return self[member]
        except KeyError:
            raise ValueError(f"Unknown value '{member}' for {self.__name__}.") from None


class Choice(enum.Enum, metaclass=Meta):
    pass


BASE = {"a": 1, "b": 2}


class Sizes(Choice):
    SMALL = {**BASE, "b": 3, "width": 4}
    DEFAULT = SMALL


class Net(nn.Module):
    def __init__(self, size):
        super().__init__()
        if type(size) is str:
            size = Sizes.from_str(size.replace(Sizes.__name__ + ".", ""))
        self.width = size["width"] + size["a"] + size["b"]

    def forward(self, x):
        return x * self.width
)";
  ScriptFile file = script_source(src, "sizes.py");
  Tensor x = ones({2});
  for (std::string name : {"DEFAULT", "Sizes.SMALL"}) {
    INFO(name);
    check_close(file.module("Net", {name})->forward(x), full({2}, 8.0), 0, 0);
  }
  test::check_error([&] { file.module("Net", {std::string("LARGE")}); }, "ValueError: Unknown value 'LARGE' for Sizes.");
}

TEST_CASE("script published: a GPT in minGPT's manner (a config node filled through __dict__, a lambda over a local, apply and named_parameters init) matches PyTorch, compiled and over 3 SGD steps") {
  ScriptFile file = script_file(kModels + "cfg_gpt.py");
  auto net = file.build("CharGPT", {file.value("Node(width=16, heads=2, layers=2, drop=0.0, vocab=11, context=8)")});
  std::map<std::string, Tensor> data = fixture("cfg_gpt");
  std::map<std::string, Tensor> state = test::with_prefix(data, "state.");
  CHECK(net->state_dict().size() == state.size());  // torch's keys, the causal buffers among them
  net->load_state_dict(state);
  const Tensor &idx = at(data, "input.0"), &targets = at(data, "input.1");
  net->eval();
  {
    NoGradGuard no_grad;
    Function compiled = compile(net->method());
    for (bool jit : {false, true}) {
      INFO("compiled: " << jit);
      std::vector<IValue> r = results(jit ? compiled.call({idx, targets}) : net->call({idx, targets}));
      check_close(r[0].to_tensor(), at(data, "output.0"), 1e-4, 1e-5);
      check_close(r[1].to_tensor(), at(data, "output.1"), 1e-4, 1e-5);
    }
  }
  net->train();
  optim::SGD opt(net->parameters(), {0.1});
  for (int step = 0; step < 3; ++step) {
    Tensor loss = results(net->call({idx, targets}))[1].to_tensor();
    check_close(loss.detach(), at(data, "loss." + std::to_string(step)), 1e-4, 1e-5);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  check_state(*net, test::with_prefix(data, "trained."));
}
