#!/usr/bin/env python3
"""pe-plot.py LABEL=PE_APP.CSV ... -o OUT.png: time a step against processes x PEs from
pe-scaling.sh's CSVs (one bar group a configuration, one bar a CSV, e.g. step graphs on and
off), with the MPI program on one rank as a dashed line (the first CSV's)."""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("series", nargs="+", help="LABEL=CSV")
    ap.add_argument("-o", "--output", default="pe_scaling.png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    series, configs, mpi = [], [], None
    for s in a.series:
        label, path = s.split("=", 1)
        rows = list(csv.DictReader(open(path)))
        ms = {}
        for r in rows:
            c = f"{r['procs']}x{r['ppn']}"
            ms[c] = float(r["ms_per_step"])
            if c not in configs:
                configs.append(c)
            if mpi is None:
                mpi = float(r["ms_per_step"]) / float(r["vs_mpi_1"])
        series.append((label, ms))
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    w = 0.8 / len(series)
    for k, (label, ms) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * w for i in range(len(configs))]
        ax.bar(xs, [ms.get(c, 0) for c in configs], w, label=label)
    if mpi:
        ax.axhline(mpi, ls="--", c="k", lw=0.8, label="MPI, 1 rank")
    ax.set_xticks(range(len(configs)))
    ax.set_xticklabels([c.replace("x", " proc x ") + " PE" for c in configs], fontsize=8)
    ax.set_ylabel("ms a step")
    if a.title:
        ax.set_title(a.title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)


if __name__ == "__main__":
    main()
