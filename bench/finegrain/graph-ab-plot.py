#!/usr/bin/env python3
"""graph-ab-plot.py GRAPH_AB.CSV -o OUT.png: Tessera / MPI(1 rank) with step graphs off and on,
one pair of bars per configuration (the medians of graph-ab.sh's rounds); dashed: 1.10."""
import argparse
import csv
import statistics
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("-o", "--output", default="graph_ab.png")
    a = ap.parse_args()
    runs = OrderedDict()
    with open(a.csv) as f:
        for r in csv.DictReader(f):
            k = (r["app"], r["size"], r["odf"], r["procs"] + "x" + r["ppn"])
            runs.setdefault(k, {}).setdefault(r["mode"], []).append(float(r["ms_per_step"]))
    labels, off, on = [], [], []
    for k, m in runs.items():
        if "mpi" not in m or "0" not in m or "1" not in m:
            continue
        mpi = statistics.median(m["mpi"])
        labels.append(f"{k[0]} {k[1]}\nODF {k[2]} {k[3]}")
        off.append(statistics.median(m["0"]) / mpi)
        on.append(statistics.median(m["1"]) / mpi)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels)), 4))
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], off, 0.4, label="step graphs off")
    ax.bar([i + 0.2 for i in x], on, 0.4, label="step graphs on")
    ax.axhline(1.10, ls="--", c="k", lw=0.8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("Tessera / MPI (1 rank)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)


if __name__ == "__main__":
    main()
