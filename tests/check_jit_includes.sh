#!/bin/sh
# The JIT names no backend (docs/architecture.md): no file under jit/ includes eager's CPU kernels or a
# code generator; it reaches them through backends/fusion_backend.h. Usage: check_jit_includes.sh JIT_DIR
set -eu
pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](eager/cpu/|backends/(x86|cuda)/)'
# the pattern itself, so a typo in it cannot pass every tree
printf '#include "eager/cpu/views.h"\n  # include <backends/x86/isa.h>\n#include "backends/cuda/api.h"\n' |
  [ "$(grep -cE "$pattern")" = 3 ] || { echo "check_jit_includes.sh: the pattern misses an include" >&2; exit 1; }
if grep -rnE --include='*.h' --include='*.cpp' --include='*.def' "$pattern" "$1"; then
  echo "jit: the lines above include eager/cpu/, backends/x86/ or backends/cuda/; reach them through backends/fusion_backend.h" >&2
  exit 1
fi
