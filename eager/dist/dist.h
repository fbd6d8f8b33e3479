#pragma once
// kiln::dist: processes that train together (torch.distributed's names). A program started by
// `mpirun -np N prog` calls init_process_group() once; each process learns its rank and the world
// size from the MPI environment. Collectives work in place on CPU tensors, on every rank in the same
// order, and every wait is bounded by the group's timeout: a rank that died or stopped calling makes
// the others raise instead of hang.
//
//   dist::init_process_group();                  // backend "mpi"
//   Tensor t = full({4}, double(dist::get_rank()));
//   dist::all_reduce(t, dist::ReduceOp::Sum);    // every rank now holds 0 + 1 + ... + (N-1)
//   dist::destroy_process_group();
//
// GPU tensors: init_process_group("nccl") reduces CUDA tensors with NCCL on the device's stream and CPU
// tensors with MPI still (torch's "cpu:mpi,cuda:nccl"); each rank uses cuda:(local rank % visible gpus),
// one gpu per rank. libnccl is opened at run time, so the same binary runs where it is missing.
//
// Data-parallel training: eager/dist/ddp.h (DistributedDataParallel) and eager/dist/sampler.h.
#include <chrono>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace kiln::dist {

enum class ReduceOp { Sum, Avg, Max, Min };

// True when kiln was built with MPI (meson found it); otherwise init_process_group raises.
bool is_available();
// True when the nccl backend can run here: kiln was built with nccl.h, and this machine has mpi, a cuda
// driver, a visible gpu and libnccl.so.2 (torch's is_nccl_available asks only the first).
bool is_nccl_available();
// Why is_nccl_available() is false ("backend nccl needs a cuda device: cuda: no driver found
// (libcuda.so.1)"); empty when it is true.
std::string nccl_unavailable_reason();
// The gpu this rank's nccl collectives use: cuda:(local rank % visible gpus), the local rank from the
// launcher (OMPI_COMM_WORLD_LOCAL_RANK). Tensors reduced under the nccl backend must be on it.
Device nccl_device();
bool is_initialized();
// The world size the launcher announces in the environment (mpirun's OMPI_COMM_WORLD_SIZE, PMI_SIZE),
// 1 when the process was not started by a launcher; readable before init, so a program can decide
// whether to run distributed.
int launcher_world_size();

// Joins the processes mpirun started (MPI_Init_thread). `timeout` bounds every collective wait
// (torch's default is 30 minutes); on expiry the wait raises and the group is unusable. backend is
// "mpi" (cpu tensors) or "nccl" (cuda tensors too; raises here, saying what is missing, where it
// cannot run). The NCCL communicator is made on the first collective of a cuda tensor, as torch does.
void init_process_group(const std::string& backend = "mpi",
                        std::chrono::milliseconds timeout = std::chrono::minutes(30));
std::string get_backend();
// ncclCommDestroy and MPI_Finalize; after a timeout or a failed collective it aborts the job instead (MPI_Abort), since
// finalizing would wait for the rank that is gone. Called at exit if the program did not.
void destroy_process_group();
int get_rank();
int get_world_size();

// A pending asynchronous collective (torch's Work): wait() blocks, bounded by the group's timeout.
class Work {
 public:
  Work();
  ~Work();
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  bool is_completed();
  void wait();
  // A completed receive (irecv, recv): the rank the message came from; -1 for other operations.
  int source_rank() const;

  struct State;
  std::unique_ptr<State> state;
};

// In place on every rank. async_op returns a pending Work (the tensor must stay alive and untouched
// until wait()); otherwise the returned Work is already complete. A non-contiguous tensor is reduced
// through a contiguous copy written back at the end. A CUDA tensor's collective is queued on its
// device's stream: the result is ordered before any later kiln work on the device even without wait(),
// and wait() polls an event after it (and NCCL's error state) against the timeout, then aborts the
// communicator and raises.
Work all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum, bool async_op = false);
Work broadcast(const Tensor& tensor, int src, bool async_op = false);
// torch's all_gather_into_tensor: output (world * input.numel() elements, any shape) gets every rank's input
// in rank order. torch's reduce_scatter_tensor: output gets the reduction over the ranks of block rank() of
// input (world * output.numel() elements). CPU tensors of one dtype; under the nccl backend cuda tensors raise
// (not supported yet). The input must stay untouched until an async Work completes.
Work all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op = false);
Work reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum, bool async_op = false);
void barrier();

// Point to point between two ranks (torch.distributed's names). The tensor is the data to send, or the
// buffer to receive into: its dtype and number of elements must match the sender's, or recv raises
// naming both sizes. A CPU tensor; under the nccl backend cuda tensors raise (not supported yet).
// Messages with the same tag between two ranks arrive in the order they were sent. Every wait is
// bounded by the group's timeout, so a peer that died or never posts the matching call makes this
// rank raise instead of hang. isend's tensor must stay untouched until its Work completes.
void send(const Tensor& tensor, int dst, int tag = 0);
// src -1 accepts any rank; returns the rank the message came from.
int recv(const Tensor& tensor, int src = -1, int tag = 0);
Work isend(const Tensor& tensor, int dst, int tag = 0);
Work irecv(const Tensor& tensor, int src = -1, int tag = 0);

}  // namespace kiln::dist
