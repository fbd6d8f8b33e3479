#include "backends/cuda/kernel_cache.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <unistd.h>

#include "backends/cuda/driver_api.h"
#include "backends/cuda/nvrtc_compile.h"
#include "backends/cuda/runtime.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

struct Cache {
  std::mutex mu;
  std::map<std::string, std::vector<char>> cubins;  // key → cubin
  std::map<std::pair<int, std::string>, CUmodule> modules;  // (device, key) → module
  std::map<std::pair<CUmodule, std::string>, CUfunction> functions;
  KernelCacheStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: modules stay loaded until the process exits
  return *c;
}

const std::string& nvrtc_ver() {
  static const std::string v = nvrtc_version();
  return v;
}

std::vector<char> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return {};
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

// Written to a temporary name and renamed, so a reader in another process never sees half a file.
void write_file(const std::filesystem::path& p, const std::vector<char>& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) {
    spdlog::warn("cuda: cannot create the kernel cache directory {}: {}", p.parent_path().string(), ec.message());
    return;
  }
  auto tmp = p;
  tmp += fmt::format(".tmp{}", getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    if (!f) {
      spdlog::warn("cuda: cannot write the kernel cache file {}", tmp.string());
      return;
    }
  }
  std::filesystem::rename(tmp, p, ec);
  if (ec) spdlog::warn("cuda: cannot rename {} into the kernel cache: {}", tmp.string(), ec.message());
}

}  // namespace

std::string cache_key(const std::string& source, int arch, const std::string& nvrtc) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const std::string& s) {
    for (unsigned char ch : s) {
      h ^= ch;
      h *= 0x100000001b3ULL;
    }
    h ^= 0xff;  // separator: ("ab", "c") and ("a", "bc") differ
    h *= 0x100000001b3ULL;
  };
  mix(source);
  mix(std::to_string(arch));
  mix(nvrtc);
  return fmt::format("{:016x}", h);
}

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("KILN_CUDA_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "kiln" / "cuda";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "kiln" / "cuda";
  return std::filesystem::temp_directory_path() / "kiln-cuda-cache";
}

KernelCacheStats kernel_cache_stats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().cubins.clear();
}

std::vector<char> cubin_for(const std::string& source, int arch, const std::string& what) {
  Cache& c = cache();
  std::string key = cache_key(source, arch, nvrtc_ver());
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.cubins.find(key);
    if (it != c.cubins.end()) {
      c.stats.memory_hits++;
      return it->second;
    }
  }
  auto path = cache_dir() / (key + ".sm_" + std::to_string(arch) + ".cubin");
  std::vector<char> cubin = read_file(path);
  bool from_disk = !cubin.empty();
  if (!from_disk) {
    cubin = nvrtc_compile(source, arch, what);
    spdlog::debug("cuda: compiled {} for sm_{} ({} bytes)", what, arch, cubin.size());
    write_file(path, cubin);
  }
  std::lock_guard<std::mutex> lock(c.mu);
  (from_disk ? c.stats.disk_hits : c.stats.compiles)++;
  c.cubins[key] = cubin;
  return cubin;
}

CUfunction function_for(int index, const std::string& source, const std::string& name) {
  DeviceState& s = device_state(index);
  Cache& c = cache();
  // The module key is the source alone: a device has one architecture.
  std::string key = cache_key(source, s.arch(), "");
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto mit = c.modules.find({index, key});
    if (mit != c.modules.end()) {
      auto fit = c.functions.find({mit->second, name});
      if (fit != c.functions.end()) return fit->second;
    }
  }
  CUmodule mod = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto mit = c.modules.find({index, key});
    if (mit != c.modules.end()) mod = mit->second;
  }
  if (!mod) {
    std::vector<char> cubin = cubin_for(source, s.arch(), name);
    KILN_CU(cuModuleLoadData, &mod, cubin.data());
    std::lock_guard<std::mutex> lock(c.mu);
    c.modules[{index, key}] = mod;
  }
  CUfunction fn = nullptr;
  KILN_CU(cuModuleGetFunction, &fn, mod, name.c_str());
  std::lock_guard<std::mutex> lock(c.mu);
  c.functions[{mod, name}] = fn;
  return fn;
}

}  // namespace kiln::cuda
