// The public process-group API (dist.h) over the transports: MPI (comm.h) for CPU tensors, and NCCL
// (comm_nccl.h) for CUDA tensors under the nccl backend (torch's "cpu:mpi,cuda:nccl"). Checks the
// tensors, reduces in place, and turns Avg into a sum and a division where the transport has no average.
#include <cstdlib>

#include "eager/autograd/graph.h"
#include "eager/dist/comm.h"
#include "eager/dist/comm_nccl.h"
#include "eager/ops.h"

namespace kiln::dist {

using detail::Comm;
using detail::NcclComm;
using detail::NcclRequest;
using detail::Request;

struct Work::State {
  Request req;       // a CPU tensor's, on MPI
  NcclRequest nccl;  // a CUDA tensor's: the division and the copy back are queued behind it on the stream
  Tensor buffer;     // what MPI writes into (contiguous)
  Tensor target;     // the caller's tensor, when buffer is a copy of it
  Tensor source;     // a two-tensor collective's input, kept until it completes
  double divide = 0; // Avg: divide by the world size once complete
  int64_t expect_bytes = -1;  // a receive: the buffer's size, which the message must fill
  std::string what;
  bool done = false;
  void finish() {
    if (done) return;
    done = true;
    if (!buffer.device().is_cpu()) return;
    if (expect_bytes >= 0 && req.received_bytes() != expect_bytes)
      fail("recv: the buffer has {} bytes ({} {} elements) but the message from rank {} has {} bytes", expect_bytes,
           buffer.numel(), dtype_name(buffer.dtype()), req.source(), req.received_bytes());
    NoGradGuard ng;
    buffer.bump_version();
    if (divide != 0) buffer.div_(divide);
    if (target.defined()) target.copy_(buffer);
  }
};

Work::Work() = default;
Work::~Work() = default;
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&&) noexcept = default;

bool Work::is_completed() {
  if (!state || state->done) return true;
  if (!state->req.test() || !state->nccl.test()) return false;
  state->finish();
  return true;
}

void Work::wait() {
  if (!state || state->done) return;
  state->req.wait(state->what);
  state->nccl.wait();
  state->finish();
}

int Work::source_rank() const { return state && state->expect_bytes >= 0 && state->done ? state->req.source() : -1; }

namespace {
std::string g_backend;  // of the initialized group
}  // namespace

bool is_available() { return Comm::available(); }
bool is_initialized() { return Comm::initialized(); }

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v && *v) return std::max(1, std::atoi(v));
  return 1;
}

bool is_nccl_available() { return detail::nccl_unavailable_reason().empty(); }
std::string nccl_unavailable_reason() {
  std::string why = detail::nccl_unavailable_reason();
  return why.empty() ? why : "backend nccl " + why;
}
Device nccl_device() { return Device::cuda(detail::nccl_local_device()); }

void init_process_group(const std::string& backend, std::chrono::milliseconds timeout) {
  // The backend is checked before the group's state, so its error is the same whenever it is called.
  if (backend != "mpi" && backend != "nccl")
    fail("init_process_group: unknown backend '{}'; kiln has the backends mpi and nccl", backend);
  if (backend == "nccl")
    if (std::string why = detail::nccl_unavailable_reason(); !why.empty())
      fail("init_process_group: backend nccl {}", why);
  Comm::init(timeout);
  g_backend = backend;
}

std::string get_backend() {
  Comm::world();  // raises before init
  return g_backend;
}

void destroy_process_group() {
  if (Comm::initialized()) NcclComm::shutdown();
  Comm::finalize();
}
int get_rank() { return Comm::world()->rank(); }
int get_world_size() { return Comm::world()->size(); }

namespace {

// The contiguous CPU buffer a collective works on, and the tensor to copy it back into if it is a copy.
std::unique_ptr<Work::State> prepare(const char* op, const Tensor& t) {
  if (!t.defined()) fail("{}: tensor is undefined", op);
  if (!t.device().is_cpu() && g_backend != "nccl")
    fail("{}: tensor is on {}; the {} backend works on cpu tensors (init_process_group(\"nccl\") reduces cuda "
         "tensors, or copy with .cpu())",
         op, t.device().str(), g_backend);
  auto s = std::make_unique<Work::State>();
  s->what = fmt::format("{} of {} {} elements", op, t.numel(), dtype_name(t.dtype()));
  if (t.is_contiguous()) {
    s->buffer = t;
  } else {
    NoGradGuard ng;
    s->buffer = t.contiguous();
    s->target = t;
  }
  return s;
}

Work finish(std::unique_ptr<Work::State> s, bool async_op) {
  Work w;
  w.state = std::move(s);
  if (!async_op) w.wait();
  return w;
}

// The communicator a CUDA tensor reduces on, checked to be on the tensor's device.
NcclComm& nccl_for(Comm& world, const char* op, const Tensor& t) {
  NcclComm& n = NcclComm::get(world);
  if (t.device().index != n.device())
    fail("{}: tensor is on {} but rank {}'s nccl communicator is on cuda:{} (local rank % visible gpus)", op,
         t.device().str(), n.rank(), n.device());
  return n;
}

// A CUDA tensor's collective: the division and the copy back are queued behind it on the same stream, and
// the Work then watches an event recorded after them (a failure of the collective still shows through
// the communicator's asynchronous error, which every test of the request polls).
Work nccl_finish(NcclComm& n, std::unique_ptr<Work::State> s, bool divide, bool async_op) {
  {
    NoGradGuard ng;
    s->buffer.bump_version();
    if (divide) s->buffer.div_(double(n.size()));
    if (s->target.defined()) s->target.copy_(s->buffer);
  }
  if (divide || s->target.defined()) s->nccl = n.fence(s->what);
  Work w;
  w.state = std::move(s);
  if (!async_op) w.wait();
  return w;
}

Work nccl_all_reduce(Comm& world, std::unique_ptr<Work::State> s, ReduceOp op, bool async_op) {
  NcclComm& n = nccl_for(world, "all_reduce", s->buffer);
  bool divide = op == ReduceOp::Avg && !n.has_avg();
  s->nccl = n.all_reduce(s->buffer.raw_data(), s->buffer.numel(), s->buffer.dtype(), divide ? ReduceOp::Sum : op,
                         s->what);
  return nccl_finish(n, std::move(s), divide, async_op);
}

}  // namespace

Work all_reduce(const Tensor& tensor, ReduceOp op, bool async_op) {
  auto comm = Comm::world();
  auto s = prepare("all_reduce", tensor);
  DType d = tensor.dtype();
  if (op == ReduceOp::Avg) {
    if (!is_floating(d)) fail("all_reduce: reduce op avg needs a floating tensor, got {}", dtype_name(d));
    s->divide = double(comm->size());
  }
  if (!tensor.device().is_cpu()) return nccl_all_reduce(*comm, std::move(s), op, async_op);
  s->req = comm->iallreduce(s->buffer.raw_data(), s->buffer.numel(), d, op == ReduceOp::Avg ? ReduceOp::Sum : op);
  return finish(std::move(s), async_op);
}

Work broadcast(const Tensor& tensor, int src, bool async_op) {
  auto comm = Comm::world();
  auto s = prepare("broadcast", tensor);
  if (!tensor.device().is_cpu()) {
    NcclComm& n = nccl_for(*comm, "broadcast", tensor);
    s->nccl = n.broadcast(s->buffer.raw_data(), s->buffer.numel() * int64_t(s->buffer.element_size()), src, s->what);
    return nccl_finish(n, std::move(s), false, async_op);
  }
  s->req = comm->ibcast(s->buffer.raw_data(), s->buffer.numel() * int64_t(s->buffer.element_size()), src);
  return finish(std::move(s), async_op);
}

namespace {

// The two-tensor collectives' common checks: one dtype, cpu tensors, sizes that match the world.
std::unique_ptr<Work::State> prepare_pair(const char* op, const Tensor& output, const Tensor& input, int64_t out_per_in,
                                          int64_t in_per_out) {
  if (!input.defined()) fail("{}: input is undefined", op);
  if (!output.defined()) fail("{}: output is undefined", op);
  if (input.dtype() != output.dtype())
    fail("{}: input and output must have the same dtype, got {} and {}", op, dtype_name(input.dtype()),
         dtype_name(output.dtype()));
  if (output.numel() * in_per_out != input.numel() * out_per_in)
    fail("{}: output has {} elements and input {}; with {} ranks the {} must have {} times the {}'s", op,
         output.numel(), input.numel(), get_world_size(), out_per_in > 1 ? "output" : "input",
         get_world_size(), out_per_in > 1 ? "input" : "output");
  if (input.device() != output.device())
    fail("{}: input is on {} and output on {}; both must be on one device", op, input.device().str(),
         output.device().str());
  auto s = prepare(op, output);
  NoGradGuard ng;
  s->source = input.is_contiguous() ? input : input.contiguous();
  return s;
}

}  // namespace

Work all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op) {
  auto comm = Comm::world();
  auto s = prepare_pair("all_gather_into_tensor", output, input, comm->size(), 1);
  if (!input.device().is_cpu()) {
    NcclComm& n = nccl_for(*comm, "all_gather_into_tensor", input);
    s->nccl = n.all_gather(s->source.raw_data(), s->buffer.raw_data(), s->source.numel(), input.dtype(), s->what);
    return nccl_finish(n, std::move(s), false, async_op);
  }
  s->req = comm->iallgather(s->source.raw_data(), s->buffer.raw_data(), s->source.numel(), input.dtype());
  return finish(std::move(s), async_op);
}

Work reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op, bool async_op) {
  auto comm = Comm::world();
  auto s = prepare_pair("reduce_scatter_tensor", output, input, 1, comm->size());
  if (op == ReduceOp::Avg) {
    if (!is_floating(input.dtype()))
      fail("reduce_scatter_tensor: reduce op avg needs a floating tensor, got {}", dtype_name(input.dtype()));
    s->divide = double(comm->size());
  }
  if (!input.device().is_cpu()) {
    NcclComm& n = nccl_for(*comm, "reduce_scatter_tensor", input);
    bool divide = op == ReduceOp::Avg && !n.has_avg();
    s->nccl = n.reduce_scatter(s->source.raw_data(), s->buffer.raw_data(), s->buffer.numel(), input.dtype(),
                               divide ? ReduceOp::Sum : op, s->what);
    return nccl_finish(n, std::move(s), divide, async_op);
  }
  s->req = comm->ireduce_scatter(s->source.raw_data(), s->buffer.raw_data(), s->buffer.numel(), input.dtype(),
                                 op == ReduceOp::Avg ? ReduceOp::Sum : op);
  return finish(std::move(s), async_op);
}

void barrier() { Comm::world()->ibarrier().wait("barrier"); }

namespace {

std::unique_ptr<Work::State> prepare_p2p(const char* op, const Tensor& t, int tag) {
  if (tag < 0) fail("{}: tag must be non-negative, got {}", op, tag);
  if (t.defined() && !t.device().is_cpu() && g_backend == "nccl")
    fail("{}: tensor is on {}; point-to-point transfers of cuda tensors are not supported by kiln's nccl backend yet "
         "(copy with .cpu())",
         op, t.device().str());
  return prepare(op, t);
}

int64_t bytes_of(const Tensor& t) { return t.numel() * int64_t(t.element_size()); }

}  // namespace

Work isend(const Tensor& tensor, int dst, int tag) {
  auto comm = Comm::world();
  auto s = prepare_p2p("send", tensor, tag);
  s->what = fmt::format("send of {} {} elements to rank {} (tag {})", tensor.numel(), dtype_name(tensor.dtype()), dst, tag);
  s->target = Tensor();  // a send never writes back into the caller's tensor
  s->req = comm->isend(s->buffer.raw_data(), bytes_of(s->buffer), dst, tag);
  Work w;
  w.state = std::move(s);
  return w;
}

Work irecv(const Tensor& tensor, int src, int tag) {
  auto comm = Comm::world();
  auto s = prepare_p2p("recv", tensor, tag);
  s->what = fmt::format("recv of {} {} elements from {} (tag {})", tensor.numel(), dtype_name(tensor.dtype()),
                        src == -1 ? std::string("any rank") : fmt::format("rank {}", src), tag);
  s->expect_bytes = bytes_of(s->buffer);
  s->req = comm->irecv(s->buffer.raw_data(), s->expect_bytes, src, tag);
  Work w;
  w.state = std::move(s);
  return w;
}

void send(const Tensor& tensor, int dst, int tag) { isend(tensor, dst, tag).wait(); }

int recv(const Tensor& tensor, int src, int tag) {
  Work w = irecv(tensor, src, tag);
  w.wait();
  return w.source_rank();
}

}  // namespace kiln::dist
