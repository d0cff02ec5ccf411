#!/usr/bin/env bash
# count-app-calls.sh OUTCSV [BUILDDIR] — what a chare step of each example app asks of the
# host: kernel launches, stream copies and memsets, device messages, host messages, GPU
# continuations, reduction contributions, per chare and step, at each ODF.
#
# Each app's Tessera program runs on the host backend (1 process x 1 PE, a small problem) under
# count-calls.so (LD_PRELOAD, built here from count-calls.c with mpicc), twice with different
# step counts; the difference of the counts over chares x extra steps is the per-chare-step
# figure (set-up and the final report cancel). MiniMD's difference spans whole neighbour-list
# periods (20 steps), so its figures are averages over rebuild and plain steps. A launch on
# the host backend is one kernel of the CUDA build: the apps' host and CUDA launchers are one
# to one (examples/*/kernels_{host.c,cuda.cu}).
#
# Writes OUTCSV: app,odf,chares,elements (of the counted problem: LULESH 24^3, MiniMD -s 16,
# Jacobi2D 256^2),launches,copies,memsets,dev_msgs,msgs,thens,contributes,
# entries (an upper bound of the entries a chare step runs: a device or host message or a
# continuation each starts one, and a contribution at most one callback per chare),
# stream_ops (launches + copies + memsets: host calls into the GPU runtime), dev_bytes (the
# device messages' bytes).
# Environment: COUNT_ODFS (default "1 2 4 8 16 27 64"), COUNT_APPS (lulesh minimd jacobi2d).
set -uo pipefail
out=${1:?usage: count-app-calls.sh OUTCSV [BUILDDIR]}
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$(cd "$here/../.." && pwd)/build}
repo=$(cd "$here/../.." && pwd)
odfs=${COUNT_ODFS:-"1 2 4 8 16 27 64"}
apps=${COUNT_APPS:-"lulesh minimd jacobi2d"}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mpicc -std=gnu11 -O2 -shared -fPIC -I"$repo/include" -I"$build/include" "$here/count-calls.c" \
    -o "$tmp/count-calls.so" -ldl || { echo "count-app-calls.sh: cannot build count-calls.so" >&2; exit 1; }
launch=(mpirun --bind-to none --oversubscribe -x LD_PRELOAD)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export TESS_GPU=host

# run APP ODF STEPS: prints the CALLS line's counts and the chare count
run() {
    local o
    case $1 in
    lulesh) o=$(LD_PRELOAD="$tmp/count-calls.so" timeout 300 "${launch[@]}" -np 1 "$build/examples/lulesh/lulesh_tess" +ppn 1 -q -g 24 -odf "$2" -i "$3" 2>&1) ;;
    minimd) o=$(LD_PRELOAD="$tmp/count-calls.so" timeout 300 "${launch[@]}" -np 1 "$build/examples/minimd/minimd_tess" +ppn 1 -s 16 -odf "$2" -n "$3" 2>&1) ;;
    jacobi2d) o=$(LD_PRELOAD="$tmp/count-calls.so" timeout 300 "${launch[@]}" -np 1 "$build/examples/jacobi2d/jacobi2d_tess" +ppn 1 -x 256 -y 256 -odf "$2" -i "$3" -w 0 2>&1) ;;
    esac
    local calls ch
    calls=$(echo "$o" | grep '^CALLS' | head -1)
    ch=$(echo "$o" | grep '^RESULT' | tr ' ' '\n' | sed -n 's/^chares=//p' | head -1)
    [ -n "$calls" ] && [ -n "$ch" ] || { echo "count-app-calls.sh: $1 ODF $2 failed:" >&2; echo "$o" | tail -5 >&2; return 1; }
    ch=$(echo "$ch" | awk -F'x' '{ p = 1; for (i = 1; i <= NF; i++) p *= $i; print p }')
    echo "$ch $(echo "$calls" | tr ' ' '\n' | sed -n 's/^[a-z_]*=//p' | tail -n +2 | tr '\n' ' ')"
}

declare -A elements=([lulesh]=$((24 * 24 * 24)) [minimd]=$((4 * 16 * 16 * 16)) [jacobi2d]=$((256 * 256)))
echo "app,odf,chares,elements,launches,copies,memsets,dev_msgs,msgs,thens,contributes,entries,stream_ops,dev_bytes" >"$out"
for app in $apps; do
    case $app in minimd) n1=20 n2=60 ;; *) n1=10 n2=30 ;; esac
    for odf in $odfs; do
        a=$(run "$app" "$odf" "$n1") && b=$(run "$app" "$odf" "$n2") || continue
        echo "$a" "$b" | awk -v app="$app" -v odf="$odf" -v d=$((n2 - n1)) -v el="${elements[$app]}" '{
            # fields: chares launches copies memsets dev_msgs msgs thens contributes broadcasts
            # dev_bytes, twice
            c = $1; for (i = 2; i <= 10; i++) v[i] = ($(i + 10) - $i) / (c * d)
            printf "%s,%s,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.1f\n", app, odf, c,
                el, v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[5] + v[6] + v[7] + v[8],
                v[2] + v[3] + v[4], v[10] }' >>"$out"
        tail -1 "$out"
    done
done
