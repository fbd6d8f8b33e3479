#include "jit/default_backend.h"

#include "backends/x86/kernel.h"

namespace kiln::jit {

namespace {

class X86GroupKernel final : public GroupKernel {
 public:
  explicit X86GroupKernel(std::shared_ptr<x86::Kernel> k) : k_(std::move(k)) {}
  const std::string& name() const override { return k_->name(); }
  Tensors run(const Tensors& inputs) const override { return k_->run(inputs); }

 private:
  std::shared_ptr<x86::Kernel> k_;
};

}  // namespace

// The x86 code generator where the CPU has AVX2 or better; otherwise none, and fusion groups run on
// the interpreter.
GroupCompiler default_backend() {
  if (x86::best_isa() == x86::Isa::None) return {};
  return [](const ir::Graph& group, const std::string& name, std::string* why_not) -> std::shared_ptr<GroupKernel> {
    if (!x86::supported(group, why_not)) return nullptr;
    return std::make_shared<X86GroupKernel>(x86::compile(group, name));
  };
}

}  // namespace kiln::jit
