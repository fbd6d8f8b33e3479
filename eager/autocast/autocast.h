#pragma once
// torch.autocast for the CPU: inside an AutocastGuard the ops of eager/autocast/policy.def run in
// bf16 (or f16), in float32, or in the widest of their inputs' dtypes; docs/autocast.md has the table.
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln {

// RAII, per thread, nestable: the scope's state is restored when the guard dies. enabled=false
// switches autocast off inside an enclosing scope. dtype: BFloat16 (default) or Float16.
// cache_enabled (torch's): a float32 leaf parameter is cast once per outermost scope and the cast reused
// by every op that reads it; the cache empties when the outermost guard dies.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = DType::BFloat16, bool enabled = true, bool cache_enabled = true);
  explicit AutocastGuard(bool enabled);  // keeps the enclosing dtype and cache setting
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_enabled_, prev_cache_enabled_;
  DType prev_dtype_;
};

bool autocast_enabled();
DType autocast_dtype();  // the innermost scope's lower-precision dtype (bf16 when none)
size_t autocast_cached_casts();  // casts held by this thread's weight cache (for tests and logs)

// What bf16 runs on here, for logs and benchmarks: "avx512_bf16: yes; bf16 matmul: brg:avx512_core_amx".
std::string autocast_cpu_info();

enum class AutocastPolicy : uint8_t { None, LowerPrecision, Fp32, Promote };
std::string_view autocast_policy_name(AutocastPolicy p);
AutocastPolicy autocast_policy(OpId op);
AutocastPolicy autocast_policy(std::string_view fn);  // a composite's row ("linear"); None when absent

// The inputs an op or composite runs on in the current scope: `inputs` itself outside a scope or for
// ops with no row. Undefined tensors, non-floating ones and tensors off the CPU pass through.
Tensors autocast_inputs(OpId op, const Tensors& inputs);
Tensors autocast_inputs(std::string_view fn, const Tensors& inputs);
Tensor autocast_input(std::string_view fn, const Tensor& x);

// A graph lowered inside a scope (a scripted method) records the policy and the scope's dtype; it runs
// them later, where no scope is open: `policy` applied as inside a scope of `lower`, whatever the state.
AutocastPolicy autocast_policy_named(std::string_view name);  // inverse of autocast_policy_name
Tensors autocast_apply(AutocastPolicy policy, DType lower, const Tensors& inputs);

}  // namespace kiln
