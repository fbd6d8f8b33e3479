#!/usr/bin/env bash
# Sets up, builds and runs every test: the release build's suite, an ASan+UBSan build of the unit
# tests, and an install check (a user program built with pkg-config against the installed kiln).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh

[ -d build ] || meson setup build -Dbuildtype=release
ninja -C build
meson test -C build --print-errorlogs

[ -d build-asan ] || meson setup build-asan -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false
ninja -C build-asan tests/kiln_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs unit

bash tests/install_check.sh build
echo "all tests passed"
