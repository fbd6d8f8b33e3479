#pragma once
// The x86 code generator behind the fusion-backend interface (backends/fusion_backend.h).
#include "backends/fusion_backend.h"

namespace kiln::x86 {

// Null where the CPU lacks AVX2.
const backends::FusionBackend* fusion_backend();
// The same backend on any CPU: its can_fuse and row_groups shape fusion groups also where its kernels
// cannot run (backends::default_fusion_rules).
const backends::FusionBackend& fusion_rules();
// What the x86 kernels take: an elementwise row (or a sum/amax/amin over every dim or the last one,
// when `reduction`) whose tensors are all of one float dtype, 0-d constants aside.
bool can_fuse(const ir::Node& n, bool reduction);

}  // namespace kiln::x86
