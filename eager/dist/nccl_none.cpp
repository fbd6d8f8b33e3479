// kiln::dist's GPU transport when meson found no nccl.h under the CUDA toolkit: the nccl backend says
// why it cannot run, and nothing reaches the rest of this interface.
#include "core/error.h"
#include "eager/dist/comm_nccl.h"

namespace kiln::dist::detail {

namespace {
[[noreturn]] void no_nccl() { fail("dist: kiln was built without nccl (no nccl.h under the cuda toolkit)"); }
}  // namespace

std::string nccl_unavailable_reason() {
  return "needs nccl, and kiln was built without it (no nccl.h under the cuda toolkit; see meson option "
         "cudatoolkit_dir)";
}
int nccl_probe_library(const std::string&) { no_nccl(); }
int nccl_local_device() { no_nccl(); }

struct NcclRequest::Impl {};
struct NcclComm::Impl {};

NcclRequest::NcclRequest() = default;
NcclRequest::~NcclRequest() = default;
NcclRequest::NcclRequest(NcclRequest&&) noexcept = default;
NcclRequest& NcclRequest::operator=(NcclRequest&&) noexcept = default;
bool NcclRequest::active() const { return false; }
bool NcclRequest::test() { return true; }
void NcclRequest::wait() {}

NcclComm::NcclComm() = default;
NcclComm::~NcclComm() = default;
NcclComm& NcclComm::get(Comm&) { no_nccl(); }
void NcclComm::shutdown() {}
int NcclComm::device() const { return 0; }
int NcclComm::rank() const { return 0; }
int NcclComm::size() const { return 1; }
bool NcclComm::has_avg() const { return false; }
NcclRequest NcclComm::all_reduce(void*, int64_t, DType, ReduceOp, std::string) { no_nccl(); }
NcclRequest NcclComm::broadcast(void*, int64_t, int, std::string) { no_nccl(); }
NcclRequest NcclComm::all_gather(const void*, void*, int64_t, DType, std::string) { no_nccl(); }
NcclRequest NcclComm::reduce_scatter(const void*, void*, int64_t, DType, ReduceOp, std::string) { no_nccl(); }
NcclRequest NcclComm::fence(std::string) { no_nccl(); }

}  // namespace kiln::dist::detail
