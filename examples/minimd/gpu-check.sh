#!/usr/bin/env bash
# gpu-check.sh BUILDDIR OUTDIR [tests|ref|demo|sweep|all] — MiniMD on a GPU machine, in one go:
#   tests  the test list (test/minimd/testlist) with the CUDA build: both programs on the GPU
#          against the miniMD reference data and each other;
#   ref    both programs at -s 20 on 1 and 2 ranks against the reference, the figures kept;
#   demo   the demo (8 M atoms, ODF 8);
#   sweep  sweep.sh (SWEEP_BUDGET seconds, default 360).
# Everything it prints is also kept in OUTDIR (tests.txt, ref.txt, demo.txt, sweep.txt and the
# sweep's CSV and PNGs). BUILDDIR is a CUDA build (build-cuda) with examples/minimd built.
set -uo pipefail
build=$(cd "${1:?usage: gpu-check.sh BUILDDIR OUTDIR [what]}" && pwd)
out=${2:?usage: gpu-check.sh BUILDDIR OUTDIR [what]}
what=${3:-all}
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L 2>/dev/null | tee "$out/gpu.txt"
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
    TESS_SRCDIR="$src/../.." TESS_BUILDDIR="$build" "$build/test/runtests" minimd 2>&1 | tee "$out/tests.txt"
    grep -q ' 0 failed' "$out/tests.txt" || rc=1
fi
if [ "$what" = ref ] || [ "$what" = all ]; then
    for np in 1 2; do
        for prog in "minimd_mpi" "minimd_tess -odf 8"; do
            echo "== $np rank(s): $prog -s 20 -ref reference/lj-s20-np$np.txt"
            # shellcheck disable=SC2086
            mpirun --bind-to none -n "$np" "$build/examples/minimd/"$prog -s 20 -ref "$src/reference/lj-s20-np$np.txt" </dev/null 2>&1 |
                grep -E '^(mpi|tess):|^time per step|^neighbors|^reference|^RESULT' || rc=1
        done
    done 2>&1 | tee "$out/ref.txt"
    grep -q WRONG "$out/ref.txt" && rc=1
fi
if [ "$what" = demo ] || [ "$what" = all ]; then
    "$src/demo" "$build" 2>&1 | tee "$out/demo.txt" || rc=1
fi
if [ "$what" = sweep ] || [ "$what" = all ]; then
    SWEEP_BUDGET=${SWEEP_BUDGET:-360} "$src/sweep.sh" "$out" "$build" 2>&1 | tee "$out/sweep.txt" || rc=1
fi
exit $rc
