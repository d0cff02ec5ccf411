# sweep-lib.sh — the scaffolding the example apps' sweep.sh scripts share; sourced, not run:
#   launch      the mpirun command line as an array (all processes on one node, as root too)
#   mps_on      starts the CUDA MPS daemon once, where there is one; mps_off stops it (on EXIT too)
#   field OUT K the value of K=... on the RESULT line of a program's output OUT
# It also sets OMPI_MCA_btl_vader_single_copy_mechanism to none unless it is set.
launch=(mpirun --bind-to none --oversubscribe)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}

mps=0
mps_on() {
    [ $mps = 1 ] && return
    command -v nvidia-cuda-mps-control >/dev/null || return
    nvidia-cuda-mps-control -d && mps=1 && sleep 1
}
mps_off() {
    [ $mps = 1 ] || return
    echo quit | nvidia-cuda-mps-control; mps=0; sleep 1
}
trap mps_off EXIT

field() { echo "$1" | grep '^RESULT' | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# app_run APP PROG BUILD SIZE STEPS NP PPN ODF [EXTRA...]: one run of an example app (lulesh,
# minimd, jacobi2d) on SIZE for STEPS steps: its MPI program on one rank (PROG mpi; NP, PPN and
# ODF unused) or its Tessera program on NP processes × PPN PEs at ODF with EXTRA arguments (PROG
# tess); the output on stdout, within APP_TIMEOUT seconds (default 120).
app_run() {
    local app=$1 prog=$2 dir="$3/examples/$1" size=$4 n=$5 np=$6 ppn=$7 odf=$8
    shift 8
    local t=(timeout "${APP_TIMEOUT:-120}" "${launch[@]}")
    case $app:$prog in
    lulesh:mpi) "${t[@]}" -np 1 "$dir/lulesh_mpi" -q -s "$size" -i "$n" ;;
    lulesh:tess) "${t[@]}" -np "$np" "$dir/lulesh_tess" +ppn "$ppn" "$@" -q -g "$size" \
        -odf "$odf" -i "$n" ;;
    minimd:mpi) "${t[@]}" -np 1 "$dir/minimd_mpi" -s "$size" -n "$n" ;;
    minimd:tess) "${t[@]}" -np "$np" "$dir/minimd_tess" +ppn "$ppn" "$@" -odf "$odf" \
        -s "$size" -n "$n" ;;
    jacobi2d:mpi) "${t[@]}" -np 1 "$dir/jacobi2d_mpi" -x "$size" -y "$size" -i "$n" -w 10 ;;
    jacobi2d:tess) "${t[@]}" -np "$np" "$dir/jacobi2d_tess" +ppn "$ppn" "$@" -odf "$odf" \
        -x "$size" -y "$size" -i "$n" -w 10 ;;
    esac 2>&1
}

# app_result APP PROG OUTPUT: "ms answer" of a run's output (ms a step; the answer as
# colon-separated numbers: LULESH iterations and origin energy, MiniMD final T, U, P, Jacobi2D
# the checksum), nothing when the output has none.
app_result() {
    local ms sum
    case $1:$2 in
    lulesh:mpi)
        local el it
        el=$(field "$3" elapsed); it=$(field "$3" iterations)
        [ -n "$it" ] && ms=$(awk -v a="$el" -v b="$it" 'BEGIN { printf "%.6f", a * 1e3 / b }')
        sum="$it:$(field "$3" origin_energy)" ;;
    lulesh:tess)
        ms=$(echo "$3" | grep '^RESULT-TESS' | tr ' ' '\n' | sed -n 's/^ms_per_cycle=//p')
        sum="$(field "$3" iterations):$(field "$3" origin_energy)" ;;
    minimd:*) ms=$(field "$3" ms_per_step); sum="$(field "$3" T):$(field "$3" U):$(field "$3" P)" ;;
    jacobi2d:*) ms=$(field "$3" ms_per_iter); sum=$(field "$3" checksum) ;;
    esac
    [ -n "${ms:-}" ] && echo "$ms $sum"
}

# same A B: 1 when two answers (colon-separated numbers) agree to 1e-9 relative, else 0.
same() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, ":"); m = split(b, y, ":"); ok = n == m && n > 0
        for (i = 1; ok && i <= n; i++) {
            d = x[i] - y[i]; if (d < 0) d = -d
            s = x[i] < 0 ? -x[i] : x[i]; if (s < 1) s = 1
            if (d > 1e-9 * s) ok = 0
        }
        print ok ? 1 : 0 }'
}
