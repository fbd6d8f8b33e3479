#include "core/storage.h"

#include "core/allocator.h"
#include "core/device_runtime.h"
#include "core/error.h"

namespace kiln {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  auto s = std::make_shared<Storage>();
  s->category = s->charged = current_memory_category();  // what the bytes are for (memory_category.h)
  s->data = device.is_cpu() ? cpu_allocator::allocate(nbytes, s->charged)
                            : device_runtime(device).allocate(device.index, nbytes);
  s->nbytes = nbytes;
  s->device = device;
  return s;
}

Storage::~Storage() {
  if (!owned || !data) return;
  if (device.is_cpu()) cpu_allocator::release(data, nbytes, charged);
  else device_runtime(device).release(device.index, data, nbytes);
}

}  // namespace kiln
