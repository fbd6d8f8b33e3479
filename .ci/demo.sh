#!/usr/bin/env bash
# Sets up, builds and runs the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
[ -d build ] || meson setup build -Dbuildtype=release
ninja -C build
./build/samples/eager_tour && ./build/samples/jit_tour && ./build/samples/train_digits both samples/data --compile
