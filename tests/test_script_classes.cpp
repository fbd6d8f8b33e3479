// script(): classes deriving from nn.Module, checked against values worked out by hand (the model
// files of tests/script/models are checked against PyTorch in test_script_modules.cpp), and the
// errors a class or a file with several broken definitions gets.
#include <string>

#include "core/device_runtime.h"
#include "error_of.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::error_of;
using kiln::test::values;

TEST_CASE("script class: __init__ arguments become constants; parameters, buffers and helper methods") {
  const char* src = R"(
import torch
import torch.nn as nn
from torch import Tensor


class Scaled(nn.Module):
    def __init__(self, n: int, scale: float = 2.0, repeats=2):
        super().__init__()
        self.scale = scale
        self.repeats = repeats
        self.weight = nn.Parameter(torch.ones(n))
        self.register_buffer("offset", torch.full((n,), 0.5))
        self.register_buffer("scratch", torch.zeros(n), persistent=False)

    def step(self, x: Tensor, k: int) -> Tensor:
        return x * self.weight * self.scale + self.offset * k

    def forward(self, x):
        for i in range(self.repeats):
            x = self.step(x, i)
        return x + self.scratch
)";
  auto m = script_source(src, "scaled.py").module("Scaled", {int64_t(3)}, {{"repeats", int64_t(3)}});
  std::vector<std::string> params, buffers;
  for (auto& [n, t] : m->named_parameters()) params.push_back(n);
  for (auto& [n, t] : m->named_buffers()) buffers.push_back(n);
  CHECK(params == std::vector<std::string>{"weight"});
  CHECK(buffers == std::vector<std::string>{"offset"});  // persistent=False stays out of state_dict
  CHECK(m->name() == "Scaled");
  // x -> 2x -> 4x + 0.5 -> 8x + 1 + 1
  Tensor y = (*m)(tensor({1.0, 2.0, 3.0}));
  CHECK(values(y) == std::vector<double>{10, 18, 26});
  // The scale is baked in as a constant; the weight is read at each call, so updates are seen.
  {
    NoGradGuard ng;
    m->named_parameters()[0].second.copy_(full({3}, 0.5));
  }
  // x -> x + 0 -> x/2... with weight 0.5 and scale 2: x -> x -> x + 0.5 -> x + 1.5
  CHECK(values((*m)(tensor({1.0, 2.0, 3.0}))) == std::vector<double>{2.5, 3.5, 4.5});
  // Other methods are functions too.
  CHECK(values(m->method("step").call({tensor({1.0}), int64_t(2)})[0].to_tensor())[0] == 0.5 * 2 + 1.0);
  std::string e = error_of([&] { m->method("stp"); });
  CHECK(e == "script: class Scaled has no method 'stp' (it has: step, forward); did you mean step?");
}

TEST_CASE("script class: submodules of the file, conditions on configuration, ModuleList by index and enumerate") {
  const char* src = R"(
import torch
from torch import nn


class Affine(nn.Module):
    def __init__(self, a: float, b: float):
        super().__init__()
        self.a = a
        self.b = b

    def forward(self, x):
        return x * self.a + self.b


class Stack(nn.Module):
    def __init__(self, coefs, last=None):
        super().__init__()
        self.layers = nn.ModuleList()
        for c in coefs:
            self.layers.append(Affine(c, 1.0))
        self.last = last if last is None else Affine(last, 0.0)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) + i
        x = self.layers[0](x)
        if self.last is not None:
            x = self.last(x)
        return x
)";
  ScriptFile file = script_source(src, "stack.py");
  auto plain = file.module("Stack", {IValue::list({2.0, 3.0})});
  // ((x*2+1)+0)*3+1+1 then *2+1: x=1 -> 3 -> 11 -> 23
  CHECK(values((*plain)(tensor({1.0})))[0] == 23);
  auto with_last = file.module("Stack", {IValue::list({2.0, 3.0})}, {{"last", 10.0}});
  CHECK(values((*with_last)(tensor({1.0})))[0] == 230);
  std::vector<std::string> children;
  for (auto& [n, c] : with_last->named_children()) children.push_back(n);
  CHECK(children == std::vector<std::string>{"layers", "last"});
}

TEST_CASE("script class: bad classes and bad uses of self name the file, the line and the facts") {
  auto build = [](const std::string& body, const std::string& cls = "Net", std::vector<IValue> args = {}) {
    std::string src = "import torch\nimport torch.nn as nn\n\n\n" + body;
    return error_of([&] { script_source(src, "net.py").module(cls, args); });
  };
  CHECK(build("class Net(object):\n    def forward(self, x):\n        return x\n") ==
        "net.py:5:11: error: class 'Net' must derive from nn.Module (imported as torch.nn) in kiln script, not 'object'\n"
        "class Net(object):\n          ^");
  std::string e;
  INFO(e);
  e = build(
      "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linaer(2, 3)\n\n"
      "    def forward(self, x):\n        return self.fc(x)\n");
  CHECK(e.find("net.py:8:22: error: nn.Linaer is not supported in kiln script; did you mean Linear?") == 0);
  e = build("class Net(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.fc = nn.Linear(n, 3)\n\n"
            "    def forward(self, x):\n        return self.fc2(x)\n");
  CHECK(e.find("net.py:5:1") == std::string::npos);
  CHECK(e.find("is missing required argument 'n'") != std::string::npos);
  e = build("class Net(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.fc = nn.Linear(n, 3)\n\n"
            "    def forward(self, x):\n        return self.fcc(x)\n",
            "Net", {int64_t(2)});
  CHECK(e.find("net.py:11:21: error: 'Net' object has no attribute 'fcc'; did you mean fc?") == 0);
  e = build("class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 1\n\n"
            "    def forward(self, x):\n        self.n = 2\n        return x\n");
  CHECK(e.find("net.py:11:14: error: cannot assign to attribute 'n' outside __init__") == 0);
  e = build("class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.blocks = nn.ModuleList([nn.ReLU()])\n\n"
            "    def forward(self, x):\n        return self.blocks(x)\n");
  CHECK(e.find("a ModuleList is not callable; iterate over it or index it") != std::string::npos);
  e = build("class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 3, bias=None, device=1)\n\n"
            "    def forward(self, x):\n        return self.fc(x)\n");
  CHECK(e.find("nn.Linear() got an unexpected keyword argument 'device'") != std::string::npos);
  e = build("class Net(nn.Module):\n    def forward(self, x):\n        return x\n", "Nett");
  CHECK(e == "script: no class 'Nett' in the module (it has: Net); did you mean Net?");
  e = build("class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n");
  CHECK(e.find("net.py:5:7: error: class 'Net' has no forward method") == 0);
}

TEST_CASE("script class: a base class without forward is one to derive from, as in torch; calling it raises") {
  const char* src = R"(
import torch.nn as nn


class Base(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n


class Net(Base):
    def __init__(self):
        super().__init__(3)

    def forward(self, x):
        return x * self.n
)";
  ScriptFile file = script_source(src, "base.py");
  Tensor x = tensor({1.0, -2.0}, {2});
  kiln::test::check_close(file.module("Net", {})->forward(x), tensor({3.0, -6.0}, {2}));
  std::string err = test::error_of([&] { file.module("Base", {int64_t(3)})->forward(x); });
  CHECK(err.find("base.py:5:7: error: class 'Base' has no forward method") == 0);
}

TEST_CASE("script class: train() and eval() pick the dropout and batch norm lowering") {
  const char* src = R"(
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.bn = nn.BatchNorm2d(2)

    def forward(self, x):
        return self.drop(self.bn(x))
)";
  auto m = script_source(src, "net.py").module("Net");
  auto graph_text = [&] { return m->method().graph().str(); };
  CHECK(graph_text().find("prim::rand_like") != std::string::npos);
  Tensor x = test::seq({2, 2, 2, 2});
  (*m)(x);
  // The running statistics were written back: mean of channel 0 moved from 0 by momentum 0.1.
  Tensor rm = m->state_dict().at("bn.running_mean");
  CHECK(values(rm)[0] != 0.0);
  CHECK(values(m->state_dict().at("bn.num_batches_tracked"))[0] == 1);
  m->eval();
  CHECK(graph_text().find("prim::rand_like") == std::string::npos);
  Tensor y = (*m)(x);
  CHECK(values(m->state_dict().at("bn.num_batches_tracked"))[0] == 1);  // eval leaves the buffers alone
  Tensor rv = m->state_dict().at("bn.running_var");
  Tensor want = div(sub(x, reshape(rm, {2, 1, 1})), sqrt(add(reshape(rv, {2, 1, 1}), 1e-5)));
  check_close(y, want, 1e-5, 1e-6);
}

TEST_CASE("script: every broken definition in a file is reported, each once") {
  const char* src = R"(import torch
from torch import Tensor


def f(x: Tensor) -> Tensor:
    return x +


def g(x: Tensor) -> Tensor:
    return x


def h(x: Tensor) Tensor:
    return x
)";
  std::string e = error_of([&] { script::check_source(src, "two.py"); });
  INFO(e);
  CHECK(e.find("two.py:6:15: error:") == 0);
  CHECK(e.find("two.py:13:18: error: expected ':' after the function signature") != std::string::npos);
  const char* sema = R"(import torch
from torch import Tensor


def f(x: Tensor) -> Tensor:
    return x + (1, 2)


def g(x: Tensor) -> int:
    return x


def h(x: Tensor) -> Tensor:
    return f(x)
)";
  e = error_of([&] { script::check_source(sema, "sema.py"); });
  CHECK(e.find("sema.py:6:12: error: cannot add Tensor and Tuple[int, int]") == 0);
  CHECK(e.find("sema.py:10:12: error: function 'g' is declared to return int but returns Tensor") != std::string::npos);
  // h inlines f and meets f's error again: reported once.
  CHECK(e.find("sema.py:6:12") == e.rfind("sema.py:6:12"));
}

TEST_CASE("script class: @property methods, len() of a ModuleList and an activation picked by a helper, as torch's transformer.py writes them") {
  const char* src = R"(import torch
import torch.nn as nn
import torch.nn.functional as F


def _get_activation_fn(activation: str):
    if activation == "relu":
        return F.relu
    elif activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class Block(nn.Module):
    def __init__(self, d, activation="gelu", n=2):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
        self.activation = _get_activation_fn(activation)
        self.scale = float(self.depth) / 4

    @property
    def depth(self):
        return len(self.layers)

    def forward(self, x):
        for layer in self.layers:
            x = self.activation(layer(x))
        return x * self.scale + self.depth
)";
  manual_seed(4);
  Tensor x = randn({2, 5});
  for (std::string act : {"gelu", "relu"}) {
    CAPTURE(act);
    auto net = script_source(src, "block.py").module("Block", {int64_t(5)}, {{"activation", act}, {"n", int64_t(3)}});
    auto sd = net->state_dict();
    Tensor h = x;
    for (int i = 0; i < 3; ++i) {
      Tensor z = matmul(h, sd.at("layers." + std::to_string(i) + ".weight").transpose(0, 1)) +
                 sd.at("layers." + std::to_string(i) + ".bias");
      h = act == "gelu" ? gelu(z) : relu(z);
    }
    Tensor want = h * 0.75 + 3.0;  // depth 3 read in __init__ (scale) and in forward
    check_close(net->forward(x), want, 1e-6, 1e-6);
    check_close(compile(net->method()).call({x})[0].to_tensor(), want, 1e-6, 1e-6);
  }
  check_error([&] { script_source(src, "block.py").module("Block", {int64_t(5)}, {{"activation", std::string("tanh")}}); },
              "activation should be relu/gelu, not tanh");
}

TEST_CASE("script class: a helper def nested in __init__, np.prod of a shape and a starred shape in view, as PyTorch-GAN's generators write them") {
  const char* src = R"(import numpy as np
import torch
import torch.nn as nn

img_shape = (1, 4, 4)
latent_dim = 6


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(latent_dim, 8, normalize=False),
            *block(8, 12),
            nn.Linear(12, int(np.prod(img_shape))),
            nn.Tanh()
        )

    def forward(self, z):
        img = self.model(z)
        img = img.view(img.size(0), *img_shape)
        return img
)";
  manual_seed(8);
  auto net = script_source(src, "gan.py").module("Generator");
  net->eval();
  auto sd = net->state_dict();
  CHECK(sd.count("model.3.running_var"));  // Linear, LeakyReLU, Linear, BatchNorm1d, ...
  Tensor z = randn({3, 6});
  auto linear = [&](const Tensor& x, const std::string& p) {
    return matmul(x, sd.at(p + ".weight").transpose(0, 1)) + sd.at(p + ".bias");
  };
  Tensor h = leaky_relu(linear(z, "model.0"), 0.2);
  h = linear(h, "model.2");
  h = (h - sd.at("model.3.running_mean")) / sqrt(sd.at("model.3.running_var") + 0.8) * sd.at("model.3.weight") +
      sd.at("model.3.bias");
  Tensor want = tanh(linear(leaky_relu(h, 0.2), "model.5")).view({3, 1, 4, 4});
  check_close(net->forward(z), want, 1e-6, 1e-6);
  check_close(compile(net->method()).call({z})[0].to_tensor(), want, 1e-6, 1e-6);
}

TEST_CASE("script class: a submodule assigned again takes the old one's place, as torch's _modules[name] = m") {
  const char* src = R"(import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        if stride != 1 or in_planes != self.expansion*planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion*planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion*planes)
            )

    def forward(self, x):
        out = self.conv2(F.relu(self.bn1(self.conv1(x))))
        out += self.shortcut(x)
        return F.relu(out)
)";
  manual_seed(2);
  auto projected = script_source(src, "block.py").module("BasicBlock", {int64_t(4), int64_t(8), int64_t(2)});
  // torch's _modules order: shortcut where it was first registered, before conv2
  std::vector<std::string> children;
  for (const auto& [k, m] : projected->named_children()) children.push_back(k);
  CHECK(children == std::vector<std::string>{"conv1", "bn1", "shortcut", "conv2"});
  CHECK(projected->state_dict().size() == 13);  // torch's keys: conv1, bn1's 5, shortcut.0/1's 6, conv2
  CHECK(projected->state_dict().count("shortcut.1.running_var") == 1);
  projected->eval();
  Tensor x = randn({2, 4, 6, 6});
  auto sd = projected->state_dict();
  auto bn = [&](const Tensor& t, const std::string& p) {
    auto c = [](const Tensor& v) { return v.view({1, -1, 1, 1}); };
    return (t - c(sd.at(p + ".running_mean"))) / sqrt(c(sd.at(p + ".running_var")) + 1e-5) * c(sd.at(p + ".weight")) +
           c(sd.at(p + ".bias"));
  };
  Tensor h = relu(bn(conv2d(x, sd.at("conv1.weight"), {}, {2, 2}, {1, 1}), "bn1"));
  Tensor want = relu(conv2d(h, sd.at("conv2.weight"), {}, {1, 1}, {1, 1}) +
                     bn(conv2d(x, sd.at("shortcut.0.weight"), {}, {2, 2}, {0, 0}), "shortcut.1"));
  check_close(projected->forward(x), want, 1e-5, 1e-5);
  // stride 1, same width: the empty Sequential stays, the identity
  auto same = script_source(src, "block.py").module("BasicBlock", {int64_t(4), int64_t(4)});
  CHECK(same->state_dict().count("shortcut.0.weight") == 0);
  CHECK(same->forward(x).sizes() == x.sizes());
}

TEST_CASE("script class: a config object's __dict__.update(kwargs), as minGPT's CfgNode fills itself") {
  const char* src = R"(import torch
import torch.nn as nn


class Config:
    def __init__(self, **kwargs):
        self.n_embd = 4
        self.vocab_size = 7
        self.__dict__.update(kwargs)


class Head(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, x):
        return self.lm_head(x)
)";
  ScriptFile file = script_source(src, "cfg.py");
  auto net = file.build("Head", {file.value("Config(n_embd=6)")});
  CHECK(net->state_dict().at("lm_head.weight").sizes() == Shape{7, 6});
  CHECK(file.build("Head", {file.value("Config(**{'vocab_size': 9})")})->state_dict().at("lm_head.weight").sizes() == Shape{9, 4});
}

TEST_CASE("script class: a device picked at module level (torch.device, torch.cuda.is_available) and .to(device) in __init__ and forward, as pytorch-tutorial's files write them") {
  const char* src = R"(import torch
import torch.nn as nn

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
second = torch.device('cuda', 1) if torch.cuda.device_count() > 1 else torch.device(type='cpu')
use_mps = torch.backends.mps.is_available()


class RNN(nn.Module):
    def __init__(self, n, layers):
        super(RNN, self).__init__()
        self.n = n
        self.layers = layers
        self.device = device
        self.on_gpu = device.type == 'cuda'
        self.lstm = nn.LSTM(n, n, layers, batch_first=True)
        self.register_buffer("offset", torch.full((n,), 0.5).to(device).to(torch.float64).to(torch.float32))

    def forward(self, x):
        h0 = torch.zeros(self.layers, x.size(0), self.n).to(device)
        c0 = torch.zeros(self.layers, x.size(0), self.n, device=device)
        out, _ = self.lstm(x.to(self.device), (h0, c0))
        if torch.cuda.is_available() or use_mps:
            out = out * 2
        return out[:, -1, :].to(torch.device('cpu')) + self.offset + (1.0 if self.on_gpu else 0.0)
)";
  const bool gpu = visible_devices(Device::Type::CUDA) > 0;
  manual_seed(6);
  Tensor x = randn({2, 3, 4});
  auto net = script_source(src, "rnn.py").module("RNN", {int64_t(4), int64_t(2)});
  auto sd = net->state_dict();
  nn::LSTM ref(4, 4, 2, true, true);
  std::map<std::string, Tensor> theirs;
  for (auto& [k, v] : sd)
    if (k.starts_with("lstm.")) theirs[k.substr(5)] = v;
  ref.load_state_dict(theirs);
  // the gpu branch and device.type read in __init__ each add to the output on a machine with a GPU
  Tensor want = ref.forward(x).select(1, 2) * (gpu ? 2.0 : 1.0) + (gpu ? 1.5 : 0.5);
  check_close(net->forward(x), want, 1e-6, 1e-6);
  check_close(compile(net->method()).call({x})[0].to_tensor(), want, 1e-6, 1e-6);

  // torch.device's checks, with torch's messages
  auto with_device = [](const std::string& expr) {
    return std::string("import torch\nimport torch.nn as nn\n\nd = ") + expr +
           "\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x.to(d)\n";
  };
  check_error([&] { script_source(with_device("torch.device('gpu')"), "d.py").module("M"); },
              "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, ort, xla, lazy, vulkan, mps, meta, hpu, privateuseone device type at start of device string: gpu");
  check_error([&] { script_source(with_device("torch.device('cuda:0', 1)"), "d.py").module("M"); },
              "type (string) must not include an index because index was passed explicitly: cuda:0");
  check_error([&] { script_source(with_device("torch.device('cuda:x')"), "d.py").module("M"); }, "Invalid device string: 'cuda:x'");
  check_error([&] { script_source(with_device("torch.cuda.current_stream()"), "d.py").module("M"); },
              "module 'torch.cuda' has no attribute 'current_stream' in kiln script");
  const char* in_forward = "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x.to(torch.device('tpu'))\n";
  check_error([&] { script_source(in_forward, "f.py").module("M")->forward(x); }, "f.py:7:34: error: RuntimeError: Expected one of cpu");
}
