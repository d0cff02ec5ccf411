"""plot-fast.py RAW_CSV PNG [RAW_BEFORE_CSV]: bench/tree/run-fast's runs, per process count: the
fast path (reduce+bcast-fast), the tree (reduce+bcast) and MPI_Allreduce, each run a dot, medians
joined; with RAW_BEFORE_CSV (run-fast's raw-before.csv) also the fast path of the library before."""
import csv
import statistics
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker

rows = list(csv.DictReader(open(sys.argv[1])))
before = list(csv.DictReader(open(sys.argv[3]))) if len(sys.argv) > 3 else []
fig, (ax, rx) = plt.subplots(1, 2, figsize=(10, 4))
series = [("reduce+bcast-fast", "tessera_us", "o", "-", "C0", "Tessera, shared-memory rounds"),
          ("reduce+bcast", "tessera_us", "s", "--", "C1", "Tessera, tree"),
          ("reduce+bcast-fast", "mpi_us", "^", ":", "k", "MPI_Allreduce (8 B)")]
for kind, field, marker, line, color, label in series:
    procs = sorted({int(r["procs"]) for r in rows if r["kind"] == kind})
    pts = [(int(r["procs"]), float(r[field])) for r in rows if r["kind"] == kind]
    ax.plot([p for p, _ in pts], [v for _, v in pts], marker, color=color, alpha=0.3)
    med = [statistics.median(v for p2, v in pts if p2 == p) for p in procs]
    ax.plot(procs, med, marker + line, color=color, label=label + " (median)")
if before:
    pts = [(int(r["procs"]), float(r["tessera_us"])) for r in before
           if r["kind"] == "reduce+bcast-fast"]
    procs = sorted({p for p, _ in pts})
    ax.plot([p for p, _ in pts], [v for _, v in pts], "o", color="C2", alpha=0.3)
    ax.plot(procs, [statistics.median(v for p2, v in pts if p2 == p) for p in procs], "o-.",
            color="C2", label="Tessera, shared-memory rounds, before (median)")
for data, color, line, label in ((before, "C2", "o-.", "before"), (rows, "C0", "o-", "")):
    fast = [r for r in data if r["kind"] == "reduce+bcast-fast"]
    if not fast:
        continue
    procs = sorted({int(r["procs"]) for r in fast})
    rx.plot([int(r["procs"]) for r in fast], [float(r["ratio"]) for r in fast], "o",
            color=color, alpha=0.3)
    rx.plot(procs, [statistics.median(float(r["ratio"]) for r in fast if int(r["procs"]) == p)
                    for p in procs], line, color=color,
            label="fast path / MPI_Allreduce (median)" + (", " + label if label else ""))
rx.axhline(1.5, color="r", ls="--", label="goal 1.5")
for a in (ax, rx):
    a.set_xscale("log", base=2)
    a.set_xticks(procs, [str(p) for p in procs])
    a.set_xlabel("processes (1 PE each, host backend; 2 cores)")
    a.legend(fontsize=8)
ax.set_yscale("log")
ax.set_ylabel("per chained round (us)")
ax.set_title("8-byte SUM, result to every element")
rx.set_yscale("log")  # a run that a busy machine hit is far off, the goal stays readable
lo, hi = rx.get_ylim()
rx.set_yticks([t for t in (0.125, 0.25, 0.5, 1, 1.5, 2, 4, 8, 16, 32, 64) if lo <= t <= hi])
rx.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
rx.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
rx.set_ylabel("ratio")
rx.set_title("Tessera fast path / MPI_Allreduce, same job")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
