#include "script_frontend/cli/cli_args.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "eager/io.h"
#include "eager/ops.h"

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

IValue random_arg(const std::string& shape, const ir::Type& type, const std::string& param) {
  if (type.kind != ir::TypeKind::Tensor)
    fail("kiln run: --randn {} for parameter '{}' ({}): --randn gives a tensor", shape, param, type.str());
  DType dtype = type.dtype.value_or(DType::Float32);
  if (!is_floating(dtype))
    fail("kiln run: --randn {} for parameter '{}' ({}): --randn gives floating tensors", shape, param, type.str());
  Shape sizes;
  for (size_t start = 0; start < shape.size();) {
    size_t end = shape.find_first_of("x,", start);
    std::string part = shape.substr(start, end == std::string::npos ? std::string::npos : end - start);
    char* stop = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &stop, 10);
    if (part.empty() || *stop || errno == ERANGE || v < 0)
      fail("kiln run: --randn {}: '{}' is not a size; shapes read like 64x784", shape, part);
    sizes.push_back(v);
    if (end == std::string::npos) break;
    start = end + 1;
    if (start == shape.size()) fail("kiln run: --randn {}: the shape ends in a separator", shape);
  }
  return IValue(randn(sizes).to(dtype));
}

}  // namespace kiln::cli
