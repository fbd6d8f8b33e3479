#!/usr/bin/env bash
# Runs kiln::dist's multi-process tests under mpirun (meson's dist suite).
#   run_dist.sh MODE HAVE_MPI EXE
#   MODE tests: EXE is kiln_dist_tests (doctest), run on 2 ranks
#   MODE nccl1: EXE is kiln_dist_tests, its nccl cases only, on 1 rank (nccl needs a gpu per rank, so
#               this is where a one-gpu machine runs them; they skip, saying why, without a gpu)
#   MODE nccl_mock: EXE is nccl_mock, run on 2 ranks with the mock libnccl.so.2 beside it, in each mode
#   MODE die | stall | pipe_die | pipe_stall: EXE is dist_fail (data-parallel or pipeline training); the
#               job must fail, within a hard time bound, with the error
# Exits 77 (meson: skipped) with the reason when kiln was built without MPI or mpirun is missing.
set -u
mode=$1 have_mpi=$2 exe=$3
if [ "$have_mpi" != 1 ]; then
  echo "skipped: kiln was built without mpi (apt-get install libopenmpi-dev openmpi-bin, then reconfigure)"
  exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
  echo "skipped: mpirun not found (apt-get install openmpi-bin)"
  exit 77
fi
# One thread per rank: the ranks share the machine's cores. Root is allowed (CI containers); more
# ranks than cores is allowed (--oversubscribe also makes Open MPI yield while it polls).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun -np 2 --oversubscribe)

case $mode in
  tests)
    # Hard bound: a hang fails the test instead of blocking CI.
    exec timeout -k 5 120 "${mpirun[@]}" "$exe"
    ;;
  nccl1)
    exec timeout -k 5 120 mpirun -np 1 "$exe" --test-case='nccl:*'
    ;;
  nccl_mock)
    # The mock libnccl.so.2 is built beside EXE (nccl_mock); every run must print what the mode checks.
    export LD_LIBRARY_PATH="$(cd "$(dirname "$exe")" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    status=0
    expect() {  # expect MODE TEXT...: each TEXT must be in the output of `mpirun -np 2 EXE MODE`
      local m=$1 out
      shift
      out=$(timeout -k 5 60 "${mpirun[@]}" -x LD_LIBRARY_PATH "$exe" "$m" 2>&1)
      echo "== nccl_mock $m (mpirun exit status $?)"
      echo "$out"
      for text in "$@"; do
        if ! grep -qF -- "$text" <<<"$out"; then
          echo "FAIL: nccl_mock $m did not print: $text"
          status=1
        fi
      done
    }
    expect ok "rank 0: nccl mock ok" "rank 1: nccl mock ok"
    expect async_error \
      "rank 0: error: dist: all_reduce of 4 float32 elements failed on rank 0 of 2 after " \
      "nccl reported remote process exited or there was a network error; the nccl communicator was aborted" \
      "rank 1: aborts 1" \
      "rank 0: then: dist: all_reduce of 4 float32 elements cannot run on rank 0 of 2: the nccl communicator was aborted after an earlier error"
    expect timeout \
      "rank 1: error: dist: all_reduce of 4 float32 elements did not complete within 2000 ms on rank 1 of 2 (" \
      "ms since it was queued on cuda:1): another rank died, stopped, or is in a different collective; the nccl communicator was aborted" \
      "rank 0: aborts 1"
    exit $status
    ;;
  die | stall | pipe_die | pipe_stall)
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    start=$(date +%s)
    timeout -k 5 60 "${mpirun[@]}" "$exe" "$mode" >"$log" 2>&1
    rc=$?
    elapsed=$(($(date +%s) - start))
    cat "$log"
    echo "run_dist: mpirun exit status $rc after ${elapsed} s"
    # timeout's own status is 124 (137 if it had to kill); mpirun's is 137 too when a rank was killed.
    if [ $rc -eq 124 ] || [ $elapsed -ge 60 ]; then
      echo "FAIL: the job was still running after 60 s (a rank hangs)"
      exit 1
    fi
    if [ $rc -eq 0 ] || grep -q "rank 0: trained 20 steps" "$log"; then
      echo "FAIL: rank 0 finished although rank 1 failed"
      exit 1
    fi
    if [ $elapsed -gt 30 ]; then
      echo "FAIL: the job took ${elapsed} s to fail (bound: 30 s)"
      exit 1
    fi
    if [ "$mode" = stall ] && ! grep -q "rank 0: error: dist: all_reduce of gradient bucket 0 (4 parameters, 9610 elements) did not complete within 3000 ms on rank 0 of 2" "$log"; then
      echo "FAIL: rank 0 did not report the all-reduce timeout"
      exit 1
    fi
    if [ "$mode" = pipe_stall ] && ! grep -q "rank 0: error: dist: pipeline stage 0: recv of the gradient of micro-batch 0 from rank 1 did not complete within 3000 ms on rank 0 of 2: the peer died, stopped, or has not posted the matching transfer" "$log"; then
      echo "FAIL: rank 0 did not report the pipeline's timeout"
      exit 1
    fi
    exit 0
    ;;
esac
echo "run_dist: unknown mode $mode"
exit 2
