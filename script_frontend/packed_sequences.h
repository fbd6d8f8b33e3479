#pragma once
// A PackedSequence's fields in lowered code (packed_sequences.cpp keeps a packed batch padded). Internal to
// script_frontend.
#include <string>

#include "script_frontend/lowerer.h"

namespace kiln::script {

// packed.data (the rows of every step in order of decreasing length, as torch packs them) and packed.batch_sizes
// (int64, one count a step up to the longest length); nullopt for another name
std::optional<Value*> packed_attribute(Lowerer& L, Value* packed, const std::string& name);

}  // namespace kiln::script
