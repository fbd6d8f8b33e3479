// script(): module-level unpacking (`MEAN, STD = (0.5,), (0.25,)`) and modules of the package as values
// (`from . import blocks`, `from .. import common`, then `blocks.f(x)` / `common.EPS`), read by __init__ and by
// forward, with starred targets (`FIRST, *MIDDLE, LAST = 1, 2, 3, 4`). tests/data/script_pkg/models/unpacked.py is the model; tests/gen_script_unpack_imports_values.py ran it
// in PyTorch 1.13 for the numbers below.
#include <filesystem>
#include <string>
#include <vector>

#include "error_of.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;

namespace {
const std::string kPkg = std::string(KILN_TEST_DATA) + "/script_pkg";

// forward on the interpreter and compiled equal to PyTorch's, and the gradient of the sum at one parameter
template <class Net>
void check_run(Net& net, const Tensor& x, const Tensor& want, const std::string& param, const Tensor& want_grad) {
  Tensor y = net.forward(x);
  check_close(y, want, 1e-4, 1e-4);
  check_close(compile(net.method()).call({x})[0].to_tensor(), want, 1e-4, 1e-4);
  y.sum().backward();
  Tensor g;
  for (auto& [n, t] : net.named_parameters())
    if (n == param) g = t.grad();
  REQUIRE(g.defined());
  check_close(g, want_grad, 1e-4, 1e-4);
}
}  // namespace

TEST_CASE("script unpack imports: module-level unpacking and package modules as values match PyTorch") {
  ScriptFile file = script_file(kPkg + "/models/unpacked.py");
  auto net = file.module("Unpacked", {int64_t(5)});
  // __init__: width = blocks.make_width(A) = 6 rows, a buffer of B = 4
  CHECK(net->state_dict().at("w").sizes() == Shape{6, 5});
  CHECK(net->state_dict().at("shift").sizes() == Shape{4});
  std::vector<double> xs;
  for (int i = 0; i < 10; ++i) xs.push_back((i - 4.0) / 3.0);
  Tensor x = tensor(xs, {2, 5});
  Tensor want = tensor({12.001, 4.06084, -11.999, 12.001, -11.999, 2.299731, 12.001, -11.999}, {2, 4});
  check_run(*net, x, want, "w",
            tensor({0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -11.903316, -5.820709, 0.261895, 6.344501, 12.427106,
                    -22.806103, -15.204067, -7.602036, 0.0, 7.602034, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
                   {6, 5}));
}

TEST_CASE("script unpack imports: relative imports resolve from a file named by a relative path") {
  // `kiln check models/net.py` inside the package: `from ..ops import shift` climbs above the path's first directory
  struct Cwd {
    std::filesystem::path was = std::filesystem::current_path();
    ~Cwd() { std::filesystem::current_path(was); }
  } restore;
  std::filesystem::current_path(kPkg);
  ScriptFile file = script_file("models/unpacked.py");
  auto net = file.module("Unpacked", {int64_t(5)});
  CHECK(net->state_dict().at("w").sizes() == Shape{6, 5});
  std::filesystem::current_path(kPkg + "/models");
  CHECK(script_file("unpacked.py").module("Unpacked", {int64_t(5)})->state_dict().at("shift").sizes() == Shape{4});
}

TEST_CASE("script unpack imports: what unpacking and package modules cannot give names the file, line and column") {
  auto module_error = [](const std::string& src, const std::string& path) {
    return kiln::test::error_of([&] { script_source(src, path).module("N"); });
  };
  const std::string head = "import torch\nimport torch.nn as nn\n";
  const std::string fwd = "\n\nclass N(nn.Module):\n    def forward(self, x):\n        return ";
  // an unpacking whose count is wrong raises where the value is read, as Python does when the module runs
  std::string e = module_error(head + "A, B = 1, 2, 3" + fwd + "x + A\n", "count.py");
  CHECK(e.find("count.py:3:1: error: ValueError: too many values to unpack (expected 2)") != std::string::npos);
  // `from . import name` with neither a name of the package nor a file
  e = module_error(head + "from . import nothere" + fwd + "nothere.f(x)\n", kPkg + "/models/missing.py");
  CHECK(e.find("missing.py:7:16: error: 'nothere' comes from `from . import nothere`, and kiln found no file for it") !=
        std::string::npos);
  CHECK(e.find("models/nothere.py") != std::string::npos);
  // a name the imported module does not bind
  e = module_error(head + "from . import blocks" + fwd + "blocks.missing(x)\n", kPkg + "/models/attr.py");
  CHECK(e.find("attr.py:7:23: error: module 'script_pkg.models.blocks' has no attribute 'missing'") != std::string::npos);
  e = module_error(head + "from .. import common" + fwd + "x + common.NOPE\n", kPkg + "/models/attr2.py");
  CHECK(e.find("attr2.py:7:27: error: module 'script_pkg.common' has no attribute 'NOPE'") != std::string::npos);
  // a module's value read in forward is named as the file writes it, the module by its dotted name
  e = module_error(head + "from . import blocks" + fwd + "x + blocks.make_width\n", kPkg + "/models/fnval.py");
  CHECK(e.find("fnval.py:7:27: error: function 'blocks.make_width' is not a value; call it") != std::string::npos);
  e = module_error(head + "from . import blocks" + fwd + "x + blocks\n", kPkg + "/models/modval.py");
  CHECK(e.find("module 'script_pkg.models.blocks'") != std::string::npos);
  CHECK(e.find(".py'") == std::string::npos);
}

TEST_CASE("script unpack imports: starred module-level targets take lists, read by __init__ and forward, as in PyTorch") {
  ScriptFile file = script_file(kPkg + "/models/unpacked.py");
  auto net = file.module("Starred");
  CHECK(net->state_dict().at("lin.weight").sizes() == Shape{4, 3});  // FIRST + len(MIDDLE) = 3 inputs, LAST = 4 outputs
  std::vector<double> w, xs;
  for (int i = 0; i < 12; ++i) w.push_back((i - 5.0) / 7.0);
  for (int i = 0; i < 6; ++i) xs.push_back((i - 2.0) / 2.0);
  net->load_state_dict({{"lin.weight", tensor(w, {4, 3})}, {"lin.bias", tensor({0.1, -0.2, 0.3, -0.4}, {4})}});
  Tensor x = tensor(xs, {2, 3});
  // tests/gen_script_unpack_imports_values.py, "starred out" and "starred lin.weight.grad"
  Tensor want = tensor({8.25, 5.892857, 5.535715, 2.178571, 1.821428, 4.285714, 8.75, 10.214287}, {2, 4});
  check_run(*net, x, want, "lin.weight", tensor({-1.25, 1.25, 3.75, -1.25, 1.25, 3.75, -1.25, 1.25, 3.75, -1.25, 1.25, 3.75}, {4, 3}));
}

TEST_CASE("script unpack imports: a starred target's errors are Python's") {
  auto module_error = [](const std::string& src) { return kiln::test::error_of([&] { script_source(src, "star.py").module("N"); }); };
  const std::string head = "import torch\nimport torch.nn as nn\n";
  const std::string fwd = "\n\nclass N(nn.Module):\n    def forward(self, x):\n        return ";
  std::string e = module_error(head + "A, *B, C = (1,)" + fwd + "x + A\n");
  CHECK(e.find("star.py:3:1: error: ValueError: not enough values to unpack (expected at least 2, got 1)") != std::string::npos);
  e = module_error(head + "*A, *B = 1, 2" + fwd + "x\n");
  CHECK(e.find("star.py:3:1: error: multiple starred expressions in assignment") != std::string::npos);
  // in __init__ too, on a local: k = 3 * len([4, 5]) + 5
  auto net = script_source(head + "\n\nclass N(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                  "        a, *b = 3, 4, 5\n        self.k = a * len(b) + b[1]\n"
                                  "    def forward(self, x):\n        return x * self.k\n",
                           "star.py")
                 .module("N");
  check_close(net->forward(tensor({1.0, 2.0}, {2})), tensor({11.0, 22.0}, {2}), 0, 0);
}

TEST_CASE("script unpack imports: names from `from torch.nn import ...` in __init__, and F functions kept on self and called in forward") {
  const std::string src =
      "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
      "from torch.nn import Linear, Tanh, Sequential as Seq\nfrom torch.nn.functional import relu\n\n\n"
      "class N(nn.Module):\n"
      "    def __init__(self, gelu=True):\n"
      "        super().__init__()\n"
      "        self.body = Seq(Linear(3, 4), Tanh())\n"
      "        self.act = F.gelu if gelu else relu\n"
      "        self.post = relu\n\n"
      "    def forward(self, x):\n"
      "        return self.post(self.act(self.body(x)) - 0.1)\n";
  manual_seed(3);
  Tensor x = randn({2, 3});
  for (bool gelu : {true, false}) {
    CAPTURE(gelu);
    auto net = script_source(src, "from_nn.py").module("N", {}, {{"gelu", gelu}});
    auto sd = net->state_dict();
    REQUIRE(sd.count("body.0.weight"));
    Tensor h = tanh(matmul(x, sd.at("body.0.weight").transpose(0, 1)) + sd.at("body.0.bias"));
    Tensor want = relu((gelu ? kiln::gelu(h) : relu(h)) - 0.1);
    check_close(net->forward(x), want, 1e-6, 1e-6);
    check_close(compile(net->method()).call({x})[0].to_tensor(), want, 1e-6, 1e-6);
  }
  // lowered code calls an F function by its bare name, as TorchScript does; other uses name the import
  const std::string head = "import torch\nimport torch.nn as nn\nfrom torch.nn.functional import relu, softmax\n\n\nclass M(nn.Module):\n"
                           "    def forward(self, x):\n        return ";
  check_close(script_source(head + "softmax(relu(x), dim=-1)\n", "called.py").module("M")->forward(x), softmax(relu(x), -1),
              1e-6, 1e-6);
  std::string e = kiln::test::error_of([&] { script_source(head + "x + relu\n", "lowered.py").module("M"); });
  CHECK(e.find("lowered.py:8:20: error: 'relu' comes from `from torch.nn.functional import relu` (line 3), which "
               "lowered code reads only as a call of an F function (write `F.relu`)") != std::string::npos);
}
