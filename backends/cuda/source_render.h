#pragma once
// CUDA C rendered from the op table: an elementwise row's kernel is its `expr` column from core/ops.def
// (the same text the CPU kernels compile, over the same helpers: the prelude compiles core/scalar_math.h
// itself), wrapped in a strided loop and a vectorised contiguous loop. Reductions, casts, where and
// the indexing kernels are rendered from the same prelude.
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/op.h"

namespace kiln::cuda {

enum class IndexMode { None, Gather, ScatterAdd };

// One elementwise kernel: inputs converted to `compute`, expr evaluated, the result stored as `out`.
// Defines extern "C" <name>_s (any strides) and, for IndexMode::None, <name>_v (contiguous or
// broadcast scalars, four elements a thread, vector loads).
struct ElementwiseSpec {
  std::string name;
  std::string expr;
  std::vector<std::string> vars;   // input names in order: {"x"}, {"a", "b"}, {"c", "a", "b"}
  std::vector<DType> in;           // input dtypes
  std::vector<bool> keep_type;     // an input read as its own type rather than converted (where's c)
  DType compute = DType::Float32;
  DType out = DType::Float32;
  IndexMode index = IndexMode::None;
};

ElementwiseSpec unary_spec(OpId op, DType in, DType compute, DType out);
ElementwiseSpec binary_spec(OpId op, DType a, DType b, DType compute, DType out);
ElementwiseSpec where_spec(DType t);
ElementwiseSpec cast_spec(DType in, DType out);
ElementwiseSpec gather_spec(DType t);       // out = x[.. index ..], inputs index (int64), x
ElementwiseSpec scatter_add_spec(DType t);  // out[.. index ..] += src, inputs index (int64), src

enum class Fold { Sum, Prod, Max, Min, ArgMax, ArgMin };
struct ReduceSpec {
  std::string name;
  Fold fold = Fold::Sum;
  DType in = DType::Float32, acc = DType::Float32, out = DType::Float32;
};
ReduceSpec reduce_spec(Fold fold, DType in, DType acc, DType out);

// Replaces every @KEY@ in text: CUDA's braces make fmt's replacement fields awkward in kernel templates.
std::string subst(std::string text, const std::vector<std::pair<std::string, std::string>>& kv);
std::string render_prelude();
std::string render(const ElementwiseSpec& spec);
std::string render(const ReduceSpec& spec);
// A module: the prelude, then each kernel.
std::string render_module(const std::vector<ElementwiseSpec>& ew, const std::vector<ReduceSpec>& red);

// The CUDA C name of a dtype ("float", "kbf16", ...) and its short tag in kernel names ("f32").
std::string cuda_type(DType t);
std::string dtype_tag(DType t);

}  // namespace kiln::cuda
