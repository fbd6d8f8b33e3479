#include "backends/cuda/runtime.h"

#include "core/log.h"

#include <memory>
#include <mutex>
#include <vector>

#include "backends/cuda/driver_api.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {
// This thread's view: the states it has used and the context it last made current. Every launch asks
// for its device's state, and the lock and cuCtxSetCurrent cost more than the launch's own work.
// (kiln and cuBLAS use only primary contexts, so nothing else moves this thread's context.)
constexpr int kCachedDevices = 16;
thread_local DeviceState* t_states[kCachedDevices] = {};
thread_local CUcontext t_current = nullptr;
}  // namespace

DeviceState& device_state(int index) {
  if (index >= 0 && index < kCachedDevices && t_states[index]) {
    DeviceState* s = t_states[index];
    if (t_current != s->context) {
      check(driver().cuCtxSetCurrent(s->context), "cuCtxSetCurrent");
      t_current = s->context;
    }
    return *s;
  }
  static std::mutex mu;
  static std::vector<std::unique_ptr<DeviceState>> states;  // never destroyed: storage may outlive main
  const DriverApi& d = driver();
  DeviceState* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (states.empty()) {
      int n = 0;
      KILN_CU(cuDeviceGetCount, &n);
      states.resize(size_t(n));
    }
    if (index < 0 || size_t(index) >= states.size())
      fail("cuda: device index {} is out of range, {} cuda devices are visible", index, states.size());
    auto& slot = states[size_t(index)];
    if (!slot) {
      auto st = std::make_unique<DeviceState>();
      st->index = index;
      CUdevice dev;
      KILN_CU(cuDeviceGet, &dev, index);
      KILN_CU(cuDevicePrimaryCtxRetain, &st->context, dev);
      KILN_CU(cuCtxSetCurrent, st->context);
      KILN_CU(cuDeviceGetAttribute, &st->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
      KILN_CU(cuDeviceGetAttribute, &st->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
      KILN_CU(cuDeviceGetAttribute, &st->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
      KILN_CU(cuStreamCreate, &st->stream, CU_STREAM_NON_BLOCKING);
      kiln::logger().debug("cuda: device {} ready, sm_{}, {} multiprocessors", index, st->arch(), st->sm_count);
      slot = std::move(st);
    }
    s = slot.get();
  }
  // Cheap, and makes the runtime under cuBLAS use the same context from any thread.
  check(d.cuCtxSetCurrent(s->context), "cuCtxSetCurrent");
  t_current = s->context;
  if (index < kCachedDevices) t_states[index] = s;
  return *s;
}

std::string unavailable_reason() {
  try {
    int n = 0;
    KILN_CU(cuDeviceGetCount, &n);
    if (n == 0) return "cuda: no cuda device is visible";
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

bool is_available() { return unavailable_reason().empty(); }

int device_count() {
  if (!is_available()) return 0;
  int n = 0;
  KILN_CU(cuDeviceGetCount, &n);
  return n;
}

int visible_device_count() {
  int n = 0;
  KILN_CU(cuDeviceGetCount, &n);
  return n;
}

void* stream_handle(int index) { return device_state(index).stream; }

void* record_event(int index) {
  DeviceState& s = device_state(index);
  CUevent e = nullptr;
  // No timing: a timing event costs a device-side timestamp and is slower to record and query.
  KILN_CU(cuEventCreate, &e, CU_EVENT_DISABLE_TIMING);
  CUresult r = driver().cuEventRecord(e, s.stream);
  if (r != CUDA_SUCCESS) {
    driver().cuEventDestroy(e);
    check(r, "cuEventRecord");
  }
  return e;
}

bool query_event(int index, void* event) {
  device_state(index);
  CUresult r = driver().cuEventQuery(static_cast<CUevent>(event));
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuEventQuery");
  return true;
}

void release_event(int index, void* event) {
  if (!event) return;
  device_state(index);
  // Not checked: called from destructors, and a failure leaks one event at worst.
  driver().cuEventDestroy(static_cast<CUevent>(event));
}

void synchronize(int index) {
  DeviceState& s = device_state(index);
  KILN_CU(cuStreamSynchronize, s.stream);
}

}  // namespace kiln::cuda
