#!/usr/bin/env bash
# bench/devcomm/rdma-run.sh OUTDIR BUILDDIR — the RDMA path between processes on one GPU, every
# process its own virtual node (TESS_VNODE_SIZE=1), for TESS_RDMA=direct (the receiver's ucp_get
# into device memory) and staged (pinned bounce buffers): the device-message, migration and
# registration tests with 2 and 4 processes under MPS, the quiet-stream and ready-stream cases,
# the whole gpu list on each mode (RDMA_LISTS=0: not the list), the misuse checks (a UCX that
# cannot reach device memory: direct must refuse at start, auto must stage), Jacobi2D's checksum
# against the MPI program, bench_devcomm latbw (Tessera direct and staged against the raw
# ucp_get of device memory in the same binary), and ucx_perftest -m cuda (ucp_get).
#
# The direct path needs a UCX with CUDA transports: BUILDDIR configured against one
# (TESS_UCX=DIR tools/gpu-build.sh, which keeps it in BUILDDIR/ucx; tools/build-ucx.sh builds
# one); tools/gpu-run puts BUILDDIR/ucx/lib on LD_LIBRARY_PATH. Prints the summary; the logs go
# to OUTDIR. GPU_RUN_GPU=host tries it on a machine without a GPU (RDMA_QUICK=1: small sizes and
# budgets). About 9 minutes on an H100 or H200 (5 with RDMA_LISTS=0).
set -uo pipefail
work=${1:?usage: bench/devcomm/rdma-run.sh OUTDIR BUILDDIR}
b=${2:?usage: bench/devcomm/rdma-run.sh OUTDIR BUILDDIR}
mkdir -p "$work"
gpu=${GPU_RUN_GPU:-cuda}
ucx=$b/ucx
note() { echo "$*"; }
mps_on() { [ "$gpu" = cuda ] && nvidia-cuda-mps-control -d 2>/dev/null && sleep 1; }
mps_off() { [ "$gpu" = cuda ] && { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }; }
run() { timeout -k 5 "$@"; }
quick=${RDMA_QUICK:-0}
grid=2048 budget=80
[ "$quick" = 1 ] && grid=256 budget=5
mpi=(mpirun --oversubscribe --bind-to none)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TESS_GPU=$gpu
# Tessera's own UCX only: Open MPI's transports stay off UCX (ob1 over shared memory/tcp).
export OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl=^uct

[ -d "$ucx/lib" ] || note "no UCX of its own in $ucx: the system UCX is used (it may lack the CUDA transports)"
"$b/src/tessera-info" >"$work/tessera-info.txt" 2>&1
note "$(grep -E '^UCX' "$work/tessera-info.txt")"
[ -x "$ucx/bin/ucx_info" ] && "$ucx/bin/ucx_info" -d >"$work/ucx_info-d.txt" 2>&1

mps_on
for mode in direct staged; do
    for np in 2 4; do
        for t in test_devmsg test_migrate test_rdma_reg; do
            [ $t = test_rdma_reg ] && { [ $np = 2 ] && [ $mode = direct ] || continue; }
            log=$work/$t-np$np-$mode.log
            t0=$SECONDS
            TESS_VNODE_SIZE=1 TESS_RDMA=$mode TEST_EXPECT_PATH=rdma \
                run 90 "${mpi[@]}" -np $np "$b/test/gpu/$t" >"$log" 2>&1
            rc=$?
            note "$(printf '%-14s np=%d TESS_RDMA=%-6s %s (%d s)' $t $np $mode \
                "$([ $rc = 0 ] && echo pass || echo "FAIL rc=$rc")" $((SECONDS - t0)))"
            [ $rc = 0 ] || tail -5 "$log"
            grep -h '^rdma_reg:' "$log"
        done
    done
done
# Direct receives that skip the stream query (one PE per process) must still wait for a busy
# stream, also right after a receive that found it idle (TEST_BURST); sends marked
# TESS_STREAM_READY are announced at once.
for t in "test_rdma_quiet TEST_EXPECT_QUIET=1" "test_rdma_quiet TEST_BURST=1" \
         "test_devmsg TEST_SRC_STREAM=ready"; do
    set -- $t
    log=$work/$1-${2%%=*}.log
    t0=$SECONDS
    TESS_VNODE_SIZE=1 TESS_RDMA=direct TEST_EXPECT_PATH=rdma \
        run 90 env "$2" "${mpi[@]}" -np 2 "$b/test/gpu/$1" >"$log" 2>&1
    rc=$?
    note "$(printf '%-14s np=2 TESS_RDMA=direct %-22s %s (%d s)' "$1" "$2" \
        "$([ $rc = 0 ] && echo pass || echo "FAIL rc=$rc")" $((SECONDS - t0)))"
    [ $rc = 0 ] || tail -5 "$log"
    grep -h '^rdma_quiet:' "$log"
done
# The whole gpu list with every process its own virtual node, on each RDMA mode (entries that
# test another path pin it): RDMA_LISTS=0 skips it (about 2 x 110 s on the H200).
if [ "${RDMA_LISTS:-1}" = 1 ]; then
    for mode in direct staged; do
        t0=$SECONDS
        TESS_VNODE_SIZE=1 TESS_RDMA=$mode run 240 "$b/test/runtests" --quiet --timeout-scale 2 \
            gpu >"$work/gpu-list-$mode.log" 2>&1
        note "gpu list, TESS_VNODE_SIZE=1 TESS_RDMA=$mode: $(grep -E '^[0-9]+ passed' \
            "$work/gpu-list-$mode.log" | tail -1) ($((SECONDS - t0)) s)"
        grep -E '^FAIL' "$work/gpu-list-$mode.log" | head -10
    done
fi
# Misuse: with a UCX that cannot reach device memory, TESS_RDMA=direct must fail at start with a
# clear error, not hang; auto must stage and say so once. Two such UCXs: the build's own with its
# CUDA transports excluded (UCX_TLS), and the machine's (without CUDA transports), which has to be
# put ahead of the binaries' run path (RUNPATH pins the build's UCX) with LD_LIBRARY_PATH.
if [ "$gpu" = cuda ]; then
    sys_ucx=$(ldconfig -p 2>/dev/null | awk '/libucp\.so\.0 .*x86-64/ {print $NF; exit}')
    sys_ld=$(echo "$LD_LIBRARY_PATH" | tr ':' '\n' | grep -vx "$ucx/lib" | paste -sd:)
    for variant in no-cuda-tls system; do
        case $variant in
        no-cuda-tls) envs=(UCX_TLS=^cuda_copy,cuda_ipc,gdr_copy) ;;
        system) [ -n "$sys_ucx" ] || { note "system UCX: none found by ldconfig"; continue; }
                envs=(LD_LIBRARY_PATH="$(dirname "$sys_ucx")${sys_ld:+:$sys_ld}") ;;
        esac
        o=$(run 30 env "${envs[@]}" TESS_VNODE_SIZE=1 TESS_RDMA=direct "${mpi[@]}" -np 2 \
            "$b/test/gpu/test_rdma_reg" 2>&1)
        rc=$?
        echo "$o" >"$work/misuse-direct-$variant.log"
        if [ $rc != 0 ] && [ $rc != 124 ] && echo "$o" | grep -q 'TESS_RDMA=direct, but this UCX'; then
            note "$variant UCX, TESS_RDMA=direct: refused at start (rc $rc): ok"
        else
            note "$variant UCX, TESS_RDMA=direct: rc $rc, expected a clear error:"
            tail -3 "$work/misuse-direct-$variant.log"
        fi
        o=$(run 60 env "${envs[@]}" TESS_VNODE_SIZE=1 TESS_RDMA=auto "${mpi[@]}" -np 2 \
            "$b/test/gpu/test_devmsg" 2>&1)
        rc=$?
        echo "$o" >"$work/auto-$variant.log"
        note "$variant UCX, TESS_RDMA=auto test_devmsg: rc $rc, staging notices: $(echo "$o" | grep -c 'TESS_RDMA=auto')"
    done
fi

# Jacobi2D on the RDMA path: the checksum must equal the MPI version's.
jac=$b/examples/jacobi2d
ref=$(run 60 "${mpi[@]}" -np 2 "$jac/jacobi2d_mpi" -x $grid -y $grid -i 100 -w 5 2>&1 | grep '^RESULT')
refsum=$(echo "$ref" | tr ' ' '\n' | sed -n 's/^checksum=//p')
for mode in direct staged; do
    for np in 2 4; do
        o=$(TESS_VNODE_SIZE=1 TESS_RDMA=$mode run 90 "${mpi[@]}" -np $np "$jac/jacobi2d_tess" \
            +ppn 1 -x $grid -y $grid -i 100 -w 5 -odf 4 2>&1)
        echo "$o" >"$work/jacobi-np$np-$mode.log"
        sum=$(echo "$o" | grep '^RESULT' | tr ' ' '\n' | sed -n 's/^checksum=//p')
        ms=$(echo "$o" | grep '^RESULT' | tr ' ' '\n' | sed -n 's/^ms_per_iter=//p')
        ok=$(awk -v a="${refsum:-nan}" -v b="${sum:-nan}" 'BEGIN { d = a - b; if (d < 0) d = -d;
            m = a < 0 ? -a : a; print (a != "nan" && b != "nan" && (a == b || d <= 1e-10 * m)) ? "same" : "DIFFERENT" }')
        note "jacobi2d $grid² np=$np TESS_RDMA=$mode: checksum $sum (MPI $refsum): $ok, $ms ms/iter"
    done
done

# bench_devcomm: latency and bandwidth, Tessera direct and staged against the raw ucp_get.
for mode in direct staged; do
    mkdir -p "$work/bench-$mode"
    TESS_VNODE_SIZE=1 TESS_RDMA=$mode run 150 "${mpi[@]}" -np 2 "$b/bench/devcomm/bench_devcomm" \
        --what latbw --expect rdma-$mode --reps 3 --target-ms 40 --budget-s $budget \
        --csv-dir "$work/bench-$mode" >"$work/bench-$mode.log" 2>&1
    note "bench_devcomm rdma-$mode exit $?"
    # The rows, the receivers' questions about their streams in the bandwidth stream (the
    # latency points' are in the log), the goals.
    grep -iE 'latency|lat-ready|bandwidth|goal|PASS|MISS' "$work/bench-$mode.log" |
        grep -vE '^# [a-z-]+ +(latency|latency-so|lat-ready) ' | tail -64
done
mps_off

# UCX's own measurement of a get of device memory (two processes, loopback bootstrap).
if [ -x "$ucx/bin/ucx_perftest" ] && [ "$gpu" = cuda ]; then
    for s in 8 16777216; do
        UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y run 40 "$ucx/bin/ucx_perftest" -p 13371 >"$work/perftest-server-$s.log" 2>&1 &
        sleep 2
        UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y run 30 "$ucx/bin/ucx_perftest" 127.0.0.1 -p 13371 \
            -t ucp_get -m cuda -s $s -n $([ $s -gt 65536 ] && echo 200 || echo 2000) -w 20 >"$work/perftest-$s.log" 2>&1
        note "ucx_perftest ucp_get -m cuda -s $s exit $?:"
        grep -E 'Final:|^ +[0-9]' "$work/perftest-$s.log" | tail -2
        wait
    done
fi
