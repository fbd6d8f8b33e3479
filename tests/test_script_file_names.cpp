// script(): the names lowered code reads beyond the defs of its own file, as published files write them —
// functions and constants of relative imports (sibling and parent packages, read lazily), module-level constants,
// lambdas kept on self or bound at module level, torch.jit.annotate, F.embedding / F.batch_norm and an
// nn.ParameterDict read in forward. tests/data/script_pkg is the package; tests/gen_script_file_names_values.py
// ran it in PyTorch 1.13 for the numbers below (eagerly: torch.jit.script keeps no lambda on a module).
#include <string>
#include <vector>

#include "error_of.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const std::string kNet = std::string(KILN_TEST_DATA) + "/script_pkg/models/net.py";

Tensor row(const std::vector<double>& v, const Shape& s) { return tensor(v, s); }

std::vector<Tensor> outputs(const std::vector<IValue>& out) {
  std::vector<IValue> es = out.size() == 1 && out[0].is_tuple() ? out[0].elements() : out;
  std::vector<Tensor> ts;
  for (const IValue& v : es) ts.push_back(v.to_tensor());
  return ts;
}

}  // namespace

TEST_CASE("script file names: relative imports, module constants, lambdas and annotate in forward match PyTorch") {
  ScriptFile file = script_file(kNet);
  Tensor idx = tensor(std::vector<int64_t>{0, 3, 1, 2, 0, 4}, {2, 3});
  // smooth=True: self.post is the lambda; False: nn.ReLU()
  struct Want {
    bool smooth;
    std::vector<double> sums, best, masked, train_sums;
  };
  std::vector<Want> wants = {
      {true,
       {105.028465, 87.823875, 70.601738, 53.287319, 35.634846, 17.22472, 13.541088, 24.36211, 34.850178, 45.014004, 55.06197, 65.072853},
       {6.878623, 3.637068, 3.970324, 1.019252, 6.878623, 6.544831},
       {15.844521, 11.787014, 8.800581, 6.591421, 4.936493, 0.0, 0.0, 1.739228, 3.975792, 5.122099, 6.625035, 8.610681},
       {16.646034, 16.91765, 17.202122, 17.500303, 17.812742, 18.134743, 18.618076, 18.955017, 19.305588, 19.675301, 20.064392, 20.472643}},
      {false,
       {105.197525, 87.975182, 70.731422, 53.394623, 35.762371, 17.77957, 14.011054, 24.451706, 34.891499, 45.074268, 55.142765, 65.171783},
       {6.885819, 3.652375, 3.985091, 1.06636, 6.885819, 6.552333},
       {15.844521, 11.787014, 8.800581, 6.591487, 4.938883, 0.0, 0.0, 3.092471, 3.976058, 5.122104, 6.625035, 8.610681},
       {17.001799, 17.28875, 17.589115, 17.903708, 18.233038, 18.572514, 18.991257, 19.353733, 19.730091, 20.125416, 20.539639, 20.972252}},
  };
  for (const Want& w : wants) {
    INFO("smooth=" << w.smooth);
    auto net = file.module("Net", {int64_t(6), int64_t(5), w.smooth});
    // the ParameterDict under torch's names, beside the file's own parameters
    CHECK(net->state_dict().count("scales.a"));
    net->eval();
    std::vector<Tensor> out = outputs(net->call({idx}));
    REQUIRE(out.size() == 3);
    check_close(out[0], row(w.sums, {12}), 1e-4, 1e-4);
    check_close(out[1], row(w.best, {2, 3}), 1e-4, 1e-4);
    check_close(out[2], row(w.masked, {12}), 1e-4, 1e-4);
    std::vector<Tensor> compiled = outputs(compile(net->method()).call({idx}));
    check_close(compiled[0], row(w.sums, {12}), 1e-4, 1e-4);
    // training: F.batch_norm normalises by the batch and moves self.running_mean / running_var, as torch's
    net->train();
    out = outputs(net->call({idx}));
    check_close(out[0], row(w.train_sums, {12}), 1e-4, 1e-4);
    auto state = net->state_dict();
    check_close(state.at("running_mean"), row({0.230556, 0.193056, 0.155555, 0.118056, 0.080556, 0.043056, 0.005556, -0.031944,
                                               -0.069444, -0.106944, -0.144444, -0.181944},
                                              {12}),
                1e-4, 1e-5);
    check_close(state.at("running_var"), row({30.539999, 20.940001, 13.259998, 7.499999, 3.66, 1.74, 1.74, 3.66, 7.5, 13.259999,
                                              20.940001, 30.539999},
                                             {12}),
                1e-4, 1e-4);
    // padding_idx=0: row 0 of the table gets no gradient
    out[0].sum().backward();
    Tensor g;
    for (auto& [n, t] : net->named_parameters())
      if (n == "table") g = t.grad();
    REQUIRE(g.defined());
    std::vector<double> grad = kiln::test::values(g);
    for (int j = 0; j < 6; ++j) CHECK(grad[size_t(j)] == 0.0);
    if (w.smooth)
      check_close(g, row({0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.373767, -1.375183, -1.3766, -1.378016, -1.379433, -1.38085, 1.910634, 1.828109,
                          1.745585, 1.663061, 1.580536, 1.498011, 0.81705, 0.840619, 0.864189, 0.887758, 0.911328, 0.934897, -1.222903,
                          -1.198969, -1.175034, -1.1511, -1.127166, -1.103232},
                         {5, 6}),
                  1e-4, 1e-4);
  }
}

TEST_CASE("script file names: module constants and imported helpers in a file's functions") {
  // a function of the file (not a method) reads constants and a lambda bound at module level as forward does
  ScriptFile file = script_source(R"(
import torch
from typing import List, Optional
from torch import Tensor

SCALE = 2.5
SHAPE = (2, 3)
FLAG = True
NAME = 'sum'
double = lambda t, k=2.0: t * k


def f(x: Tensor) -> Tensor:
    ys = torch.jit.annotate(List[Tensor], [])
    ys.append(double(x.view(SHAPE)) * SCALE)
    out = torch.jit.annotate(Optional[Tensor], None)
    if FLAG and NAME == 'sum':
        out = ys[0] + 1.0
    assert out is not None
    return out
)",
                                  "consts.py");
  Tensor x = tensor({0.0, 1.0, 2.0, 3.0, 4.0, 5.0}, {6});
  // torch: (x.view(2, 3) * 2.0) * 2.5 + 1.0
  check_close(file.function("f").call({x})[0].to_tensor(), tensor({1.0, 6.0, 11.0, 16.0, 21.0, 26.0}, {2, 3}));
}

TEST_CASE("script file names: torch.jit.annotate in __init__ types an empty attribute for forward") {
  ScriptFile file = script_source(R"(
import torch
import torch.nn as nn
from typing import Dict, List
from torch import Tensor


class N(nn.Module):
    def __init__(self):
        super().__init__()
        self.sizes = torch.jit.annotate(List[int], [])
        self.extra = torch.jit.annotate(Dict[str, int], {})

    def forward(self, x):
        ns = self.sizes + [x.size(0)]
        return x * float(len(ns) + len(self.extra))
)",
                                  "empty.py");
  // eager PyTorch: x * 1.0 (torch.jit.script refuses an empty list annotated on the instance; kiln types it by the annotation)
  check_close(file.module("N")->forward(tensor({1.0, 2.0}, {2})), tensor({1.0, 2.0}, {2}));
}

TEST_CASE("script file names: what lowered code cannot take from the file's names names the construct") {
  auto module_error = [](const std::string& src, const std::string& name) {
    return kiln::test::error_of([&] { script_source(src, name).module("N"); });
  };
  const std::string head = "import torch\nimport torch.nn as nn\nfrom typing import List\n";
  // the annotation and the value disagree
  CHECK(module_error(head + "\n\nclass N(nn.Module):\n    def forward(self, x):\n        xs = torch.jit.annotate(List[int], [x])\n"
                            "        return x\n",
                     "ann.py")
            .find("ann.py:8:44: error: torch.jit.annotate() expects List[int], got List[Tensor]") != std::string::npos);
  // a lambda capturing what lowered code cannot hold (a config object)
  std::string e = module_error(head + "\n\nclass C:\n    pass\n\n\nclass N(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                      "        c = C()\n        self.f = lambda t: t if c else t\n\n    def forward(self, x):\n        return self.f(x)\n",
                               "lam.py");
  CHECK(e.find("lam.py:17:21: error: 'f' captures 'c', a C of the code that made it") != std::string::npos);
  // a module-level value lowered code cannot type
  e = module_error(head + "TABLE = {1: 2}\n\n\nclass N(nn.Module):\n    def forward(self, x):\n        return x + TABLE[1]\n", "tab.py");
  CHECK(e.find("tab.py:9:20: error: 'TABLE' is a dict with int keys") != std::string::npos);
  // a module-level constant is computed as Python computes it, its errors Python's
  e = module_error(head + "BAD = float('1e-3x')\n\n\nclass N(nn.Module):\n    def forward(self, x):\n        return x + BAD\n", "val.py");
  CHECK(e.find("val.py:4:7: error: ValueError: could not convert string to float: '1e-3x'") != std::string::npos);
  // an import kiln cannot resolve is raised where forward uses it, naming the import
  e = module_error(head + "from .missing import helper\n\n\nclass N(nn.Module):\n    def forward(self, x):\n        return helper(x)\n",
                   "/nonexistent_dir/imp.py");
  CHECK(e.find("imp.py:9:16: error: 'helper' comes from `from .missing import helper`") != std::string::npos);
  // F.batch_norm in training updates its running statistics: they must be a module's buffers
  e = module_error(head + "import torch.nn.functional as F\n\n\nclass N(nn.Module):\n    def forward(self, x):\n"
                          "        return F.batch_norm(x, torch.zeros(3), torch.ones(3), training=True)\n",
                   "bn.py");
  CHECK(e.find("bn.py:9:38: error: batch_norm: in training, running_mean is updated in place") != std::string::npos);
}
