#include "eager/autocast/autocast.h"

#include "core/log.h"

#include <array>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "core/trace_hooks.h"
#include "eager/autograd/graph.h"
#include "eager/cpu/bf16_convert.h"
#include "eager/cpu/matmul_bf16.h"

namespace kiln {
namespace {

struct State {
  bool enabled = false;
  DType dtype = DType::BFloat16;
  bool cache_enabled = true;
};
thread_local State t_state;
thread_local int t_nesting = 0;  // guards alive on this thread, enabled or not (torch's nesting count)

// torch's weight cache: inside the outermost scope, a float32 leaf parameter is cast to the lower
// precision once and every later op reads the same cast (and its one autograd node), however often the
// weight is used. Keyed by the tensor; the source is held so its address is not reused while cached.
struct CachedCast {
  Tensor source, cast;
  uint64_t version;
};
thread_local std::unordered_map<const TensorImpl*, CachedCast> t_cast_cache;

// Only where reuse cannot change a result: not while tracing (a cast made before the trace began would
// enter the graph as a constant), not under no_grad (the cached cast would have no autograd node for a
// later op that records), and not for a parameter written in place since (the version check).
Tensor cached_cast(const Tensor& t, DType target) {
  bool cacheable = t_state.cache_enabled && t.requires_grad() && t.is_leaf() &&
                   GradMode::enabled() && !trace_hooks();
  if (!cacheable) return t.to(target);
  auto it = t_cast_cache.find(t.impl());
  if (it != t_cast_cache.end() && it->second.cast.dtype() == target && it->second.version == t.version())
    return it->second.cast;
  Tensor c = t.to(target);
  t_cast_cache[t.impl()] = {t, c, t.version()};
  return c;
}

constexpr std::array<AutocastPolicy, size_t(kNumOps)> op_table() {
  std::array<AutocastPolicy, size_t(kNumOps)> t{};
#define KILN_AUTOCAST_OP(Id, policy) t[size_t(OpId::Id)] = AutocastPolicy::policy;
#include "eager/autocast/policy.def"
  return t;
}
constexpr auto kOpPolicy = op_table();

struct FnRow {
  std::string_view name;
  AutocastPolicy policy;
};
constexpr FnRow kFnPolicy[] = {
#define KILN_AUTOCAST_FN(name, policy) {#name, AutocastPolicy::policy},
#include "eager/autocast/policy.def"
};

void warn_once_without_bf16() {
  static std::once_flag once;
  if (cpu::cpu_has_avx512_bf16()) return;
  std::call_once(once, [] {
    kiln::logger().warn("autocast: this CPU has no AVX512_BF16; bf16 ops convert in software and compute in float32, "
                 "expect them to be slower than float32");
  });
}

bool eligible(const Tensor& t) { return t.defined() && t.device().is_cpu() && is_floating(t.dtype()); }

Tensors apply(AutocastPolicy policy, const Tensors& inputs) {
  if (policy == AutocastPolicy::None) return inputs;
  DType target = t_state.dtype;
  if (policy == AutocastPolicy::Promote) {
    // 0-d tensors (wrapped C++ scalars among them) do not decide, as in torch's promotion.
    bool any = false;
    for (const Tensor& t : inputs)
      if (eligible(t) && t.dim() > 0) {
        target = any ? promote_types(target, t.dtype()) : t.dtype();
        any = true;
      }
    if (!any) return inputs;
  }
  Tensors out = inputs;
  for (Tensor& t : out) {
    if (!eligible(t)) continue;
    DType d = t.dtype();
    switch (policy) {
      case AutocastPolicy::LowerPrecision:
        if (d == DType::Float32) t = cached_cast(t, target);
        break;
      case AutocastPolicy::Fp32:
        if (d == DType::BFloat16 || d == DType::Float16) t = t.to(DType::Float32);
        break;
      case AutocastPolicy::Promote:
        if (d != target) t = t.to(target);
        break;
      case AutocastPolicy::None: break;
    }
  }
  return out;
}

}  // namespace

AutocastGuard::AutocastGuard(DType dtype, bool enabled, bool cache_enabled)
    : prev_enabled_(t_state.enabled), prev_cache_enabled_(t_state.cache_enabled), prev_dtype_(t_state.dtype) {
  if (dtype != DType::BFloat16 && dtype != DType::Float16)
    fail("autocast: dtype must be bfloat16 or float16 on the cpu, got {}", dtype_name(dtype));
  t_state = {enabled, dtype, cache_enabled};
  ++t_nesting;
  if (enabled && dtype == DType::BFloat16) warn_once_without_bf16();
}

AutocastGuard::AutocastGuard(bool enabled) : AutocastGuard(t_state.dtype, enabled, t_state.cache_enabled) {}

AutocastGuard::~AutocastGuard() {
  t_state = {prev_enabled_, prev_dtype_, prev_cache_enabled_};
  if (--t_nesting == 0) t_cast_cache.clear();
}

size_t autocast_cached_casts() { return t_cast_cache.size(); }

std::string autocast_cpu_info() {
  return fmt::format("avx512_bf16: {}; bf16 matmul: {}", cpu::cpu_has_avx512_bf16() ? "yes" : "no",
                     cpu::bf16_matmul_impl());
}

bool autocast_enabled() { return t_state.enabled; }
DType autocast_dtype() { return t_state.dtype; }

std::string_view autocast_policy_name(AutocastPolicy p) {
  switch (p) {
    case AutocastPolicy::None: return "none";
    case AutocastPolicy::LowerPrecision: return "lower_precision";
    case AutocastPolicy::Fp32: return "fp32";
    case AutocastPolicy::Promote: return "promote";
  }
  return "none";
}

AutocastPolicy autocast_policy_named(std::string_view name) {
  for (AutocastPolicy p : {AutocastPolicy::None, AutocastPolicy::LowerPrecision, AutocastPolicy::Fp32, AutocastPolicy::Promote})
    if (autocast_policy_name(p) == name) return p;
  fail("autocast: unknown policy '{}' (none, lower_precision, fp32 or promote)", name);
}

Tensors autocast_apply(AutocastPolicy policy, DType lower, const Tensors& inputs) {
  AutocastGuard scope(lower, true, /*cache_enabled=*/false);
  return apply(policy, inputs);
}

AutocastPolicy autocast_policy(OpId op) { return kOpPolicy[size_t(op)]; }

AutocastPolicy autocast_policy(std::string_view fn) {
  for (const FnRow& r : kFnPolicy)
    if (r.name == fn) return r.policy;
  return AutocastPolicy::None;
}

Tensors autocast_inputs(OpId op, const Tensors& inputs) {
  if (!t_state.enabled) return inputs;
  return apply(kOpPolicy[size_t(op)], inputs);
}

Tensors autocast_inputs(std::string_view fn, const Tensors& inputs) {
  if (!t_state.enabled) return inputs;
  return apply(autocast_policy(fn), inputs);
}

Tensor autocast_input(std::string_view fn, const Tensor& x) {
  if (!t_state.enabled) return x;
  return apply(autocast_policy(fn), {x})[0];
}

}  // namespace kiln
