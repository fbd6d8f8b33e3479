# Sourced by the bench/compare* scripts: installs what the PyTorch side needs on a fresh machine —
# Debian's python3-torch and libjemalloc2 (apt-get, when missing) and, unless KILN_SOTA=0 or the caller
# sets KILN_NEED_SOTA=0, a virtualenv at $VENV with torch 2.x and jax from PyPI (torch.compile, jax.jit).
torch_deps_missing=()
for p in python3-torch libjemalloc2; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || torch_deps_missing+=("$p")
done
if [ ${#torch_deps_missing[@]} -gt 0 ]; then
  echo "[bench] installing ${torch_deps_missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${torch_deps_missing[@]}" >/dev/null
fi
if [ "${KILN_NEED_SOTA:-1}" != 0 ] && [ "${KILN_SOTA:-1}" != 0 ] && [ ! -x "$VENV/bin/python" ]; then
  echo "[bench] creating $VENV with torch and jax from PyPI (once)" >&2
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q torch jax numpy >&2 ||
    echo "[bench] venv setup failed; skipping torch.compile/jax" >&2
fi
# PyTorch's strongest CPU kernels here: AVX-512 where the CPU has it (Intel Xeons), AVX2 elsewhere (the
# AMD EPYCs these runs also land on; forcing avx512 there dies with an illegal instruction).
TORCH_ISA=avx2
if grep -qw avx512f /proc/cpuinfo; then TORCH_ISA=avx512; fi
