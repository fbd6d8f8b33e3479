#pragma once
// kiln::dist's GPU transport (internal): NCCL, opened with dlopen on first use so one kiln binary runs
// with or without NCCL, a driver or a GPU. comm_nccl.cpp implements it where meson found nccl.h under
// the CUDA toolkit; nccl_none.cpp, built otherwise, says why it cannot run.
//
// Collectives are queued on the device's one kiln stream (core/device_runtime.h), so they are ordered
// after the kernels that produced their input and before those that read the result, with no host
// synchronisation. The host learns that one finished from an event recorded after it, and learns of a
// failure from ncclCommGetAsyncError; both are polled against the process group's timeout, after which
// the communicator is aborted (ncclCommAbort) so no rank stays blocked in it.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "eager/dist/comm.h"
#include "eager/dist/dist.h"

namespace kiln::dist::detail {

// Why the nccl backend cannot run on this machine (no mpi, no cuda driver, no device, no libnccl), as
// the facts after "backend nccl"; empty when it can.
std::string nccl_unavailable_reason();
// Opens `library` and resolves NCCL's functions without keeping them: the seam the tests use for the
// error text of a missing or incomplete libnccl on any machine. Returns the library's version.
int nccl_probe_library(const std::string& library);
// local rank % visible devices, the local rank from the launcher's environment (the world rank without
// one); raises without a device.
int nccl_local_device();

// One collective queued on the stream: complete once the event recorded after it has been reached.
class NcclRequest {
 public:
  NcclRequest();
  ~NcclRequest();
  NcclRequest(NcclRequest&&) noexcept;
  NcclRequest& operator=(NcclRequest&&) noexcept;
  bool active() const;
  // Never blocks. Raises (and aborts the communicator) when NCCL reported an asynchronous error.
  bool test();
  // Polls until complete; after the group's timeout aborts the communicator and raises naming the
  // operation, the rank and the time since the collective was queued.
  void wait();

  struct Impl;
  std::unique_ptr<Impl> impl;
};

// This process's NCCL communicator over the whole world, on device (local rank % visible devices).
class NcclComm {
 public:
  ~NcclComm();
  // Created on the first collective of a CUDA tensor (collective: every rank must reach it, which the
  // matched order of collectives guarantees): rank 0's ncclGetUniqueId is broadcast over `mpi`, then
  // every rank calls ncclCommInitRank on its device.
  static NcclComm& get(Comm& mpi);
  // ncclCommDestroy (or ncclCommAbort after an error), before MPI finalizes; a no-op if never created.
  static void shutdown();
  int device() const;
  int rank() const;
  int size() const;
  // Avg is ncclAvg where the library has it (2.10 and later); otherwise the caller divides.
  bool has_avg() const;
  // In place on the device, queued on its stream; `what` names the operation in errors.
  NcclRequest all_reduce(void* data, int64_t count, DType dtype, ReduceOp op, std::string what);
  NcclRequest broadcast(void* data, int64_t bytes, int root, std::string what);
  // count elements from every rank, in rank order, into out (world x count); in may be a part of out.
  NcclRequest all_gather(const void* in, void* out, int64_t count, DType dtype, std::string what);
  // in (world x count) reduced over the ranks; this rank's count elements into out.
  NcclRequest reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op, std::string what);
  // Complete once everything queued on the device's stream so far has run (no collective).
  NcclRequest fence(std::string what);

  struct Impl;
  std::unique_ptr<Impl> impl;

 private:
  NcclComm();
};

}  // namespace kiln::dist::detail
