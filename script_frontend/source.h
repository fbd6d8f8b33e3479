#pragma once
// A script source file: its name and text, and errors that point into it.
#include <string>
#include <string_view>

#include "core/source_error.h"

namespace kiln::script {

struct Source {
  std::string name;  // the file name errors start with
  std::string text;

  [[noreturn]] void fail(SourceLoc loc, std::string_view message) const { fail_at(name, text, loc, message); }
};

}  // namespace kiln::script
