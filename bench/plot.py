#!/usr/bin/env python3
"""plot.py — turn a benchmark CSV into a PNG (and print it as a table).

    plot.py CSV PNG --x COL --y COL [--series COL ...] [--filter COL=VALUE ...]
            [--logx] [--logy] [--title TEXT] [--xlabel TEXT] [--ylabel TEXT]
            [--baseline-y COL]   also draw COL as a dashed line per series (the raw baseline)
            [--facet COL]        one subplot per value of COL

The CSV has a header line. Rows whose --filter columns differ are dropped. Series are the
distinct values of the --series columns (joined with ' '). Uses Debian's python3-matplotlib
(run with /usr/bin/python3 where another python3 comes first on PATH).
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def number(v):
    try:
        return float(v)
    except ValueError:
        return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--x", required=True)
    ap.add_argument("--y", required=True)
    ap.add_argument("--series", nargs="*", default=[])
    ap.add_argument("--filter", nargs="*", default=[])
    ap.add_argument("--facet")
    ap.add_argument("--baseline-y")
    ap.add_argument("--logx", action="store_true")
    ap.add_argument("--logy", action="store_true")
    ap.add_argument("--title", default="")
    ap.add_argument("--xlabel")
    ap.add_argument("--ylabel")
    a = ap.parse_args()

    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    for flt in a.filter:
        k, v = flt.split("=", 1)
        rows = [r for r in rows if r.get(k) == v]
    if not rows:
        print(f"plot.py: no rows in {a.csv} after filtering", file=sys.stderr)
        return 1

    facets = sorted({r[a.facet] for r in rows}, key=number) if a.facet else [None]
    fig, axes = plt.subplots(1, len(facets), figsize=(5.5 * len(facets), 4.2), squeeze=False)
    for ax, facet in zip(axes[0], facets):
        sub = [r for r in rows if facet is None or r[a.facet] == facet]
        names = sorted({" ".join(r[s] for s in a.series) for r in sub}, key=lambda s: [number(t) for t in s.split()])
        for name in names:
            pts = sorted(((number(r[a.x]), float(r[a.y]), float(r[a.baseline_y]) if a.baseline_y else None)
                          for r in sub if " ".join(r[s] for s in a.series) == name), key=lambda p: p[0])
            label = " ".join(f"{s}={v}" for s, v in zip(a.series, name.split())) or a.y
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
            if a.baseline_y:
                ax.plot([p[0] for p in pts], [p[2] for p in pts], linestyle="--",
                        color=line.get_color(), label=f"{label} (raw)")
        if a.logx:
            ax.set_xscale("log", base=2)
        if a.logy:
            ax.set_yscale("log")
        ax.set_xlabel(a.xlabel or a.x)
        ax.set_ylabel(a.ylabel or a.y)
        ax.set_title(f"{a.title} {a.facet}={facet}" if facet is not None else a.title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"plot.py: wrote {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
