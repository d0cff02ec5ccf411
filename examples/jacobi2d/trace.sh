#!/usr/bin/env bash
# examples/jacobi2d/trace.sh OUTDIR [BUILDDIR] — the timeline trace on a GPU machine, from the
# repository root (BUILDDIR: a CUDA build tree, default build-cuda/ of tools/gpu-build.sh). Builds
# nothing; about 4 minutes.
#
#   1. the trace test list on the CUDA backend (test/trace: structure and counts of traced runs)
#   2. overhead: Jacobi2D 8192² ODF 16 (1 process, +ppn 1, 500 iterations), REPS runs each with
#      tracing off, on, and on with device-timed copies (TESS_TRACE_COPIES=1), alternated;
#      median ms/iteration of each and their ratios to off
#   3. pictures: Jacobi2D 4096² ODF 16 traced (Tessera, update kernels as user spans) and the MPI
#      driver traced, 60 iterations each; their summaries; the PNG of one iteration of each on
#      one time scale where python3-matplotlib is there (else the plot command to run elsewhere
#      after fetching OUTDIR is printed)
#
# OUTDIR gets overhead.csv, tess-4096.json, mpi-4096.json, *-summary.txt, jacobi-odf16-vs-mpi.png,
# the test log and summary.txt (also printed at the end). TRACE_GPU=host with small OVH_N,
# OVH_ITERS, PIC_N, PIC_ITERS tries it on a machine without a GPU.
set -uo pipefail
out=${1:?usage: examples/jacobi2d/trace.sh OUTDIR [BUILDDIR]}
top=$(pwd)
b=${2:-$top/build-cuda}
case $b in /*) ;; *) b=$top/$b ;; esac
mkdir -p "$out"
export LD_LIBRARY_PATH="$b/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TESS_SRCDIR=$top TESS_BUILDDIR=$b TESS_GPU=${TRACE_GPU:-cuda}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$top/examples/common/sweep-lib.sh"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
jt=$b/examples/jacobi2d/jacobi2d_tess
jm=$b/examples/jacobi2d/jacobi2d_mpi
reps=${REPS:-5}
# Sizes (smaller ones try the script on a CPU machine with TRACE_GPU=host).
ovn=${OVH_N:-8192} ovi=${OVH_ITERS:-500} pn=${PIC_N:-4096} pi=${PIC_ITERS:-60}

# 1. Tests (multi-process entries share the GPU: MPS).
mps_on
t0=$SECONDS
timeout 150 "$b/test/runtests" --timeout-scale 2 trace >"$out/trace-tests.log" 2>&1
mps_off
note "trace tests on $TESS_GPU ($((SECONDS - t0)) s): $(grep -E '^[0-9]+ passed' "$out/trace-tests.log" | tail -1)"
grep -E '^FAIL' "$out/trace-tests.log" | head -10 | tee -a "$summary"

# 2. Overhead, tracing off and on alternately (the trace file of a run is ~tens of MB).
echo "rep,trace,ms_per_iter" >"$out/overhead.csv"
for r in $(seq "$reps"); do
    for tr in off on copies; do
        trenv=()
        [ $tr = on ] && trenv=(TESS_TRACE="$out/overhead.json")
        [ $tr = copies ] && trenv=(TESS_TRACE="$out/overhead.json" TESS_TRACE_COPIES=1)
        env "${trenv[@]}" timeout 60 "${launch[@]}" -np 1 "$jt" +ppn 1 -x "$ovn" -y "$ovn" \
            -i "$ovi" -w 10 -odf 16 >"$out/run.txt" 2>&1
        echo "$r,$tr,$(field "$(cat "$out/run.txt")" ms_per_iter)" >>"$out/overhead.csv"
    done
done
rm -f "$out/overhead.json"
med() { grep ",$1," "$out/overhead.csv" | cut -d, -f3 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
off=$(med off) on=$(med on) cp=$(med copies)
ratio() { awk -v a="$1" -v b="$off" 'BEGIN{printf "%.4f", a/b}'; }
note "Jacobi2D ${ovn}² ODF 16, 1 process x 1 PE, median of $reps: trace off $off ms/iter, on $on ($(ratio "$on")), on with copies $cp ($(ratio "$cp"))"

# 3. The pictures' traces.
TESS_TRACE=$out/tess-4096.json timeout 60 "${launch[@]}" -np 1 "$jt" +ppn 4 -x "$pn" -y "$pn" \
    -i "$pi" -w 5 -odf 16 >"$out/tess-4096.txt" 2>&1
note "$(grep RESULT "$out/tess-4096.txt")"
TESS_TRACE=$out/mpi-4096.json timeout 60 "${launch[@]}" -np 1 "$jm" -x "$pn" -y "$pn" -i "$pi" \
    -w 5 >"$out/mpi-4096.txt" 2>&1
note "$(grep RESULT "$out/mpi-4096.txt")"
py=/usr/bin/python3
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ "$TESS_GPU" = cuda ] && [ -n "$gpu_name" ] || gpu_name="$TESS_GPU backend"
$py tools/tess-trace summary "$out/tess-4096.json" >"$out/tess-4096-summary.txt" 2>&1
$py tools/tess-trace check "$out/tess-4096.json" | tee -a "$summary"
plot=(tools/tess-trace plot "$out/tess-4096.json" --step update:40 --title
      "Jacobi2D 4096², Tessera ODF 16 (1 process x 4 PEs, $gpu_name)" --vs "$out/mpi-4096.json"
      --vs-step update:40 --vs-title "Jacobi2D 4096², MPI (1 process, $gpu_name)"
      -o "$out/jacobi-odf16-vs-mpi.png")
if $py -c 'import matplotlib' 2>/dev/null; then
    $py "${plot[@]}" | tee -a "$summary"
else
    note "no matplotlib here: run /usr/bin/python3 ${plot[*]} where it is"
fi
head -40 "$out/tess-4096-summary.txt" >>"$summary"
echo "---- summary"
cat "$summary"
