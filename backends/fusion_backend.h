#pragma once
// The one interface every code generator for fusion groups implements (x86 for the CPU, CUDA for
// GPUs), so the JIT asks "can this node join a group?" and "compile this group" without naming a
// device: jit::Backend is this class. A group is the standalone graph of a prim::FusionGroup's block.
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/device.h"
#include "core/tensor.h"

namespace kiln::ir {
class Graph;
class Node;
}  // namespace kiln::ir

namespace kiln::backends {

// A compiled fusion group: runs on tensors of its backend's device and returns the group's outputs.
class FusedKernel {
 public:
  virtual ~FusedKernel() = default;
  virtual const std::string& name() const = 0;
  virtual Tensors run(const Tensors& inputs) const = 0;
};

// Compiles a group's standalone graph; returns null and says why when it cannot.
using GroupCompiler =
    std::function<std::shared_ptr<FusedKernel>(const ir::Graph& group, const std::string& name, std::string* why_not)>;

class FusionBackend {
 public:
  virtual ~FusionBackend() = default;
  virtual std::string_view name() const = 0;  // "x86", "cuda"
  virtual Device::Type device_type() const = 0;
  // Whether n may join a fusion group this backend compiles; with `reduction`, as the group's trailing
  // reduction. The fusion passes build groups from this answer.
  virtual bool can_fuse(const ir::Node& n, bool reduction) const = 0;
  // Whether a group may also hold reductions over the last dim (keepdim) whose results its elementwise
  // nodes read: softmax, layer_norm and their gradients as one row kernel (backends/x86/row_kernel.h).
  // A backend without them gets the old split: each group ends at its one trailing reduction.
  virtual bool row_groups() const { return false; }
  // Null, with the reason in *why_not, when the backend declines the group (it then runs interpreted).
  virtual std::shared_ptr<FusedKernel> compile(const ir::Graph& group, const std::string& name,
                                               std::string* why_not) const = 0;
};

// The backend compiling fusion groups for a device type in this build and on this machine: x86 for the
// CPU where it has AVX2, CUDA where kiln was built with the toolkit (whether a driver loads is
// checked when a kernel runs). Null when there is none.
const FusionBackend* fusion_backend(Device::Type type);
// The backend whose can_fuse and row_groups shape fusion groups when a caller names none (a pass run
// alone, `kiln ir`, a compile() told to use no backend): the CPU's, also on a CPU without AVX2, so a
// graph's groups are the same on every machine (there they run on the interpreter).
const FusionBackend& default_fusion_rules();

// Marked groups: a JIT pass names a group's kind ("gemm", "conv_backward", "scatter_zeros"), and a device
// type's kernels for that kind run it. They call libraries (oneDNN) and eager's kernels rather than
// generated code, so the CPU has them also where it has no code generator (no AVX2); the CUDA build has
// none. Whether devices of `type` have a kernel for groups of `kind`:
bool compiles_kind(Device::Type type, std::string_view kind);
// That kernel for the group's standalone graph; `epilogue` compiles what the kind leaves to a code
// generator (a gemm group's epilogue where oneDNN is off; empty: it is interpreted). Null, with the
// reason in *why_not, when the block is not what the kind takes or no kernel of `type` runs the kind.
std::shared_ptr<FusedKernel> compile_kind(Device::Type type, std::string_view kind, const ir::Graph& group,
                                          const std::string& name, const GroupCompiler& epilogue,
                                          std::string* why_not);
// Starts the one-time set-up of the libraries the device's kernels call (oneDNN's GEMM kernels on the
// CPU) on another thread, for a caller with other work to do before its first GEMM; a GEMM that comes
// first waits for it. Nothing where the device's kernels have none.
void warm_up_in_background(Device::Type type);

}  // namespace kiln::backends
