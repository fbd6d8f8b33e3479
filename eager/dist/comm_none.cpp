// kiln::dist's transport when kiln was built without MPI: the API links and says why it cannot run.
#include "core/error.h"
#include "eager/dist/comm.h"

namespace kiln::dist::detail {

namespace {
[[noreturn]] void no_mpi(const char* what) {
  fail("{}: kiln was built without mpi (install libopenmpi-dev and openmpi-bin, then reconfigure with meson)", what);
}
}  // namespace

struct Request::Impl {};
struct Comm::Impl {};

Request::Request() = default;
Request::~Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
bool Request::active() const { return false; }
bool Request::test() { return true; }
void Request::wait(const std::string&) {}
int Request::source() const { return -1; }
int64_t Request::received_bytes() const { return 0; }

Comm::~Comm() = default;
bool Comm::available() { return false; }
void Comm::init(std::chrono::milliseconds) { no_mpi("init_process_group"); }
bool Comm::initialized() { return false; }
void Comm::finalize() { no_mpi("destroy_process_group"); }
std::shared_ptr<Comm> Comm::world() { no_mpi("dist"); }
std::chrono::milliseconds Comm::timeout() { return {}; }
void Comm::mark_broken() {}
bool Comm::broken() { return false; }
std::shared_ptr<Comm> Comm::dup() const { no_mpi("dist"); }
int Comm::rank() const { return 0; }
int Comm::size() const { return 1; }
Request Comm::iallreduce(void*, int64_t, DType, ReduceOp) { no_mpi("all_reduce"); }
Request Comm::ibcast(void*, int64_t, int) { no_mpi("broadcast"); }
Request Comm::iallgather(const void*, void*, int64_t, DType) { no_mpi("all_gather_into_tensor"); }
Request Comm::ireduce_scatter(const void*, void*, int64_t, DType, ReduceOp) { no_mpi("reduce_scatter_tensor"); }
Request Comm::ireduce(const void*, void*, int64_t, DType, ReduceOp, int) { no_mpi("reduce"); }
Request Comm::ibarrier() { no_mpi("barrier"); }
Request Comm::isend(const void*, int64_t, int, int) { no_mpi("send"); }
Request Comm::irecv(void*, int64_t, int, int) { no_mpi("recv"); }
std::vector<std::string> Comm::allgather(const std::string&, const std::string&) { no_mpi("dist"); }

}  // namespace kiln::dist::detail
