// A module's name as Python prints it in its errors (`module 'pkg.models.blocks' has no attribute 'x'`): the
// file's stem, under every directory above it that is a package (holds an __init__.py), so the user reads the
// name the file imports, not where kiln found it.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "script_frontend/objects.h"

namespace kiln::script {

std::string module_dotted_name(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::vector<std::string> parts;
  if (p.filename() != "__init__.py") parts.push_back(p.stem().string());
  std::error_code ec;
  for (fs::path dir = p.parent_path(); !dir.empty() && fs::exists(dir / "__init__.py", ec); dir = dir.parent_path()) {
    parts.push_back(dir.filename().string());
    if (dir == dir.parent_path()) break;
  }
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += (out.empty() ? "" : ".") + *it;
  return out;
}

}  // namespace kiln::script
