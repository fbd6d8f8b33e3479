#pragma once
// A scope a running trace does not see: tensor work that is no step of the user's function (a kernel's own
// dispatches, the tracer's own bookkeeping, a factory moving its host tensor to the device).
#include "core/trace_hooks.h"

namespace kiln {

class Untraced {
 public:
  Untraced() : saved_(set_trace_hooks(nullptr)) {}
  ~Untraced() { set_trace_hooks(saved_); }
  Untraced(const Untraced&) = delete;
  Untraced& operator=(const Untraced&) = delete;

 private:
  TraceHooks* saved_;
};

}  // namespace kiln
