#!/usr/bin/env bash
# Runs the unit suite (random order, tests/run_unit.sh) once per kernel build and intra-op thread count
# asked for: each entry is ISA@THREADS, ISA one of native (the best this CPU runs), avx2 (capped: the
# elementwise kernels, the x86 JIT and oneDNN, whose GEMMs round differently per ISA) or baseline (no
# AVX: the portable elementwise kernels, no x86 JIT, oneDNN on SSE4.1); THREADS the OpenMP/BLAS count.
# An entry this CPU cannot run (avx2 without AVX-512 is native already) is said and left out.
#   tests/run_matrix.sh BUILD_DIR native@1 baseline@2 ...     tests/run_matrix.sh BUILD_DIR all
set -euo pipefail
build="$1"; shift
here="$(cd "$(dirname "$0")" && pwd)"
entries=("$@")
[ "${entries[*]}" = all ] && entries=(native@1 native@2 avx2@1 avx2@2 baseline@1 baseline@2)
avx512=0; grep -qw avx512f /proc/cpuinfo && avx512=1
for e in "${entries[@]}"; do
  isa="${e%@*}"; threads="${e#*@}"
  env=(OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads")
  case "$isa" in
    native) ;;
    avx2)
      if [ $avx512 = 0 ]; then echo "matrix: $e is native here (no AVX-512): left out"; continue; fi
      env+=(KILN_CPU_ISA=avx2 KILN_X86_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2) ;;
    baseline) env+=(KILN_CPU_ISA=baseline KILN_X86_ISA=none ONEDNN_MAX_CPU_ISA=SSE41) ;;
    *) echo "matrix: unknown entry '$e' (expected native|avx2|baseline@THREADS)" >&2; exit 2 ;;
  esac
  echo "matrix: unit suite at $e (${env[*]})"
  start=$SECONDS
  env "${env[@]}" "$here/run_unit.sh" "$build/tests/kiln_tests"
  echo "matrix: $e passed in $((SECONDS - start)) s"
done
