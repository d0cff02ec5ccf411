#!/usr/bin/env bash
# sweep.sh OUTDIR [BUILDDIR] — the LULESH overdecomposition sweep on one GPU:
#   meshes 64³, 128³, 256³ (the GPU's whole mesh); lulesh_tess at ODF 1, 2, 4, 8, 16, 27, 64
#   with 1 process × 1 PE on every mesh, and processes per GPU 1, 2, 4 (under MPS) × PEs per
#   process 1, 2, 4 at ODF 8, 27, 64 on 64³ and 128³; against lulesh_mpi with 1 rank and with 8
#   ranks (under MPS) on the same mesh, in the same run. Every run has the same iteration cap
#   per mesh. Writes OUTDIR/lulesh_sweep.csv (one row per run: time per cycle, FOM, and the
#   ratio to the 1-rank MPI time) and a table; OUTDIR/lulesh_sweep.png and lulesh_pxt.png when
#   matplotlib is there. Every run's origin energy and iteration count must agree per mesh.
# SWEEP_BUDGET (seconds, default 540) stops starting new runs once spent; SWEEP_QUICK=1 runs a
# tiny version (for trying the script on the host backend). SWEEP_SIZES, SWEEP_ODFS,
# SWEEP_PMAT_SIZES and SWEEP_PMAT_ODFS (space-separated) replace the lists above.
set -uo pipefail
out=${1:?usage: sweep.sh OUTDIR [BUILDDIR]}
build=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
dir="$build/examples/lulesh"
mkdir -p "$out"
budget=${SWEEP_BUDGET:-540}
start=$SECONDS
# launch, mps_on/mps_off, field: the scaffolding the apps' sweeps share
. "$(dirname "$0")/../common/sweep-lib.sh"
csv="$out/lulesh_sweep.csv"
echo "size,prog,procs,ppn,odf,chares,iters,ms_per_cycle,fom,ratio_mpi1,iterations,origin_energy" >"$csv"

if [ "${SWEEP_QUICK:-0}" = 1 ]; then
    sizes=(12 16); odfs=(1 8); pmat_sizes=(12); pmat_odfs=(8); procs=(1 2); ppns=(1 2)
    iters_of() { echo 20; }
else
    sizes=(64 128 256); odfs=(1 2 4 8 16 27 64); pmat_sizes=(64 128); pmat_odfs=(8 27 64)
    procs=(1 2 4); ppns=(1 2 4)
    iters_of() { case $1 in 64) echo 400 ;; 128) echo 150 ;; *) echo 60 ;; esac; }
fi
[ -n "${SWEEP_SIZES:-}" ] && read -ra sizes <<<"$SWEEP_SIZES"
[ -n "${SWEEP_ODFS:-}" ] && read -ra odfs <<<"$SWEEP_ODFS"
[ -n "${SWEEP_PMAT_SIZES:-}" ] && read -ra pmat_sizes <<<"$SWEEP_PMAT_SIZES"
[ -n "${SWEEP_PMAT_ODFS:-}" ] && read -ra pmat_odfs <<<"$SWEEP_PMAT_ODFS"

# field LINE-PREFIX OUT KEY here: this sweep reads more than the RESULT line
field() { echo "$1" | grep "^$2" | tr ' ' '\n' | sed -n "s/^$3=//p" | head -1; }
declare -A mpi1_ms
budget_left() { [ $((SECONDS - start)) -lt "$budget" ] || { echo "budget spent: skipping $*"; return 1; }; }

# One row: size prog procs ppn odf chares ms fom iterations energy
row() {
    local m=${mpi1_ms[$1]:-nan} r
    r=$(awk -v a="$7" -v b="$m" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
    echo "$1,$2,$3,$4,$5,$6,$(iters_of "$1"),$7,$8,$r,$9,${10}" >>"$csv"
    printf "  %4s³ %-4s P=%d T=%d ODF=%-3s %-8s %10.4f ms/cycle  FOM %12.1f  /MPI-1 %s\n" \
        "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$r"
}

run_mpi() { # size ranks
    budget_left mpi "$@" || return
    local s=$1 p=1
    if [ "$2" = 8 ]; then s=$(($1 / 2)); p=2; mps_on; else mps_off; fi
    local o
    o=$(timeout 300 "${launch[@]}" -np "$2" "$dir/lulesh_mpi" -q -s "$s" -i "$(iters_of "$1")" 2>&1)
    local it el fom e
    it=$(field "$o" "RESULT prog" iterations); el=$(field "$o" "RESULT prog" elapsed)
    fom=$(field "$o" "RESULT prog" fom); e=$(field "$o" "RESULT prog" origin_energy)
    [ -n "$it" ] || { echo "MPI run failed ($*):"; echo "$o" | tail -5; return; }
    local ms
    ms=$(awk -v a="$el" -v b="$it" 'BEGIN { printf "%.6f", a * 1e3 / b }')
    [ "$2" = 1 ] && mpi1_ms[$1]=$ms
    row "$1" mpi "$2" 1 0 "${p}x${p}x${p}" "$ms" "$fom" "$it" "$e"
}

run_tess() { # size procs ppn odf
    budget_left tess "$@" || return
    if [ "$2" -gt 1 ]; then mps_on; else mps_off; fi
    local o
    o=$(timeout 300 "${launch[@]}" -np "$2" "$dir/lulesh_tess" +ppn "$3" -q -g "$1" -odf "$4" \
        -i "$(iters_of "$1")" 2>&1)
    local ms fom it e ch
    ms=$(field "$o" RESULT-TESS ms_per_cycle); ch=$(field "$o" RESULT-TESS chares)
    fom=$(field "$o" "RESULT prog" fom); it=$(field "$o" "RESULT prog" iterations)
    e=$(field "$o" "RESULT prog" origin_energy)
    [ -n "$ms" ] || { echo "Tessera run failed ($*):"; echo "$o" | tail -5; return; }
    row "$1" tess "$2" "$3" "$4" "$ch" "$ms" "$fom" "$it" "$e"
}

echo "LULESH sweep ($(date -u +%FT%TZ)), results in $csv"
for s in "${sizes[@]}"; do
    run_mpi "$s" 1
    run_mpi "$s" 8
    for odf in "${odfs[@]}"; do run_tess "$s" 1 1 "$odf"; done
done
[ "${SWEEP_P1_ONLY:-0}" = 1 ] && pmat_sizes=()
for s in "${pmat_sizes[@]}"; do
    for p in "${procs[@]}"; do for t in "${ppns[@]}"; do
        [ "$p" = 1 ] && [ "$t" = 1 ] && continue
        for odf in "${pmat_odfs[@]}"; do run_tess "$s" "$p" "$t" "$odf"; done
    done; done
done
mps_off

# Every run of a mesh must give the same answer: iterations equal, origin energy within 1e-9.
awk -F, 'NR > 1 { if (!($1 in e)) { e[$1] = $12; it[$1] = $11 }
                  d = $12 - e[$1]; if (d < 0) d = -d
                  if ($11 != it[$1] || (e[$1] != 0 && d / (e[$1] < 0 ? -e[$1] : e[$1]) > 1e-9)) { bad++; print "answer differs:", $0 } }
         END { if (bad) exit 1 }' "$csv" && echo "answers: all equal per mesh"

py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py "$(dirname "$0")/../../bench/plot.py" "$csv" "$out/lulesh_sweep.png" --x odf --y ratio_mpi1 \
        --series size --filter prog=tess procs=1 ppn=1 --logx \
        --title "LULESH on one GPU: Tessera / MPI (1 rank) time per cycle" \
        --ylabel "time per cycle, Tessera / MPI"
    $py "$(dirname "$0")/../../bench/plot.py" "$csv" "$out/lulesh_pxt.png" --x odf --y fom \
        --series procs ppn --facet size --filter prog=tess --logx \
        --title "LULESH: processes x PEs per GPU" --ylabel "FOM (z/s)"
fi
echo "Summary (time per cycle, Tessera at 1 process x 1 PE / MPI at 1 rank):"
awk -F, 'NR > 1 && $2 == "tess" && $3 == 1 && $4 == 1 { printf "  %4s³ ODF %-3s %s\n", $1, $5, $10 }' "$csv"
awk -F, 'NR > 1 && $2 == "mpi" && $3 == 8 { printf "  %4s³ MPI 8 ranks / 1 rank: %s\n", $1, $10 }' "$csv"
