#!/usr/bin/env bash
# bench/msg/rate-sweep.sh OUTDIR [BUILDDIR] — host message rate between two processes with 1, 2,
# 4 and 8 PEs each (PES="1 2 4 8"), against raw streaming UCX active messages (one thread) in the
# same run, with one UCX worker per process and with one per PE (LANES="1 0": TESS_NET_LANES).
# 64 sender elements per PE of process 0 each stream bursts of 64 8-byte messages to their
# receivers on process 1's PEs (bench_msg --no-latency). Writes OUTDIR/rate.csv
# (lanes,ppn,raw_mps,tessera_mps,vs_raw,vs_1pe,vs_1pe_min,vs_1pe_max,alternations; rates in
# millions of messages per second), a table, and OUTDIR/rate.png. ALTS (default 3) alternations
# of the whole sweep, each point one launch per alternation; REPS (default 5) repetitions per
# launch, medians; ROUNDS (default 250) bursts per sender in one repetition.
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
alts=${ALTS:-3}
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
# The rate of one launch depends on a state set at its start (1 PE: 7-18 M/s from launch to
# launch in one call on the 16-core machine): every PE count runs once per alternation, and the
# ratio to 1 PE is the median over alternations of each one's own ratio.
for a in $(seq 1 "$alts"); do
for ln in $lanes; do
    for n in $pes; do
        tmp=$(mktemp)
        echo "alternation $a: 2 processes x $n PEs, TESS_NET_LANES=$ln (TESS_GPU=$TESS_GPU, $cores cores):"
        if ! TESS_NET_LANES=$ln timeout 900 "${launch[@]}" -np 2 "$prog" +ppn "$n" --no-latency \
            --reps "$reps" --rounds "$rounds" --csv "$tmp"; then
            rm -f "$tmp"
            exit 1
        fi
        sed "s/^/$a,$ln,$n,/" "$tmp" >>"$raw"
        rm -f "$tmp"
    done
done
done
/usr/bin/env python3 - "$raw" "$out/rate.csv" "$cores" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 11 and r[4] == "rate"]
cores = int(sys.argv[3])
# (alternation, lanes, ppn) -> (raw, tessera)
pts = {(int(r[0]), int(r[1]), int(r[2])): (float(r[7]), float(r[8])) for r in rows}
keys = sorted({(ln, n) for _, ln, n in pts}, key=lambda k: (-k[0], k[1]))
first = {}
for ln, n in keys:
    first.setdefault(ln, n)  # the fewest PEs of each lane setting
med = statistics.median
table = []
for ln, n in keys:
    alts = sorted(a for a, l2, n2 in pts if (l2, n2) == (ln, n))
    rawv = med(pts[(a, ln, n)][0] for a in alts)
    t = med(pts[(a, ln, n)][1] for a in alts)
    ratios = [pts[(a, ln, n)][1] / pts[(a, ln, first[ln])][1] for a in alts
              if (a, ln, first[ln]) in pts]
    table.append((ln, n, rawv, t, med(ratios), min(ratios), max(ratios), len(alts)))
with open(sys.argv[2], "w") as f:
    f.write("lanes,ppn,raw_mps,tessera_mps,vs_raw,vs_1pe,vs_1pe_min,vs_1pe_max,alternations\n")
    for ln, n, rawv, t, r, lo, hi, k in table:
        f.write(f"{ln},{n},{rawv:.4f},{t:.4f},{t / rawv:.3f},{r:.3f},{lo:.3f},{hi:.3f},{k}\n")
name = {1: "1 worker per process", 0: "1 worker per PE"}
print("\n(medians over alternations; x 1 PE: the median of each alternation's own ratio, and its range)")
print("| TESS_NET_LANES | PEs per process | raw UCX (1 thread) M/s | Tessera M/s | x raw | x 1 PE |")
print("| --- | --- | --- | --- | --- | --- |")
for ln, n, rawv, t, r, lo, hi, k in table:
    print(f"| {ln} ({name.get(ln, '?')}) | {n} | {rawv:.2f} | {t:.2f} | {t / rawv:.2f} | "
          f"{r:.2f} ({lo:.2f}-{hi:.2f}) |")
over = sorted({n for _, n, *_ in table if 2 * n > cores})
if over:
    print(f"\nOversubscribed: {cores} cores for 2 x {', '.join(map(str, over))} PEs; those "
          "points measure time-sharing, not parallel PEs.")
for ln in first:
    four = [r for l2, n, _, _, r, *_ in table if l2 == ln and n == 4]
    if four and first[ln] == 1:
        print(f"Goal, TESS_NET_LANES={ln}: rate at 4 PEs >= 2.5 x at 1 PE: {four[0]:.2f} x: "
              f"{'PASS' if four[0] >= 2.5 else 'MISS'}" + (" (oversubscribed)" if 8 > cores else ""))
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
