#!/usr/bin/env bash
# sweep.sh OUTDIR [BUILDDIR] — the Jacobi2D overdecomposition sweep on one GPU:
#   grids 4096², 8192², 16384², 32768²; ODF 1 … 32 with 1 process × 1 PE on every grid;
#   processes per GPU 1, 2, 4 (under MPS) × PEs per process 1, 2, 4 at ODF 4 … 32 on 4096² and
#   8192²; each configuration against jacobi2d_mpi with the same number of processes, in the
#   same run. Writes OUTDIR/jacobi_sweep.csv (one row per Tessera run, with the MPI time beside
#   it) and a table; OUTDIR/jacobi_sweep.png when matplotlib is there.
# SWEEP_BUDGET (seconds, default 480) stops starting new runs once spent; SWEEP_QUICK=1 runs a
# tiny version (for trying the script on the host backend). SWEEP_GRIDS, SWEEP_ODFS,
# SWEEP_PMAT_GRIDS and SWEEP_PMAT_ODFS (space-separated) replace the lists above.
set -uo pipefail
out=${1:?usage: sweep.sh OUTDIR [BUILDDIR]}
build=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
dir="$build/examples/jacobi2d"
mkdir -p "$out"
budget=${SWEEP_BUDGET:-480}
start=$SECONDS
# launch, mps_on/mps_off, field: the scaffolding the apps' sweeps share
. "$(dirname "$0")/../common/sweep-lib.sh"
csv="$out/jacobi_sweep.csv"
echo "grid,procs,ppn,odf,chares,iters,mpi_ms,tess_ms,ratio,checksum_mpi,checksum_tess" >"$csv"

if [ "${SWEEP_QUICK:-0}" = 1 ]; then
    grids=(256 512); odfs=(1 4); pmat_grids=(256); pmat_odfs=(4); procs=(1 2); ppns=(1 2)
    iters_of() { echo 20; }
else
    grids=(4096 8192 16384 32768); odfs=(1 2 4 8 16 32); pmat_grids=(4096 8192)
    pmat_odfs=(4 8 16 32); procs=(1 2 4); ppns=(1 2 4)
    iters_of() { case $1 in 4096) echo 1000 ;; 8192) echo 500 ;; 16384) echo 200 ;; *) echo 100 ;; esac; }
fi
[ -n "${SWEEP_GRIDS:-}" ] && read -ra grids <<<"$SWEEP_GRIDS"
[ -n "${SWEEP_ODFS:-}" ] && read -ra odfs <<<"$SWEEP_ODFS"
[ -n "${SWEEP_PMAT_GRIDS:-}" ] && read -ra pmat_grids <<<"$SWEEP_PMAT_GRIDS"
[ -n "${SWEEP_PMAT_ODFS:-}" ] && read -ra pmat_odfs <<<"$SWEEP_PMAT_ODFS"

declare -A mpi_ms mpi_sum

run_mpi() { # grid procs
    local key="$1:$2"
    [ -n "${mpi_ms[$key]:-}" ] && return
    local o
    o=$(timeout 120 "${launch[@]}" -np "$2" "$dir/jacobi2d_mpi" -x "$1" -y "$1" -i "$(iters_of "$1")" -w 10 2>&1)
    mpi_ms[$key]=$(field "$o" ms_per_iter); mpi_sum[$key]=$(field "$o" checksum)
    [ -n "${mpi_ms[$key]}" ] || { echo "MPI run failed ($key):"; echo "$o" | tail -5; mpi_ms[$key]=nan; }
}

run_tess() { # grid procs ppn odf
    [ $((SECONDS - start)) -ge "$budget" ] && { echo "budget spent: skipping $*"; return; }
    [ "$2" -gt 1 ] && mps_on || mps_off
    run_mpi "$1" "$2"
    local o
    o=$(timeout 120 "${launch[@]}" -np "$2" "$dir/jacobi2d_tess" +ppn "$3" -x "$1" -y "$1" -i "$(iters_of "$1")" -w 10 -odf "$4" 2>&1)
    local t c ch
    t=$(field "$o" ms_per_iter); c=$(field "$o" checksum); ch=$(field "$o" chares)
    if [ -z "$t" ]; then echo "Tessera run failed ($*):"; echo "$o" | tail -5; return; fi
    local m=${mpi_ms["$1:$2"]}
    local r
    r=$(awk -v a="$t" -v b="$m" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
    echo "$1,$2,$3,$4,$ch,$(iters_of "$1"),$m,$t,$r,${mpi_sum["$1:$2"]},$c" >>"$csv"
    printf "  %6s² P=%d T=%d ODF=%-3s %-7s  MPI %9.4f ms  Tessera %9.4f ms  ratio %s\n" "$1" "$2" "$3" "$4" "$ch" "$m" "$t" "$r"
}

echo "Jacobi2D sweep ($(date -u +%FT%TZ)), results in $csv"
for g in "${grids[@]}"; do for odf in "${odfs[@]}"; do run_tess "$g" 1 1 "$odf"; done; done
# SWEEP_P1_ONLY=1: only the one process x one PE sweep.
[ "${SWEEP_P1_ONLY:-0}" = 1 ] && pmat_grids=()
for g in "${pmat_grids[@]}"; do
    for p in "${procs[@]}"; do for t in "${ppns[@]}"; do
        [ "$p" = 1 ] && [ "$t" = 1 ] && continue
        for odf in "${pmat_odfs[@]}"; do run_tess "$g" "$p" "$t" "$odf"; done
    done; done
done
mps_off

# The checksums of both programs must agree on every grid.
awk -F, 'NR > 1 { d = $10 - $11; if (d < 0) d = -d; if ($10 != 0 && d / ($10 < 0 ? -$10 : $10) > 1e-10) { bad++; print "checksum mismatch:", $0 } }
         END { if (bad) exit 1 }' "$csv" && echo "checksums: all equal"

py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py "$(dirname "$0")/../../bench/plot.py" "$csv" "$out/jacobi_sweep.png" --x odf --y ratio \
        --series grid --filter procs=1 ppn=1 --logx --title "Jacobi2D on one GPU: Tessera / MPI time" \
        --ylabel "time per iteration, Tessera / MPI"
    $py "$(dirname "$0")/../../bench/plot.py" "$csv" "$out/jacobi_pxt.png" --x odf --y ratio \
        --series procs ppn --facet grid --filter grid=4096 --logx --title "4096²: processes x PEs per GPU" \
        --ylabel "Tessera / MPI"
fi
echo "Summary (Tessera / MPI at ODF 16, 1 process x 1 PE):"
awk -F, 'NR > 1 && $2 == 1 && $3 == 1 && $4 == 16 { printf "  %6s²: %s (goal: 16384² <= 1.03, 32768² <= 1.02, 8192² <= 1.10)\n", $1, $9 }' "$csv"
