#!/bin/sh
# bench/finegrain/run.sh OUTDIR [--quick | --plot | --mechanisms] — the host cost of a chare
# step, swept, then per mechanism.
#
# bench_finegrain for M = 2, 4, 6, 26 messages per chare-step (4 KiB each, 8 chares per PE) in
# three layouts, each with its raw baseline in the same run:
#   local  1 process x 1 PE       every neighbour in the process (d2d)
#   local  1 process x 4 PEs      the same work spread over 4 PEs
#   remote 2 processes x 1 PE     every neighbour in the other process (ipc; MPS on a GPU)
# and writes OUTDIR/finegrain.csv, OUTDIR/run.log and (with /usr/bin/python3 + matplotlib)
# OUTDIR/finegrain.png; a table on stdout.
#
# Then the mechanisms, 1 process x 1 PE, every neighbour local, M = 4 and 26 (FG_MECH_MS): the
# receiving entry as registered by default (copies; TESS_BATCH_STREAM off, on), sender-ordered
# (batch stream off, on), in place (TESS_ENTRY_IN_PLACE: no copy) and in place + sender-ordered:
# one row each in OUTDIR/mechanisms.csv (host us per chare-step, its kernel launch, per message
# beyond the launch, the entries', posts' and runtime's shares, the raw baseline of the run) and
# one table on stdout. These are the per-launch and per-message costs that
# examples/common/cost-model.py fits the apps' sweeps with.
#
# With CUDA (not --quick) also bench_finegrain --calls into OUTDIR/calls.txt: the host cost of
# each CUDA call of a chare step, and of a chare step replayed as a CUDA graph.
#
# --quick: M = 2, 6 (mechanisms: M = 4), few steps (host backend / CI). --plot: only draw the
# PNG from the CSV already there. --mechanisms: only the mechanisms. Environment: BENCH_FINEGRAIN (the
# binary; default: build-cuda/ of the repo, else the one next to this script), FG_STEPS (1000;
# quick 100), FG_REPS (3), FG_TIMEOUT (seconds per run: 120), FG_MS ("2 4 6 26"), FG_ARGS (more
# bench_finegrain options for every run, e.g. --sender-ordered; the CSV says which).
set -u

usage() { echo "usage: $0 OUTDIR [--quick | --plot]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1
shift
quick= plot_only= mech_only=
for a in "$@"; do
    case $a in
    --quick) quick=1 ;;
    --plot) plot_only=1 ;;
    --mechanisms) mech_only=1 ;;
    *) usage ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
csv=$out/finegrain.csv
mcsv=$out/mechanisms.csv

plots() {
    [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 || return 0
    [ -s "$csv" ] || return 0
    /usr/bin/python3 "$repo/bench/plot.py" "$csv" "$out/finegrain.png" --x m \
        --y tess_us_per_msg --baseline-y raw_us_per_msg --series where procs ppn --logx \
        --title "host us per message (dashed: raw CUDA)" \
        --xlabel "messages per chare-step (M)" --ylabel "us per message" >/dev/null ||
        echo "# plot failed" >&2
}
if [ -n "$plot_only" ]; then
    plots
    exit 0
fi

bin=${BENCH_FINEGRAIN:-}
if [ -z "$bin" ]; then
    for c in "$repo/build-cuda/bench/finegrain/bench_finegrain" "$here/bench_finegrain"; do
        if [ -x "$c" ]; then bin=$c; break; fi
    done
fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "run.sh: no bench_finegrain binary (build it, or set BENCH_FINEGRAIN)" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
build=$(cd "$(dirname "$bin")/../.." && pwd)
LD_LIBRARY_PATH="$build/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
: "${OMPI_MCA_btl_vader_single_copy_mechanism:=none}"
export OMPI_MCA_btl_vader_single_copy_mechanism
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH"

if [ -n "$quick" ]; then
    steps=${FG_STEPS:-100} ms=${FG_MS:-"2 6"} mech_ms=${FG_MECH_MS:-4}
else
    steps=${FG_STEPS:-1000} ms=${FG_MS:-"2 4 6 26"} mech_ms=${FG_MECH_MS:-"4 26"}
fi
reps=${FG_REPS:-3} tmo=${FG_TIMEOUT:-120}
[ -n "$mech_only" ] && ms=
[ -z "$mech_only" ] && rm -f "$csv"
rm -f "$mcsv" "$out/run.log"
log=$out/run.log

mps=
stop_mps() { [ -n "$mps" ] && echo quit | nvidia-cuda-mps-control >>"$log" 2>&1; mps=; }
if [ -z "$quick" ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1 &&
   nvidia-smi -L >/dev/null 2>&1; then
    nvidia-cuda-mps-control -d >>"$log" 2>&1 && mps=1
fi
trap 'stop_mps' EXIT
trap 'stop_mps; exit 130' INT TERM

failed=0
for m in $ms; do
    for layout in "1 1 local" "1 4 local" "2 1 remote"; do
        set -- $layout
        np=$1 ppn=$2 where=$3
        cmd="$MPIRUN -np $np $bin +ppn $ppn -m $m -s $steps -w $((steps / 10)) -r $reps --where $where --csv $csv ${FG_ARGS:-}"
        echo "## $cmd" >>"$log"
        # shellcheck disable=SC2086
        timeout -k 10 "$tmo" $cmd >>"$log" 2>&1 || { failed=$((failed + 1)); echo "# FAILED: $cmd" | tee -a "$log"; }
    done
done
# The mechanisms: "name|bench_finegrain options|TESS_BATCH_STREAM".
for m in $mech_ms; do
    for mech in "copy||off" "copy||on" "sender-ordered|--sender-ordered|off" \
                "sender-ordered|--sender-ordered|on" "in-place|--in-place|auto" \
                "in-place+sender-ordered|--in-place --sender-ordered|auto"; do
        opts=$(echo "$mech" | cut -d'|' -f2) bs=$(echo "$mech" | cut -d'|' -f3)
        cmd="$MPIRUN -x TESS_BATCH_STREAM=$bs -np 1 $bin +ppn 1 -m $m -s $steps -w $((steps / 10)) -r $reps --where local --csv $mcsv $opts ${FG_ARGS:-}"
        echo "## $cmd" >>"$log"
        # shellcheck disable=SC2086
        TESS_BATCH_STREAM=$bs timeout -k 10 "$tmo" $cmd >>"$log" 2>&1 ||
            { failed=$((failed + 1)); echo "# FAILED: $cmd" | tee -a "$log"; }
    done
done
# With CUDA: the host cost of each single CUDA call of a chare step, and of one chare step as
# calls against as a CUDA graph replay (bench_finegrain --calls) into OUTDIR/calls.txt.
if [ -z "$quick" ] && nvidia-smi -L >/dev/null 2>&1; then
    cmd="$MPIRUN -np 1 $bin +ppn 1 -m 4 -s 100 -w 10 -r 1 --no-raw --calls"
    echo "## $cmd" >>"$log"
    # shellcheck disable=SC2086
    timeout -k 10 "$tmo" $cmd >"$out/calls.txt" 2>&1 ||
        { failed=$((failed + 1)); echo "# FAILED: $cmd" | tee -a "$log"; }
fi
plots
if [ -s "$csv" ]; then
    echo "# bench_finegrain: host us per chare-step and per message (raw: one thread, same calls)"
    echo "# (msg_xl: per message beyond the step's own kernel launch, timed in the same steps)"
    printf "%-7s %5s %4s %4s %10s %10s %9s %9s %7s %9s %9s %3s\n" where procs ppn M tess_step raw_step \
        tess_msg raw_msg ratio tess_xl raw_xl so
    tail -n +2 "$csv" | while IFS=, read -r w p q c m b be ts rs tm rm ra tl rl tx rx so _; do
        printf "%-7s %5s %4s %4s %10s %10s %9s %9s %7s %9s %9s %3s\n" "$w" "$p" "$q" "$m" "$ts" "$rs" \
            "$tm" "$rm" "$ra" "$tx" "$rx" "$so"
    done
    grep -h "chare-step: kernel" "$log" | sed 's/^ */# /' | head -20
fi
if [ -s "$mcsv" ]; then
    echo "# per mechanism, 1 process x 1 PE, local: host us per chare-step (tess_step), its kernel"
    echo "# launch, per message beyond the launch (msg_xl), entries in all, posts, the runtime's rest"
    printf "%-36s %4s %10s %8s %8s %9s %8s %9s %10s\n" mechanism M tess_step launch msg_xl entries \
        posts rest raw_step
    tail -n +2 "$mcsv" | while IFS=, read -r _ _ _ _ m _ _ ts rs _ _ _ tl _ tx _ _ _ _ mech _ en po re; do
        printf "%-36s %4s %10s %8s %8s %9s %8s %9s %10s\n" "$mech" "$m" "$ts" "$tl" "$tx" "$en" "$po" \
            "$re" "$rs"
    done
fi
[ "$failed" -eq 0 ]
