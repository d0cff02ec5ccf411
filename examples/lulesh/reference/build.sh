#!/bin/sh
# Build the public LULESH 2.0 reference (LLNL/LULESH, master) serially and with MPI, -O2, no
# OpenMP, with only the closing report's print precision raised (print-precision.patch).
# Usage:
#   sh build.sh [WORKDIR]            (default WORKDIR: /tmp/lulesh-ref-build)
# Gives WORKDIR/serial/lulesh2.0 (-DUSE_MPI=0) and WORKDIR/mpi/lulesh2.0 (-DUSE_MPI=1).
# Needs git, g++, Debian's Open MPI (mpicxx.openmpi) and network access to GitHub, or
# LULESH_GIT=<path of an existing clone (or bare mirror) of LLNL/LULESH>.
set -e
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/lulesh-ref-build}
commit=3e01c40b3281aadb7f996525cdd4a3354f6d3801   # master, 2020-11-18
src=${LULESH_GIT:-https://github.com/LLNL/LULESH.git}
CXX=${CXX:-g++}
MPICXX=${MPICXX:-mpicxx.openmpi}
srcs="lulesh.cc lulesh-comm.cc lulesh-viz.cc lulesh-util.cc lulesh-init.cc"

rm -rf "$work"; mkdir -p "$work/src" "$work/serial" "$work/mpi"
if [ -d "$src" ]; then
  git -C "$src" archive "$commit" | tar -x -C "$work/src"
else
  git clone -q "$src" "$work/clone"
  git -C "$work/clone" archive "$commit" | tar -x -C "$work/src"
fi
cd "$work/src"
patch -p1 < "$here/print-precision.patch"
$CXX -O2 -DUSE_MPI=0 -I. -o ../serial/lulesh2.0 $srcs -lm
$MPICXX -O2 -DUSE_MPI=1 -I. -o ../mpi/lulesh2.0 $srcs -lm
echo "built $work/serial/lulesh2.0 and $work/mpi/lulesh2.0"
