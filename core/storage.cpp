#include "core/storage.h"

#include "core/allocator.h"
#include "core/error.h"

namespace kiln {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  if (!device.is_cpu()) fail("{}: no device runtime for this device in this build", device.str());
  auto s = std::make_shared<Storage>();
  s->data = cpu_allocator::allocate(nbytes);
  s->nbytes = nbytes;
  s->device = device;
  return s;
}

Storage::~Storage() {
  if (owned && data) cpu_allocator::release(data, nbytes);
}

}  // namespace kiln
