#!/usr/bin/env bash
# Installs kiln from a build dir into a temporary prefix and builds a user program against it twice, with
# pkg-config and with CMake's find_package, exactly as the README tells users to.
set -euo pipefail
build=${1:-build}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
meson install -C "$build" --destdir "$prefix" >/dev/null
root="$prefix/usr/local"
pcdir=$(dirname "$(find "$root" -name kiln.pc | head -1)")
cat > "$prefix/prog.cpp" <<'CPP'
#include <kiln/kiln.h>
#include <iostream>
int main() {
  kiln::Tensor x = kiln::arange(6).reshape({2, 3}).to(kiln::DType::Float32);
  kiln::Tensor y = kiln::relu(x - 2.0f) * 2;
  std::cout << y.sum().item<float>() << "\n";
  return y.sum().item<float>() == 12.0f ? 0 : 1;
}
CPP
PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="" \
  g++ -std=c++20 "$prefix/prog.cpp" -o "$prefix/prog" \
  $(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$root" --cflags --libs kiln)
libdir="$(dirname "$(find "$root" -name 'libkiln.so' | head -1)")"
LD_LIBRARY_PATH="$libdir" "$prefix/prog"
echo "install check: pkg-config ok"

mkdir "$prefix/cmake-app"
cat > "$prefix/cmake-app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(app CXX)
find_package(kiln 0.1 CONFIG REQUIRED)
add_executable(prog ../prog.cpp)
target_link_libraries(prog PRIVATE kiln::kiln)
CMAKE
cmake -S "$prefix/cmake-app" -B "$prefix/cmake-build" -DCMAKE_PREFIX_PATH="$root" >/dev/null
cmake --build "$prefix/cmake-build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/cmake-build/prog"
echo "install check: cmake ok"
