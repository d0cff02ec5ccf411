#!/bin/sh
# tools/gpu-build.sh [MAKE-ARGS...]: a CUDA build of Tessera in build-cuda/, to run on a GPU
# machine that cannot build it.
#
# The recipe: a VPATH build made on a machine with nvcc (no GPU needed there), with the CUDA
# backend and without HIP, installed under build-cuda/_inst; build-cuda/ is then copied to the
# GPU machine beside a checkout of the same commit, and run from the repository root there
# (tools/gpu-run STAGE OUTDIR) against that machine's own MPI, UCX and hwloc: the binaries find
# libtessera through LD_LIBRARY_PATH (tools/gpu-run sets it), so the tree may lie anywhere.
#
# Extra arguments go to make, e.g. `tools/gpu-build.sh install` or `tools/gpu-build.sh check
# TESTS=` (builds the test programs without running them).
#
# UCX: the direct RDMA path needs a UCX with CUDA transports, which a GPU machine's packaged UCX
# may lack. TESS_UCX=DIR builds against the UCX installed in DIR (a relative DIR is taken from
# the repository root; keep it inside build-cuda/, e.g. build-cuda/ucx, so that it travels with
# the tree); TESS_UCX=build with UCX_SRC=SOURCE first builds one from SOURCE into build-cuda/ucx
# (tools/build-ucx.sh SOURCE build-cuda/ucx: see there where to get it). Unset: the choice of the
# last configure (at first the system's UCX); TESS_UCX= (empty) goes back to the system's.
# Changing it reconfigures.
#
# `tools/gpu-build.sh pack DIR` (after a build and `check-programs`) copies what runs of
# build-cuda/ into DIR (e.g. build-gpu/, at the repository root): the programs, libraries,
# scripts and configuration without objects, archives, dependency files, test logs and the
# install tree, about a third of the size (~32 MB; with build-cuda/ucx ~39 MB), for a GPU machine
# that receives the tree as files. Run from DIR's repository root there as from build-cuda/
# (GPU_RUN_BUILD=DIR for tools/gpu-run).
set -e
cd "$(dirname "$0")/.."
root=$PWD

if [ "${1:-}" = pack ]; then
    dst=${2:?usage: tools/gpu-build.sh pack DIR}
    [ -x build-cuda/src/tessera-info ] || { echo "gpu-build.sh: no build in build-cuda/" >&2; exit 1; }
    case $dst in /*) ;; *) dst=$root/$dst ;; esac
    rm -rf "$dst"
    cp -a build-cuda "$dst"
    find "$dst" \( -name '*.o' -o -name '*.lo' -o -name '*.a' -o -name '*.log' -o -name '*.trs' \) -delete
    find "$dst" -name .deps -type d -prune -exec rm -rf {} +
    rm -rf "$dst/_inst" "$dst/test/logs"
    du -sh "$dst"
    exit 0
fi

# configure refuses a VPATH build while the source tree itself is configured.
if [ -f config.status ]; then
    echo "gpu-build.sh: $root is configured in-tree; run 'make distclean' there first" >&2
    exit 1
fi
[ -x configure ] || ./autogen.sh

ucx=${TESS_UCX-$(cat build-cuda/.ucx-choice 2>/dev/null || true)}
if [ "$ucx" = build ]; then
    [ -n "${UCX_SRC:-}" ] || { echo "gpu-build.sh: TESS_UCX=build needs UCX_SRC (tools/build-ucx.sh)" >&2; exit 1; }
    tools/build-ucx.sh "$UCX_SRC" "$root/build-cuda/ucx"
    ucx=$root/build-cuda/ucx
fi
case $ucx in ''|/*) ;; *) ucx=$root/$ucx ;; esac
mkdir -p build-cuda
cd build-cuda
# Reconfigure only when needed: configure.ac or an m4 macro is newer than the last run, or the
# UCX choice changed.
if [ ! -f config.status ] || [ -n "$(find ../configure ../m4 -newer config.status 2>/dev/null)" ] ||
   [ "$(cat .ucx-choice 2>/dev/null)" != "$ucx" ]; then
    ../configure --with-cuda --with-hip=no --prefix="$root/build-cuda/_inst" ${ucx:+--with-ucx="$ucx"}
    echo "$ucx" >.ucx-choice
fi
make -j2 "$@"
