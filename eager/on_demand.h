#pragma once
// Storages whose memory an owner fills only while it is used (FSDP's sharded units, eager/dist/fsdp.h).
// A graph is one unit of code to its executor, so nn::Module's hooks cannot say when it reads a
// submodule's parameters; instead the executor (backends/interp) asks here which of a run's inputs live
// on such a storage, has the owner acquire one before each step reading it (or a view of it) and tells it
// after each step that did, `last` after the last.
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln {

class OnDemandOwner {
 public:
  virtual ~OnDemandOwner() = default;
  // Before each step of a run reading a tensor on a storage registered with `key`: fills it unless it is
  // filled (a run nested in another may have had it released since the outer run's last step).
  virtual void acquire(size_t key) = 0;
  // After a step that read one; outputs: the step's tensors (autograd may need the memory again when
  // their gradients come); last: no later step of this run reads it, nor does the run return a view of it.
  virtual void used(size_t key, const std::vector<Tensor>& outputs, bool last) = 0;
};

struct OnDemand {
  std::shared_ptr<OnDemandOwner> owner;
  size_t key = 0;
};

// Registers (or, with a null owner, forgets) a storage; the owner forgets its storages before it dies.
void set_on_demand(const Storage* s, const std::weak_ptr<OnDemandOwner>& owner, size_t key);
// The storage's owner, if registered and alive.
std::optional<OnDemand> on_demand(const Storage* s);
// Whether any storage is registered: executors skip the look-ups when none is.
bool any_on_demand();

}  // namespace kiln
