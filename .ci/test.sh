#!/usr/bin/env bash
# Sets up, builds and runs every test: the release build's suite (the unit suite in a random order, golden
# IR, script files against PyTorch, the soak test), the unit suite again on another kernel build and
# intra-op thread count, an ASan+UBSan build of the unit tests, a ThreadSanitizer build of the programs
# that use threads, and an install check (a user program built with pkg-config and with CMake against the installed kiln).
# docs/testing.md says what runs where and why.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
start=$SECONDS
stage() { echo "== $1 ($((SECONDS - start)) s so far)"; }

stage "release build and suite"
[ -d build ] || meson setup build -Dbuildtype=release
meson configure build -Dgolden=enabled  # the golden IR tests run, never skip
ninja -C build
meson test -C build --print-errorlogs

# The CPU and thread matrix (docs/testing.md): the release suite above ran the best kernels at every
# core; here the baseline kernels at 2 threads and, where the CPU has AVX-512, the AVX2 build at 1.
stage "unit suite on the other kernel builds"
tests/run_matrix.sh build baseline@2 avx2@1

stage "asan+ubsan build and unit suite (1 intra-op thread)"
# The sanitizer builds compile at -O1 with line tables only (-g1): half the compile time of debugoptimized's
# -O2 -g, the optimisation level the sanitizers' documentation asks for, asserts on, and traces still name file:line
san_opts=(-Doptimization=1 -Ddebug=false -Db_ndebug=false -Dcpp_args=-g1 -Db_lundef=false)
[ -d build-asan ] || meson setup build-asan "${san_opts[@]}" -Db_sanitize=address,undefined
ninja -C build-asan tests/kiln_tests
# intercept_tls_get_addr=0: GCC 12's sanitizer runtime takes a dynamic TLS block that happens to start 16 bytes
# into a page (oneDNN's, libgomp's) for a pre-2.25 glibc header and reads garbage through it, and LeakSanitizer's
# exit-time tracer then dies with signal 11 (seen once in CI, google/sanitizers#1322; fixed in GCC 14's runtime)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 meson test -C build-asan --print-errorlogs unit

stage "tsan build and the threaded programs"
[ -d build-tsan ] || meson setup build-tsan "${san_opts[@]}" -Db_sanitize=thread
ninja -C build-tsan tests/tsan/kiln_tsan_tests tests/tsan/kiln_tsan_dist
meson test -C build-tsan --no-rebuild --print-errorlogs --suite tsan

stage "install check"
bash tests/install_check.sh build
stage "done"
echo "all tests passed"
