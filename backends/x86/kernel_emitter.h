#pragma once
// Emits the machine code of one fusion group for one "variant": the ISA, which inputs are broadcast
// along the innermost dimension (inner stride 0) and whether float outputs use non-temporal stores.
//
// The generated function:  void fn(char** ptrs, int64_t n, void* acc)
//   ptrs: the group inputs, then the elementwise outputs, each pointing at element 0 of a run of n
//         elements (inner stride 1, or 0 for the inputs flagged broadcast);
//   acc:  for a reduction, a vector of lane partials (W values of the compute type), read at entry and
//         written back at exit; the driver combines lanes and threads.
// Full vectors in the main loop, the tail with masked loads and stores (AVX-512 opmask k1, AVX2
// vmaskmov with a mask from the constants table; bool bytes through a small stack buffer on AVX2).
#include <cstdint>
#include <memory>
#include <string>

#include "backends/x86/isa.h"
#include "backends/x86/program.h"

namespace kiln::x86::detail {

using KernelFn = void (*)(char** ptrs, int64_t n, void* acc);

struct Variant {
  uint64_t bcast = 0;  // bit k: input k has inner stride 0
  bool nt = false;
  // Several rows per call (row kernels): acc points at a RowBlock; each row of n elements starts its
  // reduction from the identity and ends it folded across lanes in registers, the value stored at
  // red_out (then advanced by one element), and every pointer in ptrs is advanced by its stride, so
  // one call runs a pass over a block of rows. (W lanes handed through memory per row cost more than
  // a short row: stores forwarded to loads of another width stall.)
  bool rows = false;
  bool operator==(const Variant&) const = default;
};

struct RowBlock {
  char* red_out = nullptr;
  int64_t count = 0;       // rows, at least 1
  int64_t stride[64] = {};  // bytes, per entry of ptrs (inputs, then outputs)
};

class Code {
 public:
  virtual ~Code() = default;
  virtual KernelFn fn() const = 0;
  virtual const uint8_t* bytes() const = 0;
  virtual size_t size() const = 0;
};

// Raises kiln::Error when the group needs more registers than the ISA has, or on an internal error.
std::unique_ptr<Code> emit(const Program& p, Isa isa, const Variant& v);
// With KILN_X86_PERF_MAP set, names the code for perf (/tmp/perf-PID.map)
void perf_map(const void* code, size_t size, const std::string& name);

}  // namespace kiln::x86::detail
