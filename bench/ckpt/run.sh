#!/usr/bin/env bash
# run.sh BUILD OUT [SIZES] — checkpoint and restart bandwidth (bench_ckpt) and what checkpoints
# cost LULESH, into OUT:
#   ckpt.csv, ckpt.png   bench_ckpt on one process over SIZES GB of device state (default
#                        1,2,4,8,16), checkpoints in $CKPT_DIR (default OUT/ckpt-dir): tessera
#                        against raw d2h / raw write+fsync (checkpoint) and raw read / raw h2d
#                        (restart), and the ratio to the slower raw path; a checkpoint in the
#                        background: the time the chares are stopped against the checkpoint
#                        written before returning and raw write+fsync, and its write's bandwidth.
#                        Each size's files (the raw file too) are removed before the next: the
#                        disk needs about the largest size free, plus 1 GB
#   lulesh.txt           LULESH -g $LULESH_G (default 256) for $LULESH_ITS cycles (default 1000)
#                        without checkpoints, then with -checkpoint-every N for each N of
#                        $LULESH_EVERY (default 100), written before returning
#                        (TESS_CKPT_BACKGROUND=0; LULESH_SYNC=0 leaves it out), in the
#                        background, and in the background past the page cache
#                        (TESS_CKPT_DIRECT=1): run times,
#                        the checkpoints' time and share of the run as LULESH prints them, and
#                        each run's time over the run without checkpoints (goal: at most 1.03);
#                        mpirun gets $LULESH_MPI_FLAGS (default -bind-to none: a background
#                        writer needs a core the PE does not use)
# PARTS=bench or PARTS=lulesh runs one of the two (default: both).
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
parts=${PARTS:-bench,lulesh}
rm -rf "$ckdir"
if [[ ,$parts, == *,bench,* ]]; then
    "$mpirun" ${MPIEXEC_FLAGS:-} -n 1 "$b/bench/ckpt/bench_ckpt" -s "$sizes" -c 16 -d "$ckdir" \
        -r "${REPS:-2}" -o "$out/ckpt.csv" | tee "$out/ckpt.txt"
    rm -rf "$ckdir"
    /usr/bin/python3 "$here/../plot.py" "$out/ckpt.csv" "$out/ckpt.png" --x size_gb --y gbs \
        --series path --facet op --logx --logy --xlabel "device state per process (GB)" \
        --ylabel "GB/s (bg-stop: size / time the chares are stopped)" \
        --title "checkpoint and restart against the raw paths" || true
fi
[[ ,$parts, == *,lulesh,* ]] || exit 0

g=${LULESH_G:-256}
its=${LULESH_ITS:-1000}
lulesh() { # LABEL [ENV...]; CK_ARGS: the checkpoint options
    local label=$1
    shift
    echo "## $label"
    env "$@" "$mpirun" ${MPIEXEC_FLAGS:-} ${LULESH_MPI_FLAGS--bind-to none} -n 1 \
        "$b/examples/lulesh/lulesh_tess" -g "$g" \
        -i "$its" -q ${CK_ARGS:-}
    rm -rf "$ckdir"
}
{
    echo "# LULESH -g $g -i $its, one process"
    CK_ARGS="" lulesh "no checkpoints" TESS_CKPT_BACKGROUND=1
    for every in ${LULESH_EVERY:-100}; do
        [ "${LULESH_SYNC:-1}" = 0 ] ||
            CK_ARGS="-checkpoint-every $every -checkpoint-dir $ckdir" \
                lulesh "checkpoint every $every cycles, written before returning" TESS_CKPT_BACKGROUND=0
        CK_ARGS="-checkpoint-every $every -checkpoint-dir $ckdir" \
            lulesh "checkpoint every $every cycles, in the background" TESS_CKPT_BACKGROUND=1
        CK_ARGS="-checkpoint-every $every -checkpoint-dir $ckdir" \
            lulesh "checkpoint every $every cycles, in the background, O_DIRECT" \
            TESS_CKPT_BACKGROUND=1 TESS_CKPT_DIRECT=1
    done
} 2>&1 | tee "$out/lulesh.txt"
awk '/^## / { label = substr($0, 4) }
     /^RESULT / { for (i = 1; i <= NF; i++) if ($i ~ /^elapsed=/) { t[label] = substr($i, 9) }
                  order[++n] = label }
     /^checkpoints:/ { ck[label] = $0 }
     END { base = t["no checkpoints"]
           for (i = 1; i <= n; i++) { l = order[i]
               printf "%s: %s s", l, t[l]
               if (base > 0 && l != "no checkpoints")
                   printf " = %.3f x the run without checkpoints (%.1f%% more)", t[l] / base,
                          100 * (t[l] / base - 1)
               printf "\n"
               if (ck[l] != "") printf "  %s\n", ck[l] } }' "$out/lulesh.txt" |
    tee "$out/lulesh-summary.txt"
