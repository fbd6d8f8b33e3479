#pragma once
// Compiled kernels, cached twice: cubins in memory and on disk, and loaded functions per device. An
// entry's key hashes everything that changes the code NVRTC produces: the source, the architecture,
// the NVRTC version, the driver version (0 without a driver) and the NVRTC options. The disk cache
// lives in $KILN_CUDA_CACHE_DIR, else $XDG_CACHE_HOME/kiln/cuda, else ~/.cache/kiln/cuda; it is best
// effort (an unwritable one is logged and skipped). Each file starts with a header naming its key and
// the cubin's size and checksum, so a truncated, corrupt or stale file is detected, deleted and
// rebuilt, never handed to the driver.
#include <cuda.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::cuda {

struct CacheKeyParts {
  std::string source;
  int arch = 0;           // 90 for sm_90
  std::string nvrtc;      // nvrtc_version()
  int driver = 0;         // cuDriverGetVersion, 0 without a driver
  std::string flags;      // the extra NVRTC options, space-separated
};
// 16 hex digits of FNV-1a 64 over every part.
std::string cache_key(const CacheKeyParts& parts);
// The driver's version (12040 for 12.4), 0 when no driver loads; part of every key.
int driver_version();
std::filesystem::path cache_dir();
// Where the disk entry of `key` for sm_<arch> lives.
std::filesystem::path cache_path(const std::string& key, int arch);

// A disk entry: header + cubin. decode_entry returns false (and says why) for anything but an intact
// entry of `key`.
std::vector<char> encode_entry(const std::string& key, const std::vector<char>& cubin);
bool decode_entry(const std::vector<char>& bytes, const std::string& key, std::vector<char>* cubin,
                  std::string* why_not);

struct KernelCacheStats {
  int64_t memory_hits = 0;  // cubins found in memory
  int64_t disk_hits = 0;    // cubins read from the disk cache
  int64_t compiles = 0;     // NVRTC runs
  int64_t rejected = 0;     // disk entries found corrupt or stale, deleted and rebuilt
};
KernelCacheStats kernel_cache_stats();
// Forgets the in-memory cubins (not loaded modules): the next request reads the disk cache.
void clear_memory_cache();

// The cubin of `source` for sm_<arch>: memory, then disk, then NVRTC (which fills both). `flags` are
// extra NVRTC options (part of the key).
std::vector<char> cubin_for(const std::string& source, int arch, const std::string& what,
                            const std::vector<std::string>& flags = {});

// The function `name` of the module rendered as `source`, loaded on device `index`.
CUfunction function_for(int index, const std::string& source, const std::string& name);

}  // namespace kiln::cuda
