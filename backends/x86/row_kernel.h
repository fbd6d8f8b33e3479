#pragma once
// Row kernels: a fusion group whose reductions over the last dim (keepdim) feed elementwise consumers of
// the same rows — softmax, log_softmax, layer_norm and their gradients. Each reduction's result is one
// number per row, so the group runs row by row: a few passes over a row, each one generated function
// (the emitter's ordinary kernels), the earlier passes' results read as broadcast scalars.
// A row is a few KB, so only the first pass reads it from memory; parallel over rows.
//
// Passes, in order (a value's level: how many reductions lie on its longest path from the inputs):
//   for each level L: one pass per reduction whose input has level L, the first of them also storing the
//   group's row-shaped outputs of level L (a pass of its own when no reduction has level L);
//   then, for outputs of one number per row (a mean, a saved rstd), one pass over a single element.
// A reduction's input that a later pass reads again is stored to a scratch row as it is folded (softmax's
// exp); other values a later pass needs are recomputed there. Each pass runs over a block of rows per
// call (kernel_emitter.h, Variant::rows): a call per row cost more than a 64-wide row's work.
#include <memory>
#include <string>

namespace kiln::ir {
class Graph;
}
namespace kiln::backends {
class FusedKernel;
}

namespace kiln::x86 {

// Whether `group` needs a row kernel: it holds a reduction that is not a single trailing one (its result
// read inside the group, or a second reduction).
bool is_row_group(const ir::Graph& group);
// Raises kiln::Error when the group's passes cannot be emitted on this CPU (every pass's default variant
// is emitted here, not at the first run).
std::shared_ptr<backends::FusedKernel> compile_row(const ir::Graph& group, const std::string& name);

}  // namespace kiln::x86
