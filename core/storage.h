#pragma once
// Refcounted bytes on a device, shared by every view of them, with the version counter that in-place
// ops bump (autograd checks it to catch a saved tensor modified after it was saved).
#include <atomic>
#include <cstddef>
#include <memory>

#include "core/device.h"
#include "core/memory_category.h"

namespace kiln {

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  std::atomic<uint64_t> version{0};
  bool owned = true;  // false: borrowed memory (from_blob), never freed by kiln
  // Memory accounting (core/memory_category.h): the role, how many saved-for-backward holders it has,
  // and the category the allocator counts its bytes under (the role, or Activation while saved).
  MemoryCategory category = MemoryCategory::Temporary;
  MemoryCategory charged = MemoryCategory::Temporary;
  std::atomic<int32_t> saved{0};

  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device = Device::cpu());
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

}  // namespace kiln
