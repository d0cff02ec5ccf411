#!/usr/bin/env bash
# bench/lb/run.sh OUTDIR [BUILDDIR] — the load-balancing demonstration: Jacobi2D with a quarter
# of its rows doing K times the work (-imbalance K), with and without load-balancing steps, on
# NP processes (default 2, the host backend on a CPU machine: TESS_HOST_DEVICES=NP gives each
# process its own device, so balancing across GPUs is balancing across processes). Runs with and
# without LB alternate; medians of REPS. Prints the time per iteration, the gain, the balancer's
# max/average load before and after, and the goals (after LB: max/avg <= 1.10 and time at least
# 25% lower); writes OUTDIR/lb.csv and OUTDIR/lb.png.
# Environment: NP, REPS (5), LB_X/LB_Y (1024), LB_ITERS (600), LB_PERIOD (50), LB_K (9),
# LB_ODF (4), LB_STRATEGY (greedyrefine), LB_BIND (core: mpirun --bind-to). The default grid's
# two arrays fit the 32 MiB L3 of the test VMs, and each process is bound to a core (Open MPI's
# default for two ranks), so each host "device" has the fixed capacity of its core, as a GPU of
# its SMs. Unbound (LB_BIND=none) the heavy process's PE thread runs on the light process's core
# and balancing gains little; at 1536 x 1536 both devices stream from DRAM and share it.
set -uo pipefail
out=${1:?usage: run.sh OUTDIR [BUILDDIR]}
build=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
prog="$build/examples/jacobi2d/jacobi2d_tess"
mkdir -p "$out"
np=${NP:-2}; reps=${REPS:-5}; x=${LB_X:-1024}; y=${LB_Y:-1024}; iters=${LB_ITERS:-600}
period=${LB_PERIOD:-50}; k=${LB_K:-9}; odf=${LB_ODF:-4}; strategy=${LB_STRATEGY:-greedyrefine}
launch=(mpirun --bind-to "${LB_BIND:-core}" --oversubscribe)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || export TESS_HOST_DEVICES=$np

field() { echo "$1" | grep '^RESULT' | tr ' ' '\n' | sed -n "s/^$2=//p"; }
csv="$out/lb.csv"
echo "rep,lb,ms_per_iter,imbalance_before,imbalance_after,checksum" >"$csv"
for r in $(seq 1 "$reps"); do
    for lb in 0 "$period"; do
        o=$(timeout 300 "${launch[@]}" -np "$np" "$prog" +tess-lb "$strategy" -x "$x" -y "$y" \
            -i "$iters" -w 5 -odf "$odf" -imbalance "$k" -lb "$lb" 2>&1) || { echo "$o" | tail; exit 1; }
        t=$(field "$o" ms_per_iter); c=$(field "$o" checksum)
        line=$(echo "$o" | grep '^load balancing' || true)
        before=$(echo "$line" | sed -nE 's/.*imbalance ([0-9.]+) -> .*/\1/p')
        after=$(echo "$line" | sed -nE 's/.*-> ([0-9.]+).*/\1/p')
        first=$(echo "$o" | grep -c 'load balancing' || true)
        echo "$r,$lb,$t,${before:-},${after:-},$c" >>"$csv"
        echo "  run $r, $( [ "$lb" = 0 ] && echo 'no LB  ' || echo "LB every $lb") : $t ms/iteration"
    done
done
# The first step's figures (the balancer logs every step at info level).
o=$(TESS_LOG=info timeout 300 "${launch[@]}" -np "$np" "$prog" +tess-lb "$strategy" -x "$x" -y "$y" \
    -i "$iters" -w 5 -odf "$odf" -imbalance "$k" -lb "$period" 2>&1)
first=$(echo "$o" | grep 'info lb.c' | head -1 | sed -nE 's/.*imbalance ([0-9.]+) -> ([0-9.]+).*/\1 \2/p')
# Debian's python3 has matplotlib (python3-matplotlib); another first on PATH may not.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" - "$csv" "$out" "$first" "$np" "$k" "$x" "$y" "${LB_BIND:-core}" "$odf" <<'PY'
import csv, statistics, sys, os
path, out, first, np, k, x, y, bind, odf = sys.argv[1:10]
rows = list(csv.DictReader(open(path)))
no = statistics.median(float(r["ms_per_iter"]) for r in rows if r["lb"] == "0")
yes = statistics.median(float(r["ms_per_iter"]) for r in rows if r["lb"] != "0")
before, after = (first.split() + ["nan", "nan"])[:2]
gain = 1 - yes / no
print(f"\nJacobi2D {x} x {y}, a quarter of the rows {k}x the work, {np} processes "
      f"(mpirun --bind-to {bind}), ODF {odf}")
print(f"  {'':<22}{'ms/iteration':>14}")
print(f"  {'without LB':<22}{no:>14.3f}")
print(f"  {'with LB':<22}{yes:>14.3f}   ({gain*100:.1f}% lower; goal >= 25%: {'PASS' if gain >= 0.25 else 'MISS'})")
print(f"  max/avg load by the balancer: {before} before the first step, {after} after "
      f"(goal <= 1.10: {'PASS' if after != 'nan' and float(after) <= 1.10 else 'MISS'})")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    ax[0].bar(["without LB", "with LB"], [no, yes], color=["#c44", "#4a4"])
    ax[0].set_ylabel("ms per iteration (median)")
    ax[0].set_title(f"time ({gain*100:.0f}% lower with LB)")
    if before != "nan":
        ax[1].bar(["before", "after"], [float(before), float(after)], color=["#c44", "#4a4"])
        ax[1].axhline(1.10, linestyle="--", color="gray")
        ax[1].set_ylabel("max / average load")
        ax[1].set_title("balance of the first step")
    fig.suptitle(f"Jacobi2D {x}x{y}, {np} processes, imbalance {k}x on 25% of rows")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lb.png"), dpi=110)
    print(f"  plot: {os.path.join(out, 'lb.png')}")
except ImportError:
    pass
PY
