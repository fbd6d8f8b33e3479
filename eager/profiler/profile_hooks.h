#pragma once
// The profiler's view of the runtime. While a Profiler records on this thread, the dispatcher reports
// each op with its start and end time, and nn::Module calls (and backward, optimizer steps) open named
// scopes. Null (one thread-local load) when nobody profiles, so the hot path pays nothing more.
#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {

class Tensor;
class Attrs;
enum class OpId : uint16_t;
namespace nn {
class Module;
}

struct ProfileHooks {
  virtual ~ProfileHooks() = default;
  virtual void on_op(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, const std::vector<Tensor>& outputs,
                     int64_t start_ns, int64_t end_ns) = 0;
  // A compiled kernel (a fusion group, or an op a backend ran in place of the table's kernel), which
  // does not pass through the dispatcher: its name, inputs and the flops of the ops it fused.
  virtual void on_kernel(std::string_view name, const std::vector<Tensor>& inputs, int64_t flops, int64_t start_ns,
                         int64_t end_ns) = 0;
  // `module` (may be null) names the scope after its place in the enclosing module's children.
  virtual void push_scope(std::string_view name, const nn::Module* module) = 0;
  virtual void pop_scope() = 0;
};

namespace detail {
// initial-exec: libkiln is linked, not dlopen'd, so the check in dispatch is one fs-relative load.
extern thread_local ProfileHooks* t_profile_hooks __attribute__((tls_model("initial-exec")));
}  // namespace detail

inline ProfileHooks* profile_hooks() { return detail::t_profile_hooks; }
int64_t profile_clock_ns();  // steady clock, nanoseconds

// A named span in the profile (a module's forward, backward, an optimizer step); free when not profiling.
class ProfileScope {
 public:
  explicit ProfileScope(std::string_view name, const nn::Module* module = nullptr) : h_(detail::t_profile_hooks) {
    if (h_) h_->push_scope(name, module);
  }
  ~ProfileScope() {
    if (h_ && h_ == detail::t_profile_hooks) h_->pop_scope();  // the profiler may have stopped inside the scope
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  ProfileHooks* h_;
};

}  // namespace kiln
