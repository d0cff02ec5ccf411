#!/bin/sh
# Run the reference cases whose stdout is stored in this folder.  Usage:
#   sh run.sh [WORKDIR] [OUTDIR]   (defaults: /tmp/minimd-ref-build, this folder)
# WORKDIR is where build.sh built ref/miniMD_dp.
set -e
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/minimd-ref-build}
out=${2:-$here}
MPIRUN=${MPIRUN:-mpirun.openmpi}
export OMP_NUM_THREADS=1
cd "$work/ref"
# in.lj.miniMD with only its last line (thermo frequency, 100 there) changed
cp "$here/in.lj.thermo10" "$here/in.lj.thermo1" .

run() {  # name ranks input args...
  name=$1; np=$2; inp=$3; shift 3
  echo "$MPIRUN -n $np ./miniMD_dp -i $inp $*"
  $MPIRUN -n "$np" ./miniMD_dp -i "$inp" "$@" > "$out/$name.txt"
}
run lj-s5-np1          1 in.lj.thermo10 -s 5
run lj-s5-np2          2 in.lj.thermo10 -s 5
run lj-s8-np1          1 in.lj.thermo10 -s 8
run lj-s8-np2          2 in.lj.thermo10 -s 8
run lj-s8-np4          4 in.lj.thermo10 -s 8
run lj-s20-np1         1 in.lj.thermo10 -s 20
run lj-s20-np2         2 in.lj.thermo10 -s 20
run lj-nx6ny7nz9-np1   1 in.lj.thermo10 -nx 6 -ny 7 -nz 9
run lj-nx6ny7nz9-np3   3 in.lj.thermo10 -nx 6 -ny 7 -nz 9
run lj-s8-thermo1-np1  1 in.lj.thermo1  -s 8
run lj-s8-thermo1-np2  2 in.lj.thermo1  -s 8
# the same physics through other code paths of the reference (round-off only)
run opt-s8-fullneigh-np1   1 in.lj.thermo10 -s 8 --half_neigh 0
run opt-s8-fullneigh-np2   2 in.lj.thermo10 -s 8 --half_neigh 0
run opt-s8-origforce-np1   1 in.lj.thermo10 -s 8 --half_neigh -1
run opt-s8-ghostnewton0-np2 2 in.lj.thermo10 -s 8 --ghost_newton 0
run opt-s8-nosort-np1      1 in.lj.thermo10 -s 8 --sort 0
