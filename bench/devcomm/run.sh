#!/bin/sh
# bench/devcomm/run.sh OUTDIR [--quick] — the device-message benchmarks on every path.
#
# Runs bench_devcomm once per path, each under a timeout, Tessera and its raw baseline back to
# back in the same binary:
#   d2d          mpirun -np 1 bench_devcomm +ppn 2                      (two PEs, one process)
#   ipc-staged   TESS_IPC=staged mpirun -np 2 bench_devcomm             (two processes, a node)
#   ipc-direct   TESS_IPC=direct mpirun -np 2 bench_devcomm
#   rdma         TESS_VNODE_SIZE=1 TESS_RDMA=$DCB_RDMA mpirun -np 2 …    (two virtual nodes;
#                auto: staged through pinned host memory where UCX has no CUDA transport)
# and writes OUTDIR/latbw.csv, OUTDIR/odf.csv, OUTDIR/goals.csv and OUTDIR/run.log (every
# run's output, then the summary); with matplotlib (/usr/bin/python3) also latency.png,
# bandwidth.png, exchange.png and overlap.png. The summary table comes last on stdout.
# --plot: only draw the PNGs from the CSVs already in OUTDIR (brought back from a GPU machine
# without matplotlib).
# MPS is started around the multi-process runs when there is a GPU (and stopped after).
#
# --quick: a tiny configuration (3 sizes, 2 volumes, ODF 1/4/16/64, 3 ms per point) for the
# host backend / CI. Environment: BENCH_DEVCOMM (the binary; default: build-cuda/ of the repo,
# else the one next to this script), DCB_TARGET_MS (time per point and repetition, default 15;
# quick 3), DCB_REPS (default 5; quick 3), DCB_RDMA (TESS_RDMA of the rdma run: auto; quick:
# staged, the H200's pipeline), DCB_TIMEOUT (seconds per run, default 100; quick 120),
# DCB_VERBOSE=1 (every point on stdout as it is measured, not only in run.log), DCB_ARGS (more
# bench_devcomm options, e.g. "--max-size 16M --what latbw").
set -u

usage() { echo "usage: $0 OUTDIR [--quick | --plot]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1
shift
quick= plot_only=
for a in "$@"; do
    case $a in
    --quick) quick=1 ;;
    --plot) plot_only=1 ;;
    *) usage ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

# PNGs where matplotlib is (it may not be on the GPU machine: then quietly none).
plot() {
    /usr/bin/python3 "$repo/bench/plot.py" "$@" >>"$log" 2>&1 || echo "# plot failed: $*" >>"$log"
}
plots() {
    [ -x /usr/bin/python3 ] && [ -f "$repo/bench/plot.py" ] &&
        /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 || return 0
    [ -s "$out/latbw.csv" ] && {
        plot "$out/latbw.csv" "$out/latency.png" --x size --y tessera --baseline-y raw \
            --series path --filter unit=us --facet metric --logx --logy \
            --title "one-way latency (dashed: raw)" --xlabel bytes --ylabel us
        plot "$out/latbw.csv" "$out/bandwidth.png" --x size --y tessera --baseline-y raw \
            --series path --filter metric=bandwidth --logx --logy \
            --title "stream bandwidth (dashed: raw)" --xlabel bytes --ylabel GB/s
    }
    [ -s "$out/odf.csv" ] && {
        plot "$out/odf.csv" "$out/exchange.png" --x odf --y tessera_us --baseline-y raw_us \
            --series volume --filter metric=exchange --facet path --logx --logy \
            --title "exchange (dashed: raw)" --xlabel ODF --ylabel "us per exchange"
        plot "$out/odf.csv" "$out/overlap.png" --x odf --y tessera_us --baseline-y raw_us \
            --series volume --filter metric=overlap --facet path --logx --logy \
            --title "exchange + kernel (dashed: raw, serial)" --xlabel ODF \
            --ylabel "us per exchange"
    }
}
if [ -n "$plot_only" ]; then
    log=/dev/stderr
    plots
    exit 0
fi
bin=${BENCH_DEVCOMM:-}
if [ -z "$bin" ]; then
    for c in "$repo/build-cuda/bench/devcomm/bench_devcomm" "$here/bench_devcomm"; do
        if [ -x "$c" ]; then bin=$c; break; fi
    done
fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "run.sh: no bench_devcomm binary (build it, or set BENCH_DEVCOMM)" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
# libtool's -no-install binaries point at their build tree by absolute path; the tree may
# have moved (copied to a GPU machine), so name its library folder too.
build=$(cd "$(dirname "$bin")/../.." && pwd)
LD_LIBRARY_PATH="$build/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
rm -f "$out/latbw.csv" "$out/odf.csv" "$out/goals.csv" "$out/run.log"
log=$out/run.log

if [ -n "$quick" ]; then
    target=${DCB_TARGET_MS:-3} reps=${DCB_REPS:-3} rdma=${DCB_RDMA:-staged} tmo=${DCB_TIMEOUT:-120}
    args="--quick"
else
    target=${DCB_TARGET_MS:-15} reps=${DCB_REPS:-5} rdma=${DCB_RDMA:-auto} tmo=${DCB_TIMEOUT:-100}
    args=""
fi
# Each run stops starting points 20 s before its timeout, so that it ends with what it has.
args="$args --csv-dir $out --target-ms $target --reps $reps --budget-s $((tmo - 20)) ${DCB_ARGS:-}"
: "${OMPI_MCA_btl_vader_single_copy_mechanism:=none}"
export OMPI_MCA_btl_vader_single_copy_mechanism
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH"

# MPS: only where there is an NVIDIA GPU and the tool to run it.
mps=
start_mps() {
    if [ -z "$quick" ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1 &&
       nvidia-smi -L >/dev/null 2>&1; then
        nvidia-cuda-mps-control -d >>"$log" 2>&1 && mps=1 && echo "# MPS started" >>"$log"
    fi
}
stop_mps() {
    if [ -n "$mps" ]; then
        echo quit | nvidia-cuda-mps-control >>"$log" 2>&1
        mps=
        echo "# MPS stopped" >>"$log"
    fi
}
trap 'stop_mps' EXIT
trap 'stop_mps; exit 130' INT TERM

failed=
# run NAME NP ENV... -- ARGS...: one mpirun under the timeout, output to stdout and the log.
run() {
    name=$1 np=$2
    shift 2
    envs= xs=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        envs="$envs $1"
        xs="$xs -x ${1%%=*}"
        shift
    done
    [ $# -gt 0 ] && shift
    echo "## $name: $envs $MPIRUN$xs -np $np $bin $* $args" | tee -a "$log"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    env $envs timeout -k 10 "$tmo" $MPIRUN $xs -np "$np" "$bin" "$@" $args >"$out/.run.out" 2>&1
    rc=$?
    cat "$out/.run.out" >>"$log"
    if [ -n "${DCB_VERBOSE:-}" ]; then
        grep -v '^GOAL' "$out/.run.out"
    else
        # The points are in the CSVs and the log; show what went wrong, if anything.
        grep -i 'bench_devcomm (rank\|error\|abort\|fatal\|signal' "$out/.run.out" | head -20
    fi
    rm -f "$out/.run.out"
    t1=$(date +%s)
    if [ $rc -ne 0 ]; then
        case $rc in
        124 | 137) why="timed out after ${tmo}s" ;;
        *) why="exit $rc" ;;
        esac
        echo "## $name: FAILED ($why)" | tee -a "$log"
        failed="$failed $name"
    else
        echo "## $name: done in $((t1 - t0)) s" | tee -a "$log"
    fi
}

echo "# bench/devcomm/run.sh: $bin, $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee -a "$log"
run d2d 1 -- +ppn 2 --expect d2d
start_mps
run ipc-staged 2 TESS_IPC=staged -- --expect ipc-staged
run ipc-direct 2 TESS_IPC=direct -- --expect ipc-direct
run rdma 2 TESS_VNODE_SIZE=1 TESS_RDMA="$rdma" -- --expect rdma
stop_mps

plots

# The summary: small-message latency, large-message bandwidth, the exchange at the largest
# volume, and the goals.
{
    echo
    echo "== bench_devcomm summary ($out) =="
    if [ -s "$out/latbw.csv" ]; then
        printf '%-12s %-11s %6s %12s %12s %9s  %-4s %s\n' path metric size raw tessera tess/raw unit baseline
        awk -F, 'NR > 1 {
                k = $1 "," $2
                if (!(k in lo) || $3 + 0 < lo[k]) { lo[k] = $3 + 0; los[k] = $0 }
                if (!(k in hi) || $3 + 0 > hi[k]) { hi[k] = $3 + 0; his[k] = $0 }
                if (!(k in seen)) { seen[k] = 1; order[n++] = k }
            }
            function human(s) {
                return s >= 1048576 ? sprintf("%dM", s / 1048576) : s >= 1024 ? sprintf("%dK", s / 1024) : sprintf("%dB", s)
            }
            function row(line,   f) {
                split(line, f, ",")
                printf "%-12s %-11s %6s %12.4g %12.4g %9.2f  %-4s %s\n", f[1], f[2], human(f[3]), f[7], f[8], f[10], f[9], f[6]
            }
            END {
                for (i = 0; i < n; i++) {
                    k = order[i]
                    if (k ~ /,bandwidth$/) row(his[k]); else row(los[k])
                }
            }' "$out/latbw.csv"
    fi
    grep -q '^rdma-staged' "$out/latbw.csv" 2>/dev/null &&
        echo "(rdma-staged: the runtime stages through pinned host memory - UCX without CUDA transports, as on the H200, or TESS_RDMA=staged - and so does the raw baseline: D2H, ucp_get of host memory, H2D, each stage timed alone)"
    if [ -s "$out/odf.csv" ]; then
        echo
        printf '%-12s %-9s %6s %4s %12s %12s %9s\n' path metric volume odf raw_us tessera_us tess/raw
        awk -F, 'NR > 1 { if ($3 + 0 > vmax) vmax = $3 + 0; l[NR] = $0 }
            END {
                for (i = 2; i <= NR; i++) {
                    split(l[i], f, ",")
                    if (f[3] + 0 == vmax && (f[4] == 1 || f[4] == 8 || f[4] == 64))
                        printf "%-12s %-9s %5dM %4d %12.1f %12.1f %9.2f\n", f[1], f[2], f[3] / 1048576, f[4], f[8], f[9], f[10]
                }
            }' "$out/odf.csv"
    fi
    if [ -s "$out/goals.csv" ]; then
        echo
        echo "goals (for the H200; tess/raw):"
        awk -F, 'NR > 1 {
                s = $3 >= 1048576 ? sprintf("%dM", $3 / 1048576) : $3 >= 1024 ? sprintf("%dK", $3 / 1024) : sprintf("%dB", $3)
                printf "  %-5s %-12s %-40s at %4s %8.3f %-7s (%s backend)\n", $6, $1, $2, s, $4, $5, $7
            }' "$out/goals.csv"
    fi
    [ -n "$failed" ] && echo "FAILED runs:$failed (see $log)"
    echo "files: $(cd "$out" && ls | tr '\n' ' ')"
} | tee -a "$log"

[ -z "$failed" ]
