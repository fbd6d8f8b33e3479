#pragma once
// kiln: the umbrella header of the public API (namespace kiln).
#include "core/allocator.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/format.h"
#include "core/tensor.h"
#include "eager/io.h"
#include "eager/ops.h"
