#!/usr/bin/env bash
# hostprof.sh OUTDIR NAME PROGRAM [ARGS...] — where a Tessera program's host time goes, on a
# machine without perf or Nsight: runs PROGRAM on one MPI process under hostprof.so (a sampling
# profiler of every host thread, built here from hostprof.c with ${CC:-cc}), then writes
# OUTDIR/NAME.report.txt with hostprof.py's report of the process and prints its head.
#
#   bench/finegrain/hostprof.sh /tmp/hp lulesh64 build/examples/lulesh/lulesh_tess -g 128 -odf 64 -i 1500 -q
#
# HOSTPROF_US: the sampling period in microseconds (300). HOSTPROF_NP: processes (1; the report
# is of the process with the most samples). HOSTPROF_REPORT: more options for hostprof.py (e.g. "--threads 2 --callers
# dc_rb_flush"). The samples stay in OUTDIR/NAME.<pid>.txt; the report must run on a machine
# where the program's objects lie at the same paths (the GPU machine, or here with the tree).
# Only the program is profiled, not mpirun: the profiler goes to it through mpirun's environment
# options (Open MPI: -x; MPICH, Intel MPI: -genv).
#
# hostprof.sh --self-test: profiles Jacobi2D of TESS_BUILDDIR (the test lists set it) on the host
# backend and fails unless the report finds, by name on the stacks of its threads, the PE's
# scheduler loop and its dispatch, and the host device's stencil kernel (skipped, 77, where the
# test launcher preloads a sanitizer already).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --self-test ]; then
    case "${MPIEXEC_FLAGS:-}" in *LD_PRELOAD*) echo "hostprof.sh: a sanitizer is preloaded: skipped"; exit 77 ;; esac
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    TESS_GPU=host HOSTPROF_US=200 HOSTPROF_REPORT="--top 80 --threads 8" "$0" "$tmp" jac \
        "${TESS_BUILDDIR:?}/examples/jacobi2d/jacobi2d_tess" -x 256 -y 256 -odf 16 -i 300 >/dev/null
    r=$tmp/jac.report.txt
    n=$(sed -n 's/.*threads, \([0-9]*\) samples$/\1/p' "$r")
    ok=1
    [ "${n:-0}" -ge 100 ] || { echo "hostprof.sh: ${n:-no} samples"; ok=0; }
    for f in tess_pe_loop tess_msg_dispatch jac_update_point; do
        grep -q "%  $f\$" "$r" || { echo "hostprof.sh: $f on no thread's stacks"; ok=0; }
    done
    [ $ok = 1 ] || { cat "$r"; exit 1; }
    echo "hostprof.sh: $n samples; the PE's loop and dispatch and the kernel found"
    exit 0
fi
[ $# -ge 3 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
out=$1 name=$2
shift 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
so=$out/hostprof.so
"${CC:-cc}" -std=gnu11 -O2 -g -fPIC -shared -o "$so" "$here/hostprof.c" -ldl -lrt
rm -f "$out/$name".[0-9]*.txt
launch=${MPIEXEC:-mpirun}
if $launch --version 2>&1 | grep -q 'Open MPI\|OpenRTE'; then
    env=(-x "LD_PRELOAD=$so" -x "HOSTPROF_OUT=$out/$name" -x "HOSTPROF_US=${HOSTPROF_US:-300}")
else
    env=(-genv LD_PRELOAD "$so" -genv HOSTPROF_OUT "$out/$name" -genv HOSTPROF_US "${HOSTPROF_US:-300}")
fi
rc=0
# shellcheck disable=SC2086
$launch ${MPIEXEC_FLAGS:-} -np "${HOSTPROF_NP:-1}" "${env[@]}" "$@" || rc=$?
[ "$rc" = 0 ] || echo "hostprof.sh: the program exited with $rc" >&2
first=$(ls -S "$out/$name".[0-9]*.txt 2>/dev/null | head -1 || true) # the largest: the program, not a command it ran
[ -n "$first" ] || { echo "hostprof.sh: no samples written (is $so loadable there?)" >&2; exit 1; }
# shellcheck disable=SC2086
python3 "$here/hostprof.py" "$first" ${HOSTPROF_REPORT:-} > "$out/$name.report.txt"
head -40 "$out/$name.report.txt"
exit "$rc"
