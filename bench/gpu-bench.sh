#!/bin/bash
# gpu-bench.sh OUTDIR — the GPU-layer benchmarks on a GPU, each against raw CUDA in the same
# run: launch rate (T PEs x C chares, one process), continuation round trip, kernel overlap
# (raw CUDA only), and the launch rate of P processes sharing the GPU without and with MPS.
#
#   bench/gpu-bench.sh OUTDIR        from the repository root, with build-cuda/ built here by
#                                    tools/gpu-build.sh and copied to the GPU machine
#
# Writes OUTDIR/{launch,launch_mp,cont,overlap}.csv, a log per run (OUTDIR/*.log), and PNGs
# when python3 with matplotlib is there (else: bench/gpu-plot.sh OUTDIR later, here). Prints
# every table as it runs and a summary last. Every run has a timeout and the whole script
# keeps within GPU_BENCH_BUDGET seconds (default 330), skipping what no longer fits.
#
# Environment: TESS_BUILD (default build-cuda), TESS_GPU (default cuda: fail rather than fall
# back to the host backend), MPIRUN, GPU_BENCH_BUDGET, GPU_BENCH_QUICK=1 (tiny settings and no
# MPS: a smoke test of the script on the host backend, e.g. TESS_GPU=host TESS_BUILD=.).
set -u
out=${1:?usage: bench/gpu-bench.sh OUTDIR}
cd "$(dirname "$0")/.." || exit 1
build=${TESS_BUILD:-build-cuda}
export TESS_GPU=${TESS_GPU:-cuda}
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}
budget=${GPU_BENCH_BUDGET:-330}
quick=${GPU_BENCH_QUICK:-0}
case $build in /*) ;; *) build=$PWD/$build ;; esac
# The build tree's library, wherever the tree was copied to (its binaries' rpath names the
# path it was built at).
export LD_LIBRARY_PATH="$build/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset CUDA_DEVICE_MAX_CONNECTIONS

launch=$build/bench/launch/bench_launch
cont=$build/bench/cont/bench_cont
overlap=$build/bench/overlap/bench_overlap
for b in "$launch" "$cont" "$overlap"; do
    [ -x "$b" ] || { echo "gpu-bench.sh: $b is missing (build with tools/gpu-build.sh)" >&2; exit 1; }
done
mkdir -p "$out" || exit 1
rm -f "$out"/launch.csv "$out"/launch_mp.csv "$out"/cont.csv "$out"/overlap.csv

if [ "$quick" = 1 ]; then
    pes="1 2"; procs="1 2"; chares=1,2; secs=0.03; reps=2
    cont_args="--iters 500 --reps 2"
    ovl_args="--totals 65536,1048576 --kernels 1,4,16 --reps 2"
    mps=0
else
    pes="1 2 4 8"; procs="1 2 4"; chares=1,2,4,8,16; secs=0.2; reps=5
    cont_args="--iters 10000 --reps 7"
    ovl_args="--reps 7"
    mps=1
fi

t_start=$(date +%s)
failed=""
# run NAME TIMEOUT CMD...: run with a timeout (cut to what is left of the budget), log to
# OUTDIR/NAME.log and stdout.
run() {
    local name=$1 limit=$2 left rc
    shift 2
    left=$((budget - ($(date +%s) - t_start)))
    if [ "$left" -lt 15 ]; then
        echo "== $name: skipped, the time budget ($budget s) is spent"
        failed="$failed $name(skipped)"
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (timeout ${limit}s): $*"
    { timeout -k 5 "$limit" "$@" 2>&1; echo $? >"$out/$name.rc"; } | tee "$out/$name.log"
    rc=$(cat "$out/$name.rc")
    rm -f "$out/$name.rc"
    case $rc in
        0) ;;
        77) echo "== $name: skipped (exit 77)"; failed="$failed $name(skipped)" ;;
        124|137) echo "== $name: TIMED OUT after ${limit}s"; failed="$failed $name(timeout)" ;;
        *) echo "== $name: FAILED (exit $rc)"; failed="$failed $name(exit $rc)" ;;
    esac
    return "$rc"
}

mps_on=0
mps_stop() {
    if [ "$mps_on" = 1 ]; then
        echo quit | nvidia-cuda-mps-control
        mps_on=0
        sleep 2
    fi
}
trap mps_stop EXIT

{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,compute_mode \
        --format=csv 2>/dev/null || echo "nvidia-smi: not available"
} | tee "$out/env.txt"

# 1. Continuation round trip, one chare on one PE.
run cont 60 $mpirun -np 1 "$cont" +ppn 1 $cont_args --csv "$out/cont.csv"

# 2. Launch rate: one process, T PEs x C chares per PE.
for t in $pes; do
    run "launch_t$t" 75 $mpirun -np 1 "$launch" +ppn "$t" --chares "$chares" --time "$secs" \
        --reps "$reps" --tag threads --csv "$out/launch.csv"
done

# 3. Kernel overlap, with the default 8 hardware queues and with 32.
run overlap_c8 60 "$overlap" $ovl_args --csv "$out/overlap.csv"
run overlap_c32 60 env CUDA_DEVICE_MAX_CONNECTIONS=32 "$overlap" $ovl_args --csv "$out/overlap.csv"

# 4. Launch rate of P processes x 1 PE on the GPU, without MPS, then with MPS.
for p in $procs; do
    run "launch_p${p}_nomps" 75 $mpirun -np "$p" "$launch" +ppn 1 --chares "$chares" \
        --time "$secs" --reps "$reps" --tag nomps --csv "$out/launch_mp.csv"
done
if [ "$mps" = 1 ]; then
    if nvidia-cuda-mps-control -d; then
        mps_on=1
        sleep 1
        for p in $procs; do
            run "launch_p${p}_mps" 75 $mpirun -np "$p" "$launch" +ppn 1 --chares "$chares" \
                --time "$secs" --reps "$reps" --tag mps --csv "$out/launch_mp.csv"
        done
        mps_stop
    else
        echo "== MPS: nvidia-cuda-mps-control -d failed; no MPS runs"
        failed="$failed mps(start)"
    fi
fi

# PNGs where matplotlib is there.
if ${PYTHON3:-/usr/bin/python3} -c 'import matplotlib' >/dev/null 2>&1; then
    bench/gpu-plot.sh "$out"
else
    echo "== PNGs: no python3 with matplotlib here; run bench/gpu-plot.sh $out where it is"
fi

# ---- summary ------------------------------------------------------------------------------
echo
echo "==== summary ($(($(date +%s) - t_start)) s; CSVs in $out)"
if [ -s "$out/launch.csv" ]; then
    echo "launch rate, 1 process, T PEs x C chares per PE: tessera/raw (goal >= 0.9), raw k/s"
    awk -F, 'NR > 1 { line[$6] = line[$6] sprintf("  C=%-2s %5.2f %s %5.0fk", $7, $13, $15, $11 / 1000);
                      if ($15 == "PASS") pass++; else miss++ }
             END { for (t in line) print "  T=" t ":" line[t] | "sort -t= -k2 -n";
                   close("sort -t= -k2 -n"); printf "  %d PASS, %d MISS\n", pass, miss }' \
        "$out/launch.csv"
fi
if [ -s "$out/cont.csv" ]; then
    awk -F, '$5 == "pct" && $6 == 99 { p99 = sprintf("  p99: raw %.2f us, tessera %.2f us", $7, $8) }
             $5 == "summary" { s = sprintf("continuation round trip: raw %.2f us, tessera %.2f us, ratio %.3f %s (goal <= %s)", $7, $8, $9, $11, $10) }
             END { print s; if (p99 != "") print p99 }' "$out/cont.csv"
fi
if [ -s "$out/overlap.csv" ]; then
    echo "kernel overlap: device time of K held kernels vs one kernel of the same threads"
    awk -F, 'NR > 1 { k = $2 " " $6; if ($3 == 1) one[k] = $7; last[k] = $7; lastk[k] = $3 }
             END { for (k in last) { split(k, a, " ");
                     x = one[k] > 0 ? last[k] / one[k] : 0
                     printf("  %9d threads, %2d queues: K=1 %8.1f us, K=%d %8.1f us (x%.2f)\n",
                            a[1], a[2], one[k], lastk[k], last[k], x) | "sort -k3,3n -k1,1n" } }' \
        "$out/overlap.csv"
fi
if [ -s "$out/launch_mp.csv" ]; then
    echo "launch rate, P processes x 1 PE: tessera/raw, tessera k/s (all processes)"
    awk -F, 'NR > 1 { k = "P=" $5 " " $4; line[k] = line[k] sprintf("  C=%-2s %5.2f %s %5.0fk", $7, $13, $15, $12 / 1000) }
             END { for (k in line) print "  " k ":" line[k] | "sort" }' "$out/launch_mp.csv"
fi
if [ -n "$failed" ]; then
    echo "not complete:$failed"
    exit 1
fi
echo "all runs completed"
