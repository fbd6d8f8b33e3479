// The public process-group API (dist.h) over the transport in comm.h: checks the tensors, reduces
// in place, and turns Avg into a sum and a division (MPI has no average).
#include <cstdlib>

#include "eager/autograd/graph.h"
#include "eager/dist/comm.h"
#include "eager/ops.h"

namespace kiln::dist {

using detail::Comm;
using detail::Request;

struct Work::State {
  Request req;
  Tensor buffer;     // what MPI writes into (contiguous)
  Tensor target;     // the caller's tensor, when buffer is a copy of it
  double divide = 0; // Avg: divide by the world size once complete
  std::string what;
  bool done = false;
  void finish() {
    if (done) return;
    done = true;
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
  if (!state->req.test()) return false;
  state->finish();
  return true;
}

void Work::wait() {
  if (!state || state->done) return;
  state->req.wait(state->what);
  state->finish();
}

bool is_available() { return Comm::available(); }
bool is_initialized() { return Comm::initialized(); }

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v && *v) return std::max(1, std::atoi(v));
  return 1;
}

void init_process_group(const std::string& backend, std::chrono::milliseconds timeout) {
  if (backend != "mpi")
    fail("init_process_group: unknown backend '{}'; kiln has the mpi backend (nccl is not built yet)", backend);
  Comm::init(timeout);
}

void destroy_process_group() { Comm::finalize(); }
int get_rank() { return Comm::world()->rank(); }
int get_world_size() { return Comm::world()->size(); }

namespace {

// The contiguous CPU buffer a collective works on, and the tensor to copy it back into if it is a copy.
std::unique_ptr<Work::State> prepare(const char* op, const Tensor& t) {
  if (!t.defined()) fail("{}: tensor is undefined", op);
  if (!t.device().is_cpu())
    fail("{}: tensor is on {}; the mpi backend works on cpu tensors (copy with .cpu())", op, t.device().str());
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

}  // namespace

Work all_reduce(const Tensor& tensor, ReduceOp op, bool async_op) {
  auto comm = Comm::world();
  auto s = prepare("all_reduce", tensor);
  DType d = tensor.dtype();
  if (op == ReduceOp::Avg) {
    if (!is_floating(d)) fail("all_reduce: reduce op avg needs a floating tensor, got {}", dtype_name(d));
    s->divide = double(comm->size());
  }
  s->req = comm->iallreduce(s->buffer.raw_data(), s->buffer.numel(), d, op == ReduceOp::Avg ? ReduceOp::Sum : op);
  return finish(std::move(s), async_op);
}

Work broadcast(const Tensor& tensor, int src, bool async_op) {
  auto comm = Comm::world();
  auto s = prepare("broadcast", tensor);
  s->req = comm->ibcast(s->buffer.raw_data(), s->buffer.numel() * int64_t(s->buffer.element_size()), src);
  return finish(std::move(s), async_op);
}

void barrier() { Comm::world()->ibarrier().wait("barrier"); }

}  // namespace kiln::dist
