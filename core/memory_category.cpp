#include "core/memory_category.h"

#include <mutex>

#include "core/allocator.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace kiln {

namespace detail {
thread_local MemoryCategory t_memory_category = MemoryCategory::Temporary;
}  // namespace detail

std::string_view memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::Temporary: return "temporary";
    case MemoryCategory::Parameter: return "parameter";
    case MemoryCategory::Activation: return "activation";
    case MemoryCategory::Gradient: return "gradient";
    case MemoryCategory::OptimizerState: return "optimizer state";
  }
  return "?";
}

namespace {

// Only memory the CPU allocator handed out is in its accounts.
bool counted(const Storage& s) { return s.owned && s.data && s.device.is_cpu(); }

// Serialises role changes so the allocator's account ends where the storage's state says, whatever
// the order of concurrent saves and releases. Taken only when a role changes, not per allocation.
std::mutex& role_mutex() {
  static std::mutex* m = new std::mutex();  // never destroyed: storages may die after exit
  return *m;
}

void recharge_locked(Storage& s) {
  MemoryCategory want = s.category == MemoryCategory::Temporary && s.saved.load() > 0 ? MemoryCategory::Activation
                                                                                     : s.category;
  if (want == s.charged) return;
  cpu_allocator::recharge(s.nbytes, s.charged, want);
  s.charged = want;
}

void recharge(Storage& s) {
  std::lock_guard<std::mutex> lock(role_mutex());
  recharge_locked(s);
}

}  // namespace

void set_memory_category(const Tensor& t, MemoryCategory c) {
  if (!t.defined() || !t.storage() || !counted(*t.storage())) return;
  Storage& s = *t.storage();
  std::lock_guard<std::mutex> lock(role_mutex());
  s.category = c;
  recharge_locked(s);
}

SavedForBackward::SavedForBackward(std::shared_ptr<Storage> s) {
  if (!s || !counted(*s)) return;
  s_ = std::move(s);
  if (s_->saved.fetch_add(1) == 0) recharge(*s_);
}

SavedForBackward::~SavedForBackward() {
  if (s_ && s_->saved.fetch_sub(1) == 1) recharge(*s_);
}

}  // namespace kiln
