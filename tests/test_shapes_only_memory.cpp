// A shapes-only recording (CompiledTrainStep's first call) gives the outputs whose kernels it skips on one
// shared mapping: no allocation of kiln's, no fresh memory touched, each output its own storage (in-place
// writes and autograd's version counters stay apart).
#include "jit/passes/shape_prop.h"
#include "tracer/recorder.h"
#include "tracer/undefined_tensor.h"
#include "support.h"

using namespace kiln;

TEST_CASE("shapes only memory: the outputs a recording does not compute allocate nothing") {
  Tensor x = randn({48, 48}), w = randn({48, 48});
  tracing::Recorder rec("f", /*silent=*/true);
  rec.set_shapes_only(&jit::op_output_dims);
  rec.add_input(x, "x");
  rec.add_input(w, "w");
  const int64_t before = memory_stats().alloc_count;
  Tensor a, b, c;
  {
    tracing::TraceScope scope(rec);
    a = x + w;
    b = matmul(a, w);
    c = b.exp().sum(1);
  }
  CHECK(memory_stats().alloc_count == before);
  CHECK(c.sizes() == Shape{48});
  CHECK(a.storage().get() != b.storage().get());
  Function f = rec.finish({c}, {});
  CHECK(f.graph().str().find("matmul") != std::string::npos);
}

TEST_CASE("shapes only memory: undefined tensors take no allocation, also past the first mapping's size") {
  const int64_t before = memory_stats().alloc_count;
  Tensor small = tracing::undefined_tensor({3, 5}, DType::Float32);
  Tensor big = tracing::undefined_tensor({1 << 19}, DType::Float64);  // 4 MiB: past the first 1 MiB mapping
  Tensor other = tracing::undefined_tensor({3, 5}, DType::Float32);
  CHECK(memory_stats().alloc_count == before);
  CHECK(big.sizes() == Shape{1 << 19});
  CHECK(big.dtype() == DType::Float64);
  CHECK(other.storage().get() != small.storage().get());
  // readable and writable to the last element
  big.fill_(2.0);
  CHECK(big.sum().item<double>() == double(1 << 20));
  small.fill_(1.0);
  CHECK(small.sum().item<double>() == 15.0);
}
