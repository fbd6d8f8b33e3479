#pragma once
// The transport under kiln::dist (internal): a communicator with nonblocking collectives whose every
// wait is bounded by the process group's timeout. comm_mpi.cpp implements it on MPI; comm_none.cpp,
// built when meson finds no MPI, raises on use. No MPI header leaks out of here, so the public
// headers (and user programs) compile without MPI installed.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "eager/dist/dist.h"

namespace kiln::dist::detail {

// One outstanding nonblocking collective or point-to-point transfer. Destroying a request that has not completed leaves the
// operation to MPI (it cannot be cancelled); the process group is then unusable, as after a timeout.
class Request {
 public:
  Request();
  ~Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  bool active() const;  // started and not yet known to be complete
  // True when complete. Each call also drives MPI's progress engine: Open MPI's nonblocking
  // collectives advance only inside MPI calls, so callers test while they compute to overlap.
  bool test();
  // Blocks until complete; after the group's timeout raises naming `what`, the rank and the wait.
  void wait(const std::string& what);
  // A completed receive: the rank it came from (the one asked for, or the sender when any was
  // accepted) and its size in bytes, which may be less than the buffer.
  int source() const;
  int64_t received_bytes() const;

  struct Impl;
  std::unique_ptr<Impl> impl;
};

class Comm {
 public:
  ~Comm();
  static bool available();  // built with MPI
  static void init(std::chrono::milliseconds timeout);
  static bool initialized();
  static void finalize();
  static std::shared_ptr<Comm> world();  // raises before init
  static std::chrono::milliseconds timeout();
  // A wait timed out or a call failed, here or in the nccl transport: operations may be left in flight,
  // so destroy_process_group aborts the job instead of finalizing.
  static void mark_broken();
  static bool broken();
  // A communicator of its own over the same ranks (MPI_Comm_dup): collectives on it are ordered
  // independently of every other communicator, so a control message cannot be matched against a
  // gradient all-reduce still in flight.
  std::shared_ptr<Comm> dup() const;
  int rank() const;
  int size() const;

  // In place on `count` elements at `data` (Sum, Max, Min; Avg is Sum then a division by the caller).
  Request iallreduce(void* data, int64_t count, DType dtype, ReduceOp op);
  Request ibcast(void* data, int64_t bytes, int root);
  // out (size() * count elements) gets every rank's `count` elements of in, in rank order.
  Request iallgather(const void* in, void* out, int64_t count, DType dtype);
  // out (count elements) gets the reduction over the ranks of block rank() of in (size() * count elements).
  Request ireduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op);
  // out (count elements, read on `root` only) gets the reduction over the ranks of each one's `count` elements at in.
  Request ireduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op, int root);
  Request ibarrier();
  // Point to point, `bytes` bytes. Messages of one (source, tag) on one communicator arrive in the
  // order they were sent, so a stream of transfers between two ranks needs no sequence numbers.
  // A send's buffer must stay untouched until its request completes; src -1 receives from any rank.
  Request isend(const void* data, int64_t bytes, int dst, int tag);
  Request irecv(void* data, int64_t bytes, int src, int tag);
  // Every rank's string, in rank order (blocking, bounded by the timeout).
  std::vector<std::string> allgather(const std::string& mine, const std::string& what);

  struct Impl;
  std::unique_ptr<Impl> impl;
};

}  // namespace kiln::dist::detail
