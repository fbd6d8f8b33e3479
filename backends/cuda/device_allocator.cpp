// The caching device allocator (PyTorch's design, reduced): cuMemAlloc and cuMemFree synchronise the
// device and cost tens of microseconds, so freed blocks are kept in per-stream size-class free lists
// and handed out again. A block freed while kernels that use it are still queued is safe to reuse at
// once: kiln has one stream per device, so the next user's kernels run after them. Also registers the
// device runtime core calls for CUDA storage.
#include "core/log.h"

#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/driver_api.h"
#include "backends/cuda/runtime.h"
#include "core/device_runtime.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

// 512-byte granularity up to 1 MiB (cuMemAlloc aligns to 256 bytes anyway), then quarter steps between
// powers of two, so a reused block is at most 25% larger than asked.
size_t size_class(size_t n) {
  if (n == 0) n = 1;
  if (n <= (size_t(1) << 20)) return (n + 511) & ~size_t(511);
  size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));
  size_t step = p / 4;
  return (n + step - 1) / step * step;
}

struct DevicePool {
  std::multimap<size_t, CUdeviceptr> free_blocks;  // size class → blocks; the device's one stream
  MemoryStats stats;
};

struct Pools {
  std::mutex mu;
  std::map<int, DevicePool> pools;
};

Pools& pools() {
  static Pools* p = new Pools();  // never destroyed: tensors in static storage may be freed after exit
  return *p;
}

void free_cached(int index) {
  device_state(index);  // raises without a driver or device, as every CUDA call does
  std::multimap<size_t, CUdeviceptr> blocks;
  {
    Pools& ps = pools();
    std::lock_guard<std::mutex> lock(ps.mu);
    DevicePool& pool = ps.pools[index];
    blocks.swap(pool.free_blocks);
    pool.stats.cached_bytes = 0;
  }
  if (blocks.empty()) return;
  DeviceState& s = device_state(index);
  KILN_CU(cuStreamSynchronize, s.stream);
  for (auto& [sz, p] : blocks) KILN_CU(cuMemFree, p);
}

void* allocate(int index, size_t nbytes) {
  size_t sz = size_class(nbytes);
  Pools& ps = pools();
  DeviceState& s = device_state(index);  // raises without a driver or device
  {
    std::lock_guard<std::mutex> lock(ps.mu);
    DevicePool& pool = ps.pools[index];
    pool.stats.alloc_count++;
    pool.stats.current_bytes += int64_t(sz);
    if (pool.stats.current_bytes > pool.stats.peak_bytes) pool.stats.peak_bytes = pool.stats.current_bytes;
    auto it = pool.free_blocks.find(sz);
    if (it != pool.free_blocks.end()) {
      CUdeviceptr p = it->second;
      pool.free_blocks.erase(it);
      pool.stats.cached_bytes -= int64_t(sz);
      pool.stats.cache_hits++;
      return reinterpret_cast<void*>(p);
    }
  }
  CUdeviceptr p = 0;
  CUresult r = driver().cuMemAlloc(&p, sz);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    kiln::logger().debug("cuda: allocation of {} bytes failed on cuda:{}, freeing the cache and retrying", sz, index);
    free_cached(index);
    r = driver().cuMemAlloc(&p, sz);
  }
  if (r != CUDA_SUCCESS) {
    {
      std::lock_guard<std::mutex> lock(ps.mu);
      ps.pools[index].stats.current_bytes -= int64_t(sz);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      size_t free_b = 0, total_b = 0;
      driver().cuMemGetInfo(&free_b, &total_b);
      fail("out of memory: cannot allocate {} bytes on cuda:{} ({} bytes free of {})", nbytes, index, free_b, total_b);
    }
    check(r, "cuMemAlloc");
  }
  (void)s;
  return reinterpret_cast<void*>(p);
}

void release(int index, void* p, size_t nbytes) {
  if (!p) return;
  size_t sz = size_class(nbytes);
  Pools& ps = pools();
  std::lock_guard<std::mutex> lock(ps.mu);
  DevicePool& pool = ps.pools[index];
  pool.stats.current_bytes -= int64_t(sz);
  pool.stats.cached_bytes += int64_t(sz);
  pool.free_blocks.emplace(sz, reinterpret_cast<CUdeviceptr>(p));
}

// Host ↔ device and device → device copies in the device's stream. A copy from pageable host memory is
// staged by the driver before cuMemcpyHtoDAsync returns, so the source may be freed right after; a
// copy to the host waits for the stream, as the caller reads the bytes next.
void copy_bytes(void* dst, Device dd, const void* src, Device sd, size_t n) {
  if (n == 0) return;
  if (sd.is_cpu()) {
    DeviceState& s = device_state(dd.index);
    KILN_CU(cuMemcpyHtoDAsync, reinterpret_cast<CUdeviceptr>(dst), src, n, s.stream);
  } else if (dd.is_cpu()) {
    DeviceState& s = device_state(sd.index);
    KILN_CU(cuMemcpyDtoHAsync, dst, reinterpret_cast<CUdeviceptr>(src), n, s.stream);
    KILN_CU(cuStreamSynchronize, s.stream);
  } else {
    // Between two devices (or within one): ordered after the source's queued work, then the
    // destination's stream waits for the copy by synchronising the source stream first.
    DeviceState& s = device_state(sd.index);
    KILN_CU(cuMemcpyDtoDAsync, reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), n, s.stream);
    if (sd.index != dd.index) KILN_CU(cuStreamSynchronize, s.stream);
  }
}

MemoryStats stats_of(int index) {
  device_state(index);
  Pools& ps = pools();
  std::lock_guard<std::mutex> lock(ps.mu);
  return ps.pools[index].stats;
}

const DeviceRuntime kRuntime{&allocate,     &release,      &copy_bytes,   &stats_of,      &free_cached,
                             &visible_device_count, &stream_handle, &record_event, &query_event, &release_event};
[[maybe_unused]] const bool kRegistered = (register_device_runtime(Device::Type::CUDA, &kRuntime), true);

}  // namespace
}  // namespace kiln::cuda
