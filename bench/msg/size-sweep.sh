#!/usr/bin/env bash
# bench/msg/size-sweep.sh OUTDIR [BUILDDIR] — one-way latency of a message between two
# processes of one node (1 PE each) from 16 KiB to 4 MiB (SIZES, bytes), Tessera with its node
# eager limit (TESS_NET_EAGER_NODE as set, default 64k: "eager") and with UCX's own choice of
# protocol (TESS_NET_EAGER_NODE=0: "ucx"), each against the raw UCX active-message ping-pongs
# of the same run: "raw-ucp-am" (UCX's choice, a buffer never written: issue 18's baseline),
# "raw-ucp-am-eager" (the same, every send eager) and "raw-ucp-am-fwd" (resends what it
# received, as tess_send does). ALTS (default 2) alternations of both settings at each size,
# REPS (default 5) repetitions in each launch. Writes OUTDIR/size.csv, a table of medians (the
# ratio is the median of the paired ratios of every repetition), and OUTDIR/size.png.
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
eager=${TESS_NET_EAGER_NODE:-64k}
csv="$out/size.csv"
echo "alt,setting,mode,metric,size,baseline,baseline_value,tessera_value,unit,ratio" >"$csv"
for a in $(seq 1 "$alts"); do
    for s in $sizes; do
        for setting in eager ucx; do
            limit=$eager
            [ "$setting" = ucx ] && limit=0
            tmp=$(mktemp)
            echo "alternation $a: $s bytes, TESS_NET_EAGER_NODE=$limit"
            if ! TESS_NET_EAGER_NODE=$limit timeout 600 "${launch[@]}" -np 2 "$prog" +ppn 1 \
                --size "$s" --reps "$reps" --csv "$tmp"; then
                rm -f "$tmp"
                exit 1
            fi
            sed "s/^/$a,$setting,/" "$tmp" >>"$csv"
            rm -f "$tmp"
        done
    done
done
/usr/bin/env python3 - "$csv" "$eager" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["metric"] == "latency"]
med = lambda v: statistics.median(v) if v else float("nan")
def pick(size, setting=None, base=None, col="tessera_value"):
    return [float(r[col]) for r in rows if r["size"] == size
            and (setting is None or r["setting"] == setting)
            and (base is None or r["baseline"] == base)]
print(f"\none-way us between two processes of one node (medians; ratio = median of paired "
      f"ratios; Tessera 'eager' = TESS_NET_EAGER_NODE={sys.argv[2]}, 'ucx' = 0):")
print(f"{'bytes':>8} {'raw UCX':>9} {'raw eager':>9} {'raw fwd':>9} {'eager':>9} {'ucx':>9} "
      f"{'eager/raw':>9} {'ucx/raw':>8} {'eager/raw-eager':>15}")
for size in sorted({r["size"] for r in rows}, key=int):
    raw = pick(size, base="raw-ucp-am", col="baseline_value")
    rawe = pick(size, base="raw-ucp-am-eager", col="baseline_value")
    fwd = pick(size, base="raw-ucp-am-fwd", col="baseline_value")
    te = pick(size, "eager", "raw-ucp-am")
    tu = pick(size, "ucx", "raw-ucp-am")
    re_ = pick(size, "eager", "raw-ucp-am", "ratio")
    ru = pick(size, "ucx", "raw-ucp-am", "ratio")
    ree = pick(size, "eager", "raw-ucp-am-eager", "ratio")
    print(f"{size:>8} {med(raw):9.2f} {med(rawe):9.2f} {med(fwd):9.2f} {med(te):9.2f} "
          f"{med(tu):9.2f} {med(re_):9.2f} {med(ru):8.2f} {med(ree):15.2f}")
PY
py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py - "$csv" "$out/size.png" <<'PY'
import csv, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["metric"] == "latency"]
sizes = sorted({int(r["size"]) for r in rows})
def line(f):
    return [statistics.median([float(v) for v in f(s)] or [float("nan")]) for s in sizes]
series = {
    "raw UCX (its protocol, clean buffer)": lambda s: [r["baseline_value"] for r in rows
        if int(r["size"]) == s and r["baseline"] == "raw-ucp-am"],
    "raw UCX, eager": lambda s: [r["baseline_value"] for r in rows
        if int(r["size"]) == s and r["baseline"] == "raw-ucp-am-eager"],
    "raw UCX, forwarding what it received": lambda s: [r["baseline_value"] for r in rows
        if int(r["size"]) == s and r["baseline"] == "raw-ucp-am-fwd"],
    "Tessera, eager within the node": lambda s: [r["tessera_value"] for r in rows
        if int(r["size"]) == s and r["setting"] == "eager" and r["baseline"] == "raw-ucp-am"],
    "Tessera, UCX's protocol": lambda s: [r["tessera_value"] for r in rows
        if int(r["size"]) == s and r["setting"] == "ucx" and r["baseline"] == "raw-ucp-am"],
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
