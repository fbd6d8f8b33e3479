#!/bin/sh
# Builds the libFuzzer target with clang++ (the project's compiler may be gcc): the script frontend is
# compiled instrumented (coverage + AddressSanitizer), the rest of kiln comes from libkiln.so.
#   build_fuzzer.sh CLANGXX SOURCE_ROOT BUILD_ROOT OUTPUT SOURCE...
set -eu
cxx=$1 src=$2 build=$3 out=$4
shift 4
flags=$(pkg-config --cflags fmt spdlog 2>/dev/null || true)
libs=$(pkg-config --libs fmt spdlog 2>/dev/null || echo -lfmt)
exec "$cxx" -std=c++20 -O1 -gline-tables-only -fsanitize=fuzzer,address -fno-omit-frame-pointer \
  -I"$src" -I"$src/core" -I"$build" $flags "$@" -o "$out" \
  -L"$build" -lkiln -Wl,-rpath,"$build" $libs
