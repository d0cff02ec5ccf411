#!/usr/bin/env bash
# pe-scaling.sh APP OUTDIR [BUILDDIR] — host throughput at fine grain: one app at one size and
# ODF on one GPU, run by 1 process × 1 PE and then by more PEs and processes (the same chares:
# the ODF counts chares per GPU), against the MPI program on one rank in the same run.
#
# Writes OUTDIR/pe_APP.csv (procs, ppn, ms a step, ratio to Tessera 1 × 1 and to MPI on one
# rank, whether the answer equals MPI's) and prints a short table. Where the host is the
# bottleneck, each PE launches and posts for its own chares, so the step time should fall with
# the PEs until the GPU is the bottleneck again.
#
#   PES_CONFIGS  "PROCSxPPN ..." (default "1x1 1x2 1x4 1x8 2x1 2x2 4x1 4x2 8x1")
#   PES_SIZE     problem size (LULESH -g: 128; MiniMD -s: 32; Jacobi2D -x/-y: 4096)
#   PES_ODF      chares per GPU (LULESH 64, MiniMD 16, Jacobi2D 64)
#   PES_STEPS    steps a run (LULESH 200, MiniMD 400, Jacobi2D 2000)
#   PES_EXTRA    more arguments for the Tessera program (e.g. +tess-graphs 0)
# Several processes share the GPU through MPS where the machine has it (sweep-lib.sh).
set -uo pipefail
app=${1:?usage: pe-scaling.sh lulesh|minimd|jacobi2d OUTDIR [BUILDDIR]}
out=${2:?usage: pe-scaling.sh lulesh|minimd|jacobi2d OUTDIR [BUILDDIR]}
here=$(cd "$(dirname "$0")" && pwd)
build=${3:-$(cd "$here/../.." && pwd)}
mkdir -p "$out" || exit 1
. "$here/sweep-lib.sh"

read -ra configs <<<"${PES_CONFIGS:-1x1 1x2 1x4 1x8 2x1 2x2 4x1 4x2 8x1}"
read -ra extra <<<"${PES_EXTRA:-}"
case $app in
lulesh) size=${PES_SIZE:-128} odf=${PES_ODF:-64} steps=${PES_STEPS:-200} ;;
minimd) size=${PES_SIZE:-32} odf=${PES_ODF:-16} steps=${PES_STEPS:-400} ;;
jacobi2d) size=${PES_SIZE:-4096} odf=${PES_ODF:-64} steps=${PES_STEPS:-2000} ;;
*) echo "pe-scaling.sh: unknown app '$app'" >&2; exit 2 ;;
esac

# run PROG NP PPN: "ms answer" of one run (empty on failure; the output goes to a log).
run() {
    local o
    o=$(app_run "$app" "$1" "$build" "$size" "$steps" "$2" "$3" "$odf" "${extra[@]}")
    echo "$o" >"$out/${app}_$1_$2x$3.log"
    app_result "$app" "$1" "$o"
}

mps_on
csv="$out/pe_$app.csv"
echo "app,size,odf,procs,ppn,ms_per_step,vs_tess_1x1,vs_mpi_1,answer_equal" >"$csv"
read -r mpi_ms mpi_sum <<<"$(run mpi 1 1)"
[ -n "${mpi_ms:-}" ] || { echo "pe-scaling.sh: the MPI run failed ($out)" >&2; exit 1; }
base=
printf '%-8s %10s %10s %10s %s\n' config ms/step 'vs 1x1' 'vs MPI' answer
printf '%-8s %10s %10s %10s %s\n' 'MPI 1' "$mpi_ms" - 1.000 -
for c in "${configs[@]}"; do
    np=${c%x*} ppn=${c#*x}
    read -r ms sum <<<"$(run tess "$np" "$ppn")"
    if [ -z "${ms:-}" ]; then
        echo "$c: failed (log in $out)"; continue
    fi
    [ -z "$base" ] && base=$ms
    eq=$(same "$sum" "$mpi_sum")
    r1=$(awk -v a="$ms" -v b="$base" 'BEGIN { printf "%.3f", a / b }')
    rm=$(awk -v a="$ms" -v b="$mpi_ms" 'BEGIN { printf "%.3f", a / b }')
    echo "$app,$size,$odf,$np,$ppn,$ms,$r1,$rm,$eq" >>"$csv"
    answer=equal
    [ "$eq" = 1 ] || answer=DIFFERS
    printf '%-8s %10s %10s %10s %s\n' "$c" "$ms" "$r1" "$rm" "$answer"
done
mps_off
