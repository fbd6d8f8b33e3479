#pragma once
// The test tools' constructor arguments: each command-line word a Python expression over the model file's
// names, NAME=EXPR a keyword (an `=` inside brackets, quotes or `==` is part of the expression).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "script_frontend/script.h"

namespace kiln::test {

inline std::shared_ptr<ScriptedModule> build_from_words(const ScriptFile& file, const std::string& cls, char** first,
                                                        char** last) {
  std::vector<ScriptValue> args;
  std::map<std::string, ScriptValue> kwargs;
  for (char** w = first; w < last; ++w) {
    std::string a = *w;
    size_t eq = a.find('=');
    bool keyword = eq != std::string::npos && eq > 0 && a.find_first_of("[('\"") > eq && a[eq + 1] != '=';
    if (keyword) kwargs.emplace(a.substr(0, eq), file.value(a.substr(eq + 1)));
    else args.push_back(file.value(a));
  }
  return file.build(cls, args, kwargs);
}

}  // namespace kiln::test
