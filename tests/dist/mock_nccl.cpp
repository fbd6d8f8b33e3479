// A stand-in libnccl.so.2 for machines without a GPU (tests/dist/nccl_mock.cpp): NCCL's C API over MPI on
// host memory, so the nccl backend's rendezvous, collectives, Work and failure handling run end to end
// under mpirun with a mock device runtime. It checks what a real NCCL would refuse (an id that did not
// come from rank 0's ncclGetUniqueId) and counts calls; mock_nccl_counter and mock_nccl_async_error let
// the test read the counts and inject an asynchronous error.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <nccl.h>

#include <cstring>
#include <map>
#include <string>

namespace {
const char kId[] = "kiln-mock-nccl-unique-id";
std::map<std::string, int> g_counters;
ncclResult_t g_async = ncclSuccess;

struct Mock {
  int rank = 0, size = 1;
};

MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclInt32: return MPI_INT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint8: return MPI_BYTE;
    default: return MPI_DATATYPE_NULL;
  }
}
}  // namespace

extern "C" {

int* mock_nccl_counter(const char* name) { return &g_counters[name]; }
void mock_nccl_async_error(int r) { g_async = ncclResult_t(r); }

ncclResult_t ncclGetVersion(int* v) {
  *v = 22809;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInvalidArgument: return "invalid argument";
    default: return "mock nccl error";
  }
}
const char* ncclGetLastError(ncclComm_t) { return "mock: see the test"; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  ++g_counters["get_unique_id"];
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, kId, sizeof kId);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (std::memcmp(id.internal, kId, sizeof kId) != 0) return ncclInvalidArgument;
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (nranks != size || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  ++g_counters["init"];
  *comm = reinterpret_cast<ncclComm_t>(new Mock{rank, nranks});
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  ++g_counters["destroy"];
  delete reinterpret_cast<Mock*>(comm);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  ++g_counters["abort"];
  delete reinterpret_cast<Mock*>(comm);
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* e) {
  *e = g_async;
  return ncclSuccess;
}
// ncclAvg: the sum MPI made, divided by the ranks (floating types only, as NCCL)
static ncclResult_t divide(void* recv, size_t count, ncclDataType_t t, int n) {
  if (t == ncclFloat32)
    for (size_t i = 0; i < count; ++i) static_cast<float*>(recv)[i] /= float(n);
  else if (t == ncclFloat64)
    for (size_t i = 0; i < count; ++i) static_cast<double*>(recv)[i] /= double(n);
  else
    return ncclInvalidArgument;
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  MPI_Datatype mt = mpi_type(t);
  if (mt == MPI_DATATYPE_NULL || send != recv) return ncclInvalidArgument;
  ++g_counters["all_reduce"];
  MPI_Op mo = op == ncclMax ? MPI_MAX : op == ncclMin ? MPI_MIN : MPI_SUM;
  MPI_Allreduce(MPI_IN_PLACE, recv, int(count), mt, mo, MPI_COMM_WORLD);
  return op == ncclAvg ? divide(recv, count, t, reinterpret_cast<Mock*>(comm)->size) : ncclSuccess;
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t,
                           cudaStream_t) {
  if (mpi_type(t) != MPI_BYTE || send != recv) return ncclInvalidArgument;
  ++g_counters["broadcast"];
  MPI_Bcast(recv, int(count), MPI_BYTE, root, MPI_COMM_WORLD);
  return ncclSuccess;
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t, ncclComm_t, cudaStream_t) {
  MPI_Datatype mt = mpi_type(t);
  if (mt == MPI_DATATYPE_NULL) return ncclInvalidArgument;
  ++g_counters["all_gather"];
  MPI_Allgather(send, int(count), mt, recv, int(count), mt, MPI_COMM_WORLD);
  return ncclSuccess;
}
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t) {
  MPI_Datatype mt = mpi_type(t);
  if (mt == MPI_DATATYPE_NULL) return ncclInvalidArgument;
  ++g_counters["reduce_scatter"];
  MPI_Op mo = op == ncclMax ? MPI_MAX : op == ncclMin ? MPI_MIN : MPI_SUM;
  MPI_Reduce_scatter_block(send, recv, int(count), mt, mo, MPI_COMM_WORLD);
  return op == ncclAvg ? divide(recv, count, t, reinterpret_cast<Mock*>(comm)->size) : ncclSuccess;
}

}  // extern "C"
