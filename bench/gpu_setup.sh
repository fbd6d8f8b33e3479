#!/usr/bin/env bash
# kiln on a lent GPU machine (../shared/gpu-checklist.md). That machine reaches no package registry and
# lacks kiln's Debian libraries, so they travel as .debs:
#   here:  bash bench/gpu_setup.sh fetch          downloads them into .gpu-debs/ (ignored, ~30 MB)
#   there: source bench/gpu_setup.sh build [DIR [TARGET...]]  unpacks them into a prefix of their own (never into /),
#          points pkg-config, the compiler and the loader at it, and builds kiln into DIR (build-gpu)
# with the device tool: run(command="source bench/gpu_setup.sh build && bash bench/gpu_check.sh $OUT",
#   carry=[".gpu-debs", "samples/data"]); source it in the shell that runs the tests, not in ( ) or a pipe.
# `build` is sourced so the environment (LD_LIBRARY_PATH, OPAL_PREFIX) stays for the commands after it.

kiln_gpu_debs=(libfmt-dev libfmt9 libspdlog-dev libspdlog1.10 doctest-dev libbenchmark-dev libbenchmark1debian
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5 libquadmath0
  libdnnl-dev libdnnl2 libxbyak-dev
  # OpenMPI for the dist suite, with what its libraries load
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libhwloc-dev libevent-core-2.1-7
  libevent-pthreads-2.1-7 libevent-dev libpmix2 libpmix-dev libfabric1 libucx0 libibverbs1 libibverbs-dev
  libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 librdmacm1)

kiln_gpu_fetch() {
  mkdir -p .gpu-debs && (cd .gpu-debs && rm -f ./*.deb && apt-get download "${kiln_gpu_debs[@]}")
  du -sh .gpu-debs
}

kiln_gpu_build() {
  local dir=${1:-build-gpu} p=/opt/kiln-deps
  local lib=$p/usr/lib/x86_64-linux-gnu
  mkdir -p $p
  for f in .gpu-debs/*.deb; do dpkg -x "$f" $p || return 1; done
  # dpkg -x runs no maintainer scripts: the alternatives and the unversioned links they would make
  ln -sf openblas-pthread/libopenblas.so.0 $lib/libopenblas.so.0
  for t in mpirun mpiexec mpicxx mpicc; do ln -sf $t.openmpi $p/usr/bin/$t; done
  export PKG_CONFIG_PATH=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$lib/openmpi/lib/pkgconfig:$p/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$p
  export CPATH=$p/usr/include${CPATH:+:$CPATH} LIBRARY_PATH=$lib:$lib/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CMAKE_PREFIX_PATH=$p/usr PATH=$p/usr/bin:$PATH
  # Debian's OpenMPI is built for prefix /usr: OPAL_PREFIX moves its plugin and help paths with it
  export OPAL_PREFIX=$p/usr OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false
  echo "gpu_setup: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(g++ --version | head -1); meson $(meson --version)"
  local mpi=auto
  mpicxx --showme:version >/dev/null 2>&1 || mpi=disabled
  [ -d "$dir" ] || meson setup "$dir" -Dbuildtype=release -Dmpi=$mpi || return 1
  shift
  local targets=("$@")
  [ ${#targets[@]} -gt 0 ] || targets=(tests/kiln_tests tests/dist/kiln_dist_tests tests/dist/dist_fail bench/bench_cuda bench/bench_dist samples/train_gpt)
  ninja -C "$dir" "${targets[@]}"
}

case "${1:-}" in
  fetch) kiln_gpu_fetch ;;
  build) shift; kiln_gpu_build "$@" ;;
  *) echo "usage: bash bench/gpu_setup.sh fetch (here) | source bench/gpu_setup.sh build [DIR] (on the GPU machine)" >&2 ;;
esac
