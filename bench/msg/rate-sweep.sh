#!/usr/bin/env bash
# bench/msg/rate-sweep.sh OUTDIR [BUILDDIR] — host message rate between two processes with 1, 2,
# 4 and 8 PEs each (PES="1 2 4 8"), against raw streaming UCX active messages (one thread) in the
# same run, with one UCX worker per process and with one per PE (LANES="1 0": TESS_NET_LANES).
# 64 sender elements per PE of process 0 each stream bursts of 64 8-byte messages to their
# receivers on process 1's PEs (bench_msg --no-latency). Writes OUTDIR/rate.csv
# (lanes,ppn,raw_mps,tessera_mps,vs_raw,vs_1pe in millions of messages per second), a table,
# and OUTDIR/rate.png. REPS (default 5) repetitions per point, medians; ROUNDS (default 250)
# bursts per sender in one repetition.
#
# The processes and PEs need 2 x 8 cores to themselves for the 8-PE point; with fewer the
# figures are oversubscribed (the script says so) and cannot grow with PEs. On a 16-core node:
#   TESS_GPU=host TESS_BIND=1 bench/msg/rate-sweep.sh OUTDIR build
set -uo pipefail
out=${1:?usage: rate-sweep.sh OUTDIR [BUILDDIR]}
build=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
prog="$build/bench/msg/bench_msg"
[ -x "$prog" ] || { echo "rate-sweep: $prog not built" >&2; exit 1; }
mkdir -p "$out"
reps=${REPS:-5}
rounds=${ROUNDS:-250}
pes=${PES:-1 2 4 8}
lanes=${LANES:-1 0}
launch=(mpirun --bind-to none --oversubscribe)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export TESS_GPU=${TESS_GPU:-host}
cores=$(nproc)
raw="$out/rate-raw.csv"
: >"$raw"
for ln in $lanes; do
    for n in $pes; do
        tmp=$(mktemp)
        echo "2 processes x $n PEs, TESS_NET_LANES=$ln (TESS_GPU=$TESS_GPU, $cores cores):"
        if ! TESS_NET_LANES=$ln timeout 900 "${launch[@]}" -np 2 "$prog" +ppn "$n" --no-latency \
            --reps "$reps" --rounds "$rounds" --csv "$tmp"; then
            rm -f "$tmp"
            exit 1
        fi
        sed "s/^/$ln,$n,/" "$tmp" >>"$raw"
        rm -f "$tmp"
    done
done
/usr/bin/env python3 - "$raw" "$out/rate.csv" "$cores" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 10 and r[3] == "rate"]
cores = int(sys.argv[3])
pts = [(int(r[0]), int(r[1]), float(r[6]), float(r[7])) for r in rows]
name = {1: "1 worker per process", 0: "1 worker per PE"}
base = {}
for ln, n, _, t in pts:
    base.setdefault(ln, t)  # the first (fewest PEs) point of each lane setting
with open(sys.argv[2], "w") as f:
    f.write("lanes,ppn,raw_mps,tessera_mps,vs_raw,vs_1pe\n")
    for ln, n, rawv, t in pts:
        f.write(f"{ln},{n},{rawv:.4f},{t:.4f},{t / rawv:.3f},{t / base[ln]:.3f}\n")
print(f"\n| TESS_NET_LANES | PEs per process | raw UCX (1 thread) M/s | Tessera M/s | x raw | x 1 PE |")
print("| --- | --- | --- | --- | --- | --- |")
for ln, n, rawv, t in pts:
    print(f"| {ln} ({name.get(ln, '?')}) | {n} | {rawv:.2f} | {t:.2f} | {t / rawv:.2f} | "
          f"{t / base[ln]:.2f} |")
over = sorted({n for _, n, _, _ in pts if 2 * n > cores})
if over:
    print(f"\nOversubscribed: {cores} cores for 2 x {', '.join(map(str, over))} PEs; those "
          "points measure time-sharing, not parallel PEs.")
for ln in base:
    four = [t for l2, n, _, t in pts if l2 == ln and n == 4]
    if four and [n for l2, n, _, _ in pts if l2 == ln][0] == 1:
        r = four[0] / base[ln]
        print(f"Goal, TESS_NET_LANES={ln}: rate at 4 PEs >= 2.5 x at 1 PE: {r:.2f} x: "
              f"{'PASS' if r >= 2.5 else 'MISS'}" + (" (oversubscribed)" if 8 > cores else ""))
PY
py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py - "$out/rate.csv" "$out/rate.png" "$cores" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
name = {"1": "1 UCX worker per process", "0": "1 UCX worker per PE"}
fig, ax = plt.subplots(figsize=(6, 4))
for ln in dict.fromkeys(r["lanes"] for r in rows):
    sel = [r for r in rows if r["lanes"] == ln]
    n = [int(r["ppn"]) for r in sel]
    ax.plot(n, [float(r["tessera_mps"]) for r in sel], "o-", label=f"Tessera, {name.get(ln, ln)}")
    ax.plot(n, [float(r["raw_mps"]) for r in sel], "s--", alpha=0.5,
            label=f"raw UCX AM, 1 thread (runs of {name.get(ln, ln)})")
n = sorted({int(r["ppn"]) for r in rows})
ax.set_xscale("log", base=2)
ax.set_xticks(n)
ax.set_xticklabels([str(k) for k in n])
ax.set_xlabel("PEs per process")
ax.set_ylabel("8-byte messages per second (millions)")
ax.set_title(f"host message rate between two processes ({sys.argv[3]} cores)")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
PY
    echo "wrote $out/rate.csv, $out/rate.png"
else
    echo "wrote $out/rate.csv (no matplotlib for the plot)"
fi
