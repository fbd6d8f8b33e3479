#pragma once
// Compiled kernels, cached twice: cubins in memory and on disk (keyed by a hash of the source, the
// architecture and the NVRTC version, so a changed renderer or toolkit never reuses stale code), and
// loaded functions per device. The disk cache lives in $KILN_CUDA_CACHE_DIR, else
// $XDG_CACHE_HOME/kiln/cuda, else ~/.cache/kiln/cuda; it is best effort (an unwritable one is logged
// and skipped).
#include <cuda.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::cuda {

// 16 hex digits of FNV-1a 64 over source, arch and NVRTC version.
std::string cache_key(const std::string& source, int arch, const std::string& nvrtc_ver);
std::filesystem::path cache_dir();

struct KernelCacheStats {
  int64_t memory_hits = 0;  // cubins found in memory
  int64_t disk_hits = 0;    // cubins read from the disk cache
  int64_t compiles = 0;     // NVRTC runs
};
KernelCacheStats kernel_cache_stats();
// Forgets the in-memory cubins (not loaded modules): the next request reads the disk cache.
void clear_memory_cache();

// The cubin of `source` for sm_<arch>: memory, then disk, then NVRTC (which fills both).
std::vector<char> cubin_for(const std::string& source, int arch, const std::string& what);

// The function `name` of the module rendered as `source`, loaded on device `index`.
CUfunction function_for(int index, const std::string& source, const std::string& name);

}  // namespace kiln::cuda
