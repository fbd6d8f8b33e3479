// The nccl backend end to end without a GPU, for run_dist.sh's nccl_mock mode: a mock device runtime
// (host memory, events the test completes) replaces the CUDA one, and LD_LIBRARY_PATH puts the mock
// libnccl.so.2 (mock_nccl.cpp, NCCL's API over MPI) before the real one. What runs is kiln's own code:
// the dlopen loader, the unique-id rendezvous over MPI, the device choice, dtype and op mapping, Work
// over events, and the abort on an asynchronous error or a timeout. What the mock cannot show is NCCL
// and the GPU themselves (tests/dist/test_dist.cpp's nccl cases, on a GPU machine).
//   nccl_mock ok | async_error | timeout
#include <dlfcn.h>
#include <kiln/kiln.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/device_runtime.h"
#include "tests/error_of.h"

using namespace kiln;
using kiln::test::error_of;

namespace {

std::atomic<bool> g_events_done{true};
int g_failures = 0, g_rank = 0;

#define EXPECT(cond)                                                                          \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s\n", g_rank, __LINE__, #cond); \
      ++g_failures;                                                                           \
    }                                                                                         \
  } while (0)

int local_size() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return v ? std::atoi(v) : 1;
}

const DeviceRuntime kMock{
    [](int, size_t n) { return std::malloc(n ? n : 1); },
    [](int, void* p, size_t) { std::free(p); },
    [](void* dst, Device, const void* src, Device, size_t n) { std::memcpy(dst, src, n); },
    [](int) { return MemoryStats{}; },
    [](int) {},
    [] { return local_size(); },  // one "gpu" per rank, as the nccl backend requires
    [](int) -> void* {
      static int stream;
      return &stream;
    },
    [](int) -> void* { return new int(0); },
    [](int, void*) { return g_events_done.load(); },
    [](int, void* e) { delete static_cast<int*>(e); },
};

// The mock's counters, through the handle kiln's loader already opened.
int counter(const char* name) {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  auto fn = h ? reinterpret_cast<int* (*)(const char*)>(dlsym(h, "mock_nccl_counter")) : nullptr;
  if (!fn) {
    std::fprintf(stderr, "rank %d: libnccl.so.2 is not the mock (is LD_LIBRARY_PATH set?)\n", g_rank);
    std::exit(2);
  }
  return *fn(name);
}
void inject_async_error(int r) {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  reinterpret_cast<void (*)(int)>(dlsym(h, "mock_nccl_async_error"))(r);
}

// The values of a tensor in (mock) device memory: the mock's memory is the host's.
std::vector<double> values(const Tensor& t) {
  Tensor host = Tensor::empty(t.sizes(), t.dtype());
  std::memcpy(host.raw_data(), t.raw_data(), size_t(t.numel()) * t.element_size());
  std::vector<double> out;
  Tensor d = host.to(DType::Float64);
  for (int64_t i = 0; i < d.numel(); ++i) out.push_back(static_cast<const double*>(d.raw_data())[i]);
  return out;
}

void run_ok(Device dev, int r, int n) {
  std::string e, e0;
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    Tensor s = full({5}, double(r + 1), t).to(dev);
    dist::all_reduce(s);
    EXPECT(s.device() == dev);
    EXPECT(values(s) == std::vector<double>(5, n * (n + 1) / 2.0));
    Tensor mx = full({2}, double(r), t).to(dev);
    dist::all_reduce(mx, dist::ReduceOp::Max);
    EXPECT(values(mx) == std::vector<double>(2, n - 1));
    Tensor mn = full({2}, double(r), t).to(dev);
    dist::all_reduce(mn, dist::ReduceOp::Min);
    EXPECT(values(mn) == std::vector<double>(2, 0));
  }
  Tensor a = full({3}, double(r), DType::Float32).to(dev);
  dist::all_reduce(a, dist::ReduceOp::Avg);  // ncclAvg: the mock says 2.28
  EXPECT(values(a) == std::vector<double>(3, (n - 1) / 2.0));
  EXPECT(counter("init") == 1);
  EXPECT(counter("get_unique_id") == (r == 0 ? 1 : 0));  // rank 1's id came over MPI
  Tensor b = (r == 0 ? arange(6.0).to(DType::Float64) : zeros({6}, DType::Float64)).to(dev);
  dist::broadcast(b, 0);
  EXPECT(values(b) == (std::vector<double>{0, 1, 2, 3, 4, 5}));
  // all_gather_into_tensor and reduce_scatter_tensor (FSDP's and ZeRO's collectives) on NCCL
  for (DType t : {DType::Float32, DType::Int64}) {
    Tensor mine = full({2}, double(r + 1), t).to(dev), all = zeros({2 * n}, t).to(dev);
    dist::all_gather_into_tensor(all, mine);
    std::vector<double> want;
    for (int k = 0; k < n; ++k) want.insert(want.end(), 2, double(k + 1));
    EXPECT(values(all) == want);
    Tensor part = zeros({2}, t).to(dev);
    dist::reduce_scatter_tensor(part, full({2 * n}, double(r + 1), t).to(dev));
    EXPECT(values(part) == std::vector<double>(2, n * (n + 1) / 2.0));
  }
  Tensor avg = zeros({1}).to(dev);
  dist::reduce_scatter_tensor(avg, full({n}, double(r)).to(dev), dist::ReduceOp::Avg);
  EXPECT(values(avg) == std::vector<double>(1, (n - 1) / 2.0));
  EXPECT(counter("all_gather") == 2);
  EXPECT(counter("reduce_scatter") == 3);
  e0 = error_of([&] { dist::all_gather_into_tensor(zeros({2 * n}), ones({2}).to(dev)); });
  EXPECT(e0 == fmt::format("all_gather_into_tensor: input is on {} and output on cpu; both must be on one device",
                           dev.str()));
  // Work watches the event after the collective: incomplete until the device gets there.
  g_events_done = false;
  Tensor x = full({4}, 1.0).to(dev);
  dist::Work w = dist::all_reduce(x, dist::ReduceOp::Sum, true);
  EXPECT(!w.is_completed());
  g_events_done = true;
  EXPECT(w.is_completed());
  w.wait();
  EXPECT(values(x) == std::vector<double>(4, n));
  // CPU tensors still go through MPI in the same group.
  Tensor c = full({2}, double(r + 1));
  dist::all_reduce(c);
  EXPECT(values(c) == std::vector<double>(2, n * (n + 1) / 2.0));
  int reduces = counter("all_reduce");
  e = error_of([&] { dist::all_reduce(ones({2}, DType::Bool).to(dev)); });
  EXPECT(e.find("dist: all_reduce of bool tensors is not supported by nccl") == 0);
  Device other = Device::cuda((dev.index + 1) % std::max(n, 2));
  e = error_of([&] { dist::all_reduce(ones({2}).to(other)); });
  EXPECT(e == fmt::format("all_reduce: tensor is on {} but rank {}'s nccl communicator is on {} (local rank % "
                          "visible gpus)",
                          other.str(), r, dev.str()));
  EXPECT(counter("all_reduce") == reduces);  // refused before reaching NCCL
  EXPECT(counter("abort") == 0);
  dist::destroy_process_group();
  EXPECT(counter("destroy") == 1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "ok" && mode != "async_error" && mode != "timeout") {
    std::fprintf(stderr, "usage: nccl_mock ok|async_error|timeout\n");
    return 2;
  }
  // After libkiln's own registration (its static initialisers ran before main), so this one wins.
  register_device_runtime(Device::Type::CUDA, &kMock);
  if (!dist::is_nccl_available()) {
    std::printf("nccl_mock: %s\n", dist::nccl_unavailable_reason().c_str());
    return 3;
  }
  dist::init_process_group("nccl", std::chrono::seconds(2));
  int r = dist::get_rank(), n = dist::get_world_size();
  g_rank = r;
  Device dev = dist::nccl_device();
  EXPECT(dev == Device::cuda(r));
  if (mode == "ok") {
    run_ok(dev, r, n);
    if (g_failures) return 1;
    std::printf("rank %d: nccl mock ok\n", r);
    return 0;
  }
  Tensor x = full({4}, 1.0).to(dev);
  if (mode == "async_error") inject_async_error(6);  // ncclRemoteError: a peer is gone
  if (mode == "timeout") g_events_done = false;      // the collective never finishes on the device
  std::string e = error_of([&] { dist::all_reduce(x); });
  std::printf("rank %d: error: %s\n", r, e.c_str());
  std::printf("rank %d: aborts %d\n", r, counter("abort"));
  e = error_of([&] { dist::all_reduce(x); });
  std::printf("rank %d: then: %s\n", r, e.c_str());
  std::fflush(stdout);
  dist::barrier();  // MPI still works: both ranks print before either exits and aborts the job
  return 1;  // the group is broken: the exit handler aborts the job (MPI_Abort)
}
