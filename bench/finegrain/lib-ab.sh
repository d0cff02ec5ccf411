#!/usr/bin/env bash
# lib-ab.sh OLDLIB BUILDDIR OUTDIR [ROUNDS] — two versions of the runtime library on the fine-grain
# configurations of the three apps, alternating run by run (ROUNDS rounds, default 3), with the
# MPI programs on one rank in the same run: OLDLIB is a folder holding the other
# libtessera.so.0 (found first through LD_LIBRARY_PATH), BUILDDIR the build whose programs and
# library run as "after". Writes OUTDIR/lib-ab.csv (config,lib,round,ms; lib: before, after or
# mpi; ms: a cycle, step or iteration) and prints the medians; bench/results/publish OUTDIR takes
# the CSV into bench/results/finegrain/.
#
# LIB_AB_CONFIGS: the configurations (default all): lul64 lul64p4 lul27 md8 md16 jac64.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
old=$(cd "$1" && pwd) b=$(cd "$2" && pwd) out=$3 rounds=${4:-3}
[ -e "$old/libtessera.so.0" ] || { echo "lib-ab.sh: no libtessera.so.0 in $old" >&2; exit 1; }
mkdir -p "$out"
csv=$out/lib-ab.csv
echo "config,lib,round,ms" >"$csv"
launch=${MPIEXEC:-mpirun}
run() { # run LIBDIR|"" PROGRAM ARGS...: the time field of its RESULT lines (LULESH's MPI
    # program reports elapsed seconds and iterations: their quotient in ms)
    local ll=$1
    shift
    LD_LIBRARY_PATH=${ll:+$ll:}$b/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        timeout 120 "$launch" -np 1 --bind-to none -x LD_LIBRARY_PATH "$@" </dev/null 2>&1 |
        grep '^RESULT' | tr ' ' '\n' | awk -F= '
            $1 ~ /^ms_per_(cycle|step|iter)$/ && ms == "" { ms = $2 }
            $1 == "elapsed" { el = $2 } $1 == "iterations" { it = $2 }
            END { if (ms == "" && el != "" && it > 0) ms = sprintf("%.6f", 1000 * el / it)
                  if (ms != "") print ms }'
}
tl=$b/examples/lulesh/lulesh_tess tm=$b/examples/minimd/minimd_tess tj=$b/examples/jacobi2d/jacobi2d_tess
args() {
    case $1 in
    lul64) echo "$tl -g 128 -odf 64 -i 1000 -q" ;;
    lul64p4) echo "$tl +ppn 4 -g 128 -odf 64 -i 1000 -q" ;;
    lul27) echo "$tl -g 128 -odf 27 -i 1000 -q" ;;
    md8) echo "$tm -s 32 -odf 8 -n 3000 --thermo 3000" ;;
    md16) echo "$tm -s 32 -odf 16 -n 2000 --thermo 2000" ;;
    jac64) echo "$tj +ppn 1 -x 4096 -y 4096 -i 3000 -odf 64 -launch batch" ;;
    esac
}
mpi_args() {
    case $1 in
    lul*) echo "$b/examples/lulesh/lulesh_mpi -s 128 -i 1000 -q" ;;
    md*) echo "$b/examples/minimd/minimd_mpi -s 32 -n 3000 --thermo 3000" ;;
    jac*) echo "$b/examples/jacobi2d/jacobi2d_mpi -x 4096 -y 4096 -i 3000" ;;
    esac
}
configs=${LIB_AB_CONFIGS:-lul64 lul64p4 lul27 md8 md16 jac64}
for c in $configs; do
    [ -n "$(args "$c")" ] || { echo "lib-ab.sh: no configuration $c" >&2; exit 1; }
    for r in $(seq "$rounds"); do
        # shellcheck disable=SC2046
        for lib in before after; do
            ms=$(run "$([ $lib = before ] && echo "$old")" $(args "$c"))
            echo "$c,$lib,$r,${ms:-}" >>"$csv"
            echo "$c $lib round $r: ${ms:-no result} ms"
        done
    done
done
for m in lul md jac; do
    case " $configs" in *" $m"*) ;; *) continue ;; esac
    # shellcheck disable=SC2046
    ms=$(run "" $(mpi_args $m))
    echo "${m}_mpi,mpi,1,${ms:-}" >>"$csv" # lul_mpi, md_mpi, jac_mpi
    echo "$m MPI: ${ms:-no result} ms"
done
python3 - "$csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {}
for r in rows:
    if r["ms"]:
        med.setdefault((r["config"], r["lib"]), []).append(float(r["ms"]))
app = lambda c: "lul" if c.startswith("lul") else "md" if c.startswith("md") else "jac"
mpi = {app(c): statistics.median(v) for (c, l), v in med.items() if l == "mpi"}
print("%-8s %10s %10s %8s %9s %9s" % ("config", "before", "after", "a/b", "before/MPI", "after/MPI"))
for (c, l), v in sorted(med.items()):
    if l != "before" or (c, "after") not in med:
        continue
    b, a, m = statistics.median(v), statistics.median(med[c, "after"]), mpi.get(app(c))
    print("%-8s %10.4f %10.4f %8.3f %9s %9s" % (c, b, a, a / b, "%.2f" % (b / m) if m else "-",
                                                "%.2f" % (a / m) if m else "-"))
EOF
