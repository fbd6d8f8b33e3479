// nn modules, state_dict and optimizers; the optimizer trajectories are PyTorch 1.13's on the same
// deterministic weights (values pasted from tests/data/torch_optim.py's output).
#include <cstdio>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

Tensor det(const Shape& shape, double seed) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::sin(double(i) * 0.37 + seed) * 0.5;
  return t;
}

std::shared_ptr<nn::Sequential> small_mlp() {
  auto l0 = std::make_shared<nn::Linear>(4, 5), l2 = std::make_shared<nn::Linear>(5, 3);
  auto m = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{l0, std::make_shared<nn::Tanh>(), l2});
  m->load_state_dict({{"0.weight", det({5, 4}, 1)}, {"0.bias", det({5}, 2)}, {"2.weight", det({3, 5}, 3)}, {"2.bias", det({3}, 4)}});
  return m;
}

}  // namespace

TEST_CASE("nn: state_dict names follow torch") {
  auto m = small_mlp();
  auto sd = m->state_dict();
  std::vector<std::string> names;
  for (auto& [n, t] : sd) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.bias", "0.weight", "2.bias", "2.weight"});
  nn::BatchNorm2d bn(3);
  auto bsd = bn.state_dict();
  CHECK(bsd.count("running_mean") == 1);
  CHECK(bsd.count("running_var") == 1);
  CHECK(bsd.count("num_batches_tracked") == 1);
  check_error([&] { m->load_state_dict({{"0.weight", zeros({5, 4})}}); }, "load_state_dict: missing key");
  check_error([&] { m->load_state_dict({{"0.weight", zeros({4, 4})}}, false); }, "size mismatch for '0.weight'");
}

TEST_CASE("nn: ModuleList holds modules under torch's names, indexes and iterates as torch, has no forward") {
  auto l0 = std::make_shared<nn::Linear>(2, 3), l2 = std::make_shared<nn::Linear>(3, 1);
  nn::ModuleList list({l0, std::make_shared<nn::ReLU>()});
  list.append(l2);
  CHECK(list.size() == 3);
  std::vector<std::string> names;
  for (auto& [n, t] : list.state_dict()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.bias", "0.weight", "2.bias", "2.weight"});
  CHECK(list.parameters().size() == 4);
  CHECK(&list[-1] == l2.get());
  CHECK(&list[0] == l0.get());
  CHECK(list.ptr(-3) == l0);
  std::vector<std::string> kinds;
  for (const auto& m : list) kinds.push_back(m->name());
  CHECK(kinds == std::vector<std::string>{"Linear", "ReLU", "Linear"});
  // the modules called one by one, as a torch model's forward does over its list
  Tensor h = randn({4, 2});
  for (const auto& m : list) h = (*m)(h);
  CHECK(h.sizes() == Shape{4, 1});
  nn::ModuleList more;
  more.push_back(l0);
  more.extend({std::make_shared<nn::Tanh>(), l2});
  CHECK(more.state_dict().count("2.weight") == 1);
  list.eval();
  CHECK(!list[0].is_training());
  check_error([&] { list[3]; }, "ModuleList: index 3 is out of range");
  check_error([&] { list[-4]; }, "ModuleList: index -4 is out of range");
  check_error([&] { list(randn({4, 2})); }, "Module [ModuleList] is missing the required \"forward\" function");
}

TEST_CASE("nn: save and load as safetensors") {
  auto m = small_mlp();
  std::string path = "/tmp/kiln_test_nn_state.safetensors";
  m->save(path);
  nn::Sequential fresh({std::make_shared<nn::Linear>(4, 5), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(5, 3)});
  for (auto& [n, t] : fresh.named_parameters()) t.requires_grad();  // keep the handles
  fresh.load(path);
  for (auto& [n, t] : m->state_dict()) check_close(fresh.state_dict().at(n), t.to(DType::Float32));
  std::remove(path.c_str());
}

TEST_CASE("nn: optimizers follow torch's trajectories") {
  struct Expect {
    const char* name;
    std::vector<double> losses;
    double bias;
  };
  std::vector<Expect> expects = {
      {"sgd", {1.131704428998, 1.086306793815, 1.029585157842, 0.968632552605, 0.908818005814}, -0.326426862779},
      {"adam", {1.131704428998, 1.105841648098, 1.081102943742, 1.057469278816, 1.034885964935}, -0.421327308954},
      {"adamw", {1.131704428998, 1.105834418423, 1.081079817454, 1.057370874680, 1.034665166583}, -0.421110129747},
  };
  for (auto& e : expects) {
    CAPTURE(e.name);
    // float64 parameters, so the comparison with torch's float64 run is tight.
    auto m = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 5), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(5, 3)});
    std::vector<Tensor> params;
    std::map<std::string, Tensor> init = {{"0.weight", det({5, 4}, 1)}, {"0.bias", det({5}, 2)}, {"2.weight", det({3, 5}, 3)}, {"2.bias", det({3}, 4)}};
    auto* l0 = static_cast<nn::Linear*>(&(*m)[0]);
    auto* l2 = static_cast<nn::Linear*>(&(*m)[2]);
    l0->weight = init["0.weight"].clone().requires_grad_();
    l0->bias = init["0.bias"].clone().requires_grad_();
    l2->weight = init["2.weight"].clone().requires_grad_();
    l2->bias = init["2.bias"].clone().requires_grad_();
    params = {l0->weight, l0->bias, l2->weight, l2->bias};
    std::unique_ptr<optim::Optimizer> opt;
    if (std::string(e.name) == "sgd") opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{0.1, 0.9, 0, 0.01, true});
    else if (std::string(e.name) == "adam") opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.01});
    else opt = std::make_unique<optim::AdamW>(params, optim::AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.01});
    Tensor x = det({6, 4}, 5);
    Tensor y = tensor(std::vector<int64_t>{0, 2, 1, 1, 0, 2});
    for (int i = 0; i < 5; ++i) {
      Tensor loss = cross_entropy(m->forward(x), y);
      opt->zero_grad();
      loss.backward();
      opt->step();
      CHECK(loss.item<double>() == doctest::Approx(e.losses[size_t(i)]).epsilon(1e-9));
    }
    CHECK(l2->bias[1].item<double>() == doctest::Approx(e.bias).epsilon(1e-9));
  }
}

TEST_CASE("nn: lr schedulers") {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD opt({p}, {0.1});
  optim::StepLR step(opt, 2, 0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 5; ++i) {
    step.step();
    lrs.push_back(opt.lr());
  }
  CHECK(lrs == std::vector<double>{0.1, 0.05, 0.05, 0.025, 0.025});
  optim::SGD opt2({p}, {1.0});
  optim::CosineAnnealingLR cos(opt2, 4, 0.0);
  cos.step();
  CHECK(opt2.lr() == doctest::Approx(0.5 * (1 + std::cos(M_PI / 4))));
  for (int i = 0; i < 3; ++i) cos.step();
  CHECK(opt2.lr() == doctest::Approx(0.0));
}

TEST_CASE("nn: layers run forward and backward with torch's shapes") {
  manual_seed(1);
  nn::Sequential net({std::make_shared<nn::Conv2d>(3, 8, Shape{3, 3}, Shape{1, 1}, Shape{1, 1}),
                      std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::GELU>(),
                      std::make_shared<nn::MaxPool2d>(Shape{2, 2}), std::make_shared<nn::AvgPool2d>(Shape{2, 2}),
                      std::make_shared<nn::Flatten>(), std::make_shared<nn::Dropout>(0.1),
                      std::make_shared<nn::Linear>(8 * 2 * 2, 6), std::make_shared<nn::LayerNorm>(Shape{6}),
                      std::make_shared<nn::Sigmoid>()});
  Tensor x = randn({2, 3, 8, 8});
  Tensor y = net(x);
  CHECK(y.sizes() == Shape{2, 6});
  y.sum().backward();
  for (auto& [n, p] : net.named_parameters()) {
    CAPTURE(n);
    CHECK(p.grad().defined());
    CHECK(p.grad().sizes() == p.sizes());
  }
  net.eval();
  Tensor y1 = net(x), y2 = net(x);
  check_close(y1, y2);  // eval: no dropout, running statistics
  nn::Embedding emb(10, 4);
  CHECK(emb(tensor(std::vector<int64_t>{1, 2, 3, 9}, {2, 2})).sizes() == Shape{2, 2, 4});
}

TEST_CASE("nn: weights trained in PyTorch load into the same architecture") {
  // tests/data/make_torch_state.py: Sequential(Linear(4,8), ReLU, Linear(8,3)) after 10 SGD steps.
  nn::Sequential m({std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3)});
  m.load(std::string(KILN_TEST_DATA) + "/torch_state/mlp.safetensors");
  Tensor x = Tensor::empty({5, 4}, DType::Float32);
  float* p = x.data_ptr<float>();
  for (int64_t i = 0; i < 20; ++i) p[i] = float(std::sin(double(i) * 0.37 + 5));
  Tensor expected = tensor({0.5140187, -0.0962828, -0.1191713, -0.0123220, 0.0554508, 0.1214804, -0.1066157, 0.2536995,
                            0.0833566, 0.3068069, 0.1756806, -0.1900962, 0.4900105, -0.0243711, -0.1648248},
                           {5, 3});
  check_close(m(x), expected, 1e-5, 1e-6);
  // And back: what kiln saves loads again with the same names.
  std::string path = "/tmp/kiln_test_roundtrip.safetensors";
  m.save(path);
  auto back = load_safetensors(path);
  CHECK(back.size() == 4);
  check_close(back.at("2.bias"), m.state_dict().at("2.bias"));
  std::remove(path.c_str());
}

TEST_CASE("nn: Module::to(dtype) converts floating parameters and buffers in place; integer buffers stay") {
  using M = std::shared_ptr<nn::Module>;
  manual_seed(4);
  auto m = std::make_shared<nn::Sequential>(std::vector<M>{
      std::make_shared<nn::Conv2d>(1, 4, Shape{3, 3}), std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4 * 6 * 6, 3)});
  Tensor x = randn({2, 1, 8, 8});
  Tensor want = (*m)(x).to(DType::Float64);
  Tensor w0 = m->parameters()[0];  // the handle an optimizer would hold
  m->to(DType::Float64);
  CHECK(w0.dtype() == DType::Float64);
  for (auto& [name, p] : m->named_parameters()) CHECK(p.dtype() == DType::Float64);
  for (auto& [name, b] : m->named_buffers()) {
    CAPTURE(name);
    CHECK(b.dtype() == (name == "1.num_batches_tracked" ? DType::Int64 : DType::Float64));
  }
  Tensor y = (*m)(x.to(DType::Float64));
  CHECK(y.dtype() == DType::Float64);
  check_close(y, want, 1e-5, 1e-5);  // the second call's batch statistics equal the first's
  sum(y).backward();
  CHECK(w0.grad().dtype() == DType::Float64);
  check_error([&] { m->to(DType::Int64); }, "Module.to: expected a floating dtype, got int64");
}

TEST_CASE("nn: clip_grad_norm_ and clip_grad_value_ follow torch.nn.utils") {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({1}).requires_grad_(), c = zeros({3}).requires_grad_();
  auto set = [&] {
    a.set_grad(tensor({3.0, -4.0}));
    b.set_grad(tensor({12.0}));
  };
  set();  // c has no gradient: skipped
  Tensor n = nn::clip_grad_norm_({a, b, c}, 6.5);
  CHECK(n.item<double>() == doctest::Approx(13.0));
  double k = 6.5 / (13.0 + 1e-6);
  check_close(a.grad(), tensor({3.0 * k, -4.0 * k}), 1e-6, 1e-7);
  check_close(b.grad(), tensor({12.0 * k}), 1e-6, 1e-7);
  CHECK(!c.grad().defined());
  set();
  CHECK(nn::clip_grad_norm_({a, b}, 100.0).item<double>() == doctest::Approx(13.0));  // under max_norm: unchanged
  check_close(a.grad(), tensor({3.0, -4.0}));
  CHECK(nn::clip_grad_norm_({a, b}, 100.0, 1.0).item<double>() == doctest::Approx(19.0));
  CHECK(nn::clip_grad_norm_({a, b}, 6.0, nn::kInfNorm).item<double>() == doctest::Approx(12.0));
  check_close(b.grad(), tensor({12.0 * 6.0 / (12.0 + 1e-6)}), 1e-6, 1e-7);
  set();
  nn::clip_grad_value_({a, b}, 3.5);
  check_close(a.grad(), tensor({3.0, -3.5}));
  check_close(b.grad(), tensor({3.5}));
  b.set_grad(tensor({std::numeric_limits<double>::infinity()}));
  check_error([&] { nn::clip_grad_norm_({a, b}, 1.0, 2.0, true); },
              "clip_grad_norm_: the total norm of order 2 of the gradients is inf, so they cannot be clipped");
  check_error([&] { nn::clip_grad_norm_({a}, -1.0); }, "clip_grad_norm_: max_norm must be non-negative, got -1");
}

TEST_CASE("nn: forward pre-hooks and forward hooks run around forward, in order; a forward hook may replace the output") {
  auto net = small_mlp();
  auto first = net->named_children().front().second;
  std::vector<std::string> calls;
  first->register_forward_pre_hook([&](nn::Module& m, const Tensor& x) {
    calls.push_back("pre " + m.name() + " " + shape_str(x.sizes()));
  });
  first->register_forward_pre_hook([&](nn::Module&, const Tensor&) { calls.push_back("pre 2"); });
  first->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& y) {
    calls.push_back("post " + shape_str(y.sizes()));
    return Tensor();  // keeps the output
  });
  Tensor x = det({3, 4}, 0.5).to(DType::Float32);
  Tensor plain = first->forward(x);
  REQUIRE(calls.empty());  // forward itself is not hooked: operator() is, as torch's __call__
  Tensor y = (*first)(x);
  REQUIRE(calls.size() == 3);
  CHECK(calls[0] == "pre Linear " + shape_str({3, 4}));
  CHECK(calls[1] == "pre 2");
  CHECK(calls[2] == "post " + shape_str({3, 5}));
  CHECK(amax((y - plain).abs()).item<double>() == 0);
  first->register_forward_hook([](nn::Module&, const Tensor&, const Tensor& out) { return out * 2.0; });
  calls.clear();
  (*net)(x);  // a child's hooks run when its parent calls it
  CHECK(calls.size() == 3);
  CHECK(amax(((*first)(x) - plain * 2.0).abs()).item<double>() == 0);
}
