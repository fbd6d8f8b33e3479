// Script errors: one `file:line:col: error: message` per problem, with the source line and a caret,
// before anything runs; every independent mistake of a file, none of their consequences. (tests/script/bad/*.py check many more through `kiln check`.)
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;

namespace {
std::string error_of(const std::string& src) {
  try {
    script::check_source(src, "m.py");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("script errors: location, source line and caret") {
  std::string e = error_of("import torch\ndef f(x: torch.Tensor) -> torch.Tensor:\n    y = x + (x, x)\n    return y\n");
  CHECK(e == "m.py:3:9: error: cannot add Tensor and Tuple[Tensor, Tensor]\n    y = x + (x, x)\n        ^");
}

TEST_CASE("script errors: unsupported Python is named") {
  CHECK(error_of("def f(x: int) -> int:\n    g = lambda: 1\n    return x\n").find("lambda is not supported in kiln script") !=
        std::string::npos);
  CHECK(error_of("def f(x: int) -> int:\n    return [i for i in range(3)][0]\n").find("list comprehensions are not supported") !=
        std::string::npos);
  CHECK(error_of("def f(x: int) -> int:\n    yield x\n").find("yield is not supported") != std::string::npos);
  CHECK(error_of("def f(x: int) -> int:\n    return {x, 1}\n").find("set literals are not supported") != std::string::npos);
}

TEST_CASE("script errors: unknown names suggest the closest known one") {
  std::string e = error_of("import torch\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return torch.sigmod(x)\n");
  CHECK(e.find("unknown function torch.sigmod; did you mean torch.sigmoid?") != std::string::npos);
  e = error_of("def f(x: int) -> int:\n    return lenn(x)\n");
  CHECK(e.find("did you mean len?") != std::string::npos);
}

TEST_CASE("script errors: exactly one error, even for garbage") {
  for (const char* src : {"def f(:\n", "def f(x: int) -> int:\n\treturn x\n  return x\n", "((((\n", "def", "\x01\x02",
                          "def f(x: int) -> int:\n    return x +\n", "def f(x: Tensor) -> Tensor:\n    return x\n"}) {
    std::string e = error_of(src);
    CAPTURE(src);
    REQUIRE(!e.empty());
    size_t first = e.find("error:");
    CHECK(first != std::string::npos);
    CHECK(e.find("error:", first + 1) == std::string::npos);
  }
}

TEST_CASE("script errors: type errors are found before anything runs") {
  std::string e = error_of(
      "def f(n: int) -> int:\n    if n > 100:\n        return n + (1, 2)\n    return n\n");
  CHECK(e.find("m.py:3:16: error: cannot add int and Tuple[int, int]") == 0);
}

TEST_CASE("script errors: // and % on tensors of unknown dtype lower (integer tensors: test_script_inplace.cpp)") {
  CHECK(error_of("import torch\ndef f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n    return x // y\n").empty());
}

TEST_CASE("script errors: independent mistakes in one function are all reported, their consequences are not") {
  std::string e = error_of(
      "import torch\n"
      "def f(x: torch.Tensor) -> torch.Tensor:\n"
      "    a = x.nosuchmethod()\n"       // 1
      "    b = torch.relu(x, 3, 4)\n"    // 2
      "    c = a + b\n"                  // reads a and b: skipped, not an error of its own
      "    d = x + undefined_name\n"     // 3
      "    if x.sum() > 0:\n"
      "        e = x * 2\n"
      "    else:\n"
      "        e = x.another_missing()\n"  // 4
      "    return c + d + e\n");         // reads c, d, e: skipped
  CAPTURE(e);
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = e.find(s); at != std::string::npos; at = e.find(s, at + 1)) ++n;
    return n;
  };
  CHECK(count("error:") == 4);
  CHECK(e.find("m.py:3:11: error: unknown tensor method 'nosuchmethod'") != std::string::npos);
  CHECK(e.find("m.py:4:") != std::string::npos);
  CHECK(e.find("m.py:6:13: error: undefined name 'undefined_name'") != std::string::npos);
  CHECK(e.find("m.py:10:15: error: unknown tensor method 'another_missing'") != std::string::npos);
  CHECK(e.find("m.py:3:") < e.find("m.py:4:"));  // in source order
  CHECK(error_of("import torch\ndef f(x: torch.Tensor) -> torch.Tensor:\n    y = x * 2\n    return y + 1\n").empty());
}
