"""plot-fast.py RAW_CSV PNG: bench/tree/run-fast's runs, per process count: the fast path
(reduce+bcast-fast), the tree (reduce+bcast) and MPI_Allreduce, each run a dot, medians joined."""
import csv
import statistics
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
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
fast = [r for r in rows if r["kind"] == "reduce+bcast-fast"]
procs = sorted({int(r["procs"]) for r in fast})
rx.plot([int(r["procs"]) for r in fast], [float(r["ratio"]) for r in fast], "o", color="C0",
        alpha=0.3)
rx.plot(procs, [statistics.median(float(r["ratio"]) for r in fast if int(r["procs"]) == p)
                for p in procs], "o-", color="C0", label="fast path / MPI_Allreduce (median)")
rx.axhline(1.5, color="r", ls="--", label="goal 1.5")
for a in (ax, rx):
    a.set_xscale("log", base=2)
    a.set_xticks(procs, [str(p) for p in procs])
    a.set_xlabel("processes (1 PE each, host backend; 2 cores)")
    a.legend(fontsize=8)
ax.set_yscale("log")
ax.set_ylabel("per chained round (us)")
ax.set_title("8-byte SUM, result to every element")
rx.set_ylabel("ratio")
rx.set_title("Tessera fast path / MPI_Allreduce, same job")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
