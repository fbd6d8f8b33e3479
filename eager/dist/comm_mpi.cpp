// kiln::dist's transport on MPI (Open MPI from Debian). Every collective is nonblocking underneath
// and every wait polls MPI_Test against a deadline: MPI's own blocking calls cannot be interrupted,
// so a peer that died or stopped would hang them forever. Errors return to us (MPI_ERRORS_RETURN on
// each communicator) and become kiln::Error naming the call.
// The C API only: Open MPI's deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "eager/dist/comm.h"

namespace kiln::dist::detail {

namespace {

struct Global {
  bool initialized = false, finalized = false;
  bool broken = false;  // a wait timed out or a call failed: operations may be left in flight
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<Comm> world;
};
Global& global() {
  static Global g;
  return g;
}

std::string mpi_error(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return fmt::format("error code {}", code);
  return std::string(buf, size_t(len));
}

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  global().broken = true;
  fail("dist: {} failed: {}", call, mpi_error(code));
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Bool: return MPI_C_BOOL;
    case DType::BFloat16:
    case DType::Float16: break;
  }
  fail("dist: all_reduce of {} tensors is not supported (mpi has no 16-bit float type)", dtype_name(d));
}

MPI_Op mpi_op(ReduceOp op, DType d) {
  bool logical = d == DType::Bool;  // MPI reduces C bools only with logical ops
  switch (op) {
    case ReduceOp::Sum: return logical ? MPI_LOR : MPI_SUM;
    case ReduceOp::Max: return logical ? MPI_LOR : MPI_MAX;
    case ReduceOp::Min: return logical ? MPI_LAND : MPI_MIN;
    case ReduceOp::Avg: break;
  }
  fail("dist: reduce op avg reaches the transport (it is sum then a division)");
}

int int_count(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX) fail("dist: {} of {} elements exceeds mpi's int count ({})", what, n, INT_MAX);
  return int(n);
}

void finalize_at_exit() {
  if (global().initialized && !global().finalized) Comm::finalize();
}

}  // namespace

struct Request::Impl {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Status status{};
  int rank = 0, size = 1;
  // What a timeout most likely means, for the error: collectives and transfers stall differently.
  const char* stalled = "another rank died, stopped, or is in a different collective";
};

struct Comm::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
};

Request::Request() = default;
Request::~Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;

bool Request::active() const { return impl && impl->req != MPI_REQUEST_NULL; }

bool Request::test() {
  if (!active()) return true;
  int done = 0;
  check(MPI_Test(&impl->req, &done, &impl->status), "MPI_Test");
  return done != 0;
}

void Request::wait(const std::string& what) {
  if (!active()) return;
  auto limit = global().timeout;
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (int spins = 0;; ++spins) {
    if (test()) return;
    // A short spin first (a reduce often completes within microseconds), then yield the core:
    // ranks are often more than the cores (mpirun --oversubscribe) and the peer needs it to progress.
    if (spins < 64) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      global().broken = true;
      fail("dist: {} did not complete within {} ms on rank {} of {}: {}", what, limit.count(), impl->rank,
           impl->size, impl->stalled);
    }
    std::this_thread::yield();
  }
}

int Request::source() const { return impl ? impl->status.MPI_SOURCE : -1; }

int64_t Request::received_bytes() const {
  if (!impl) return 0;
  int n = 0;
  MPI_Get_count(&impl->status, MPI_BYTE, &n);
  return n;
}

bool Comm::available() { return true; }

void Comm::init(std::chrono::milliseconds timeout) {
  Global& g = global();
  if (g.initialized) fail("init_process_group: trying to initialize the default process group twice");
  if (g.finalized)
    fail("init_process_group: the process group was destroyed and mpi cannot start again in the same process");
  if (timeout.count() <= 0) fail("init_process_group: timeout must be positive, got {} ms", timeout.count());
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    // FUNNELED: only the thread that called init makes MPI calls; kiln's OpenMP workers never do.
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) fail("init_process_group: MPI_Init_thread failed: {}", mpi_error(rc));
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g.initialized = true;
  g.timeout = timeout;
  auto w = std::shared_ptr<Comm>(new Comm());
  w->impl = std::make_unique<Impl>();
  w->impl->comm = MPI_COMM_WORLD;
  MPI_Comm_rank(MPI_COMM_WORLD, &w->impl->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w->impl->size);
  // kiln's own collectives run on a duplicate, never on the world the program may also use.
  g.world = w->dup();
  static bool registered = false;
  if (!registered) std::atexit(finalize_at_exit), registered = true;
}

bool Comm::initialized() { return global().initialized; }

void Comm::finalize() {
  Global& g = global();
  if (!g.initialized) fail("destroy_process_group: the default process group is not initialized");
  g.initialized = false;
  g.finalized = true;
  g.world.reset();
  if (g.broken) {
    // MPI_Finalize would wait for operations involving the rank that is gone.
    MPI_Abort(MPI_COMM_WORLD, 1);
    return;
  }
  MPI_Finalize();
}

std::shared_ptr<Comm> Comm::world() {
  if (!global().initialized)
    fail("dist: default process group has not been initialized, please make sure to call init_process_group");
  return global().world;
}

std::chrono::milliseconds Comm::timeout() { return global().timeout; }
void Comm::mark_broken() { global().broken = true; }
bool Comm::broken() { return global().broken; }

Comm::~Comm() {
  if (!impl || impl->comm == MPI_COMM_NULL || impl->comm == MPI_COMM_WORLD) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !global().broken) MPI_Comm_free(&impl->comm);
}

std::shared_ptr<Comm> Comm::dup() const {
  auto c = std::shared_ptr<Comm>(new Comm());
  c->impl = std::make_unique<Impl>();
  Request r;
  r.impl = std::make_unique<Request::Impl>();
  r.impl->rank = impl->rank;
  r.impl->size = impl->size;
  check(MPI_Comm_idup(impl->comm, &c->impl->comm, &r.impl->req), "MPI_Comm_idup");
  r.wait("MPI_Comm_idup");
  check(MPI_Comm_set_errhandler(c->impl->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  c->impl->rank = impl->rank;
  c->impl->size = impl->size;
  return c;
}

int Comm::rank() const { return impl->rank; }
int Comm::size() const { return impl->size; }

namespace {
Request start(const Comm::Impl& c) {
  Request r;
  r.impl = std::make_unique<Request::Impl>();
  r.impl->rank = c.rank;
  r.impl->size = c.size;
  return r;
}
}  // namespace

Request Comm::iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  Request r = start(*impl);
  check(MPI_Iallreduce(MPI_IN_PLACE, data, int_count(count, "all_reduce"), mpi_type(dtype), mpi_op(op, dtype),
                       impl->comm, &r.impl->req),
        "MPI_Iallreduce");
  return r;
}

Request Comm::ibcast(void* data, int64_t bytes, int root) {
  if (root < 0 || root >= impl->size)
    fail("broadcast: invalid source rank {}, rank should be in the interval [0, {}]", root, impl->size - 1);
  Request r = start(*impl);
  check(MPI_Ibcast(data, int_count(bytes, "broadcast"), MPI_BYTE, root, impl->comm, &r.impl->req), "MPI_Ibcast");
  return r;
}

Request Comm::iallgather(const void* in, void* out, int64_t count, DType dtype) {
  Request r = start(*impl);
  int n = int_count(count, "all_gather_into_tensor");
  check(MPI_Iallgather(in, n, mpi_type(dtype), out, n, mpi_type(dtype), impl->comm, &r.impl->req), "MPI_Iallgather");
  return r;
}

Request Comm::ireduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) {
  Request r = start(*impl);
  check(MPI_Ireduce_scatter_block(in, out, int_count(count, "reduce_scatter_tensor"), mpi_type(dtype), mpi_op(op, dtype),
                                  impl->comm, &r.impl->req),
        "MPI_Ireduce_scatter_block");
  return r;
}

Request Comm::ireduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op, int root) {
  Request r = start(*impl);
  check(MPI_Ireduce(in, out, int_count(count, "reduce"), mpi_type(dtype), mpi_op(op, dtype), root, impl->comm, &r.impl->req),
        "MPI_Ireduce");
  return r;
}

Request Comm::ibarrier() {
  Request r = start(*impl);
  check(MPI_Ibarrier(impl->comm, &r.impl->req), "MPI_Ibarrier");
  return r;
}

namespace {
void check_peer(const Comm::Impl& c, int peer, const char* what, const char* role) {
  if (peer < 0 || peer >= c.size)
    fail("{}: invalid {} rank {}, rank should be in the interval [0, {}]", what, role, peer, c.size - 1);
  // A blocking transfer to oneself waits on itself; torch refuses it too.
  if (peer == c.rank) fail("{}: the {} rank {} is this process's own rank", what, role, peer);
}
constexpr const char* kPeerStalled = "the peer died, stopped, or has not posted the matching transfer";
}  // namespace

Request Comm::isend(const void* data, int64_t bytes, int dst, int tag) {
  check_peer(*impl, dst, "send", "destination");
  Request r = start(*impl);
  r.impl->stalled = kPeerStalled;
  check(MPI_Isend(data, int_count(bytes, "send"), MPI_BYTE, dst, tag, impl->comm, &r.impl->req), "MPI_Isend");
  return r;
}

Request Comm::irecv(void* data, int64_t bytes, int src, int tag) {
  if (src != -1) check_peer(*impl, src, "recv", "source");
  Request r = start(*impl);
  r.impl->stalled = kPeerStalled;
  r.impl->status.MPI_SOURCE = src;
  check(MPI_Irecv(data, int_count(bytes, "recv"), MPI_BYTE, src == -1 ? MPI_ANY_SOURCE : src, tag, impl->comm,
                  &r.impl->req),
        "MPI_Irecv");
  return r;
}

std::vector<std::string> Comm::allgather(const std::string& mine, const std::string& what) {
  int n = impl->size;
  std::vector<int> lens(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  int len = int_count(int64_t(mine.size()), "allgather");
  Request r = start(*impl);
  check(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, impl->comm, &r.impl->req), "MPI_Iallgather");
  r.wait(what);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) displs[size_t(i)] = int(total), total += lens[size_t(i)];
  std::string all(size_t(int_count(total, "allgather")), '\0');
  Request r2 = start(*impl);
  check(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, impl->comm,
                        &r2.impl->req),
        "MPI_Iallgatherv");
  r2.wait(what);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(all.substr(size_t(displs[size_t(i)]), size_t(lens[size_t(i)])));
  return out;
}

}  // namespace kiln::dist::detail
