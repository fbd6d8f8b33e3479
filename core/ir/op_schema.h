#pragma once
// What the IR needs to know of each op-table row beyond ops.def: how many inputs and outputs it
// takes and which attributes it requires, for the verifier and for builders.
#include <utility>
#include <vector>

#include "core/op.h"

namespace kiln::ir {

// The index of each kind in AttrValue (core/attrs.h).
enum class AttrKind : uint8_t { Int, Float, Ints, Str, DType, Bool };
const char* attr_kind_name(AttrKind k);

struct OpSchema {
  int min_inputs;
  int max_inputs;  // -1 = any number
  int outputs;
  std::vector<std::pair<const char*, AttrKind>> required;
  std::vector<std::pair<const char*, AttrKind>> optional;
};

const OpSchema& op_schema(OpId op);

}  // namespace kiln::ir
