#!/usr/bin/env bash
# tools/device-run.sh STAGE OUTDIR — what runs on the GPU machine, from the repository root,
# with build-cuda/ (tools/gpu-build.sh) carried along. Builds nothing there.
#
#   suite   the gpu and examples test lists on the CUDA backend (under MPS, so the multi-process
#           entries share the GPU), then bench/gpu-bench.sh
#   comm    bench/devcomm/run.sh, the Jacobi2D sweep, the load-balancing demonstration
#   apps    the minimd and lulesh test lists on CUDA (under MPS), LLNL's CUDA LULESH
#           (build-cuda/peer/lulesh-cuda, tools/build-peer-lulesh.sh) checked at -s 30, and one
#           timing run of each program at a mid size (APPS_QUICK_ONLY=1: no tests)
#   minimd  examples/minimd/sweep.sh (MINIMD_BUDGET seconds, default 500)
#   lulesh  examples/lulesh/sweep.sh beside LLNL's CUDA LULESH (LULESH_BUDGET, default 500)
#   finegrain  bench/finegrain/run.sh (the host cost of a chare step against raw CUDA) with the
#           batch stream (TESS_BATCH_STREAM auto: on), without it, and with the receiving entry
#           sender-ordered (bench_finegrain --sender-ordered), the cost of single CUDA
#           calls, and Jacobi2D at ODF 16 from 4096² to 16384² (1 x 1 and 1 x 4 PEs)
#   sweeps  one call for all three apps: the minimd and lulesh lists on CUDA (the gpu and
#           examples lists are suite's: all four no longer fit one call beside the sweeps), a
#           short Jacobi2D sweep, lulesh gpu-compare (MPI and Tessera against LLNL's CUDA port
#           at 128³ and 256³), short LULESH and MiniMD sweeps; about 8 minutes
#   rdma    the direct RDMA path with the carried UCX (build-cuda/ucx: TESS_UCX=build
#           tools/gpu-build.sh): tessera-info's UCX report, then under MPS with 2 and 4
#           processes on the GPU, TESS_VNODE_SIZE=1 (every process its own virtual node), for
#           TESS_RDMA=direct and staged: the device-message, migration and registration tests
#           and the whole gpu list (RDMA_LISTS=0: not the list),
#           Jacobi2D's checksum against the MPI version; bench_devcomm latbw (direct, staged,
#           raw ucp_get of device memory in the same binary); ucx_perftest -m cuda (ucp_get)
#   modes   Jacobi2D ODF 16 sweeps with TESS_BATCH_STREAM on and off (auto, adapt, is the
#           sweeps stage's), the adapt choice's counts at 4096² and 8192², finegrain at M = 4
#           and 26, and the traces of 4096² ODF 16 (Tessera 1 x 1, MPI) for the Jacobi2D README
#   lulesh-ab  the lulesh list on CUDA (under MPS), lulesh_mpi on 8 ranks (MPS) at -s 64 and 128
#           for the old build and each LULESH_FUSE mode of the new one, LLNL's CUDA LULESH against
#           lulesh_mpi (gpu-compare, 200 cycles), examples/lulesh/ab (ODF 8 / MPI at 128³ and
#           256³, old and new alternating; AB_OLD, AB_FUSE, AB_REPS, AB_SPLIT), ncu kernel times
#           at 256³ (MPI, and Tessera ODF 8 with the first AB_FUSE mode; with AB_SPLIT also both
#           with LULESH_EOS_SPLIT=on); about 6 minutes (8 with AB_SPLIT="off auto")
#   issue16  the gpu and examples lists on CUDA (MPS), finegrain sender-ordered (raw CUDA in the
#           same runs), Jacobi2D at ODF 16 (4096² to 16384², 1 x 1 and 1 x 4) against the fair
#           MPI program, then fg-ab (FG_LIBS, 2 rounds); about 4 minutes on the H200
#   fg-ab   bench_finegrain with this build's libtessera and older ones (FG_LIBS="NAME=DIR ...",
#           each DIR holding a libtessera.so.0; default old=FG_OLD_LIB or build-cuda/old-lib),
#           alternating, FG_AB_REPS rounds (default 5) of M = 4, 6, 26 sender-ordered at 1 x 1
#           and M = 4 at 1 x 4; medians of the host us per message beyond the launch, and new's
#           ratio to each (the same binary: only the runtime differs). FG_BIND=core binds each
#           run to as many cores as it has PEs (default: unbound)
#   jacobi-ab  Jacobi2D ODF 16 (JAB_ODF) on one process against the fair MPI program on one
#           rank, alternating, JAB_REPS rounds (default 5) of JAB_GRIDS (default "4096 8192") at
#           JAB_PPNS PEs (default "1 4"), each binding of JAB_BINDS ("none core": unbound, or the
#           process bound to as many cores as it has PEs) and of JAB_ENVS (default "-": the
#           environment as it is; e.g. "- CUDA_DEVICE_MAX_CONNECTIONS=32 A=1,B=2": a variant per
#           word, its variables set for both programs; a word that starts with - gives
#           jacobi2d_tess options instead, ':' for spaces: "-halos:copy"); each Tessera run's
#           ratio to the MPI run of its round, binding and variant, and the medians (one run
#           cannot decide a 1% goal)
#   jacobi-diag  where Jacobi2D ODF 16's time goes (DIAG_GRID, default 4096; 1 x 1 and 1 x 4 PEs
#           and the MPI program): the CUDA runtime calls' counts and host time
#           (build-cuda/libcudacalls.so, tools/cuda-calls.c), and, where the machine has Nsight
#           Systems, tools/gpu-busy on a profile of each (GPU busy share, idle gaps, calls per
#           thread)
#   msg     host messages between two processes (issue 18): the mpi message tests, bench/msg/run,
#           bench/msg/size-sweep.sh (16 KiB to 4 MiB: the node arena, eager, UCX's protocol,
#           raw UCX in the same runs), and MSG_OLD_LIB's runtime (default build-cuda/old-lib) at
#           256 KiB and 1 MiB against this one, alternating; about 6 minutes
#   extras  LULESH load balancing on the host backend (the machine's idle cores; 100 cycles
#           balancing every 10, and 300 balancing every 20), bench/finegrain/run.sh
#
# Everything lands in OUTDIR/STAGE.tar.gz (logs, CSVs) and OUTDIR/STAGE-summary.txt; the last
# lines printed are the summary. Budgets keep each stage inside one 10-minute call.
set -uo pipefail
stage=${1:?usage: device-run.sh suite|comm OUTDIR}
out=${2:?usage: device-run.sh suite|comm OUTDIR}
top=$(pwd)
b=$top/build-cuda
work=$(mktemp -d)
mkdir -p "$out"
export LD_LIBRARY_PATH="$b/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A build configured against the carried UCX (TESS_UCX=build tools/gpu-build.sh) runs with it,
# not the machine's UCX 1.16 (one libucp per process: Open MPI's UCX components get it too).
if [ -s "$b/.ucx-choice" ] && [ -d "$b/ucx/lib" ]; then
    export LD_LIBRARY_PATH="$b/ucx/lib:$LD_LIBRARY_PATH"
fi
export TESS_SRCDIR=$top TESS_BUILDDIR=$b
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# DEVICE_RUN_GPU=host and DEVICE_RUN_FILTER=RE try the script on a CPU machine.
gpu=${DEVICE_RUN_GPU:-cuda}
filter=(${DEVICE_RUN_FILTER:+--filter "$DEVICE_RUN_FILTER"})
summary="$out/$stage-summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
    git -C "$top" log -1 --format='commit %h %s' 2>/dev/null || true
} >"$work/env.txt" 2>&1
note "$(head -2 "$work/env.txt" | tail -1)"

mps_on() { nvidia-cuda-mps-control -d 2>/dev/null && sleep 1; }
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
# bind_opts BIND PES: mpirun's binding options, unbound (none) or the process bound to PES
# cores (core).
bind_opts() {
    if [ "$1" = core ]; then
        echo "--map-by slot:PE=$2 --bind-to core"
    else
        echo "--bind-to none"
    fi
}

# cuda_lists SECONDS LIST...: the test lists on the GPU under MPS (the multi-process entries share
# it): a summary line, the failures, and the logs into the stage's archive.
cuda_lists() {
    local limit=$1 t0=$SECONDS
    shift
    mps_on
    TESS_GPU=$gpu timeout "$limit" "$b/test/runtests" --timeout-scale 2 "${filter[@]}" "$@" \
        >"$work/tests.log" 2>&1
    mps_off
    note "$* tests on CUDA ($((SECONDS - t0)) s): $(grep -E '^[0-9]+ passed' "$work/tests.log" | tail -1)"
    grep -E '^FAIL' "$work/tests.log" | head -20 | tee -a "$summary"
    cp -r "$b/test/logs" "$work/testlogs" 2>/dev/null
}

case "$stage" in
suite)
    cuda_lists 330 gpu examples
    grep -hE '^(devmsg|migrate|lb \(|ring)' "$b"/test/logs/gpu_test_devmsg_np=2_TEST* 2>/dev/null | head -3 >>"$summary"
    TESS_GPU=$gpu GPU_BENCH_BUDGET=230 timeout 260 bench/gpu-bench.sh "$work/gpubench" \
        >"$work/gpubench.log" 2>&1
    note "gpu-bench exit $?"
    sed -n '/[Ss]ummary/,$p' "$work/gpubench.log" | tail -40 >>"$summary"
    ;;
comm)
    t0=$SECONDS
    if [ -x bench/devcomm/run.sh ]; then
        DCB_TIMEOUT=55 TESS_GPU=$gpu timeout 235 bench/devcomm/run.sh "$work/devcomm" \
            >"$work/devcomm.log" 2>&1
        note "devcomm bench exit $? ($((SECONDS - t0)) s)"
        tail -30 "$work/devcomm.log" >>"$summary"
    fi
    t0=$SECONDS
    SWEEP_BUDGET=170 timeout 220 examples/jacobi2d/sweep.sh "$work/sweep" "$b" >"$work/sweep.log" 2>&1
    note "sweep exit $? ($((SECONDS - t0)) s)"
    tail -12 "$work/sweep.log" >>"$summary"
    t0=$SECONDS
    mps_on
    # Two processes share the one GPU: balance across processes.
    TESS_LB_TARGET=process NP=2 REPS=2 LB_X=8192 LB_Y=8192 LB_ITERS=200 timeout 80 \
        bench/lb/run.sh "$work/lb" "$b" >"$work/lb.log" 2>&1
    mps_off
    note "lb demo exit $? ($((SECONDS - t0)) s)"
    tail -8 "$work/lb.log" >>"$summary"
    ;;
final)
    cuda_lists 200 gpu examples
    t0=$SECONDS
    SWEEP_P1_ONLY=1 SWEEP_BUDGET=120 timeout 150 examples/jacobi2d/sweep.sh "$work/sweep" "$b" \
        >"$work/sweep.log" 2>&1
    note "sweep exit $? ($((SECONDS - t0)) s)"
    cat "$work/sweep.log" >>"$summary"
    ;;
jacobi)
    t0=$SECONDS
    TESS_GPU=$gpu timeout 120 "$b/test/runtests" "${filter[@]}" examples >"$work/tests.log" 2>&1
    note "Jacobi2D checks on CUDA ($((SECONDS - t0)) s): $(grep -E '^[0-9]+ passed' "$work/tests.log" | tail -1)"
    grep -E '^FAIL' "$work/tests.log" | head -10 | tee -a "$summary"
    t0=$SECONDS
    SWEEP_BUDGET=${SWEEP_BUDGET:-250} timeout 320 examples/jacobi2d/sweep.sh "$work/sweep" "$b" >"$work/sweep.log" 2>&1
    note "sweep exit $? ($((SECONDS - t0)) s)"
    cat "$work/sweep.log" >>"$summary"
    t0=$SECONDS
    mps_on
    TESS_LB_TARGET=process NP=2 REPS=2 LB_X=8192 LB_Y=8192 LB_ITERS=200 timeout 80 \
        bench/lb/run.sh "$work/lb" "$b" >"$work/lb.log" 2>&1
    mps_off
    note "lb demo exit $? ($((SECONDS - t0)) s)"
    tail -8 "$work/lb.log" >>"$summary"
    ;;
apps)
    if [ "${APPS_QUICK_ONLY:-0}" != 1 ]; then
        cuda_lists 360 minimd lulesh
    fi
    # LLNL's CUDA LULESH writes xyz.asc where it runs: a scratch folder.
    peer=$b/peer/lulesh-cuda
    if [ -x "$peer" ]; then
        (cd "$(mktemp -d)" && timeout 60 "$peer" -s 30) >"$work/peer-s30.log" 2>&1
        note "LLNL CUDA LULESH -s 30: $(grep -iE 'iteration count|origin energy' "$work/peer-s30.log" | tr -s ' ' | tr '\n' ' ')"
    fi
    run1() { # label cmd...
        local o
        o=$(timeout 120 mpirun --allow-run-as-root --bind-to none -np 1 "$@" 2>&1)
        echo "$o" >>"$work/quick.log"
        note "$1: $(echo "$o" | grep -E '^RESULT|FOM' | tail -2 | tr '\n' ' ')"
    }
    run1 "$b/examples/minimd/minimd_mpi" -s 64 -n 200
    run1 "$b/examples/minimd/minimd_tess" -s 64 -n 200 -odf 8
    run1 "$b/examples/lulesh/lulesh_mpi" -s 128 -i 100
    run1 "$b/examples/lulesh/lulesh_tess" -g 128 -odf 8 -i 100
    [ -x "$peer" ] && { (cd "$(mktemp -d)" && timeout 120 "$peer" -s 128 -i 100) >"$work/peer-128.log" 2>&1
        note "LLNL CUDA LULESH -s 128 -i 100: $(grep -E 'FOM|Elapsed' "$work/peer-128.log" | tr -s ' ' | tr '\n' ' ')"; }
    ;;
minimd|lulesh)
    # The app's own sweep; MINIMD_BUDGET or LULESH_BUDGET seconds (default 500).
    budget_var=${stage^^}_BUDGET
    budget=${!budget_var:-500}
    t0=$SECONDS
    SWEEP_BUDGET=$budget timeout $((budget + 60)) examples/$stage/sweep.sh "$work/$stage" "$b" \
        >"$work/$stage.log" 2>&1
    note "$stage sweep exit $? ($((SECONDS - t0)) s)"
    tail -40 "$work/$stage.log" >>"$summary"
    ;;
finegrain)
    t0=$SECONDS
    timeout 150 bench/finegrain/run.sh "$work/fg" >"$work/fg.log" 2>&1
    note "finegrain exit $? ($((SECONDS - t0)) s), batch stream auto"; cat "$work/fg.log" >>"$summary"
    t0=$SECONDS
    TESS_BATCH_STREAM=off FG_MS="4 26" timeout 100 bench/finegrain/run.sh "$work/fg-off" \
        >"$work/fg-off.log" 2>&1
    note "finegrain exit $? ($((SECONDS - t0)) s), batch stream off"; cat "$work/fg-off.log" >>"$summary"
    t0=$SECONDS
    FG_ARGS=--sender-ordered FG_MS="4 6 26" timeout 90 bench/finegrain/run.sh "$work/fg-so" \
        >"$work/fg-so.log" 2>&1
    note "finegrain exit $? ($((SECONDS - t0)) s), sender-ordered"; cat "$work/fg-so.log" >>"$summary"
    "$b/bench/finegrain/bench_finegrain" -m 4 -s 200 -r 1 --no-raw --calls 2>&1 |
        tail -8 >>"$summary"
    t0=$SECONDS
    SWEEP_BUDGET=${JACOBI_BUDGET:-100} SWEEP_GRIDS="4096 8192 16384" SWEEP_ODFS="16" \
        SWEEP_PMAT_GRIDS="4096" SWEEP_PMAT_ODFS="16" timeout 160 examples/jacobi2d/sweep.sh \
        "$work/jacobi" "$b" >"$work/jacobi.log" 2>&1
    note "jacobi sweep exit $? ($((SECONDS - t0)) s)"; grep -E '²' "$work/jacobi.log" >>"$summary"
    ;;
issue16)
    # One call for the runtime's GPU checks and issue 16's figures: the gpu and examples lists
    # on CUDA (MPS), bench/finegrain sender-ordered with raw CUDA in the same runs, fg-ab
    # against the older runtimes FG_LIBS names (2 rounds unless FG_AB_REPS), and Jacobi2D at
    # ODF 16 (4096² to 16384², 1 x 1 and 1 x 4 PEs) against the fair MPI program.
    cuda_lists 260 gpu examples
    t0=$SECONDS
    FG_ARGS=--sender-ordered FG_MS="4 6 26" timeout 90 bench/finegrain/run.sh "$work/fg-so" \
        >"$work/fg-so.log" 2>&1
    note "finegrain exit $? ($((SECONDS - t0)) s), sender-ordered"
    grep -A12 '^where' "$work/fg-so.log" | head -12 >>"$summary"
    t0=$SECONDS
    SWEEP_BUDGET=60 SWEEP_GRIDS="4096 8192 16384" SWEEP_ODFS="16" SWEEP_PMAT_GRIDS="4096" \
        SWEEP_PMAT_ODFS="16" timeout 90 examples/jacobi2d/sweep.sh "$work/jacobi" "$b" \
        >"$work/jacobi.log" 2>&1
    note "jacobi sweep exit $? ($((SECONDS - t0)) s)"; grep -E '²' "$work/jacobi.log" >>"$summary"
    FG_AB_REPS=${FG_AB_REPS:-2} timeout 150 "$0" fg-ab "$out/fg-ab" >/dev/null 2>&1
    note "fg-ab exit $?"; tail -6 "$out/fg-ab/fg-ab-summary.txt" >>"$summary"
    ;;
fg-ab)
    # FG_LIBS: "NAME=DIR ..." older runtimes (each DIR holds a libtessera.so.0), default
    # "old=${FG_OLD_LIB:-build-cuda/old-lib}"; each round runs them all and this build's (new).
    libs=${FG_LIBS:-old=${FG_OLD_LIB:-$b/old-lib}}
    names=""
    for l in $libs; do
        [ -e "${l#*=}/libtessera.so.0" ] || { note "fg-ab: no ${l#*=}/libtessera.so.0"; exit 1; }
        names="$names ${l%%=*}"
    done
    fg=$b/bench/finegrain/bench_finegrain
    csv=$work/fg-ab.csv
    echo "round,lib,ppn,m,tess_us_per_step,us_per_msg_beyond_launch" >"$csv"
    t0=$SECONDS
    for r in $(seq "${FG_AB_REPS:-5}"); do
        for l in $libs new=; do
            lib=${l%%=*}
            [ "$lib" = new ] && lp=$LD_LIBRARY_PATH || lp=${l#*=}:$LD_LIBRARY_PATH
            for cfg in "1 4" "1 6" "1 26" "4 4"; do
                set -- $cfg
                # FG_BIND=core: the process bound to as many cores as it has PEs.
                o=$(LD_LIBRARY_PATH=$lp timeout 60 mpirun $(bind_opts "${FG_BIND:-none}" "$1") \
                    -np 1 "$fg" -m "$2" \
                    +ppn "$1" -s 1000 -r 3 --no-raw --sender-ordered 2>&1)
                echo "$o" >>"$work/fg-ab.log"
                step=$(echo "$o" | sed -n 's/.*tess_us=\([0-9.]*\).*/\1/p' | tail -1)
                xl=$(echo "$o" | sed -n 's/^ *tessera: .*per message, *\([0-9.]*\) beyond.*/\1/p' | tail -1)
                echo "$r,$lib,$1,$2,$step,$xl" >>"$csv"
            done
        done
    done
    note "fg-ab: $(($(wc -l <"$csv") - 1)) runs ($((SECONDS - t0)) s)"
    cp "$csv" "$work/fg-ab.log" "$out/" 2>/dev/null
    python3 - "$csv" $names <<'PY' | tee -a "$summary"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
libs = sys.argv[2:] + ["new"]
print("host us per message beyond the launch (medians; sender-ordered); new / each older one")
print("ppn   M " + "".join(f"{l:>10}" for l in libs) + "".join(f"  new/{l:<6}" for l in libs[:-1]))
for ppn, m in (("1", "4"), ("1", "6"), ("1", "26"), ("4", "4")):
    med = {}
    for lib in libs:
        v = [float(r["us_per_msg_beyond_launch"]) for r in rows
             if r["lib"] == lib and r["ppn"] == ppn and r["m"] == m and r["us_per_msg_beyond_launch"]]
        med[lib] = statistics.median(v) if v else float("nan")
    print(f"{ppn:>3} {m:>3} " + "".join(f"{med[l]:10.3f}" for l in libs) +
          "".join(f"  {med['new'] / med[l]:10.3f}" for l in libs[:-1]))
PY
    ;;
jacobi-diag)
    jd=$b/examples/jacobi2d g=${DIAG_GRID:-4096}
    nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys \
        /usr/local/cuda/nsight-systems-*/bin/nsys 2>/dev/null | head -1)
    note "nsys: ${nsys:-none}"
    for run in mpi tess:1 tess:4; do
        prog=jacobi2d_${run%%:*} args=(-x "$g" -y "$g" -i 1000 -w 10)
        [ "$prog" = jacobi2d_tess ] && args+=(+ppn "${run#*:}" -odf 16)
        note "== $run $g²: CUDA runtime calls (LD_PRELOAD libcudacalls.so)"
        LD_PRELOAD=$b/libcudacalls.so timeout 60 mpirun --bind-to none -np 1 -x LD_PRELOAD \
            "$jd/$prog" "${args[@]}" 2>&1 | grep -v ' warn ' | tee -a "$summary" >/dev/null
        [ -n "$nsys" ] || continue
        rep=$work/nsys-${run/:/-}
        timeout 120 mpirun --bind-to none -np 1 "$nsys" profile -t cuda -s none --cpuctxsw=none \
            --export=sqlite -f true -o "$rep" "$jd/$prog" "${args[@]}" >"$rep.log" 2>&1
        note "== $run $g²: nsys (exit $?)"
        "$top/tools/gpu-busy" "$rep.sqlite" update 2>&1 | tee -a "$summary" >/dev/null
        rm -f "$rep.sqlite" "$rep.nsys-rep"
    done
    ;;
jacobi-ab)
    jd=$b/examples/jacobi2d
    csv=$work/jacobi-ab.csv
    echo "round,bind,env,grid,ppn,mpi_ms,tess_ms,ratio" >"$csv"
    ms_of() { echo "$1" | grep '^RESULT' | tr ' ' '\n' | sed -n 's/^ms_per_iter=//p'; }
    t0=$SECONDS
    for r in $(seq "${JAB_REPS:-5}"); do
        for bind in ${JAB_BINDS:-none core}; do for e in ${JAB_ENVS:--}; do
            vars=() targs=()
            case $e in -) ;; -*) read -ra targs <<<"${e//:/ }" ;; *) IFS=, read -ra vars <<<"$e" ;; esac
            for g in ${JAB_GRIDS:-4096 8192}; do
                it=1000; [ "$g" -gt 4096 ] && it=500; [ "$g" -gt 8192 ] && it=200
                o=$(env "${vars[@]}" timeout 60 mpirun $(bind_opts "$bind" 1) -np 1 \
                    "$jd/jacobi2d_mpi" -x "$g" -y "$g" -i "$it" -w 10 2>&1)
                echo "$o" >>"$work/jacobi-ab.log"
                m=$(ms_of "$o")
                for t in ${JAB_PPNS:-1 4}; do
                    o=$(env "${vars[@]}" timeout 60 mpirun $(bind_opts "$bind" "$t") -np 1 \
                        "$jd/jacobi2d_tess" +ppn "$t" -x "$g" -y "$g" -i "$it" -w 10 \
                        -odf "${JAB_ODF:-16}" "${targs[@]}" 2>&1)
                    echo "$o" >>"$work/jacobi-ab.log"
                    tm=$(ms_of "$o")
                    ra=$(awk -v a="$tm" -v c="$m" 'BEGIN { if (a > 0 && c > 0) printf "%.4f", a / c }')
                    echo "$r,$bind,${e//,/;},$g,$t,$m,$tm,$ra" >>"$csv"
                done
            done
        done; done
    done
    note "jacobi-ab: $(($(wc -l <"$csv") - 1)) Tessera runs ($((SECONDS - t0)) s)"
    cp "$csv" "$work/jacobi-ab.log" "$out/" 2>/dev/null
    # The figure where matplotlib is (else: tools/jacobi-ab-plot CSV OUT.png here).
    python3 -c 'import matplotlib' 2>/dev/null &&
        "$top/tools/jacobi-ab-plot" "$csv" "$out/jacobi-ab.png" >/dev/null 2>&1
    python3 - "$csv" <<'PY' | tee -a "$summary"
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["ratio"]]
print("Jacobi2D ODF 16 / MPI on one process (medians over rounds; each ratio to its round's MPI run)")
print("bind  variant                         grid  PEs  rounds  MPI ms  Tessera ms  ratio (min-max)")
def key_of(r): return (r["bind"], r["env"], int(r["grid"]), int(r["ppn"]))
for key in sorted({key_of(r) for r in rows}):
    v = [r for r in rows if key_of(r) == key]
    q = [float(r["ratio"]) for r in v]
    print(f"{key[0]:<5} {key[1]:<30} {key[2]:>5} {key[3]:>4} {len(v):>7} {statistics.median(float(r['mpi_ms']) for r in v):7.4f}"
          f" {statistics.median(float(r['tess_ms']) for r in v):11.4f}  {statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f})")
PY
    ;;
sweeps)
    cuda_lists 250 minimd lulesh
    t0=$SECONDS
    SWEEP_BUDGET=60 SWEEP_GRIDS="4096 8192" SWEEP_ODFS="8 16" SWEEP_PMAT_GRIDS="4096" \
        SWEEP_PMAT_ODFS="16" timeout 120 examples/jacobi2d/sweep.sh "$work/jacobi" "$b" \
        >"$work/jacobi.log" 2>&1
    note "jacobi sweep exit $? ($((SECONDS - t0)) s)"; grep -E '²' "$work/jacobi.log" >>"$summary"
    t0=$SECONDS
    SIZES="128 256" ITERS=200 ODF=8 LULESH_PROGS="lulesh_mpi lulesh_tess" timeout 120 \
        examples/lulesh/gpu-compare "$b" "$b/peer/lulesh-cuda" >"$work/gpu-compare.log" 2>&1
    note "lulesh gpu-compare exit $? ($((SECONDS - t0)) s)"; cat "$work/gpu-compare.log" >>"$summary"
    t0=$SECONDS
    SWEEP_BUDGET=${LULESH_BUDGET:-120} SWEEP_SIZES="128 256" SWEEP_ODFS="1 8 27 64" \
        SWEEP_PMAT_SIZES="128" SWEEP_PMAT_ODFS="8" timeout 200 examples/lulesh/sweep.sh \
        "$work/lulesh" "$b" >"$work/lulesh.log" 2>&1
    note "lulesh sweep exit $? ($((SECONDS - t0)) s)"; tail -25 "$work/lulesh.log" >>"$summary"
    t0=$SECONDS
    SWEEP_BUDGET=${MINIMD_BUDGET:-120} SWEEP_SIZES="8M s32" SWEEP_ODFS="1 4 8 16" \
        SWEEP_PMAT_SIZES="8M" SWEEP_PMAT_ODFS="8" timeout 200 examples/minimd/sweep.sh \
        "$work/minimd" "$b" >"$work/minimd.log" 2>&1
    note "minimd sweep exit $? ($((SECONDS - t0)) s)"; tail -25 "$work/minimd.log" >>"$summary"

    ;;
modes)
    # TESS_BATCH_STREAM auto (adapt) against on and off, Jacobi2D ODF 16 beside the fair MPI;
    # the adapt runs print each process's counts (TESS_VERBOSE: batch-stream launches, changes).
    for m in on off; do
        t0=$SECONDS
        TESS_BATCH_STREAM=$m SWEEP_BUDGET=60 SWEEP_GRIDS="4096 8192" SWEEP_ODFS="16" \
            SWEEP_PMAT_GRIDS="4096" SWEEP_PMAT_ODFS="16" timeout 100 examples/jacobi2d/sweep.sh \
            "$work/jacobi-$m" "$b" >"$work/jacobi-$m.log" 2>&1
        note "jacobi sweep TESS_BATCH_STREAM=$m exit $? ($((SECONDS - t0)) s)"
        grep -E '²' "$work/jacobi-$m.log" >>"$summary"
    done
    jt=$b/examples/jacobi2d/jacobi2d_tess jm=$b/examples/jacobi2d/jacobi2d_mpi
    for g in 4096 8192; do for ppn in 1 4; do
        TESS_VERBOSE=1 timeout 60 mpirun --allow-run-as-root --bind-to none -np 1 "$jt" \
            +ppn $ppn -x $g -y $g -i 300 -w 10 -odf 16 2>&1 |
            grep -E 'ms_per_iter|device messages' | sed "s/^/$g² 1x$ppn adapt: /" >>"$summary"
    done; done
    t0=$SECONDS
    FG_MS="4 26" timeout 100 bench/finegrain/run.sh "$work/fg" >"$work/fg.log" 2>&1
    note "finegrain (adapt) exit $? ($((SECONDS - t0)) s)"; cat "$work/fg.log" >>"$summary"
    # Traces for the Jacobi2D README's picture: 4096² ODF 16 at 1 x 1 and the MPI program.
    TESS_TRACE=$work/tess-4096.json timeout 60 mpirun --allow-run-as-root --bind-to none -np 1 \
        "$jt" +ppn 1 -x 4096 -y 4096 -i 60 -w 5 -odf 16 2>&1 | grep RESULT >>"$summary"
    TESS_TRACE=$work/mpi-4096.json timeout 60 mpirun --allow-run-as-root --bind-to none -np 1 \
        "$jm" -x 4096 -y 4096 -i 60 -w 5 2>&1 | grep RESULT >>"$summary"
    /usr/bin/python3 tools/tess-trace check "$work/tess-4096.json" 2>&1 | tail -2 >>"$summary"
    ls -la "$work"/*.json >>"$summary" 2>&1
    ;;
rdma)
    bash tools/rdma-run.sh "$work" "$b" "$summary"
    ;;
lulesh-ab)
    L=$b/examples/lulesh
    old=${AB_OLD:-$L/old}
    fuse=${AB_FUSE:-nodes force none}
    export OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl=^uct OMPI_MCA_btl_vader_single_copy_mechanism=none
    mps_on
    t0=$SECONDS
    TESS_GPU=$gpu timeout 200 "$b/test/runtests" --timeout-scale 2 "${filter[@]}" lulesh \
        >"$work/tests.log" 2>&1
    note "lulesh tests on CUDA ($((SECONDS - t0)) s): $(grep -E '^[0-9]+ passed' "$work/tests.log" | tail -1)"
    grep -E '^FAIL' "$work/tests.log" | head -20 | tee -a "$summary"
    for s in 64 128; do
        line="lulesh_mpi, 8 ranks (MPS), -s $s, ms per cycle:"
        for v in old $fuse; do
            d=$L f=$v
            [ "$v" = old ] && d=$old f=nodes
            [ -x "$d/lulesh_mpi" ] || continue
            o=$(LULESH_FUSE=$f timeout 90 mpirun --oversubscribe --bind-to none -n 8 -x LULESH_FUSE \
                "$d/lulesh_mpi" -q -s $s -i 100 2>&1)
            echo "$o" >"$work/mpi8-$v-$s.txt"
            line="$line $v $(echo "$o" | grep '^RESULT' | tr ' ' '\n' |
                awk -F= '$1 == "elapsed" { e = $2 } $1 == "iterations" { i = $2 } END { if (i) printf "%.3f", e * 1e3 / i }')"
        done
        note "$line"
    done
    mps_off
    t0=$SECONDS
    ITERS=200 timeout 120 examples/lulesh/gpu-compare "$b" "$b/peer/lulesh-cuda" >"$work/compare.txt" 2>&1
    note "gpu-compare exit $? ($((SECONDS - t0)) s)"
    cat "$work/compare.txt" >>"$summary"
    t0=$SECONDS
    AB_OLD=$old AB_FUSE=$fuse timeout 300 examples/lulesh/ab "$work/ab" "$b" >"$work/ab.log" 2>&1
    note "ab exit $? ($((SECONDS - t0)) s)"
    cat "$work/ab.log" >>"$summary"
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    t0=$SECONDS
    timeout 60 "$NCU" --metrics gpu__time_duration.sum --csv "$L/lulesh_mpi" -q -s 256 -i 3 \
        >"$work/ncu-mpi-256.csv" 2>"$work/ncu.err"
    LULESH_FUSE=${fuse%% *} timeout 100 "$NCU" --metrics gpu__time_duration.sum --csv "$L/lulesh_tess" \
        +ppn 1 -q -g 256 -odf 8 -i 3 >"$work/ncu-tess-256.csv" 2>>"$work/ncu.err"
    if [ -n "${AB_SPLIT:-}" ]; then
        LULESH_EOS_SPLIT=on timeout 60 "$NCU" --metrics gpu__time_duration.sum --csv \
            "$L/lulesh_mpi" -q -s 256 -i 3 >"$work/ncu-mpi-256-split.csv" 2>>"$work/ncu.err"
        LULESH_EOS_SPLIT=on LULESH_FUSE=${fuse%% *} timeout 100 "$NCU" --metrics \
            gpu__time_duration.sum --csv "$L/lulesh_tess" +ppn 1 -q -g 256 -odf 8 -i 3 \
            >"$work/ncu-tess-256-split.csv" 2>>"$work/ncu.err"
    fi
    note "ncu exit $? ($((SECONDS - t0)) s)"
    ;;
msg)
    # Host messages between processes (issue 18): the mpi message tests on this machine's UCX,
    # bench/msg/run (latency and rate goals), the size sweep (node eager limit against UCX's
    # protocol, raw UCX in the same runs), and the runtime of MSG_OLD_LIB (default
    # build-cuda/old-lib: no pools past 64 KiB, UCX's protocol) at 256 KiB and 1 MiB with the
    # same binary, alternating with this build.
    export TESS_GPU=host OMPI_MCA_btl_vader_single_copy_mechanism=none
    t0=$SECONDS
    timeout 150 "$b/test/runtests" "${filter[@]}" --filter 'bigmsg|random|burst|fifo' mpi \
        >"$work/tests.log" 2>&1
    note "mpi message tests, host backend ($((SECONDS - t0)) s): $(grep -E '^[0-9]+ passed' "$work/tests.log" | tail -1)"
    grep -E '^FAIL' "$work/tests.log" | head -10 | tee -a "$summary"
    t0=$SECONDS
    REPS=${MSG_REPS:-7} timeout 200 bench/msg/run "$work/run" "$b" >"$work/run.log" 2>&1
    note "bench/msg/run exit $? ($((SECONDS - t0)) s)"
    grep -A20 '^Goals' "$work/run.log" >>"$summary"
    t0=$SECONDS
    ALTS=${MSG_ALTS:-2} REPS=5 timeout 240 bench/msg/size-sweep.sh "$work/size" "$b" \
        >"$work/size.log" 2>&1
    note "size-sweep exit $? ($((SECONDS - t0)) s)"
    sed -n '/^one-way/,$p' "$work/size.log" >>"$summary"
    old=${MSG_OLD_LIB:-$b/old-lib}
    for a in 1 2; do
        for sz in 262144 1048576; do
            for v in old new; do
                lp=$LD_LIBRARY_PATH
                [ "$v" = old ] && lp=$old:$LD_LIBRARY_PATH
                r=$(LD_LIBRARY_PATH=$lp timeout 120 mpirun --allow-run-as-root --oversubscribe \
                    --bind-to none -np 2 -x LD_LIBRARY_PATH "$b/bench/msg/bench_msg" +ppn 1 \
                    --size $sz --reps 3 2>&1 | grep -E 'latency +[0-9]+ +raw-ucp-am ')
                note "round $a $v: $r"
            done
        done
    done
    ;;
extras)
    t0=$SECONDS
    TESS_GPU=host REPS=2 LB_N=32 timeout 70 examples/lulesh/bench-lb "$work/lb" "$b" >"$work/lb.log" 2>&1
    note "lulesh bench-lb (host backend) exit $? ($((SECONDS - t0)) s)"; tail -8 "$work/lb.log" >>"$summary"
    # A longer run, balancing every 20 cycles: the first imbalanced cycles and the steps weigh less.
    t0=$SECONDS
    TESS_GPU=host REPS=2 LB_N=32 LB_ITERS=300 LB_PERIOD=20 timeout 120 examples/lulesh/bench-lb \
        "$work/lb300" "$b" >"$work/lb300.log" 2>&1
    note "lulesh bench-lb 300 cycles, period 20 (host backend) exit $? ($((SECONDS - t0)) s)"
    tail -8 "$work/lb300.log" >>"$summary"
    t0=$SECONDS
    timeout 150 bench/finegrain/run.sh "$work/fg" >"$work/fg.log" 2>&1
    note "finegrain exit $? ($((SECONDS - t0)) s)"; cat "$work/fg.log" >>"$summary"
    ;;
*)
    echo "device-run.sh: unknown stage $stage" >&2
    exit 2
    ;;
esac
cp "$summary" "$work/"
tar -C "$work" -czf "$out/$stage.tar.gz" . 2>/dev/null
rm -rf "$work"
echo "==== $stage summary ===="
cat "$summary"
