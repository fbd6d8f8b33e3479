#pragma once
// A recording that computes no values. CompiledTrainStep's first call records the step's forward and
// backward only to compile them; the compiled run then computes the step, so the recording's values are
// never read. While hooks are installed here, the dispatcher asks them before each op's kernel on a traced
// path: they may give the op's outputs themselves (shaped from the recorded inputs' types, contents
// undefined) and the kernel does not run. The tracer's Recorder installs itself (Recorder::set_shapes_only).
#include <vector>

#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln {

struct ShapesOnlyHooks {
  virtual ~ShapesOnlyHooks() = default;
  // true: `outputs` are the op's outputs and its kernel is skipped; false: the kernel runs as usual
  virtual bool record_only(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, std::vector<Tensor>& outputs) = 0;
};

namespace detail {
extern thread_local ShapesOnlyHooks* t_shapes_only_hooks;
}  // namespace detail

inline ShapesOnlyHooks* shapes_only_hooks() { return detail::t_shapes_only_hooks; }
// Installs hooks for this thread; returns the previous ones.
ShapesOnlyHooks* set_shapes_only_hooks(ShapesOnlyHooks* hooks);

}  // namespace kiln
