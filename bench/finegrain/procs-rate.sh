#!/usr/bin/env bash
# bench/finegrain/procs-rate.sh BUILD OUT — how the raw CUDA issue rate of chare steps grows with
# processes on one GPU, under MPS: bench_finegrain --procs-rate at 1, 2, 4 and 8 processes (one
# thread each; a chare step as calls: 4 copies of 4 KiB + a kernel; as graph replays; as 5
# kernel launches alone), $ROUNDS rounds (default 2), alternating the order. Writes
# OUT/procs.csv (mode, processes, steps/s, the ratio to one process of the same round) and
# prints it; OUT/procs.png when matplotlib is there. The threads of one process share one issue
# rate (bench_finegrain --calls); this says whether processes do too.
set -uo pipefail
b=$(cd "${1:?usage: procs-rate.sh BUILD OUT}" && pwd)
out=${2:?usage: procs-rate.sh BUILD OUT}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
mps=0
if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d 2>/dev/null; then
    mps=1
    sleep 1
fi
csv=$out/procs.csv
echo "round,mode,procs,steps_per_s,x_one" >"$csv"
for r in $(seq 1 "${ROUNDS:-2}"); do
    order="1 2 4 8"
    [ $((r % 2)) = 0 ] && order="8 4 2 1"
    declare -A rate=()
    for n in $order; do
        log=$out/procs-r$r-n$n.log
        TESS_GPU=cuda ${MPIEXEC:-mpirun} --oversubscribe --bind-to none -n "$n" \
            "$b/bench/finegrain/bench_finegrain" --procs-rate >"$log" 2>&1 ||
            { echo "procs-rate: $n processes failed:"; tail -5 "$log"; }
        while read -r m v; do rate[$m,$n]=$v; done < <(sed -n \
            's/^RESULT-PROCS mode=\([a-z]*\) procs=[0-9]* steps_per_s=\([0-9.]*\)$/\1 \2/p' "$log")
    done
    for m in calls graph kernels; do
        for n in 1 2 4 8; do
            v=${rate[$m,$n]:-}
            one=${rate[$m,1]:-}
            [ -n "$v" ] && [ -n "$one" ] &&
                echo "$r,$m,$n,$v,$(awk -v a="$v" -v b="$one" 'BEGIN{printf "%.3f", a/b}')" >>"$csv"
        done
    done
    unset rate
done
[ $mps = 1 ] && { echo quit | nvidia-cuda-mps-control; sleep 1; }
echo "raw chare steps a second, one thread in each of N processes on one GPU$([ $mps = 1 ] && echo ', under MPS'):"
column -s, -t "$csv"
/usr/bin/python3 "$here/../plot.py" "$csv" "$out/procs.png" --x procs --y x_one --series mode \
    --xlabel "processes on the GPU (one thread each)" --ylabel "steps/s over one process" \
    --title "raw CUDA issue rate of chare steps against processes" 2>/dev/null || true
