#!/usr/bin/env bash
# bench/msg/size-sweep.sh OUTDIR [BUILDDIR] — one-way latency of a message between two
# processes of one node (1 PE each) from 16 KiB to 4 MiB (SIZES, bytes), Tessera in three
# settings: "default" (the node message arena up to 1 MiB, then eager up to
# TESS_NET_EAGER_NODE, then UCX's rendezvous), "eager" (TESS_MSG_SHM=0: no arena) and "ucx"
# (no arena, TESS_NET_EAGER_NODE=0: UCX's own protocol), each against the raw UCX
# active-message ping-pongs of the same run: "raw-ucp-am" (UCX's choice, a buffer never
# written: the goal's baseline), "raw-ucp-am-eager" (the same, every send eager) and
# "raw-ucp-am-fwd" (resends what it received, as tess_send does). Both send forms: tess_send
# ("latency") and tess_msg_alloc + tess_send_msg ("latency-zc"). ALTS (default 2) alternations
# of the settings at each size, REPS (default 5) repetitions in each launch. Writes
# OUTDIR/size.csv, a table of medians (a ratio is the median of the paired ratios of every
# repetition), and OUTDIR/size.png. PLOT_ONLY=1 redraws them from an existing size.csv.
#
# TESS_GPU defaults to host: the messages are host memory on either backend.
set -uo pipefail
out=${1:?usage: size-sweep.sh OUTDIR [BUILDDIR]}
build=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
prog="$build/bench/msg/bench_msg"
[ -x "$prog" ] || { echo "size-sweep: $prog not built" >&2; exit 1; }
mkdir -p "$out"
sizes=${SIZES:-16384 65536 262144 1048576 4194304}
reps=${REPS:-5}
alts=${ALTS:-2}
launch=(mpirun --bind-to none --oversubscribe)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export TESS_GPU=${TESS_GPU:-host}
csv="$out/size.csv"
# PLOT_ONLY=1: the table and the plot of an existing OUTDIR/size.csv (e.g. from a machine
# without matplotlib).
[ -n "${PLOT_ONLY:-}" ] && alts=0 ||
    echo "alt,setting,mode,metric,size,baseline,baseline_value,tessera_value,unit,ratio" >"$csv"
for a in $(seq 1 "$alts"); do
    for s in $sizes; do
        for setting in default eager ucx; do
            case $setting in
            default) envs=() ;;
            eager) envs=(TESS_MSG_SHM=0) ;;
            ucx) envs=(TESS_MSG_SHM=0 TESS_NET_EAGER_NODE=0) ;;
            esac
            tmp=$(mktemp)
            echo "alternation $a: $s bytes, $setting ${envs[*]}"
            if ! env "${envs[@]}" timeout 600 "${launch[@]}" -np 2 "$prog" +ppn 1 \
                --size "$s" --reps "$reps" --csv "$tmp"; then
                rm -f "$tmp"
                exit 1
            fi
            sed "s/^/$a,$setting,/" "$tmp" >>"$csv"
            rm -f "$tmp"
        done
    done
done
/usr/bin/env python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = lambda v: statistics.median(v) if v else float("nan")
def pick(size, metric, setting=None, base=None, col="tessera_value"):
    return [float(r[col]) for r in rows if r["size"] == size and r["metric"] == metric
            and (setting is None or r["setting"] == setting)
            and (base is None or r["baseline"] == base)]
print("\none-way us between two processes of one node (medians; a ratio is the median of paired "
      "ratios; 'zc' = tess_msg_alloc + tess_send_msg):")
print(f"{'bytes':>8} {'raw UCX':>8} {'raw eager':>9} {'raw fwd':>8} {'default':>8} "
      f"{'eager':>8} {'ucx':>8} {'default zc':>10} {'default/raw':>11} {'zc/raw':>7} "
      f"{'ucx/raw':>7}")
for size in sorted({r["size"] for r in rows}, key=int):
    L = "latency"
    raw = pick(size, L, base="raw-ucp-am", col="baseline_value")
    rawe = pick(size, L, base="raw-ucp-am-eager", col="baseline_value")
    fwd = pick(size, L, base="raw-ucp-am-fwd", col="baseline_value")
    t = {st: pick(size, L, st, "raw-ucp-am") for st in ("default", "eager", "ucx")}
    zc = pick(size, "latency-zc", "default", "raw-ucp-am")
    rd = pick(size, L, "default", "raw-ucp-am", "ratio")
    rz = pick(size, "latency-zc", "default", "raw-ucp-am", "ratio")
    ru = pick(size, L, "ucx", "raw-ucp-am", "ratio")
    print(f"{size:>8} {med(raw):8.2f} {med(rawe):9.2f} {med(fwd):8.2f} {med(t['default']):8.2f} "
          f"{med(t['eager']):8.2f} {med(t['ucx']):8.2f} {med(zc):10.2f} {med(rd):11.2f} "
          f"{med(rz):7.2f} {med(ru):7.2f}")
PY
py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py - "$csv" "$out/size.png" <<'PY'
import csv, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
sizes = sorted({int(r["size"]) for r in rows})
def line(f):
    return [statistics.median([float(v) for v in f(s)] or [float("nan")]) for s in sizes]
def col(base=None, setting=None, metric="latency", value="tessera_value"):
    return lambda s: [r[value] for r in rows if int(r["size"]) == s and r["metric"] == metric
                      and (base is None or r["baseline"] == base)
                      and (setting is None or r["setting"] == setting)]
series = {
    "raw UCX (its protocol, clean buffer)": col("raw-ucp-am", value="baseline_value"),
    "raw UCX, eager": col("raw-ucp-am-eager", value="baseline_value"),
    "raw UCX, forwarding what it received": col("raw-ucp-am-fwd", value="baseline_value"),
    "Tessera tess_send (arena, default)": col("raw-ucp-am", "default"),
    "Tessera tess_send_msg (arena, default)": col("raw-ucp-am", "default", "latency-zc"),
    "Tessera tess_send, no arena (eager to 64k)": col("raw-ucp-am", "eager"),
    "Tessera tess_send, UCX's protocol": col("raw-ucp-am", "ucx"),
}
fig, ax = plt.subplots(figsize=(7, 4.5))
for name, f in series.items():
    ax.plot(sizes, line(f), marker="o", linestyle="--" if name.startswith("raw") else "-",
            label=name)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("payload bytes")
ax.set_ylabel("one-way us (median)")
ax.set_title("a message between two processes of one node")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
PY
fi
