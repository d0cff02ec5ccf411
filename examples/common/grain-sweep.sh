#!/usr/bin/env bash
# grain-sweep.sh APP OUTDIR [BUILDDIR] — the grain-size sweep of one app on one GPU, APP one of
# lulesh, minimd, jacobi2d: where overdecomposition stops being free.
#
# For each problem size: the Tessera program on 1 process x 1 PE at every ODF, and the MPI
# program on 1, 2, 4, 8 ranks on the one GPU (more than one under MPS, where there is MPS;
# LULESH's MPI program takes cubes only: 1 and 8). Rounds alternate: odd rounds run the
# configurations in order, even rounds in reverse, every configuration once a round, until the
# rounds are done or the time budget is spent (no run starts after it). Every run must give the
# answer of the 1-rank MPI run of its size (LULESH: iterations and origin energy to 1e-9;
# MiniMD: final T, U, P to 1e-10, P against max(|P|, 1); Jacobi2D: checksum to 1e-10).
#
# Writes OUTDIR/grain_APP.csv, one row per run:
#   app,size,elements,program,ranks,ppn,odf,chares,elements_per_chare,round,steps,ms_per_step,
#   checksum,checksum_equal
# (program tess or mpi; odf 0 for MPI; elements_per_chare of an MPI run: elements per rank),
# then draws OUTDIR/grain_APP.png and prints the summary (examples/common/grain-plot.py, with
# /usr/bin/python3 and matplotlib).
#
# Defaults (sized for one H100; about three minutes an app):
#   lulesh    -s 64 128 256 (edge elements of the whole mesh), ODF 1 2 4 8 16 27 64
#   minimd    -s 32 64 128 (4 N^3 atoms: 131 k, 1 M, 8.4 M), ODF 1 2 4 8 16 32 64
#   jacobi2d  4096 8192 16384 (N x N), ODF 1 2 4 8 16 32 64
# Environment: GRAIN_SIZES, GRAIN_ODFS (ODF 1 is always run), GRAIN_RANKS (space-separated)
# replace the lists;
# GRAIN_STEPS fixes the steps of every run (default: by size, see steps_of); GRAIN_ROUNDS
# (default 2); GRAIN_BUDGET (seconds, default 180); GRAIN_TIMEOUT (seconds a run, default 120);
# GRAIN_QUICK=1: tiny sizes and few steps, to try the script on the host backend.
set -uo pipefail
app=${1:?usage: grain-sweep.sh lulesh|minimd|jacobi2d OUTDIR [BUILDDIR]}
out=${2:?usage: grain-sweep.sh lulesh|minimd|jacobi2d OUTDIR [BUILDDIR]}
here=$(cd "$(dirname "$0")" && pwd)
build=${3:-$(cd "$here/../.." && pwd)}
dir="$build/examples/$app"
mkdir -p "$out" || exit 1
. "$here/sweep-lib.sh"

quick=${GRAIN_QUICK:-0}
case $app in
lulesh)
    sizes=(64 128 256); odfs=(1 2 4 8 16 27 64); ranks=(1 8)
    [ "$quick" = 1 ] && sizes=(8 12) odfs=(1 8 27)
    ;;
minimd)
    sizes=(32 64 128); odfs=(1 2 4 8 16 32 64); ranks=(1 2 4 8)
    [ "$quick" = 1 ] && sizes=(8 12) odfs=(1 4 8) ranks=(1 2)
    ;;
jacobi2d)
    sizes=(4096 8192 16384); odfs=(1 2 4 8 16 32 64); ranks=(1 2 4 8)
    [ "$quick" = 1 ] && sizes=(128 256) odfs=(1 4 16) ranks=(1 2)
    ;;
*)
    echo "grain-sweep.sh: unknown app '$app' (lulesh, minimd, jacobi2d)" >&2
    exit 2
    ;;
esac
[ -n "${GRAIN_SIZES:-}" ] && read -ra sizes <<<"$GRAIN_SIZES"
[ -n "${GRAIN_ODFS:-}" ] && read -ra odfs <<<"$GRAIN_ODFS"
[ -n "${GRAIN_RANKS:-}" ] && read -ra ranks <<<"$GRAIN_RANKS"
# Tessera at ODF 1 (the runtime without overdecomposition) is every ratio's second baseline.
[[ " ${odfs[*]} " == *" 1 "* ]] || odfs=(1 "${odfs[@]}")
rounds=${GRAIN_ROUNDS:-2}
budget=${GRAIN_BUDGET:-180}
tmo=${GRAIN_TIMEOUT:-120}
for p in "${ranks[@]}"; do
    if [ "$app" = lulesh ] && [ "$p" != 1 ] && [ "$p" != 8 ] && [ "$p" != 27 ] && [ "$p" != 64 ]; then
        echo "grain-sweep.sh: lulesh_mpi needs a cube number of ranks, not $p" >&2
        exit 2
    fi
done

# Steps a run: about a second of GPU time on an H100 at ODF 1 (the start-up of a run costs
# about as much); a host-backend quick run takes few.
steps_of() {
    [ -n "${GRAIN_STEPS:-}" ] && { echo "$GRAIN_STEPS"; return; }
    [ "$quick" = 1 ] && { echo 10; return; }
    case $app in
    lulesh) case $1 in 64) echo 400 ;; 128) echo 150 ;; *) echo 50 ;; esac ;;
    minimd) case $1 in 32) echo 300 ;; 64) echo 150 ;; *) echo 50 ;; esac ;;
    jacobi2d) case $1 in 4096) echo 1000 ;; 8192) echo 400 ;; *) echo 100 ;; esac ;;
    esac
}

elements_of() {
    case $app in
    lulesh) echo $(($1 * $1 * $1)) ;;
    minimd) echo $((4 * $1 * $1 * $1)) ;;
    jacobi2d) echo $(($1 * $1)) ;;
    esac
}

# run_one PROGRAM RANKS ODF SIZE: runs it; prints "ms_per_step chares checksum" or nothing.
run_one() {
    local prog=$1 np=$2 odf=$3 s=$4 n o ms ch sum
    n=$(steps_of "$s")
    case $app:$prog in
    lulesh:mpi)
        local per=$s k=1
        while [ $((k * k * k)) -lt "$np" ]; do k=$((k + 1)); done
        per=$((s / k))
        o=$(timeout "$tmo" "${launch[@]}" -np "$np" "$dir/lulesh_mpi" -q -s "$per" -i "$n" 2>&1)
        local el it
        el=$(field "$o" elapsed); it=$(field "$o" iterations)
        [ -n "$it" ] && ms=$(awk -v a="$el" -v b="$it" 'BEGIN { printf "%.6f", a * 1e3 / b }')
        ch=$np; sum="$it:$(field "$o" origin_energy)"
        ;;
    lulesh:tess)
        o=$(timeout "$tmo" "${launch[@]}" -np 1 "$dir/lulesh_tess" +ppn 1 -q -g "$s" -odf "$odf" -i "$n" 2>&1)
        ms=$(echo "$o" | grep '^RESULT-TESS' | tr ' ' '\n' | sed -n 's/^ms_per_cycle=//p')
        ch=$(echo "$o" | grep '^RESULT-TESS' | tr ' ' '\n' | sed -n 's/^chares=//p')
        sum="$(field "$o" iterations):$(field "$o" origin_energy)"
        ;;
    minimd:*)
        local extra=()
        [ "$prog" = tess ] && extra=(+ppn 1 -odf "$odf")
        [ "$prog" = tess ] && np=1
        o=$(timeout "$tmo" "${launch[@]}" -np "$np" "$dir/minimd_$prog" "${extra[@]}" -s "$s" -n "$n" 2>&1)
        ms=$(field "$o" ms_per_step); ch=$(field "$o" chares)
        sum="$(field "$o" T):$(field "$o" U):$(field "$o" P)"
        ;;
    jacobi2d:*)
        local extra=()
        [ "$prog" = tess ] && extra=(+ppn 1 -odf "$odf")
        [ "$prog" = tess ] && np=1
        o=$(timeout "$tmo" "${launch[@]}" -np "$np" "$dir/jacobi2d_$prog" "${extra[@]}" -x "$s" -y "$s" -i "$n" -w 10 2>&1)
        ms=$(field "$o" ms_per_iter); ch=$(field "$o" chares)
        sum=$(field "$o" checksum)
        ;;
    esac
    if [ -z "${ms:-}" ]; then
        echo "run failed ($app $prog ranks $np ODF $odf size $s):" >&2
        echo "$o" | tail -5 >&2
        return
    fi
    echo "$ms ${ch:-$np} $sum"
}

# equal A B: the two checksums (colon-separated fields) agree to the app's tolerance.
equal() {
    awk -v a="$1" -v b="$2" -v app="$app" 'BEGIN {
        na = split(a, x, ":"); nb = split(b, y, ":")
        if (na != nb || na == 0) { print "no"; exit }
        tol = app == "lulesh" ? 1e-9 : 1e-10
        for (i = 1; i <= na; i++) {
            if (x[i] == "" || y[i] == "") { print "no"; exit }
            m = y[i] < 0 ? -y[i] : y[i]
            if (app == "minimd" && i == 3 && m < 1) m = 1
            d = x[i] - y[i]; if (d < 0) d = -d
            if (m > 0 ? d / m > tol : d > tol) { print "no"; exit }
        }
        print "yes" }'
}

csv="$out/grain_$app.csv"
echo "app,size,elements,program,ranks,ppn,odf,chares,elements_per_chare,round,steps,ms_per_step,checksum,checksum_equal" >"$csv"
declare -A ref ref_mpi
start=$SECONDS

# The configurations of one round: single-process runs first (no MPS), then MPI on several
# ranks (MPS), each group over the sizes; "prog ranks odf size" per line.
configs() {
    local s o p
    for s in "${sizes[@]}"; do
        [[ " ${ranks[*]} " == *" 1 "* ]] && echo "mpi 1 0 $s"
        for o in "${odfs[@]}"; do echo "tess 1 $o $s"; done
    done
    for s in "${sizes[@]}"; do
        for p in "${ranks[@]}"; do [ "$p" != 1 ] && echo "mpi $p 0 $s"; done
    done
}

echo "grain sweep of $app ($(date -u +%FT%TZ)): sizes ${sizes[*]}, ODF ${odfs[*]}, MPI ranks ${ranks[*]}, $rounds rounds, budget ${budget}s; $csv"
mapfile -t all < <(configs)
for ((r = 1; r <= rounds; r++)); do
    order=("${all[@]}")
    if [ $((r % 2)) = 0 ]; then
        order=()
        for ((i = ${#all[@]} - 1; i >= 0; i--)); do order+=("${all[i]}"); done
    fi
    for c in "${order[@]}"; do
        read -r prog np odf s <<<"$c"
        if [ $((SECONDS - start)) -ge "$budget" ]; then
            echo "budget spent: round $r stops before $c"
            break 2
        fi
        if [ "$np" -gt 1 ]; then mps_on; else mps_off; fi
        res=$(run_one "$prog" "$np" "$odf" "$s") || true
        [ -n "$res" ] || continue
        read -r ms ch sum <<<"$res"
        # The reference answer: the 1-rank MPI run of the size (until there is one, the
        # first run of the size).
        if [ -z "${ref[$s]:-}" ] || { [ "$prog:$np" = mpi:1 ] && [ -z "${ref_mpi[$s]:-}" ]; }; then
            ref[$s]=$sum
            [ "$prog:$np" = mpi:1 ] && ref_mpi[$s]=1
        fi
        eq=$(equal "$sum" "${ref[$s]}")
        el=$(elements_of "$s")
        nch=$(echo "$ch" | awk -F'x' '{ p = 1; for (i = 1; i <= NF; i++) p *= $i; print p }')
        epc=$(awk -v e="$el" -v c="$nch" 'BEGIN { printf "%.6g", e / c }')
        echo "$app,$s,$el,$prog,$np,1,$odf,$nch,$epc,$r,$(steps_of "$s"),$ms,$sum,$eq" >>"$csv"
        printf "  round %d  %-8s size %-6s %-4s ranks %-2s ODF %-3s chares %-4s %10s el/chare  %10.4f ms/step  answer %s\n" \
            "$r" "$app" "$s" "$prog" "$np" "$odf" "$nch" "$epc" "$ms" "$eq"
    done
done
mps_off

status=0
awk -F, 'NR > 1 && $14 != "yes" { bad++; print "answer differs from the 1-rank MPI run:", $0 } END { exit bad ? 1 : 0 }' "$csv" ||
    status=1
[ $status = 0 ] && echo "answers: every run equal to MPI on 1 rank"
py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py "$here/grain-plot.py" "$csv" -o "$out/grain_$app.png" || status=1
else
    echo "(no matplotlib: no plot; $py $here/grain-plot.py $csv draws it)"
fi
exit $status
