#pragma once
// A copy derived from a model parameter (oneDNN's blocked layout of a conv weight, a one-pixel conv's
// centre tap), kept while the parameter is unchanged: its version counter moves with every write that goes
// through kiln (optimizers, copy_, load_state_dict). Only kiln-owned parameter storage qualifies: a
// from_blob buffer may be written behind kiln's back. The copies are malloc'd, not from kiln's allocator,
// so memory_stats()'s parameter bytes stay the model's own.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "core/storage.h"

namespace kiln::cpu {

// Whether copies derived from this storage may be kept.
inline bool keeps_derived_copies(const std::shared_ptr<Storage>& st) {
  return st && st->owned && st->category == MemoryCategory::Parameter;
}

struct DerivedCopy {
  std::weak_ptr<Storage> storage;  // the key's address may be reused by a later storage
  uint64_t version = 0;
  size_t bytes = 0;
  std::shared_ptr<void> buf;  // held by its users while they read it

  bool current(const std::shared_ptr<Storage>& st, uint64_t v) const {
    return buf && version == v && storage.lock() == st;
  }
  bool expired() const { return storage.expired(); }

  // Makes this the copy of st at version v, `bytes` long, for the caller to fill. A training step changes
  // every weight: the buffer is rewritten in place while no user holds it (use_count 1), else replaced.
  // With a fresh buffer each version oneDNN's reorders into it took twice as long (ResNet-18, one step:
  // 2.9 against 1.5 ms; page faults did not grow with the steps, so the cause is not pinned down), and the
  // peak held old and new copies (392 against 345 MiB).
  void renew(const std::shared_ptr<Storage>& st, uint64_t v, size_t n) {
    if (!buf || buf.use_count() > 1 || bytes != n) {
      buf = std::shared_ptr<void>(std::aligned_alloc(64, (n + 63) / 64 * 64), &std::free);
      if (!buf) throw std::bad_alloc();
      bytes = n;
    }
    storage = st;
    version = v;
  }
};

}  // namespace kiln::cpu
