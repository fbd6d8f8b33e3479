#include "script_frontend/cli/cli_args.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "eager/io.h"

namespace kiln::cli {

IValue parse_arg(const std::string& text, const ir::Type& type, const std::string& param) {
  auto bad = [&](const char* want) -> IValue {
    fail("kiln run: argument '{}' for parameter '{}' ({}) is not {}", text, param, type.str(), want);
  };
  switch (type.kind) {
    case ir::TypeKind::Tensor: return load_npy(text);
    case ir::TypeKind::Int: {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end || errno == ERANGE) return bad("an int");
      return IValue(int64_t(v));
    }
    case ir::TypeKind::Float: {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end) return bad("a float");
      return IValue(v);
    }
    case ir::TypeKind::Bool:
      if (text == "True" || text == "true" || text == "1") return IValue(true);
      if (text == "False" || text == "false" || text == "0") return IValue(false);
      return bad("a bool (True or False)");
    case ir::TypeKind::Str: return IValue(text);
    case ir::TypeKind::None: return text == "None" ? IValue() : bad("None");
    case ir::TypeKind::Optional: return text == "None" ? IValue() : parse_arg(text, type.elems[0], param);
    case ir::TypeKind::List: {
      std::vector<IValue> es;
      size_t start = 0;
      while (!text.empty() && start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        es.push_back(parse_arg(part, type.elems[0], param));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      return IValue::list(std::move(es));
    }
    case ir::TypeKind::Tuple: break;
  }
  fail("kiln run: parameter '{}' has type {}, which the command line cannot pass", param, type.str());
}

}  // namespace kiln::cli
