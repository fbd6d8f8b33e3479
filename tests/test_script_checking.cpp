// What checking a script reports: @torch.jit.unused / ignore calls lowered as TorchScript lowers them (a
// raise when the call runs), several independent errors of one method (statement-level recovery), every
// construct kiln does not lower among them, issue 28's once-misleading __init__ messages, and `kiln check`'s
// view of a file's classes (the CLI itself: tests/script/run_check_all.sh, run_check_args.sh).
#include <fstream>
#include <sstream>

#include "error_of.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::error_of;

namespace {

// A checkpointing block as swin and convnext write it: the checkpoint path is unused, taken only in training.
const char* kMarked = R"py(import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, use_checkpoint: bool = True):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.use_checkpoint = use_checkpoint

    @torch.jit.unused
    def _checkpointed(self, x):
        return torch.utils.checkpoint.checkpoint(self.fc, x, use_reentrant=False)

    @torch.jit.ignore
    def report(self, x) -> None:
        print({k: v for k, v in enumerate(x.tolist())})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self.use_checkpoint:
            return self._checkpointed(x)
        if bool(x.sum() > 100.0):
            self.report(x)
        return self.fc(x)
)py";

}  // namespace

TEST_CASE("script: a call to a @torch.jit.unused or ignore method lowers to a raise, so a path not taken runs") {
  ScriptFile file = script_source(kMarked, "block.py");
  auto net = file.module("Block");  // in training: forward lowers, its body the unused call
  Tensor x = randn({2, 4});
  check_error([&] { net->call({x}); }, "block.py:21: RuntimeError: '_checkpointed' was marked @torch.jit.unused");
  net->eval();
  auto* fc = dynamic_cast<nn::Linear*>(net->named_children().at(0).second.get());
  REQUIRE(fc);
  check_close(net->call({x})[0].to_tensor(), linear(x, fc->weight, fc->bias), 1e-6, 1e-6);
  // the ignored call is on a path decided when the graph runs: taken, it raises naming the method
  check_error([&] { net->call({full({2, 4}, 100.0)}); },
              "block.py:23: RuntimeError: 'report' is marked @torch.jit.ignore: it runs in Python, which kiln cannot call");
  // asked for by name, neither is compiled
  check_error([&] { net->method("_checkpointed"); }, "is marked @torch.jit.unused, so it is not compiled");
}

TEST_CASE("script: checking goes on past a method's first error; module() raises with the independent ones after") {
  const char* src = R"py(import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        a = x.frobnicate()
        b = a + 1
        c = torch.no_such_op(x)
        d = x * 2
        return d + undefined_name
)py";
  std::string e = error_of([&] { script_source(src, "net.py").module("Net"); });
  CHECK(e.find("net.py:7:") == 0);  // the first error first
  CHECK(e.find("net.py:9:") != std::string::npos);
  CHECK(e.find("net.py:11:") != std::string::npos);
  CHECK(e.find("net.py:8:") == std::string::npos);  // b reads a, whose definition failed: not a new error
  CHECK(e.find("net.py:10:") == std::string::npos);
  // each once, in the source error format
  size_t errors = 0;
  for (size_t at = e.find(": error: "); at != std::string::npos; at = e.find(": error: ", at + 1)) ++errors;
  CHECK(errors == 3);
}

TEST_CASE("script: kiln check builds each class that takes no argument and names the others as skipped") {
  // the file `kiln check` is run on in tests/script/run_check_all.sh
  std::string path = std::string(KILN_TEST_DATA) + "/../script/check/classes.py";
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> skipped;
  std::vector<std::string> errors = script::check_all(text.str(), "classes.py", skipped);
  REQUIRE(errors.size() == 2);  // Broken's two; the statement reading its failed `y` is not a third
  CHECK(errors[0].find("classes.py:29:24: error: unknown tensor method 'frobnicate'") == 0);
  CHECK(errors[1].find("classes.py:31:25: error: 'Broken' object has no attribute 'missing'") == 0);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0] == "classes.py:34:7: class Sized skipped: its __init__ needs 'width', 'depth' (kiln check classes.py Sized ARGS...)");
  // a clean file has no errors
  skipped.clear();
  CHECK(script::check_all("import torch.nn as nn\n\n\nclass A(nn.Module):\n    def forward(self, x):\n        return x\n", "a.py", skipped)
            .empty());
}

TEST_CASE("script: checking goes on inside if, for and while bodies, each independent error once and no cascades") {
  const char* src = R"py(import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        if bool(x.sum() > 0):
            a = x.frobnicate()
            b = a + 1
            c = torch.no_such_op(x)
        else:
            y = x.bad_method()
        for layer in self.layers:
            h = layer(x)
            h = h.nope()
            k = h + 1
            z = x.zzz()
        i = 0
        while i < 3:
            i = i + 1
            q = x.www()
            for j in range(2):
                w = x.inner()
            v = q + 1
        return x + undefined_name
)py";
  std::string e = error_of([&] { script_source(src, "nested.py").module("Net"); });
  CHECK(e.find("nested.py:12:") == 0);  // the first error first
  // then the rest of its block, the else block, the loops' bodies (the unrolled one's once), the function's body
  size_t at = 0;
  for (const char* line : {"nested.py:14:", "nested.py:16:", "nested.py:19:", "nested.py:21:", "nested.py:25:", "nested.py:27:",
                           "nested.py:29:"}) {
    INFO(std::string(line));
    size_t found = e.find(line, at);
    CHECK(found != std::string::npos);
    if (found != std::string::npos) at = found;
  }
  // statements that read a name a failed statement assigns are not new errors
  for (const char* line : {"nested.py:13:", "nested.py:20:", "nested.py:28:"}) {
    INFO(std::string(line));
    CHECK(e.find(line) == std::string::npos);
  }
  size_t errors = 0;
  for (size_t k = e.find(": error: "); k != std::string::npos; k = e.find(": error: ", k + 1)) ++errors;
  CHECK(errors == 8);
}

TEST_CASE("script: checking goes on inside an inlined function, each of its errors once and in file order") {
  const char* src = R"py(import torch
import torch.nn as nn


def helper(x):
    a = x.frobnicate()
    b = a + 1
    if bool(x.sum() > 0):
        c = x.bad_then()
    else:
        c = x.bad_else()
    return x.nope()


class Net(nn.Module):
    def forward(self, x):
        y = helper(x)
        z = y + 1
        w = helper(x * 2)
        return x.zzz()
)py";
  std::string e = error_of([&] { script_source(src, "inlined.py").module("Net"); });
  CHECK(e.find("inlined.py:6:") == 0);  // the first error first
  // then the helper's later ones, in file order, then forward's: the helper's each once although it is called twice
  size_t at = 0;
  for (const char* line : {"inlined.py:9:", "inlined.py:11:", "inlined.py:12:", "inlined.py:20:"}) {
    INFO(std::string(line));
    size_t found = e.find(line, at);
    CHECK(found != std::string::npos);
    if (found != std::string::npos) at = found;
  }
  // what reads a failed statement's name is not a new error
  for (const char* line : {"inlined.py:7:", "inlined.py:18:"}) {
    INFO(std::string(line));
    CHECK(e.find(line) == std::string::npos);
  }
  size_t errors = 0;
  for (size_t k = e.find(": error: "); k != std::string::npos; k = e.find(": error: ", k + 1)) ++errors;
  CHECK(errors == 5);
}

TEST_CASE("script: every construct kiln does not lower is reported, each once in file order, and checking goes on") {
  const char* src = R"py(import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        a = [v * 2 for v in [1, 2]]
        b = f"{x.dim()}"
        c = {1, 2}
        d = a[0] + 1
        e = lambda v: v + 1
        g = {str(v): v for v in [1, 2]}
        if (n := x.dim()) > 1:
            pass
        try:
            h = x + 1
        except Exception:
            h = x
        with torch.no_grad():
            k = x * 2
        global G
        y = x + 0
        del y
        m = torch.cat(*[[x, x]])
        p = x.no_such_method()
        q = torch.no_such_fn(x)
        r = [v for v in [1]] + [{3}]
        s = [{1} for v in [1]]
        t = self.missing
        u = unknown_fn(x)
        return x + h.sum()
)py";
  std::string e = error_of([&] { script_source(src, "constructs.py").module("Net"); });
  // the message of each, and which TorchScript accepts (checked with torch.jit.script, torch 1.13)
  const char* want[] = {
      "constructs.py:7:13: error: list comprehensions are not supported in kiln script (TorchScript accepts this)",
      "constructs.py:8:13: error: f-strings are not supported in kiln script (TorchScript accepts this)",
      "constructs.py:9:13: error: set literals are not supported in kiln script\n",
      "constructs.py:11:13: error: lambda is not supported in kiln script\n",
      "constructs.py:12:13: error: dict comprehensions are not supported in kiln script (TorchScript accepts this)",
      "constructs.py:13:13: error: assignment expressions (:=) are not supported in kiln script\n",
      "constructs.py:15:9: error: try is not supported in kiln script\n",
      "constructs.py:19:9: error: with is not supported in kiln script (TorchScript accepts this)",
      "constructs.py:21:9: error: global is not supported in kiln script\n",
      "constructs.py:23:9: error: del is not supported in kiln script (TorchScript accepts this)",
      "constructs.py:24:23: error: starred expressions are only supported in __init__",
      "constructs.py:25:15: error: unknown tensor method 'no_such_method'",
      "constructs.py:26:19: error: unknown function torch.no_such_fn",
      // two in one statement: both, in source order; one inside another: the outer one alone
      "constructs.py:27:13: error: list comprehensions are not supported",
      "constructs.py:27:33: error: set literals are not supported",
      "constructs.py:28:13: error: list comprehensions are not supported",
      "constructs.py:29:18: error: 'Net' object has no attribute 'missing'",
      "constructs.py:30:13: error: unknown function 'unknown_fn'",
  };
  size_t at = 0;
  for (const char* w : want) {
    INFO(std::string(w));
    size_t found = e.find(w, at);
    CHECK(found != std::string::npos);
    if (found != std::string::npos) at = found;
  }
  CHECK(e.find("constructs.py:7:") == 0);
  // what reads a failed statement's names (a, h) is skipped; nothing inside a failed construct is reported again
  CHECK(e.find("constructs.py:10:") == std::string::npos);
  CHECK(e.find("constructs.py:31:") == std::string::npos);
  CHECK(e.find("constructs.py:28:14:") == std::string::npos);
  size_t errors = 0;
  for (size_t k = e.find(": error: "); k != std::string::npos; k = e.find(": error: ", k + 1)) ++errors;
  CHECK(errors == std::size(want));
}

TEST_CASE("script: a construct kiln does not lower is the error, not the return paths it makes") {
  // returning from both branches of a try would read as 'returns from more than one place'
  const char* src = R"py(import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        try:
            return x + 1
        except Exception:
            return {x}
)py";
  std::string e = error_of([&] { script_source(src, "paths.py").module("Net"); });
  CHECK(e.find("paths.py:7:9: error: try is not supported in kiln script") == 0);
  CHECK(e.find("more than one place") == std::string::npos);
  size_t errors = 0;
  for (size_t k = e.find(": error: "); k != std::string::npos; k = e.find(": error: ", k + 1)) ++errors;
  CHECK(errors == 1);  // the set inside the try is the try's: not a second error
}

TEST_CASE("script: __init__'s messages for torch.nn.functional, F, calculate_gain and getattr(nn, name) name what failed") {
  // issue 28 item 7: each of these read misleadingly once (`str has no attribute 'functional'`, `undefined name
  // 'F'`, `calculate_gain() takes a Tensor first`, `this call is not supported in __init__`)
  const char* src = R"py(import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, case: str = ""):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        assert hasattr(torch.nn.functional, "gelu") and not hasattr(torch.nn.functional, "nope"), "hasattr"
        assert F is not None and hasattr(F, "relu"), "F"
        if case == "F":
            self.act = F.no_such_function
        elif case == "gain":
            self.gain = nn.init.calculate_gain(self.fc.weight)
        elif case == "getattr":
            self.act = getattr(nn, "Relu")()
        elif case == "getattr_args":
            self.act = getattr(nn, "Linear")()

    def forward(self, x):
        return self.fc(x)
)py";
  ScriptFile file = script_source(src, "msgs.py");
  file.module("Net");  // hasattr over torch.nn.functional and F in __init__ evaluate
  check_error([&] { file.module("Net", {"F"}); }, "msgs.py:13:26: error: module 'torch.nn.functional' has no attribute 'no_such_function'");
  check_error([&] { file.module("Net", {"gain"}); }, "msgs.py:15:33: error: nn.init.calculate_gain() takes the nonlinearity's name first");
  check_error([&] { file.module("Net", {"getattr"}); }, "msgs.py:17:24: error: module 'torch.nn' has no attribute 'Relu'");
  check_error([&] { file.module("Net", {"getattr_args"}); }, "msgs.py:19:24: error: nn.Linear() is missing required argument 'in_features'");
}

TEST_CASE("script: __init__ reports every construct its evaluator does not run, at once") {
  const char* src = R"py(import torch.nn as nn


class P(nn.Module):
    def __init__(self):
        super().__init__()
        global G
        self.b = b"bytes"
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)
)py";
  std::string e = error_of([&] { script_source(src, "init.py").module("P"); });
  CHECK(e.find("init.py:7:9: error: global is not supported in __init__") == 0);
  CHECK(e.find("init.py:8:18: error: bytes literals are not supported in __init__") != std::string::npos);
}
