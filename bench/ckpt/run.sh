#!/usr/bin/env bash
# run.sh BUILD OUT [SIZES] — checkpoint and restart bandwidth (bench_ckpt) and what checkpoints
# cost LULESH, into OUT:
#   ckpt.csv, ckpt.png   bench_ckpt on one process over SIZES GB of device state (default
#                        1,2,4,8,16), checkpoints in $CKPT_DIR (default OUT/ckpt-dir): tessera
#                        against raw d2h / raw write+fsync (checkpoint) and raw read / raw h2d
#                        (restart), and the ratio to the slower raw path
#   lulesh.txt           LULESH -g $LULESH_G (default 256) for $LULESH_ITS cycles (default 1000)
#                        without checkpoints, then with -checkpoint-every 100: run times and the
#                        share of the run the checkpoints took (goal <= 3%)
# On the host backend (no GPU) use small sizes: run.sh build out 0.0625,0.25 (LULESH_G=30).
set -euo pipefail
b=$(cd "$1" && pwd)
out=$2
sizes=${3:-1,2,4,8,16}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ckdir=${CKPT_DIR:-$out/ckpt-dir}
here=$(cd "$(dirname "$0")" && pwd)
mpirun=${MPIEXEC:-mpirun}
rm -rf "$ckdir"
"$mpirun" ${MPIEXEC_FLAGS:-} -n 1 "$b/bench/ckpt/bench_ckpt" -s "$sizes" -c 16 -d "$ckdir" \
    -r "${REPS:-2}" -o "$out/ckpt.csv" | tee "$out/ckpt.txt"
rm -rf "$ckdir"
/usr/bin/python3 "$here/../plot.py" "$out/ckpt.csv" "$out/ckpt.png" --x size_gb --y gbs \
    --series path --facet op --logx --xlabel "device state per process (GB)" \
    --ylabel "GB/s" --title "checkpoint and restart against the raw paths" || true

g=${LULESH_G:-256}
its=${LULESH_ITS:-1000}
{
    echo "# LULESH -g $g -i $its, one process"
    "$mpirun" ${MPIEXEC_FLAGS:-} -n 1 "$b/examples/lulesh/lulesh_tess" -g "$g" -i "$its" -q
    "$mpirun" ${MPIEXEC_FLAGS:-} -n 1 "$b/examples/lulesh/lulesh_tess" -g "$g" -i "$its" -q \
        -checkpoint-every 100 -checkpoint-dir "$ckdir"
} 2>&1 | tee "$out/lulesh.txt"
rm -rf "$ckdir"
grep -E '^RESULT |^checkpoints:' "$out/lulesh.txt" |
    sed -n 's/.*elapsed=\([0-9.]*\).*/\1/p; s/^checkpoints: .* \([0-9.]*\) s (\([0-9.]*\)% .*/checkpoints \1 s, \2% of the run/p'
