#!/usr/bin/env bash
# graph-ab.sh OUTDIR [BUILDDIR] — the apps at fine and coarse grain with step graphs on and off
# (TESS_GRAPHS=1 / 0), each against the MPI program on one rank of the GPU in the same run.
#
# Every configuration of GAB_CONFIGS runs GAB_ROUNDS times (default 2), the MPI program and the
# two Tessera modes in turn, odd rounds in order and even rounds in reverse; a time is the
# median of its rounds. Every Tessera run's answer is compared with the MPI run's (LULESH:
# iterations and origin energy to 1e-9; MiniMD: final T, U, P to 1e-9; Jacobi2D: checksum to
# 1e-9). Writes OUTDIR/graph_ab.csv (one line a run) and OUTDIR/graph_ab.txt (the table it
# prints); bench/finegrain/graph-ab-plot.py draws the PNG.
#
#   GAB_CONFIGS  "APP:SIZE:ODF:PROCSxPPN ..." (default below: the fine-grain goals and the
#                coarse-grain sizes that must not get slower)
#   GAB_STEPS    "APP:SIZE:STEPS ..." overrides of the steps a run
#   GAB_ROUNDS   rounds (2)
#   GAB_TIMEOUT  seconds a run (120)
set -uo pipefail
out=${1:?usage: graph-ab.sh OUTDIR [BUILDDIR]}
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$(cd "$here/../.." && pwd)}
mkdir -p "$out" || exit 1
. "$here/../../examples/common/sweep-lib.sh"

read -ra configs <<<"${GAB_CONFIGS:-lulesh:128:27:1x1 lulesh:128:64:1x1 lulesh:128:64:1x4 \
lulesh:256:64:1x1 lulesh:256:8:1x1 minimd:32:8:1x1 minimd:32:16:1x1 minimd:128:16:1x1 \
minimd:128:8:1x1 jacobi2d:4096:64:1x1 jacobi2d:16384:64:1x1}"
rounds=${GAB_ROUNDS:-2}
export APP_TIMEOUT=${GAB_TIMEOUT:-120}

steps_of() { # APP SIZE
    local s
    for s in ${GAB_STEPS:-}; do
        [ "${s%:*}" = "$1:$2" ] && { echo "${s##*:}"; return; }
    done
    case $1:$2 in
    lulesh:64) echo 400 ;; lulesh:128) echo 150 ;; lulesh:*) echo 50 ;;
    minimd:32) echo 300 ;; minimd:64) echo 150 ;; minimd:*) echo 50 ;;
    jacobi2d:4096) echo 2000 ;; jacobi2d:8192) echo 500 ;; jacobi2d:*) echo 200 ;;
    *) echo 100 ;;
    esac
}

# run APP SIZE ODF NP PPN MODE: "ms answer" (MODE mpi, or the TESS_GRAPHS value); nothing on
# failure (the output goes to a log).
run() {
    local app=$1 size=$2 odf=$3 np=$4 ppn=$5 mode=$6 prog=tess o
    [ "$mode" = mpi ] && prog=mpi
    o=$(TESS_GRAPHS=${mode/mpi/1} app_run "$app" "$prog" "$build" "$size" \
        "$(steps_of "$app" "$size")" "$np" "$ppn" "$odf")
    echo "$o" >"$out/$app-$size-$odf-${np}x$ppn-$mode.log"
    app_result "$app" "$prog" "$o"
}

csv="$out/graph_ab.csv"
echo "app,size,odf,procs,ppn,mode,round,ms_per_step,answer_equal" >"$csv"
mps_on
declare -A ref
for ((r = 1; r <= rounds; r++)); do
    order=("${configs[@]}")
    if ((r % 2 == 0)); then
        order=()
        for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[i]}"); done
    fi
    for c in "${order[@]}"; do
        IFS=: read -r app size odf pp <<<"$c"
        np=${pp%x*} ppn=${pp#*x}
        for mode in mpi 0 1; do
            read -r ms sum <<<"$(run "$app" "$size" "$odf" "$np" "$ppn" "$mode")"
            if [ -z "${ms:-}" ]; then
                echo "run failed: $c mode $mode (log in $out)" >&2
                continue
            fi
            key="$app:$size"
            [ "$mode" = mpi ] && [ -z "${ref[$key]:-}" ] && ref[$key]=$sum
            eq=$(same "$sum" "${ref[$key]:-none}")
            echo "$app,$size,$odf,$np,$ppn,$mode,$r,$ms,$eq" >>"$csv"
        done
    done
done
mps_off

# The table: medians, ratios to MPI(1) of graphs off and on, and on / off.
awk -F, 'NR > 1 {
    k = $1 FS $2 FS $3 FS $4 "x" $5; m = $6
    if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    v[k, m, ++n[k, m]] = $8; if ($9 != 1 && m != "mpi") bad[k] = 1
}
function med(k, m,   i, j, t, c, a) {
    c = n[k, m]; if (!c) return 0
    for (i = 1; i <= c; i++) a[i] = v[k, m, i]
    for (i = 1; i <= c; i++)
        for (j = i + 1; j <= c; j++)
            if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
END {
    printf "%-10s %6s %4s %5s %10s %10s %10s %8s %8s %8s  %s\n", "app", "size", "odf", "pxt",
           "MPI(1) ms", "off ms", "on ms", "off/MPI", "on/MPI", "on/off", "answers"
    for (i = 1; i <= nk; i++) {
        k = keys[i]; split(k, f, FS); mp = med(k, "mpi"); a = med(k, "0"); b = med(k, "1")
        printf "%-10s %6s %4s %5s %10.4f %10.4f %10.4f %8.3f %8.3f %8.3f  %s\n", f[1], f[2], f[3],
               f[4], mp, a, b, mp ? a / mp : 0, mp ? b / mp : 0, a ? b / a : 0,
               (k in bad) ? "DIFFER" : "equal"
    }
}' "$csv" | tee "$out/graph_ab.txt"
