#!/bin/sh
# gpu-build.sh [MAKE-ARGS...]: build a CUDA-enabled tree here for the H200 machine (see DEVICE.md).
#
# The device machine can build nothing we need, but runs binaries built here (Debian 12) against
# its own MPI, UCX and hwloc. So: a VPATH build in build-cuda/ (ignored by .gitignore's /build*/),
# with the CUDA backend and without HIP, installed under build-cuda/_inst; then pass
# carry=["build-cuda"] to the device tool (64 MiB travel in all) and run from the repo root there.
# Extra arguments go to make, e.g. `tools/gpu-build.sh install` or `tools/gpu-build.sh check TESTS=`
# (builds the test programs without running them).
# TESS_UCX=DIR builds against the UCX in DIR (e.g. build-cuda/ucx from tools/build-ucx.sh, which
# has the CUDA transports); TESS_UCX=build runs tools/build-ucx.sh first and uses build-cuda/ucx.
# Unset: the choice of the last configure (at first the system's UCX); TESS_UCX= (empty) goes back
# to the system's. Changing it reconfigures.
set -e
cd "$(dirname "$0")/.."
root=$PWD

# configure refuses a VPATH build while the source tree itself is configured.
if [ -f config.status ]; then
    echo "gpu-build.sh: $root is configured in-tree; run 'make distclean' there first" >&2
    exit 1
fi
[ -x configure ] || ./autogen.sh

ucx=${TESS_UCX-$(cat build-cuda/.ucx-choice 2>/dev/null || true)}
if [ "$ucx" = build ]; then
    tools/build-ucx.sh "$root/build-cuda/ucx"
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
