#!/usr/bin/env bash
# Installs what kiln needs on a fresh Debian 12 machine (skips what is already there) and makes the
# sample data. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(meson ninja-build pkg-config g++ cmake libfmt-dev libspdlog-dev doctest-dev libbenchmark-dev
      libopenblas-dev libdnnl-dev libxbyak-dev llvm-14-tools python3-numpy python3-sklearn
      libopenmpi-dev openmpi-bin
      graphviz        # `kiln dot -o graph.svg` renders through its dot (tests/script/run_dot_svg.sh)
      fortunes        # the English text samples/train_gpt trains on
      python3-torch   # Debian's PyTorch 1.13: tests/script compares every script file with it
      python3-torchvision)  # its model files, read by kiln as published (tests/script/torchvision)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The 8x8 handwritten digits that python3-sklearn ships, as .npy for the samples.
if [ ! -f samples/data/digits_x.npy ]; then
  mkdir -p samples/data
  /usr/bin/python3 samples/make_digits.py samples/data
fi
