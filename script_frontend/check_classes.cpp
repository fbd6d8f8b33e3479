// `kiln check FILE` without a class: the file's nn.Module classes are checked as a user would first use
// them, each built with its defaults (its __init__ run, its forward and what that calls lowered with
// unknown shapes), so an error anywhere in code that would run is reported, not only syntax errors.
#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "script_frontend/objects.h"
#include "script_frontend/script.h"

namespace kiln {

namespace {
// The parameters a class's __init__ needs an argument for (its own or the nearest base's; none for
// torch.nn.Module's).
std::vector<std::string> required_args(const script::ClassDef& c) {
  std::vector<std::string> out;
  const script::FunctionDef* init = c.method("__init__");
  if (!init) return out;
  for (size_t i = 1; i < init->params.size(); ++i)
    if (!init->params[i].default_value) out.push_back(init->params[i].name);
  for (const script::Param& p : init->kwonly)
    if (!p.default_value) out.push_back(p.name);
  return out;
}

// One raised message holds the errors of a method one after another, each `file:line:col: error: ...`
// with its source line and caret: split there, so an error met again (a base's forward) is reported once.
void add_errors(const std::string& what, std::vector<std::string>& errors) {
  static const std::regex start(R"(^[^\n:]+:\d+:\d+: error: )");
  std::vector<std::string> lines;
  size_t at = 0;
  while (at <= what.size()) {
    size_t nl = what.find('\n', at);
    if (nl == std::string::npos) nl = what.size();
    lines.push_back(what.substr(at, nl - at));
    at = nl + 1;
  }
  std::string cur;
  auto flush = [&] {
    if (!cur.empty() && std::find(errors.begin(), errors.end(), cur) == errors.end()) errors.push_back(cur);
    cur.clear();
  };
  for (const std::string& l : lines) {
    if (std::regex_search(l, start)) flush();
    cur += (cur.empty() ? "" : "\n") + l;
  }
  flush();
}
}  // namespace

void ScriptFile::check_classes(std::vector<std::string>& errors, std::vector<std::string>& skipped) const {
  if (!file_) return;
  for (const auto& c : file_->ast.classes) {
    if (c->root()->torch_base.empty() || c->root()->torch_base == "dataclass") continue;  // a config object
    // A base from another file is read only when the class is built: whether it is an nn.Module at all
    // (torchvision's `class ResNet18_Weights(WeightsEnum)` is not) is not known before, so it is not guessed.
    if (!c->root()->base_import.empty()) {
      skipped.push_back(fmt::format("{}:{}:{}: class {} skipped: its base '{}' is imported (kiln check {} {} ARGS... builds it)",
                                    file_->src.name, c->loc.line, c->loc.col, c->name, c->root()->base_import, file_->src.name, c->name));
      continue;
    }
    // No __init__ in the file's chain and a torch.nn layer as the base (convnext's `class LayerNorm2d(nn.LayerNorm)`):
    // the layer's constructor, whose arguments a file's class usually passes on
    const std::string& base = c->root()->torch_base;
    if (!c->method("__init__") && base != "Module" && base != "Sequential" && base != "ModuleDict") {
      skipped.push_back(fmt::format("{}:{}:{}: class {} skipped: its __init__ is nn.{}'s (kiln check {} {} ARGS...)", file_->src.name,
                                    c->loc.line, c->loc.col, c->name, base, file_->src.name, c->name));
      continue;
    }
    std::vector<std::string> needs = required_args(*c);
    if (!needs.empty()) {
      std::string names;
      for (const std::string& n : needs) names += (names.empty() ? "'" : ", '") + n + "'";
      skipped.push_back(fmt::format("{}:{}:{}: class {} skipped: its __init__ needs {} (kiln check {} {} ARGS...)", file_->src.name,
                                    c->loc.line, c->loc.col, c->name, names, file_->src.name, c->name));
      continue;
    }
    try {
      build(c->name);
    } catch (const Error& e) {
      add_errors(e.what(), errors);
    }
  }
}

std::vector<std::string> script::check_all(const std::string& text, const std::string& name, std::vector<std::string>& skipped) {
  std::vector<std::string> errors;
  try {
    check_source(text, name);
  } catch (const Error& e) {
    add_errors(e.what(), errors);
  }
  ScriptFile file;
  try {
    file = script_source(text, name);
  } catch (const Error&) {
    return errors;  // a syntax error, reported above: nothing more can be read
  }
  file.check_classes(errors, skipped);
  return errors;
}

}  // namespace kiln
