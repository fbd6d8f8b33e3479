#include "core/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.h"

namespace kiln {
namespace {

// Size classes: 64-byte steps up to 512 bytes, then quarter steps between powers of two, so a request
// reuses a block at most 25% larger and fragmentation stays bounded.
size_t size_class(size_t n) {
  if (n <= 512) return (n + 63) & ~size_t(63);
  size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));  // largest power of two below n
  size_t step = p / 4;
  return (n + step - 1) / step * step;
}

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  // size class → blocks
  MemoryStats stats;
  bool enabled;
  Cache() {
    const char* e = std::getenv("KILN_CACHING_ALLOCATOR");
    enabled = !(e && e[0] == '0');
  }
  ~Cache() {
    for (auto& [sz, p] : free_blocks) std::free(p);
  }
};

Cache& cache() {
  static Cache* c = new Cache();  // leaked on purpose: tensors in static storage may free after exit
  return *c;
}

}  // namespace

namespace cpu_allocator {

void* allocate(size_t nbytes) {
  Cache& c = cache();
  size_t sz = size_class(nbytes == 0 ? 1 : nbytes);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.alloc_count++;
    c.stats.current_bytes += int64_t(sz);
    if (c.stats.current_bytes > c.stats.peak_bytes) c.stats.peak_bytes = c.stats.current_bytes;
    auto it = c.free_blocks.find(sz);
    if (it != c.free_blocks.end()) {
      void* p = it->second;
      c.free_blocks.erase(it);
      c.stats.cached_bytes -= int64_t(sz);
      c.stats.cache_hits++;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, sz);
  if (!p) {
    empty_cache();
    p = std::aligned_alloc(64, sz);
  }
  if (!p) {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.current_bytes -= int64_t(sz);
    fail("out of memory: cannot allocate {} bytes on cpu", nbytes);
  }
  return p;
}

void release(void* p, size_t nbytes) {
  if (!p) return;
  Cache& c = cache();
  size_t sz = size_class(nbytes == 0 ? 1 : nbytes);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.current_bytes -= int64_t(sz);
    if (c.enabled) {
      c.free_blocks.emplace(sz, p);
      c.stats.cached_bytes += int64_t(sz);
      return;
    }
  }
  std::free(p);
}

}  // namespace cpu_allocator

MemoryStats memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void reset_peak_memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.peak_bytes = c.stats.current_bytes;
}

void empty_cache() {
  Cache& c = cache();
  std::multimap<size_t, void*> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    blocks.swap(c.free_blocks);
    c.stats.cached_bytes = 0;
  }
  for (auto& [sz, p] : blocks) std::free(p);
}

}  // namespace kiln
