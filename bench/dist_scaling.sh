#!/usr/bin/env bash
# Data-parallel figures for bench/RESULTS.md: the digits MLP step at -np 1 and -np 2 (scaling
# efficiency = throughput at 2 ranks / (2 x throughput of one process without DDP)) and the all-reduce
# against MPI_Allreduce.   bash bench/dist_scaling.sh [build]
set -euo pipefail
build=${1:-build}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg), cores: $(nproc --all)"
mpirun -np 1 "$build/bench/bench_dist" mlp
mpirun -np 2 --oversubscribe "$build/bench/bench_dist" mlp
mpirun -np 2 --oversubscribe "$build/bench/bench_dist" allreduce
