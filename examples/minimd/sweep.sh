#!/usr/bin/env bash
# sweep.sh OUTDIR [BUILDDIR] — the MiniMD overdecomposition sweep on one GPU:
#   sizes -nx 100 -ny 100 -nz 200 (8 M atoms), -s 64 (1 M), -s 32 (131 k);
#   minimd_mpi with 1, 2, 4 processes on the GPU (more than 1 under MPS);
#   minimd_tess with 1 process x 1 PE at ODF 1, 2, 4, 8, 16 on every size, plus a --timing run
#   (force and neighbor kernels timed with the stream drained around them) at ODF 1 and 8;
#   processes per GPU 1, 2, 4 (MPS) x PEs 1, 2, 4 at ODF 4, 8, 16 on the 8 M atom size.
# Each row has the time per step split into force, neighbor, communication and the rest where
# the program can split it (minimd_mpi always; minimd_tess only force and neighbor, in its
# timing runs), atom-steps per second, the force kernel's effective bandwidth, and the ratio to
# MPI on 1 process and on as many processes. The thermo rows of every run must equal MPI's
# (1e-10 relative). Writes OUTDIR/minimd_sweep.csv and, with matplotlib, PNGs.
# SWEEP_BUDGET (seconds, default 540) stops starting new runs once spent; SWEEP_QUICK=1 runs a
# tiny version (to try the script on the host backend). SWEEP_SIZES (names: 8M s64 s32),
# SWEEP_ODFS, SWEEP_PMAT_SIZES, SWEEP_PMAT_ODFS replace the lists above.
set -uo pipefail
out=${1:?usage: sweep.sh OUTDIR [BUILDDIR]}
build=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
dir="$build/examples/minimd"
mkdir -p "$out"
budget=${SWEEP_BUDGET:-540}
start=$SECONDS
# launch, mps_on/mps_off, field: the scaffolding the apps' sweeps share
. "$(dirname "$0")/../common/sweep-lib.sh"
csv="$out/minimd_sweep.csv"
echo "size,natoms,prog,procs,ppn,odf,chares,steps,timing,ms_per_step,force_ms,neigh_ms,comm_ms,other_ms,atom_steps_per_s,force_gbs,force_list_gbs,ratio_mpi1,ratio_mpi_same,thermo_equal,T,U,P" >"$csv"

declare -A opts steps_of
opts[8M]="-nx 100 -ny 100 -nz 200"; steps_of[8M]=100
opts[s64]="-s 64"; steps_of[s64]=200
opts[s32]="-s 32"; steps_of[s32]=500
if [ "${SWEEP_QUICK:-0}" = 1 ]; then
    opts[q12]="-s 12"; steps_of[q12]=20; opts[q16]="-s 16"; steps_of[q16]=20
    sizes=(q12 q16); odfs=(1 4); timing_odfs=(1 4); pmat_sizes=(q16); pmat_odfs=(4); procs=(1 2); ppns=(1 2); mpi_procs=(1 2)
else
    sizes=(8M s64 s32); odfs=(1 2 4 8 16); timing_odfs=(1 8); pmat_sizes=(8M); pmat_odfs=(4 8 16)
    procs=(1 2 4); ppns=(1 2 4); mpi_procs=(1 2 4)
fi
[ -n "${SWEEP_SIZES:-}" ] && read -ra sizes <<<"$SWEEP_SIZES"
[ -n "${SWEEP_ODFS:-}" ] && read -ra odfs <<<"$SWEEP_ODFS"
[ -n "${SWEEP_PMAT_SIZES:-}" ] && read -ra pmat_sizes <<<"$SWEEP_PMAT_SIZES"
[ -n "${SWEEP_PMAT_ODFS:-}" ] && read -ra pmat_odfs <<<"$SWEEP_PMAT_ODFS"

table() { echo "$1" | awk '/^# Timestep T U P/ { on = 1; next } on && NF != 5 { exit } on { print $1, $2, $3, $4 }'; }
declare -A mpi_ms mpi_table

# row SIZE PROG PROCS PPN ODF TIMING OUTPUT
row() {
    local o=$7 m1=${mpi_ms["$1:1"]:-nan} mp=${mpi_ms["$1:$3"]:-nan} t eq
    t=$(field "$o" ms_per_step)
    eq=$(paste -d' ' <(echo "${mpi_table["$1:1"]:-}") <(table "$o") | awk '
        function rel(a, b, f) { m = (b < 0 ? -b : b); if (m < f) m = f; d = a - b; if (d < 0) d = -d; return m > 0 ? d / m : d }
        { n++; r = rel($2, $6, 0); if (rel($3, $7, 0) > r) r = rel($3, $7, 0); if (rel($4, $8, 1) > r) r = rel($4, $8, 1); if (!(r <= 1e-10) || $1 != $5) bad = 1 }
        END { print (bad || n == 0) ? "no" : "yes" }')
    local r1 rp
    r1=$(awk -v a="$t" -v b="$m1" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "nan" }')
    rp=$(awk -v a="$t" -v b="$mp" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "nan" }')
    echo "$1,$(field "$o" natoms),$2,$3,$4,$5,$(field "$o" chares),${steps_of[$1]},$6,$t,$(field "$o" force_ms),$(field "$o" neigh_ms),$(field "$o" comm_ms),$(field "$o" other_ms),$(field "$o" atom_steps_per_s),$(field "$o" force_gbs),$(field "$o" force_list_gbs),$r1,$rp,$eq,$(field "$o" T),$(field "$o" U),$(field "$o" P)" >>"$csv"
    printf "  %-4s %-4s P=%d T=%d ODF=%-3s %-7s %9.4f ms/step  force %8s  /MPI(1) %s  /MPI(P) %s  thermo equal %s\n" \
        "$1" "$2" "$3" "$4" "$5" "$(field "$o" chares)$([ "$6" = 1 ] && echo ' timing')" "$t" "$(field "$o" force_ms)" "$r1" "$rp" "$eq"
}

spent() { [ $((SECONDS - start)) -ge "$budget" ] && { echo "budget spent: skipping $*"; return 0; }; return 1; }

run_mpi() { # size procs
    spent mpi "$@" && return
    [ "$2" -gt 1 ] && mps_on || mps_off
    local o; read -ra sz <<<"${opts[$1]}"
    o=$(timeout 300 "${launch[@]}" -np "$2" "$dir/minimd_mpi" "${sz[@]}" -n "${steps_of[$1]}" 2>&1)
    mpi_ms["$1:$2"]=$(field "$o" ms_per_step)
    [ -n "${mpi_ms["$1:$2"]}" ] || { echo "MPI run failed ($*):"; echo "$o" | tail -5; mpi_ms["$1:$2"]=nan; return; }
    [ "$2" = 1 ] && mpi_table["$1:1"]=$(table "$o")
    row "$1" mpi "$2" 1 0 0 "$o"
}

run_tess() { # size procs ppn odf [timing]
    spent tess "$@" && return
    [ "$2" -gt 1 ] && mps_on || mps_off
    local o timing=${5:-0} extra=(); read -ra sz <<<"${opts[$1]}"
    [ "$timing" = 1 ] && extra=(--timing)
    o=$(timeout 300 "${launch[@]}" -np "$2" "$dir/minimd_tess" +ppn "$3" "${sz[@]}" -n "${steps_of[$1]}" -odf "$4" "${extra[@]}" 2>&1)
    [ -n "$(field "$o" ms_per_step)" ] || { echo "Tessera run failed ($*):"; echo "$o" | tail -5; return; }
    row "$1" tess "$2" "$3" "$4" "$timing" "$o"
}

echo "MiniMD sweep ($(date -u +%FT%TZ)), results in $csv"
for s in "${sizes[@]}"; do
    for p in "${mpi_procs[@]}"; do run_mpi "$s" "$p"; done
    for odf in "${odfs[@]}"; do run_tess "$s" 1 1 "$odf"; done
    for odf in "${timing_odfs[@]}"; do run_tess "$s" 1 1 "$odf" 1; done
done
for s in "${pmat_sizes[@]}"; do
    for p in "${procs[@]}"; do for t in "${ppns[@]}"; do
        [ "$p" = 1 ] && [ "$t" = 1 ] && continue
        for odf in "${pmat_odfs[@]}"; do run_tess "$s" "$p" "$t" "$odf"; done
    done; done
done
mps_off

awk -F, 'NR > 1 && $20 != "yes" { bad++; print "thermo differs from MPI:", $0 } END { if (bad) exit 1 }' "$csv" && echo "thermo: every run equal to MPI on 1 process"

py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    plot="$(dirname "$0")/../../bench/plot.py"
    $py "$plot" "$csv" "$out/minimd_sweep.png" --x odf --y ratio_mpi1 --series size \
        --filter prog=tess procs=1 ppn=1 timing=0 --logx --title "MiniMD on one GPU: Tessera / MPI (1 process) time per step" \
        --ylabel "time per step, Tessera / MPI"
    $py "$plot" "$csv" "$out/minimd_pxt.png" --x odf --y ratio_mpi1 --series procs ppn \
        --filter prog=tess size="${pmat_sizes[0]}" timing=0 --logx --title "${pmat_sizes[0]}: processes x PEs per GPU" \
        --ylabel "Tessera / MPI (1 process)"
fi
echo "Summary (Tessera / MPI on 1 process, 1 process x 1 PE; goal at 8M: ODF 4 and 8 <= 1.03):"
awk -F, 'NR > 1 && $3 == "tess" && $4 == 1 && $5 == 1 && $9 == 0 { printf "  %-4s ODF %-3s %s\n", $1, $6, $18 }' "$csv"
