#pragma once
// What host memory is for: every CPU storage is charged to one category, so the allocator can say how
// its live bytes (and those at its peak) split into parameters, activations, gradients, optimizer
// state and temporaries. New storages take the thread's current category (a scope, Temporary by
// default); a storage whose role changes is moved to another (a tensor becomes a parameter, a .grad,
// or is saved for backward).
#include <cstdint>
#include <memory>
#include <string_view>

namespace kiln {

struct Storage;
class Tensor;

enum class MemoryCategory : uint8_t { Temporary, Parameter, Activation, Gradient, OptimizerState };
constexpr int kNumMemoryCategories = 5;
std::string_view memory_category_name(MemoryCategory c);  // "temporary", "parameter", ...

namespace detail {
extern thread_local MemoryCategory t_memory_category __attribute__((tls_model("initial-exec")));
}  // namespace detail

inline MemoryCategory current_memory_category() { return detail::t_memory_category; }

// Storages allocated on this thread while the scope lives are charged to `c`.
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(MemoryCategory c) : prev_(detail::t_memory_category) { detail::t_memory_category = c; }
  ~MemoryCategoryScope() { detail::t_memory_category = prev_; }
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  MemoryCategory prev_;
};

// The tensor's storage is now (and until freed) for `c`. Borrowed and device memory is not counted.
void set_memory_category(const Tensor& t, MemoryCategory c);

// Held by autograd for each tensor saved for backward: while any holds a storage charged to
// Temporary, its bytes count as Activation.
class SavedForBackward {
 public:
  SavedForBackward() = default;
  explicit SavedForBackward(std::shared_ptr<Storage> s);
  SavedForBackward(const SavedForBackward& o) : SavedForBackward(o.s_) {}
  SavedForBackward(SavedForBackward&& o) noexcept = default;
  SavedForBackward& operator=(SavedForBackward o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~SavedForBackward();

 private:
  std::shared_ptr<Storage> s_;
};

}  // namespace kiln
