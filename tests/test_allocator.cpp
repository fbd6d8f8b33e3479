// The caching CPU allocator: statistics, block reuse across a training-style loop, and empty_cache.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "support.h"

using namespace kiln;

namespace {
constexpr int64_t kMiB = 1024 * 1024;
// KILN_CACHING_ALLOCATOR=0 (e.g. under ASan) turns reuse off; the reuse checks then expect none.
bool caching_enabled() {
  const char* e = std::getenv("KILN_CACHING_ALLOCATOR");
  return !(e && e[0] == '0');
}
}  // namespace

TEST_CASE("allocator: current and peak bytes follow live tensors") {
  empty_cache();
  reset_peak_memory_stats();
  MemoryStats s0 = memory_stats();
  CHECK(s0.peak_bytes == s0.current_bytes);
  CHECK(s0.cached_bytes == 0);
  {
    Tensor a = empty({16 * kMiB / 4});  // 16 MiB of float32
    MemoryStats s1 = memory_stats();
    CHECK(s1.current_bytes == s0.current_bytes + 16 * kMiB);  // a power of two is its own size class
    CHECK(s1.alloc_count == s0.alloc_count + 1);
    {
      Tensor b = empty({8 * kMiB}, DType::Int64);  // 64 MiB
      CHECK(memory_stats().current_bytes == s0.current_bytes + 80 * kMiB);
      Tensor v = b.view({2, 4 * kMiB});  // a view allocates nothing
      CHECK(memory_stats().current_bytes == s0.current_bytes + 80 * kMiB);
    }
    MemoryStats s2 = memory_stats();
    CHECK(s2.current_bytes == s0.current_bytes + 16 * kMiB);
    CHECK(s2.peak_bytes == s0.current_bytes + 80 * kMiB);
    if (caching_enabled()) CHECK(s2.cached_bytes == 64 * kMiB);
  }
  MemoryStats s3 = memory_stats();
  CHECK(s3.current_bytes == s0.current_bytes);
  CHECK(s3.peak_bytes == s0.current_bytes + 80 * kMiB);
  reset_peak_memory_stats();
  CHECK(memory_stats().peak_bytes == s0.current_bytes);
  empty_cache();
  CHECK(memory_stats().cached_bytes == 0);
}

TEST_CASE("allocator: a loop allocating the same 64 MiB tensor reuses the cached block") {
  empty_cache();
  MemoryStats s0 = memory_stats();
  const void* first = nullptr;
  for (int i = 0; i < 5; ++i) {
    Tensor t = empty({16 * kMiB});  // 64 MiB of float32
    if (i == 0) first = t.raw_data();
    else if (caching_enabled()) CHECK(t.raw_data() == first);  // the very same block
    CHECK(memory_stats().current_bytes == s0.current_bytes + 64 * kMiB);
  }
  MemoryStats s1 = memory_stats();
  CHECK(s1.current_bytes == s0.current_bytes);  // back to baseline after the last free
  CHECK(s1.alloc_count == s0.alloc_count + 5);
  if (caching_enabled()) {
    CHECK(s1.cache_hits == s0.cache_hits + 4);  // every round but the first
    CHECK(s1.cached_bytes == 64 * kMiB);
  } else {
    CHECK(s1.cache_hits == s0.cache_hits);
    CHECK(s1.cached_bytes == 0);
  }
  empty_cache();
  CHECK(memory_stats().cached_bytes == 0);
  CHECK(memory_stats().current_bytes == s0.current_bytes);
}

TEST_CASE("allocator: ops inside a loop reach a steady state") {
  // y = x * 2 + 1 allocates two temporaries a round; from the second round on they come from the cache.
  empty_cache();
  Tensor x = ones({1024, 1024});
  MemoryStats s0 = memory_stats();
  for (int i = 0; i < 4; ++i) {
    Tensor y = x * 2 + 1;
    CHECK(y[3][7].item<float>() == 3);
  }
  MemoryStats s1 = memory_stats();
  CHECK(s1.current_bytes == s0.current_bytes);
  if (caching_enabled()) CHECK(s1.cache_hits - s0.cache_hits >= 6);
  empty_cache();
  CHECK(memory_stats().cached_bytes == 0);
}

TEST_CASE("allocator: size classes reuse a block for a slightly smaller request") {
  empty_cache();
  MemoryStats s0 = memory_stats();
  const void* p = nullptr;
  {
    Tensor a = empty({1000}, DType::Float64);  // 8000 bytes → the 8192 class
    p = a.raw_data();
    CHECK(memory_stats().current_bytes == s0.current_bytes + 8192);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);  // 64-byte aligned
  }
  {
    Tensor b = empty({1010}, DType::Float64);  // 8080 bytes: same class
    if (caching_enabled()) {
      CHECK(b.raw_data() == p);
      CHECK(memory_stats().cache_hits == s0.cache_hits + 1);
    }
  }
  {
    Tensor c = empty({0});  // zero bytes still get a distinct, valid block
    CHECK(c.raw_data() != nullptr);
    CHECK(c.numel() == 0);
  }
  empty_cache();
  CHECK(memory_stats().cached_bytes == 0);
}

#if defined(__linux__) && defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
// The flags of the mapping that holds p, from /proc/self/smaps ("" when none does).
static std::string mapping_flags(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// A cold step's fresh memory comes in 2 MiB pages where the kernel has them (a GPT's first compiled step
// faulted 24.6k 4 KiB pages before): the heap's new stretches are advised MADV_HUGEPAGE.
TEST_CASE("allocator: a fresh block lies in heap memory advised for huge pages") {
  for (const char* v : {"KILN_HUGE_PAGES", "GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"})
    if (std::getenv(v)) return;  // the user's malloc settings are left alone
  if (!caching_enabled() || !std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) return;
  // an odd size no cached block serves, below the 32 MiB at which glibc maps blocks apart from the heap
  size_t n = 6 * kMiB + 4096 + 192;
  void* p = cpu_allocator::allocate(n);
  // its end: its start may lie in the stretch the heap had before kiln's first allocation
  std::string flags = mapping_flags(static_cast<char*>(p) + n - 1);
  cpu_allocator::release(p, n);
  INFO(flags);
  CHECK(flags.find(" hg") != std::string::npos);
}
#endif
