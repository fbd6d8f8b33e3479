#include "backends/cuda/nvrtc_compile.h"

#include <fmt/format.h>

#include <cstdlib>
#include <set>

#include "backends/cuda/toolkit_api.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

void check(nvrtcResult r, const char* call, const std::string& what) {
  if (r != NVRTC_SUCCESS) fail("nvrtc: {} failed for {}: {}", call, what, nvrtc().nvrtcGetErrorString(r));
}

// NVRTC's log points at lines of the generated source (`fused.cu(42): error: ...`), which the user
// never sees: each line an error names is quoted under the log.
std::string quote_error_lines(const std::string& log, const std::string& source, const std::string& file) {
  std::vector<std::string> lines;
  for (size_t b = 0; b <= source.size();) {
    size_t e = source.find('\n', b);
    if (e == std::string::npos) e = source.size();
    lines.push_back(source.substr(b, e - b));
    b = e + 1;
  }
  std::string out;
  std::set<long> shown;
  const std::string open = file + "(";
  for (size_t pos = log.find(open); pos != std::string::npos; pos = log.find(open, pos + 1)) {
    size_t num = pos + open.size(), close = log.find(')', num);
    if (close == std::string::npos || close == num) continue;
    long line = std::strtol(log.c_str() + num, nullptr, 10);
    if (log.compare(close, 9, "): error:") != 0) continue;
    if (line < 1 || size_t(line) > lines.size() || !shown.insert(line).second) continue;
    out += fmt::format("\n  generated line {}: {}", line, lines[size_t(line - 1)]);
  }
  return out;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtc().nvrtcVersion(&major, &minor), "nvrtcVersion", "the version query");
  return fmt::format("{}.{}", major, minor);
}

std::vector<char> nvrtc_compile(const std::string& source, int arch, const std::string& what,
                                const std::vector<std::string>& extra) {
  nvrtcProgram prog;
  check(nvrtc().nvrtcCreateProgram(&prog, source.c_str(), (what + ".cu").c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram",
        what);
  // Exact math (no --use_fast_math): results are compared with the CPU kernels.
  std::string gpu = fmt::format("--gpu-architecture=sm_{}", arch);
  std::vector<const char*> opts = {gpu.c_str(), "--std=c++17", "-default-device"};
  for (const std::string& o : extra) opts.push_back(o.c_str());
  nvrtcResult r = nvrtc().nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtc().nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    if (n) nvrtc().nvrtcGetProgramLog(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    nvrtc().nvrtcDestroyProgram(&prog);
    fail("nvrtc: nvrtcCompileProgram failed for {} on sm_{}: {}\n{}{}", what, arch, nvrtc().nvrtcGetErrorString(r), log,
         quote_error_lines(log, source, what + ".cu"));
  }
  size_t n = 0;
  std::vector<char> cubin;
  try {
    check(nvrtc().nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize", what);
    cubin.resize(n);
    check(nvrtc().nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN", what);
  } catch (...) {
    nvrtc().nvrtcDestroyProgram(&prog);
    throw;
  }
  nvrtc().nvrtcDestroyProgram(&prog);
  return cubin;
}

}  // namespace kiln::cuda
