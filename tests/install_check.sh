#!/usr/bin/env bash
# Installs kiln from a build dir into a temporary prefix and builds a user program against it with
# pkg-config, exactly as the README tells users to.
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
LD_LIBRARY_PATH="$(dirname "$(find "$root" -name 'libkiln.so' | head -1)")" "$prefix/prog"
echo "install check: ok"
