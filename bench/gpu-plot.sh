#!/bin/sh
# gpu-plot.sh OUTDIR — PNGs from the CSVs that bench/gpu-bench.sh wrote in OUTDIR (those that are
# there). Needs python3 with matplotlib (Debian's /usr/bin/python3 + python3-matplotlib): run
# it here on the CSVs brought back from the GPU machine when that machine has no matplotlib.
set -u
out=${1:?usage: bench/gpu-plot.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON3:-/usr/bin/python3}
[ -x "$py" ] || py=python3
plot() { "$py" "$here/plot.py" "$@" || echo "gpu-plot.sh: plot of $1 failed" >&2; }

if [ -s "$out/launch.csv" ]; then
    plot "$out/launch.csv" "$out/launch.png" --x chares_per_pe --y tess_kps --baseline-y raw_kps \
        --series ppn --logx --title "Launch rate, 1 process (dashed: raw CUDA)" \
        --xlabel "chares per PE" --ylabel "kernels/s"
    plot "$out/launch.csv" "$out/launch_ratio.png" --x chares_per_pe --y ratio --series ppn \
        --logx --title "Launch rate, tessera / raw (goal >= 0.9)" --xlabel "chares per PE" \
        --ylabel "tessera / raw"
fi
if [ -s "$out/launch_mp.csv" ]; then
    plot "$out/launch_mp.csv" "$out/launch_mp.png" --x chares_per_pe --y tess_kps \
        --baseline-y raw_kps --series procs --facet tag --logx \
        --title "Launch rate, P processes x 1 PE on one GPU" --xlabel "chares per process" \
        --ylabel "kernels/s (all processes)"
fi
if [ -s "$out/cont.csv" ]; then
    plot "$out/cont.csv" "$out/cont.png" --x percentile --y tess_us --baseline-y raw_us \
        --filter kind=pct --title "Continuation round trip (dashed: raw CUDA)" \
        --xlabel "percentile" --ylabel "launch -> continuation (us)"
fi
if [ -s "$out/overlap.csv" ]; then
    plot "$out/overlap.csv" "$out/overlap.png" --x kernels --y gpu_us --series total_threads \
        --facet connections --logx --logy --title "Held kernels released at once" \
        --xlabel "kernels (streams)" --ylabel "completion (us, device)"
    plot "$out/overlap.csv" "$out/overlap_slowdown.png" --x kernels --y slowdown_vs_k1 \
        --series total_threads --facet connections --logx \
        --title "Completion vs one kernel" --xlabel "kernels (streams)" \
        --ylabel "time(K) / time(1)"
fi
