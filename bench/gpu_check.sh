#!/usr/bin/env bash
# ../shared/gpu-checklist.md in one command, on the GPU machine, after `source bench/gpu_setup.sh build`:
# every CUDA test case (none may skip), the dist suite's NCCL cases on one rank, the CUDA benchmarks and
# PyTorch's on the same machine, NCCL all-reduce bandwidth, the GPT demo on CUDA. Writes each part's log under $1 (default .).
out=${1:-.} dir=${2:-build-gpu}
status=0
part() {  # part NAME COMMAND...: runs it, keeps its log, and says how it ended
  local name=$1
  shift
  echo "== $name: $*"
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  echo "== $name: exit $rc"
  [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
part cuda_tests "$dir/tests/kiln_tests" -tc='cuda*' -s=false --duration=true
# the GPT demo on CUDA (issue 33) beside PyTorch's step on the same file, when the fortunes travelled
# (.gpu-fortunes: a copy of /usr/share/games/fortunes, which that machine lacks)
if [ -d .gpu-fortunes ]; then
  part train_gpt_cuda "$dir/samples/train_gpt" --device cuda --data .gpu-fortunes --steps 300 --eval-every 100 --out /tmp/kiln-gpt-out
  part train_gpt_torch python3 bench/train_gpt_torch.py --device cuda --data .gpu-fortunes --steps 300 --eval-every 100
fi
part dist_nccl1 bash tests/dist/run_dist.sh nccl1 1 "$dir/tests/dist/kiln_dist_tests"
part dist_train bash tests/dist/run_dist.sh tests 1 "$dir/tests/dist/kiln_dist_tests"
part bench_cuda env KILN_LOG_LEVEL=debug "$dir/bench/bench_cuda" --benchmark_min_time=0.3
part torch_cuda python3 bench/torch_cuda_workloads.py
part bench_dist_nccl mpirun -np 1 "$dir/bench/bench_dist" nccl
exit $status
