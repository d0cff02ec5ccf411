"""plot.py CSV PNG: bench_array's cost per element (create, broadcast + reduction, migration,
destroy) and runtime bytes per element against the element count, before/after."""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
ops = [("create", "create"), ("bcastred", "broadcast + reduction"),
       ("migrate", "migrate 10% (per moved element)"), ("destroy", "destroy")]
colors = ["C0", "C1", "C2", "C3"]
for v, style in [("before", "--"), ("after", "-")]:
    rs = [r for r in rows if r["version"] == v]
    if not rs:
        continue
    n = [int(r["elements"]) for r in rs]
    for (key, label), c in zip(ops, colors):
        axes[0].plot(n, [float(r[key + "_ns"]) for r in rs], style, color=c, marker="o",
                     label=f"{label} ({v})")
    axes[1].plot(n, [float(r["bytes_per_elem"]) for r in rs], style, color="k", marker="o",
                 label=v)
procs = rows[0]["procs"] if rows else "?"
for ax in axes:
    ax.set_xscale("log")
    ax.set_xlabel(f"elements ({procs} processes, 1 PE each, host backend)")
axes[0].set_yscale("log")
axes[0].set_ylabel("time per element (ns)")
axes[0].set_title("cost per element (flat = linear)")
axes[0].legend(fontsize=7)
axes[1].set_ylabel("runtime heap bytes per local element")
axes[1].set_title("runtime state per element (8-byte elements)")
axes[1].set_ylim(bottom=0)
axes[1].legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
