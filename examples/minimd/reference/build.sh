#!/bin/sh
# Build the public miniMD reference version (ref/) in double precision, as used
# for the data in this folder.  Usage:
#   sh build.sh [WORKDIR]            (default WORKDIR: /tmp/minimd-ref-build)
# Needs git, Debian's Open MPI (mpicxx.openmpi) and network access to GitHub,
# or MINIMD_GIT=<path of an existing clone of Mantevo/miniMD>.
set -e
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/minimd-ref-build}
commit=2662065eb2b2264a673bda780a23d296f05a2c87
src=${MINIMD_GIT:-https://github.com/Mantevo/miniMD.git}
CXX=${CXX:-mpicxx.openmpi}
# The Makefile.openmpi flags, less -O3 -fopenmp -mavx -DUSE_SIMD: -O2, no OpenMP.
FLAGS="-O2 -DPRECISION=2 -DMPICH_IGNORE_CXX_SEEK -DNOCHUNK"

rm -rf "$work"; mkdir -p "$work"
if [ -d "$src" ]; then
  git -C "$src" archive "$commit" ref | tar -x -C "$work"
else
  git clone -q "$src" "$work/clone"
  git -C "$work/clone" archive "$commit" ref | tar -x -C "$work"
fi
cd "$work"
patch -p1 < "$here/print-precision.patch"
cd ref
mkdir -p obj
for f in ljs input integrate atom force_lj force_eam neighbor thermo comm timer output setup; do
  # as ref/Makefile.openmpi: preprocess first (OMPFORSCHEDULE is a macro that expands to a pragma)
  $CXX $FLAGS -E $f.cpp > obj/$f.2.cpp
  $CXX $FLAGS -c obj/$f.2.cpp -o obj/$f.o
done
$CXX -O2 obj/*.o -o miniMD_dp
echo "built $work/ref/miniMD_dp"
