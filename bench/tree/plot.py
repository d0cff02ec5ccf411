"""plot.py CSV PNG: bench_tree latencies (Tessera before/after, MPI) against processes."""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, kind, mpi in zip(axes, ["reduce+bcast", "bcast+ack"], ["MPI_Allreduce", "MPI_Bcast+send"]):
    for v, style in [("before", "s--"), ("after", "o-")]:
        rs = [r for r in rows if r["kind"] == kind and r["version"] == v]
        if rs:
            ax.plot([int(r["procs"]) for r in rs], [float(r["tessera_us"]) for r in rs], style,
                    label="Tessera " + v)
    rs = [r for r in rows if r["kind"] == kind and r["version"] == "after"]
    ax.plot([int(r["procs"]) for r in rs], [float(r["mpi_us"]) for r in rs], "k^:", label=mpi)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processes (1 PE each, host backend, 2 cores)")
    ax.set_ylabel("latency per round (us)")
    ax.set_title(kind)
    ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
