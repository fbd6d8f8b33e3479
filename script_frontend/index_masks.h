#pragma once
// The check torch makes of a bool mask used as an index (its shape must be that of the dims it covers), in a
// scripted graph, where the shapes are mostly known only when it runs. Internal to script_frontend.
#include <cstdint>

#include "script_frontend/lowerer.h"

namespace kiln::script {

// mask covers x's dims from d on (d >= 0), or x's last dims (d < 0): torch's IndexError where both shapes are
// known now, else a check that runs with the graph
void check_mask_shape(Lowerer& L, Value* mask, Value* x, int64_t d);

}  // namespace kiln::script
