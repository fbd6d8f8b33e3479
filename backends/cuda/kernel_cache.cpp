#include "backends/cuda/kernel_cache.h"

#include "core/log.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
    kiln::logger().warn("cuda: cannot create the kernel cache directory {}: {}", p.parent_path().string(), ec.message());
    return;
  }
  auto tmp = p;
  tmp += fmt::format(".tmp{}", getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    if (!f) {
      kiln::logger().warn("cuda: cannot write the kernel cache file {}", tmp.string());
      return;
    }
  }
  std::filesystem::rename(tmp, p, ec);
  if (ec) kiln::logger().warn("cuda: cannot rename {} into the kernel cache: {}", tmp.string(), ec.message());
}

}  // namespace

namespace {

uint64_t fnv1a(const char* p, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// "KILNCUBN", format version, key (16 hex digits), cubin size, FNV-1a of the cubin; then the cubin.
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'U', 'B', 'N'};
constexpr uint32_t kFormat = 1;
struct Header {
  char magic[8];
  uint32_t format;
  uint32_t reserved;
  char key[16];
  uint64_t size;
  uint64_t checksum;
};
static_assert(sizeof(Header) == 48);

}  // namespace

std::string cache_key(const CacheKeyParts& k) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const std::string& s) {
    h = fnv1a(s.data(), s.size(), h);
    h ^= 0xff;  // separator: ("ab", "c") and ("a", "bc") differ
    h *= 0x100000001b3ULL;
  };
  mix(k.source);
  mix(std::to_string(k.arch));
  mix(k.nvrtc);
  mix(std::to_string(k.driver));
  mix(k.flags);
  return fmt::format("{:016x}", h);
}

int driver_version() {
  static const int v = [] {
    try {
      int d = 0;
      if (driver().cuDriverGetVersion(&d) == CUDA_SUCCESS) return d;
    } catch (const Error&) {
    }
    return 0;
  }();
  return v;
}

std::filesystem::path cache_path(const std::string& key, int arch) {
  return cache_dir() / (key + ".sm_" + std::to_string(arch) + ".cubin");
}

std::vector<char> encode_entry(const std::string& key, const std::vector<char>& cubin) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format = kFormat;
  std::memcpy(h.key, key.data(), std::min(key.size(), sizeof h.key));
  h.size = cubin.size();
  h.checksum = fnv1a(cubin.data(), cubin.size());
  std::vector<char> out(sizeof h + cubin.size());
  std::memcpy(out.data(), &h, sizeof h);
  if (!cubin.empty()) std::memcpy(out.data() + sizeof h, cubin.data(), cubin.size());
  return out;
}

bool decode_entry(const std::vector<char>& bytes, const std::string& key, std::vector<char>* cubin,
                  std::string* why_not) {
  auto no = [&](std::string why) {
    if (why_not) *why_not = std::move(why);
    return false;
  };
  Header h;
  if (bytes.size() < sizeof h) return no(fmt::format("{} bytes, shorter than the header", bytes.size()));
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return no("not a kiln cubin entry");
  if (h.format != kFormat) return no(fmt::format("entry format {}, expected {}", h.format, kFormat));
  if (key.size() != sizeof h.key || std::memcmp(h.key, key.data(), sizeof h.key) != 0)
    return no(fmt::format("entry of key {}, expected {}", std::string(h.key, sizeof h.key), key));
  if (h.size != bytes.size() - sizeof h)
    return no(fmt::format("cubin of {} bytes, the header says {}", bytes.size() - sizeof h, h.size));
  if (fnv1a(bytes.data() + sizeof h, h.size) != h.checksum) return no("checksum mismatch");
  cubin->assign(bytes.begin() + long(sizeof h), bytes.end());
  return true;
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

std::vector<char> cubin_for(const std::string& source, int arch, const std::string& what,
                            const std::vector<std::string>& flags) {
  Cache& c = cache();
  std::string joined;
  for (const std::string& f : flags) joined += (joined.empty() ? "" : " ") + f;
  std::string key = cache_key({source, arch, nvrtc_ver(), driver_version(), joined});
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.cubins.find(key);
    if (it != c.cubins.end()) {
      c.stats.memory_hits++;
      return it->second;
    }
  }
  auto path = cache_path(key, arch);
  std::vector<char> bytes = read_file(path), cubin;
  bool from_disk = false, rejected = false;
  if (!bytes.empty()) {
    std::string why;
    from_disk = decode_entry(bytes, key, &cubin, &why);
    if (!from_disk) {
      // Loading a damaged cubin could crash the driver; a rebuilt one costs one NVRTC run.
      kiln::logger().warn("cuda: kernel cache entry {} is unusable ({}); deleting it and compiling again", path.string(), why);
      std::error_code ec;
      std::filesystem::remove(path, ec);
      rejected = true;
    }
  }
  if (!from_disk) {
    cubin = nvrtc_compile(source, arch, what, flags);
    kiln::logger().debug("cuda: compiled {} for sm_{} ({} bytes)", what, arch, cubin.size());
    write_file(path, encode_entry(key, cubin));
  }
  std::lock_guard<std::mutex> lock(c.mu);
  (from_disk ? c.stats.disk_hits : c.stats.compiles)++;
  if (rejected) c.stats.rejected++;
  c.cubins[key] = cubin;
  return cubin;
}

CUfunction function_for(int index, const std::string& source, const std::string& name) {
  DeviceState& s = device_state(index);
  Cache& c = cache();
  // The module key is the source alone: a device has one architecture.
  std::string key = cache_key({source, s.arch(), "", 0, ""});
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
