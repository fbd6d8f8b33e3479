#pragma once
// The key of a compiled function's cache: per input its kind and, for a tensor, dtype, sizes,
// contiguity, device, requires_grad and whether its memory is filled on demand; and grad mode. A dim
// made symbolic (kSymbolicDim) matches every size. A miss says which of these changed, in words the
// log and CacheStats carry.
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/ivalue.h"

namespace kiln::jit {

constexpr int64_t kSymbolicDim = -1;

enum class InputKind : uint8_t { Tensor, Int, Float, Bool, Str, None, Other };

struct InputSig {
  InputKind kind = InputKind::Other;
  DType dtype = DType::Float32;
  Shape dims;  // kSymbolicDim for a symbolic dim
  bool contiguous = true;
  Device device;
  bool requires_grad = false;
  // Its storage's memory is filled on demand (eager/on_demand.h: FSDP's units): the training entry's
  // backward then recomputes forward values as late as it can (jit/min_cut_partition.h).
  bool on_demand = false;
  bool operator==(const InputSig&) const = default;
};

struct Signature {
  std::vector<InputSig> inputs;
  bool grad_mode = false;
  bool operator==(const Signature&) const = default;
};

// (input, dim) pairs compiled as symbolic dims
using SymbolicDims = std::set<std::pair<int, int>>;

// The signature of a call; the dims in `symbolic` (when given) become kSymbolicDim.
Signature signature_of(const std::vector<IValue>& inputs, bool grad_mode, const SymbolicDims* symbolic);

// Whether a call's inputs have this signature; allocates nothing, so a cache hit stays cheap.
bool matches(const Signature& s, const std::vector<IValue>& inputs, bool grad_mode);

// Why `now` missed the entry compiled for `before`, and which (input, dim) changed if a dim did.
std::string miss_reason(const Signature& before, const Signature& now, std::pair<int, int>* dim);

// A copy of `source` with the signature's input types; op result types are cleared for shape
// propagation to derive anew when an input type changed (a symbolic dim, another dtype than traced).
std::shared_ptr<ir::Graph> specialise(const ir::Graph& source, const Signature& sig);

}  // namespace kiln::jit
