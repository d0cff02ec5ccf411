#!/usr/bin/env bash
# bench/msg/rate-sweep.sh OUTDIR [BUILDDIR] — host message rate between two processes with 1, 2,
# 4 and 8 PEs each (PES="1 2 4 8"), against raw streaming UCX active messages (one thread) in the
# same run. 64 sender elements per PE of process 0 each stream bursts of 64 8-byte messages to
# their receivers on process 1's PEs (bench_msg --no-latency). Writes OUTDIR/rate.csv
# (ppn,raw_mps,tessera_mps,vs_raw,vs_1pe in millions of messages per second), a table, and
# OUTDIR/rate.png. REPS (default 5) repetitions per point, medians; ROUNDS (default 250) bursts
# per sender in one repetition.
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
launch=(mpirun --bind-to none --oversubscribe)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export TESS_GPU=${TESS_GPU:-host}
cores=$(nproc)
raw="$out/rate-raw.csv"
: >"$raw"
for n in $pes; do
    tmp=$(mktemp)
    echo "2 processes x $n PEs (TESS_GPU=$TESS_GPU, $cores cores):"
    if ! timeout 900 "${launch[@]}" -np 2 "$prog" +ppn "$n" --no-latency --reps "$reps" \
        --rounds "$rounds" --csv "$tmp"; then
        rm -f "$tmp"
        exit 1
    fi
    sed "s/^/$n,/" "$tmp" >>"$raw"
    rm -f "$tmp"
done
/usr/bin/env python3 - "$raw" "$out/rate.csv" "$cores" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 9 and r[2] == "rate"]
cores = int(sys.argv[3])
pts = [(int(r[0]), float(r[5]), float(r[6])) for r in rows]
base = pts[0][2] if pts else 1.0
with open(sys.argv[2], "w") as f:
    f.write("ppn,raw_mps,tessera_mps,vs_raw,vs_1pe\n")
    for n, rawv, t in pts:
        f.write(f"{n},{rawv:.4f},{t:.4f},{t / rawv:.3f},{t / base:.3f}\n")
print(f"\n| PEs per process | raw UCX (1 thread) M/s | Tessera M/s | x raw | x 1 PE |")
print("| --- | --- | --- | --- | --- |")
for n, rawv, t in pts:
    print(f"| {n} | {rawv:.2f} | {t:.2f} | {t / rawv:.2f} | {t / base:.2f} |")
over = [n for n, _, _ in pts if 2 * n > cores]
if over:
    print(f"\nOversubscribed: {cores} cores for 2 x {', '.join(map(str, over))} PEs; those "
          "points measure time-sharing, not parallel PEs.")
four = [t for n, _, t in pts if n == 4]
if four and pts[0][0] == 1:
    r = four[0] / base
    print(f"Goal: rate at 4 PEs >= 2.5 x at 1 PE: {r:.2f} x: {'PASS' if r >= 2.5 else 'MISS'}"
          + (" (oversubscribed)" if 8 > cores else ""))
PY
py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py - "$out/rate.csv" "$out/rate.png" "$cores" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
n = [int(r["ppn"]) for r in rows]
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(n, [float(r["tessera_mps"]) for r in rows], "o-", label="Tessera, 2 processes x PEs")
ax.plot(n, [float(r["raw_mps"]) for r in rows], "s--", label="raw UCX AM, 1 thread")
if rows:
    b = float(rows[0]["tessera_mps"])
    ax.plot(n, [b * k / n[0] for k in n], ":", color="grey", label="linear from 1 PE")
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
