// Python's builtin exception classes and their bases, for `except` in __init__.
#include "script_frontend/py_exceptions.h"

#include <map>

namespace kiln::script {

namespace {

// class -> its base, as Python 3.10's builtins (the ones __init__ code catches or raises).
const std::map<std::string_view, std::string_view>& bases() {
  static const std::map<std::string_view, std::string_view> b = {
      {"BaseException", ""},
      {"SystemExit", "BaseException"},
      {"KeyboardInterrupt", "BaseException"},
      {"GeneratorExit", "BaseException"},
      {"Exception", "BaseException"},
      {"ArithmeticError", "Exception"},
      {"ZeroDivisionError", "ArithmeticError"},
      {"OverflowError", "ArithmeticError"},
      {"FloatingPointError", "ArithmeticError"},
      {"LookupError", "Exception"},
      {"KeyError", "LookupError"},
      {"IndexError", "LookupError"},
      {"ValueError", "Exception"},
      {"UnicodeError", "ValueError"},
      {"TypeError", "Exception"},
      {"AttributeError", "Exception"},
      {"NameError", "Exception"},
      {"AssertionError", "Exception"},
      {"RuntimeError", "Exception"},
      {"NotImplementedError", "RuntimeError"},
      {"RecursionError", "RuntimeError"},
      {"ImportError", "Exception"},
      {"ModuleNotFoundError", "ImportError"},
      {"OSError", "Exception"},
      {"FileNotFoundError", "OSError"},
      {"StopIteration", "Exception"},
      {"Warning", "Exception"},
      {"UserWarning", "Warning"},
      {"DeprecationWarning", "Warning"},
      {"FutureWarning", "Warning"},
  };
  return b;
}

}  // namespace

std::optional<bool> exception_caught_by(std::string_view type, std::string_view handler) {
  const auto& b = bases();
  if (!b.count(handler)) return std::nullopt;
  // a class raised by name that Python lacks (a typo in `raise`) is still an Exception
  for (std::string_view k = type; !k.empty();) {
    if (k == handler) return true;
    auto it = b.find(k);
    k = it == b.end() ? std::string_view("Exception") : it->second;
  }
  return false;
}

}  // namespace kiln::script
