#pragma once
// The caching CPU allocator: freed blocks are kept per size class and handed out again, so a loop
// that allocates the same large tensors pays the kernel's first-touch page faults only once.
// KILN_CACHING_ALLOCATOR=0 turns caching off (each free goes back to the system; useful under ASan).
#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace kiln {

struct MemoryStats {
  int64_t current_bytes = 0;    // handed out and not yet freed
  int64_t peak_bytes = 0;       // high-water mark of current_bytes since start or reset_peak_memory_stats
  int64_t cached_bytes = 0;     // freed, kept for reuse
  int64_t alloc_count = 0;      // allocations served
  int64_t cache_hits = 0;       // of which served from the cache
};

MemoryStats memory_stats();
void reset_peak_memory_stats();
void empty_cache();  // returns every cached block to the system
// The same for a device's caching allocator (Device::cpu() gives the CPU ones above).
MemoryStats memory_stats(Device device);
void empty_cache(Device device);

namespace cpu_allocator {
void* allocate(size_t nbytes);  // 64-byte aligned; never null (throws kiln::Error)
void release(void* p, size_t nbytes);
}  // namespace cpu_allocator

}  // namespace kiln
