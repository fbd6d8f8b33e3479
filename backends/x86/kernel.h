#pragma once
// The x86 backend's entry points: one generated function per fusion group (backends/x86/README in
// kernel_emitter.h for the calling convention), wrapped in a Kernel that runs it over tensors.
//
// A fusion group is a small standalone ir::Graph: tensor inputs (f32 or f64, bool for where's
// condition; any rank, dims possibly symbolic), body nodes of kind Unary or Binary (every row of
// ops.def), where, prim::Constant scalars (converted to the compute dtype), and at most one trailing
// reduction (sum, prod, amax, amin over all dims or the last dim, keepdim either way). Several outputs
// are allowed; bool outputs are stored as bytes. All inputs broadcast to one iteration shape.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/x86/isa.h"
#include "core/tensor.h"

namespace kiln::ir {
class Graph;
}

namespace kiln::x86 {

namespace detail {
struct Program;
class Code;
}  // namespace detail

// False (with the reason in *why_not) when compile() raises for this group on this CPU (it compiles it).
bool supported(const ir::Graph& group, std::string* why_not = nullptr);

class Kernel {
 public:
  ~Kernel();
  const std::string& name() const { return name_; }
  Isa isa() const { return isa_; }
  // Allocates the outputs (Tensor::empty), broadcasts through strides, handles non-contiguous inputs
  // and splits large work across the OpenMP threads (kiln::set_num_threads).
  Tensors run(const Tensors& inputs) const;
  // objdump's disassembly of the default variant (all inputs with inner stride 1), or a hex dump with
  // the code size when objdump is absent.
  std::string disassembly() const;
  size_t code_size() const;  // the default variant's bytes (code + constants table)

 private:
  friend std::shared_ptr<Kernel> compile(const ir::Graph& group, const std::string& name);
  Kernel() = default;
  const detail::Code& variant(uint64_t bcast, bool nt) const;

  std::string name_;
  Isa isa_ = Isa::None;
  std::unique_ptr<detail::Program> prog_;
  mutable std::mutex mu_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<detail::Code>> variants_;
  const detail::Code* default_ = nullptr;
};

// Generates the kernel for the best ISA of this CPU (best_isa()); raises kiln::Error if !supported.
// `name` names the kernel (e.g. "kiln_fused_3_exp_mul_add"); empty: one is made from the ops.
std::shared_ptr<Kernel> compile(const ir::Graph& group, const std::string& name = {});

}  // namespace kiln::x86
