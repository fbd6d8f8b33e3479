#!/usr/bin/env bash
# Sets up, builds and runs the main demo: a GPT trained from its PyTorch model file (samples/gpt.py), then
# the API tours and the digits models.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
[ -d build ] || meson setup build -Dbuildtype=release
ninja -C build
./build/samples/train_gpt
./build/samples/eager_tour && ./build/samples/jit_tour && ./build/samples/train_digits both samples/data --compile
# Data-parallel: the MLP on 2 processes (DistributedDataParallel over MPI), when mpirun is there.
if command -v mpirun >/dev/null; then
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np 2 --oversubscribe ./build/samples/train_digits mlp samples/data --compile
fi
