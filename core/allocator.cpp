#include "core/allocator.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif
#include <mutex>

#include "core/error.h"

// Under ASan, cached blocks are poisoned so a use after free is still caught although the memory
// stays with kiln; the slack beyond the requested size is poisoned too.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KILN_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define KILN_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define KILN_POISON(p, n) ((void)(p), (void)(n))
#define KILN_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

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
  bool huge_heap = false;
  std::atomic<uintptr_t> advised_to{0};  // the heap is advised up to here
  Cache() {
    const char* e = std::getenv("KILN_CACHING_ALLOCATOR");
    enabled = !(e && e[0] == '0');
    if (enabled) keep_heap_warm();
  }

  // oneDNN's sgemm and OpenBLAS take their packing buffers from malloc on every call. glibc hands the
  // top of the heap back to the system once a free leaves 128 KiB there, so the next call faults the
  // same pages in again (~10 us per 4 KiB page on a VM): a compiled CNN step spent a tenth of its time
  // there. Keeping freed heap memory makes those buffers as warm as kiln's own cached blocks. A
  // threshold the user set (MALLOC_*_THRESHOLD_, GLIBC_TUNABLES) is left alone.
  void keep_heap_warm() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
    if (std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("GLIBC_TUNABLES"))
      return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    use_huge_pages();
#endif
  }

  // Each fresh 4 KiB page costs a fault (~1.5 us here, ~10 on some VMs): a GPT's first compiled step, whose
  // eager recording and compiled run touch ~100 MB, spent a fifth of its time there. One 2 MiB
  // transparent huge page replaces 512 of those faults. Where THP is in `madvise` mode the heap's new
  // memory is advised as it grows; the heap grows in 64 MiB steps so that whole aligned 2 MiB ranges
  // exist before anything touches them. KILN_HUGE_PAGES=0 leaves the heap on 4 KiB pages.
  void use_huge_pages() {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
    const char* e = std::getenv("KILN_HUGE_PAGES");
    if (e && e[0] == '0') return;
    mallopt(M_TOP_PAD, 64 << 20);
    advised_to = reinterpret_cast<uintptr_t>(sbrk(0));
    huge_heap = true;
#endif
  }

  // Called after a block came from malloc: advises whatever the heap grew by since the last call.
  void advise_new_heap() {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
    if (!huge_heap) return;
    uintptr_t top = reinterpret_cast<uintptr_t>(sbrk(0));
    uintptr_t from = advised_to.load(std::memory_order_relaxed);
    if (top == from || !advised_to.compare_exchange_strong(from, top)) return;
    if (top < from) return;  // trimmed: what grows back from here is advised then
    uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    uintptr_t start = from & ~(page - 1);
    madvise(reinterpret_cast<void*>(start), top - start, MADV_HUGEPAGE);  // a hint: failure changes nothing
#endif
  }

  // A fresh block of 2 MiB or more is advised itself as well: where something is mapped just above the heap,
  // glibc grows the main arena by mmap instead of sbrk, and advise_new_heap never sees that memory (a random
  // test order left a 6 MiB block there).
  void advise_block(void* p, size_t n) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
    if (!huge_heap || n < (size_t(2) << 20)) return;
    uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
    madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
#endif
  }
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors in static storage may be freed after exit
  return *c;
}

}  // namespace

namespace cpu_allocator {

void* allocate(size_t nbytes, MemoryCategory category) {
  if (nbytes == 0) nbytes = 1;
  Cache& c = cache();
  size_t sz = size_class(nbytes);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.alloc_count++;
    c.stats.current_bytes += int64_t(sz);
    c.stats.category_bytes[size_t(category)] += int64_t(sz);
    if (c.stats.current_bytes > c.stats.peak_bytes) {
      c.stats.peak_bytes = c.stats.current_bytes;
      c.stats.category_peak_bytes = c.stats.category_bytes;
    }
    auto it = c.free_blocks.find(sz);
    if (it != c.free_blocks.end()) {
      void* p = it->second;
      c.free_blocks.erase(it);
      c.stats.cached_bytes -= int64_t(sz);
      c.stats.cache_hits++;
      KILN_UNPOISON(p, nbytes);
      KILN_POISON(static_cast<char*>(p) + nbytes, sz - nbytes);
      return p;
    }
  }
  void* p = std::aligned_alloc(64, sz);
  if (!p) {
    empty_cache();
    p = std::aligned_alloc(64, sz);
  }
  if (p) {
    c.advise_new_heap();
    c.advise_block(p, sz);
    KILN_POISON(static_cast<char*>(p) + nbytes, sz - nbytes);
  }
  if (!p) {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.current_bytes -= int64_t(sz);
    c.stats.category_bytes[size_t(category)] -= int64_t(sz);
    fail("out of memory: cannot allocate {} bytes on cpu", nbytes);
  }
  return p;
}

void release(void* p, size_t nbytes, MemoryCategory category) {
  if (!p) return;
  if (nbytes == 0) nbytes = 1;
  Cache& c = cache();
  size_t sz = size_class(nbytes);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.current_bytes -= int64_t(sz);
    c.stats.category_bytes[size_t(category)] -= int64_t(sz);
    if (c.enabled) {
      KILN_POISON(p, sz);
      c.free_blocks.emplace(sz, p);
      c.stats.cached_bytes += int64_t(sz);
      return;
    }
  }
  std::free(p);
}

void recharge(size_t nbytes, MemoryCategory from, MemoryCategory to) {
  if (from == to) return;
  if (nbytes == 0) nbytes = 1;
  Cache& c = cache();
  int64_t sz = int64_t(size_class(nbytes));
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.category_bytes[size_t(from)] -= sz;
  c.stats.category_bytes[size_t(to)] += sz;
  // Still at the peak (nothing allocated since): the peak's split is the current one. A tensor is
  // typically allocated as a temporary and saved or made a .grad right after.
  if (c.stats.current_bytes == c.stats.peak_bytes) c.stats.category_peak_bytes = c.stats.category_bytes;
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
  c.stats.category_peak_bytes = c.stats.category_bytes;
}

void empty_cache() {
  Cache& c = cache();
  std::multimap<size_t, void*> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    blocks.swap(c.free_blocks);
    c.stats.cached_bytes = 0;
  }
  for (auto& [sz, p] : blocks) {
    KILN_UNPOISON(p, sz);
    std::free(p);
  }
}

}  // namespace kiln
