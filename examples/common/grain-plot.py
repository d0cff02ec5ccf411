#!/usr/bin/python3
"""grain-plot.py CSV [CSV ...] [-o PNG] [--summary FILE] — the grain-size curves of
grain-sweep.sh's CSVs, and where overdecomposition stops being free.

Per app, two panels against elements per chare (log x), one line per problem size:
  left   Tessera (1 process x 1 PE) / MPI on 1 rank of the same size; the MPI program on 2-8
         ranks of the one GPU as markers at its elements per rank (MPI(R) / MPI(1));
  right  Tessera / Tessera at ODF 1 (the runtime with no overdecomposition).
A dashed line at 1.10. A configuration's time is the median of its rounds.

The summary (stdout, and --summary FILE as CSV) gives per app and size every ratio, and the
grain where each ratio crosses 1.10: the fewest elements per chare at which the ratio is still
<= 1.10, coming from the coarse end (interpolated in log elements between the two ODFs that
straddle it), or "none" when even ODF 1 is above it and "below" when no measured ODF reaches it.
"""
import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict

LIMIT = 1.10


def load(paths):
    runs = defaultdict(list)  # (app, size, program, ranks, odf) -> [ms]
    meta = {}
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                try:
                    ms = float(r["ms_per_step"])
                except ValueError:
                    continue
                key = (r["app"], int(r["size"]), r["program"], int(r["ranks"]), int(r["odf"]))
                runs[key].append(ms)
                meta[key] = (int(r["elements"]), float(r["elements_per_chare"]), int(r["chares"]),
                             r["checksum_equal"])
    return {k: statistics.median(v) for k, v in runs.items()}, meta


def crossing(points):
    """points: [(elements per chare, ratio)] from coarse to fine; the grain at which the ratio
    first exceeds LIMIT, interpolated in log x. None if ODF 1 already exceeds it; 0 if never."""
    if not points:
        return None
    if points[0][1] > LIMIT:
        return None
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if y1 > LIMIT >= y0:
            t = (LIMIT - y0) / (y1 - y0)
            return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
    return 0.0


def curves(t, meta):
    """Per (app, size): sorted [(odf, epc, tess, mpi1, tess1)] and the MPI rank points."""
    out = defaultdict(lambda: {"tess": [], "mpi": []})
    for (app, size, prog, ranks, odf), ms in t.items():
        key = (app, size)
        if prog == "tess" and ranks == 1:
            out[key]["tess"].append((odf, meta[(app, size, prog, ranks, odf)][1], ms))
        elif prog == "mpi":
            out[key]["mpi"].append((ranks, meta[(app, size, prog, ranks, odf)][1], ms))
    res = {}
    for key, c in out.items():
        mpi1 = next((ms for r, _, ms in c["mpi"] if r == 1), None)
        tess1 = next((ms for o, _, ms in c["tess"] if o == 1), None)
        res[key] = {"tess": sorted(c["tess"]), "mpi": sorted(c["mpi"]), "mpi1": mpi1,
                    "tess1": tess1}
    return res


def summary(res, out_csv):
    rows = []
    print("grain-size summary (time per step; ratios of medians over rounds; crossing: the "
          f"elements per chare where the ratio passes {LIMIT:.2f})")
    for (app, size), c in sorted(res.items()):
        pts_m, pts_1 = [], []
        for odf, epc, ms in c["tess"]:
            rm = ms / c["mpi1"] if c["mpi1"] else float("nan")
            r1 = ms / c["tess1"] if c["tess1"] else float("nan")
            rows.append([app, size, "tess", 1, odf, f"{epc:.6g}", f"{ms:.6g}", f"{rm:.4f}",
                         f"{r1:.4f}"])
            pts_m.append((epc, rm))
            pts_1.append((epc, r1))
        for ranks, epc, ms in c["mpi"]:
            rm = ms / c["mpi1"] if c["mpi1"] else float("nan")
            rows.append([app, size, "mpi", ranks, 0, f"{epc:.6g}", f"{ms:.6g}", f"{rm:.4f}", ""])
        xm = crossing([p for p in pts_m if not math.isnan(p[1])])
        x1 = crossing([p for p in pts_1 if not math.isnan(p[1])])

        def say(x, base):
            if base is None:
                return "no baseline run"
            if x is None:
                return "none (ODF 1 already above)"
            return "not within the ODFs run" if x == 0 else f"{x:.4g}"

        line = "  ".join(f"ODF {o}: {ms / c['mpi1']:.3f}" if c["mpi1"] else f"ODF {o}: -"
                         for o, _, ms in c["tess"])
        print(f"  {app} {size}: Tessera / MPI(1)  {line}")
        line = "  ".join(f"ODF {o}: {ms / c['tess1']:.3f}" if c["tess1"] else f"ODF {o}: -"
                         for o, _, ms in c["tess"])
        print(f"  {app} {size}: Tessera / ODF 1   {line}")
        line = "  ".join(f"{r} ranks: {ms / c['mpi1']:.3f}" for r, _, ms in c["mpi"]
                         if c["mpi1"] and r != 1)
        if line:
            print(f"  {app} {size}: MPI(R) / MPI(1)  {line}")
        print(f"  {app} {size}: crosses {LIMIT:.2f} at elements per chare: / MPI(1) {say(xm, c['mpi1'])}, "
              f"/ ODF 1 {say(x1, c['tess1'])}")
        rows.append([app, size, "crossing", "", "", "", "",
                     "" if xm is None or not c["mpi1"] else f"{xm:.6g}",
                     "" if x1 is None or not c["tess1"] else f"{x1:.6g}"])
    if out_csv:
        with open(out_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["app", "size", "program", "ranks", "odf", "elements_per_chare",
                        "ms_per_step", "ratio_mpi1", "ratio_odf1"])
            w.writerows(rows)


def plot(res, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    apps = sorted({a for a, _ in res})
    fig, axes = plt.subplots(len(apps), 2, figsize=(11, 3.8 * len(apps)), squeeze=False)
    markers = {2: "s", 4: "^", 8: "D", 27: "P", 64: "X"}
    for row, app in enumerate(apps):
        ax_m, ax_1 = axes[row]
        for (a, size), c in sorted(res.items()):
            if a != app:
                continue
            xs = [epc for _, epc, _ in c["tess"]]
            col = None
            if c["mpi1"]:
                ln = ax_m.plot(xs, [ms / c["mpi1"] for _, _, ms in c["tess"]], "o-",
                               label=f"size {size}")
                col = ln[0].get_color()
                for odf, epc, ms in c["tess"]:
                    ax_m.annotate(str(odf), (epc, ms / c["mpi1"]), fontsize=6,
                                  textcoords="offset points", xytext=(2, 3))
                for ranks, epc, ms in c["mpi"]:
                    if ranks == 1:
                        continue
                    ax_m.plot([epc], [ms / c["mpi1"]], markers.get(ranks, "*"), color=col,
                              markerfacecolor="none", markersize=8)
            if c["tess1"]:
                ax_1.plot(xs, [ms / c["tess1"] for _, _, ms in c["tess"]], "o-", color=col,
                          label=f"size {size}")
        for ranks, m in markers.items():
            if any(r == ranks for (a, _), c in res.items() if a == app for r, _, _ in c["mpi"]):
                ax_m.plot([], [], m, color="gray", markerfacecolor="none",
                          label=f"MPI on {ranks} ranks / 1")
        for ax, what in ((ax_m, "Tessera / MPI (1 rank)"), (ax_1, "Tessera / Tessera at ODF 1")):
            ax.axhline(LIMIT, color="k", ls="--", lw=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.invert_xaxis()
            ax.set_xlabel("elements per chare (MPI markers: per rank)")
            ax.set_ylabel("time per step, " + what)
            ax.set_title(f"{app}: {what} (labels: ODF)", fontsize=10)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
            ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot: {png}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("-o", "--png")
    ap.add_argument("--summary", help="write the ratios and crossings as CSV")
    a = ap.parse_args()
    t, meta = load(a.csv)
    if not t:
        sys.exit("grain-plot.py: no runs in " + " ".join(a.csv))
    res = curves(t, meta)
    summary(res, a.summary)
    if a.png:
        plot(res, a.png)


if __name__ == "__main__":
    main()
