#pragma once
// The caching CPU allocator: freed blocks are kept per size class and handed out again, so a loop
// that allocates the same large tensors pays the kernel's first-touch page faults only once.
// KILN_CACHING_ALLOCATOR=0 turns caching off (each free goes back to the system; useful under ASan).
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "core/memory_category.h"

namespace kiln {

struct MemoryStats {
  int64_t current_bytes = 0;    // handed out and not yet freed
  int64_t peak_bytes = 0;       // high-water mark of current_bytes since start or reset_peak_memory_stats
  int64_t cached_bytes = 0;     // freed, kept for reuse
  int64_t alloc_count = 0;      // allocations served
  int64_t cache_hits = 0;       // of which served from the cache
  // CPU only: current_bytes by MemoryCategory, and how current_bytes split when peak_bytes was reached
  // (each sums to its total exactly).
  std::array<int64_t, kNumMemoryCategories> category_bytes{};
  std::array<int64_t, kNumMemoryCategories> category_peak_bytes{};
};

MemoryStats memory_stats();
void reset_peak_memory_stats();
void empty_cache();  // returns every cached block to the system
// The same for a device's caching allocator (Device::cpu() gives the CPU ones above).
MemoryStats memory_stats(Device device);
void empty_cache(Device device);

namespace cpu_allocator {
// 64-byte aligned; never null (throws kiln::Error). `category` is what the bytes are counted under.
void* allocate(size_t nbytes, MemoryCategory category = MemoryCategory::Temporary);
void release(void* p, size_t nbytes, MemoryCategory category = MemoryCategory::Temporary);
// Live bytes of one allocation change category (a storage's role changed).
void recharge(size_t nbytes, MemoryCategory from, MemoryCategory to);
}  // namespace cpu_allocator

}  // namespace kiln
