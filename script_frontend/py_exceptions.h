#pragma once
// Python exceptions while __init__ runs. `raise`, a dict's missing key, a bad list.index() raise one of
// these: a kiln::Error with Python's words (`file:line:col: error: KeyError: 'x'`) that also keeps the
// exception's class and str(), so a `try ... except KeyError` around it can catch it. Errors about kiln
// itself (a construct it does not evaluate) are plain kiln::Errors, which no `except` catches.
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kiln::script {

class Raised : public Error {
 public:
  Raised(std::string formatted, std::string type, std::string message)
      : Error(std::move(formatted)), type(std::move(type)), message(std::move(message)) {}
  std::string type;     // the class: "KeyError"
  std::string message;  // str(e): the message, or the repr of a KeyError's key
};

// Whether `except handler:` catches an exception of class `type`, by the hierarchy of Python's builtin
// exceptions (KeyError under LookupError under Exception under BaseException); nullopt when `handler`
// names no builtin exception class.
std::optional<bool> exception_caught_by(std::string_view type, std::string_view handler);

}  // namespace kiln::script
