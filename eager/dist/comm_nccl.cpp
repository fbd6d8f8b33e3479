// kiln::dist's GPU transport on NCCL (see comm_nccl.h). nccl.h supplies only types and signatures: the
// library is opened with dlopen, as backends/cuda/driver_api.cpp opens libcuda, and the device's stream
// and events come through core's DeviceRuntime, since eager/dist sits below backends/cuda.
#include "eager/dist/comm_nccl.h"

#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "core/device_runtime.h"
#include "core/error.h"
#include "core/load_once.h"
#include "core/log.h"
#include "kiln_config.h"

namespace kiln::dist::detail {

namespace {

#define KILN_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)            \
  X(ncclGetErrorString)        \
  X(ncclGetUniqueId)           \
  X(ncclCommInitRank)          \
  X(ncclCommDestroy)           \
  X(ncclCommAbort)             \
  X(ncclCommGetAsyncError)     \
  X(ncclAllReduce)             \
  X(ncclBroadcast)             \
  X(ncclAllGather)             \
  X(ncclReduceScatter)

struct NcclApi {
#define KILN_NCCL_FIELD(name) decltype(&::name) name = nullptr;
  KILN_NCCL_FUNCTIONS(KILN_NCCL_FIELD)
#undef KILN_NCCL_FIELD
  decltype(&::ncclGetLastError) ncclGetLastError = nullptr;  // 2.13 and later; optional
  int version = 0;  // 22809 for 2.28.9
  std::string library;
};

NcclApi load(const std::string& library, bool keep) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    fail("nccl: cannot open {} ({})", library, why ? why : "not found");
  }
  NcclApi api;
  api.library = library;
  std::string missing;
#define KILN_NCCL_RESOLVE(name)                                                  \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(h, #name));             \
  if (!api.name && missing.empty()) missing = #name;
  KILN_NCCL_FUNCTIONS(KILN_NCCL_RESOLVE)
#undef KILN_NCCL_RESOLVE
  api.ncclGetLastError = reinterpret_cast<decltype(api.ncclGetLastError)>(dlsym(h, "ncclGetLastError"));
  if (missing.empty() && api.ncclGetVersion(&api.version) != ncclSuccess) missing = "a working ncclGetVersion";
  if (!keep || !missing.empty()) dlclose(h);
  if (!missing.empty()) fail("nccl: the library {} lacks {}", library, missing);
  return api;
}

const NcclApi& nccl() {
  return load_once<NcclApi>([] {
    // The loader's search path first (LD_LIBRARY_PATH, ldconfig), then the toolkit meson found.
    std::vector<std::string> tried;
    for (std::string lib : {std::string("libnccl.so.2"), std::string(KILN_CUDA_LIBDIR "/libnccl.so.2")}) {
      try {
        return load(lib, true);
      } catch (const Error& e) {
        tried.push_back(e.what());
      }
    }
    fail("{}; {}", tried[0], tried[1]);
  });
}

const DeviceRuntime& cuda_runtime() { return device_runtime(Device::cuda(0)); }

int env_int(std::initializer_list<const char*> vars, int fallback) {
  for (const char* var : vars)
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return fallback;
}

ncclDataType_t nccl_type(DType d, int version) {
  switch (d) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16:
      if (version < 21000) fail("dist: all_reduce of bfloat16 tensors needs nccl 2.10 or later, found {}", version);
      return ncclBfloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Bool: break;
  }
  fail("dist: all_reduce of {} tensors is not supported by nccl (float32, float64, float16, bfloat16, int32 and "
       "int64 are)",
       dtype_name(d));
}

}  // namespace

std::string nccl_unavailable_reason() {
  if (!Comm::available()) return "needs mpi for its rendezvous, and kiln was built without mpi";
  int devices = 0;
  try {
    devices = cuda_runtime().device_count();
  } catch (const Error& e) {
    return fmt::format("needs a cuda device: {}", e.what());
  }
  if (devices == 0) return "needs a cuda device, and none is visible";
  try {
    nccl();
  } catch (const Error& e) {
    return fmt::format("needs libnccl.so.2: {}", e.what());
  }
  return "";
}

int nccl_probe_library(const std::string& library) { return load(library, false).version; }

namespace {
int local_rank() { return env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, -1); }
}  // namespace

int nccl_local_device() {
  int devices = cuda_runtime().device_count();
  if (devices == 0) fail("dist: the nccl backend needs a cuda device, and none is visible");
  int r = local_rank();
  if (r < 0) r = Comm::initialized() ? Comm::world()->rank() : 0;
  return r % devices;
}

struct NcclComm::Impl {
  const NcclApi* api = nullptr;
  const DeviceRuntime* rt = nullptr;
  ncclComm_t comm = nullptr;
  int device = 0, rank = 0, size = 1;
  bool destroyed = false;
  std::string aborted;  // why the communicator was aborted; empty while usable

  void check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    Comm::mark_broken();
    // The last error's text says which argument or peer (e.g. two ranks on one gpu).
    const char* last = api->ncclGetLastError ? api->ncclGetLastError(comm) : nullptr;
    fail("dist: {} failed on rank {} of {}: {}{}{}", call, rank, size, api->ncclGetErrorString(r),
         last && *last ? ": " : "", last ? last : "");
  }
  // After a timeout or an asynchronous error: unblocks every NCCL kernel of this communicator, so the
  // stream (and the process's exit) cannot hang on it; the communicator is unusable afterwards.
  void abort(const std::string& why) {
    if (!aborted.empty() || destroyed) return;
    aborted = why;
    Comm::mark_broken();
    api->ncclCommAbort(comm);
    comm = nullptr;
  }
  // The device's one kiln stream, where every collective is queued (after checking the communicator is usable).
  cudaStream_t stream_for(const std::string& what) const {
    check_usable(what);
    return static_cast<cudaStream_t>(rt->stream(device));
  }
  void check_usable(const std::string& what) const {
    if (destroyed) fail("dist: {} on rank {}: the process group was destroyed", what, rank);
    if (!aborted.empty())
      fail("dist: {} cannot run on rank {} of {}: the nccl communicator was aborted after an earlier error ({})",
           what, rank, size, aborted);
  }
};

struct NcclRequest::Impl {
  NcclComm::Impl* comm = nullptr;  // the process's communicator, never freed
  void* event = nullptr;
  std::string what;
  std::chrono::steady_clock::time_point queued;
  ~Impl() {
    if (!event) return;
    try {
      comm->rt->release_event(comm->device, event);
    } catch (const Error&) {
      // The device is in an error state; the event goes with the context.
    }
  }
  int64_t elapsed_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - queued).count();
  }
};

NcclRequest::NcclRequest() = default;
NcclRequest::~NcclRequest() = default;
NcclRequest::NcclRequest(NcclRequest&&) noexcept = default;
NcclRequest& NcclRequest::operator=(NcclRequest&&) noexcept = default;

bool NcclRequest::active() const { return impl && impl->event; }

bool NcclRequest::test() {
  if (!active()) return true;
  NcclComm::Impl& c = *impl->comm;
  c.check_usable(impl->what);
  // A peer that failed shows here first: its ranks' kernels would otherwise wait for it until the timeout.
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = c.api->ncclCommGetAsyncError(c.comm, &async);
  if (r == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
    std::string err = c.api->ncclGetErrorString(async);
    c.abort(fmt::format("{} reported {}", impl->what, err));
    fail("dist: {} failed on rank {} of {} after {} ms: nccl reported {}; the nccl communicator was aborted",
         impl->what, c.rank, c.size, impl->elapsed_ms(), err);
  }
  if (!c.rt->query_event(c.device, impl->event)) return false;
  c.rt->release_event(c.device, impl->event);
  impl->event = nullptr;
  return true;
}

void NcclRequest::wait() {
  if (!active()) return;
  auto limit = Comm::timeout();
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (int spins = 0;; ++spins) {
    if (test()) return;
    if (spins < 64) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      NcclComm::Impl& c = *impl->comm;
      int64_t elapsed = impl->elapsed_ms();
      c.abort(fmt::format("{} timed out", impl->what));
      fail("dist: {} did not complete within {} ms on rank {} of {} ({} ms since it was queued on cuda:{}): "
           "another rank died, stopped, or is in a different collective; the nccl communicator was aborted",
           impl->what, limit.count(), c.rank, c.size, elapsed, c.device);
    }
    // The host only watches: the collective runs on the device, and a peer rank may need this core.
    std::this_thread::yield();
  }
}

namespace {
NcclComm* g_comm = nullptr;  // never freed: requests point at it, and exit must not destroy it late
}  // namespace

NcclComm::NcclComm() = default;
NcclComm::~NcclComm() = default;

NcclComm& NcclComm::get(Comm& mpi) {
  if (g_comm) {
    if (g_comm->impl->destroyed) fail("dist: the process group was destroyed");
    return *g_comm;
  }
  const NcclApi& api = nccl();
  const DeviceRuntime& rt = cuda_runtime();
  int device = nccl_local_device();
  int devices = rt.device_count();
  int local_size = env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, mpi.size());
  // Checked before the rendezvous, on every rank of the node alike, so they all raise together.
  if (local_size > devices)
    fail("dist: the nccl backend needs one gpu per rank, and {} ranks on this node share {} visible gpu{}: nccl "
         "refuses two ranks on one device (start at most {} rank{} per node)",
         local_size, devices, devices == 1 ? "" : "s", devices, devices == 1 ? "" : "s");

  // Rank 0's id, with whether it could make one, so the others raise instead of waiting on it.
  struct {
    int ok = 0;
    ncclUniqueId id{};
  } hello;
  std::string rank0_error;
  if (mpi.rank() == 0) {
    ncclResult_t r = api.ncclGetUniqueId(&hello.id);
    hello.ok = r == ncclSuccess;
    if (!hello.ok) rank0_error = api.ncclGetErrorString(r);
  }
  mpi.ibcast(&hello, int64_t(sizeof hello), 0).wait("the broadcast of the nccl unique id");
  if (!hello.ok)
    fail("dist: ncclGetUniqueId failed on rank 0{}", rank0_error.empty() ? "" : ": " + rank0_error);

  auto impl = std::make_unique<Impl>();
  impl->api = &api;
  impl->rt = &rt;
  impl->device = device;
  impl->rank = mpi.rank();
  impl->size = mpi.size();
  rt.stream(device);  // NCCL's runtime calls use the context current on this thread: the device's primary one
  impl->check(api.ncclCommInitRank(&impl->comm, mpi.size(), hello.id, mpi.rank()), "ncclCommInitRank");
  int v = api.version;
  logger().debug("dist: nccl {}.{}.{} ({}) ready on cuda:{}, rank {} of {}", v / 10000, v / 100 % 100, v % 100,
                 api.library, device, impl->rank, impl->size);
  auto* c = new NcclComm();
  c->impl = std::move(impl);
  g_comm = c;
  return *c;
}

void NcclComm::shutdown() {
  if (!g_comm) return;
  Impl& c = *g_comm->impl;
  if (c.destroyed) return;
  if (c.aborted.empty()) {
    // ncclCommDestroy waits for the communicator's queued work; a group that failed must not wait on it.
    if (Comm::broken())
      c.api->ncclCommAbort(c.comm);
    else
      c.api->ncclCommDestroy(c.comm);
  }
  c.comm = nullptr;
  c.destroyed = true;
}

int NcclComm::device() const { return impl->device; }
int NcclComm::rank() const { return impl->rank; }
int NcclComm::size() const { return impl->size; }
bool NcclComm::has_avg() const { return impl->api->version >= 21000; }

namespace {
NcclRequest queued(NcclComm::Impl& c, std::string what) {
  NcclRequest r;
  r.impl = std::make_unique<NcclRequest::Impl>();
  r.impl->comm = &c;
  r.impl->what = std::move(what);
  r.impl->queued = std::chrono::steady_clock::now();
  r.impl->event = c.rt->record_event(c.device);
  return r;
}
}  // namespace

namespace {
ncclRedOp_t nccl_op(ReduceOp op, bool has_avg, int version) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Avg:
      if (!has_avg) fail("dist: nccl {} has no average (2.10 and later do); reduce with sum", version);
      return ncclAvg;
  }
  return ncclSum;
}
}  // namespace

NcclRequest NcclComm::all_reduce(void* data, int64_t count, DType dtype, ReduceOp op, std::string what) {
  Impl& c = *impl;
  auto stream = c.stream_for(what);
  ncclDataType_t type = nccl_type(dtype, c.api->version);
  ncclRedOp_t nop = nccl_op(op, has_avg(), c.api->version);
  c.check(c.api->ncclAllReduce(data, data, size_t(count), type, nop, c.comm, stream), "ncclAllReduce");
  return queued(c, std::move(what));
}

NcclRequest NcclComm::all_gather(const void* in, void* out, int64_t count, DType dtype, std::string what) {
  Impl& c = *impl;
  auto stream = c.stream_for(what);
  ncclDataType_t type = nccl_type(dtype, c.api->version);
  c.check(c.api->ncclAllGather(in, out, size_t(count), type, c.comm, stream), "ncclAllGather");
  return queued(c, std::move(what));
}

NcclRequest NcclComm::reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op,
                                     std::string what) {
  Impl& c = *impl;
  auto stream = c.stream_for(what);
  ncclDataType_t type = nccl_type(dtype, c.api->version);
  ncclRedOp_t nop = nccl_op(op, has_avg(), c.api->version);
  c.check(c.api->ncclReduceScatter(in, out, size_t(count), type, nop, c.comm, stream), "ncclReduceScatter");
  return queued(c, std::move(what));
}

NcclRequest NcclComm::broadcast(void* data, int64_t bytes, int root, std::string what) {
  Impl& c = *impl;
  auto stream = c.stream_for(what);
  if (root < 0 || root >= c.size)
    fail("broadcast: invalid source rank {}, rank should be in the interval [0, {}]", root, c.size - 1);
  c.check(c.api->ncclBroadcast(data, data, size_t(bytes), ncclUint8, root, c.comm, stream), "ncclBroadcast");
  return queued(c, std::move(what));
}

NcclRequest NcclComm::fence(std::string what) {
  impl->check_usable(what);
  return queued(*impl, std::move(what));
}

}  // namespace kiln::dist::detail
