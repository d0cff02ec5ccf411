#!/usr/bin/python3
"""fit-cost-model.py — the per-chare host cost model of docs/cost-model.md, fitted to the
grain-size sweeps: host µs per stream operation (kernel launch, copy, memset), per device
message and per entry, least squares on the host-bound runs; where each app's ratio crosses
1.10; a strong-scaling projection to 64 GPUs.

  fit-cost-model.py --sweep grain_lulesh.csv grain_minimd.csv grain_jacobi2d.csv \\
      --counts counts.csv [--mechanisms mechanisms.csv] [--table OUT.md] \\
      [--project lulesh:N minimd:N ...] [--gpus 1,2,...,64] [--odf 8]

Inputs: examples/common/grain-sweep.sh's CSVs (time per step of Tessera at each ODF on one
process x one PE, and of the MPI program on one rank), bench/finegrain/count-app-calls.sh's
CSV (per chare step of each app at each ODF: stream operations S, device messages M, entries
E, device bytes), and optionally bench/finegrain/run.sh's mechanisms.csv (bench_finegrain's
host µs per chare step for each mechanism).

The model (one process x one PE per GPU, C chares):
  host time per step   H(C) = C * (t_op * S(C) + t_msg * M(C) + t_ent * E(C))
  GPU time per step    G(N) = the MPI program's time per step on one rank (same kernels)
  Tessera              T(C) = max(G, H(C))   (the host issues ahead of the GPU until it is
                                              the bottleneck)
Fit: the runs with T / G >= --min-ratio (host-bound) give T = H, linear in (t_op, t_msg,
t_ent): non-negative least squares. Prediction: the C at which H(C) = 1.10 G, as elements
per chare N / C.
"""
import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict

LIMIT = 1.10
DIMS = {"lulesh": 3, "minimd": 3, "jacobi2d": 2}


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---- inputs ---------------------------------------------------------------------------------

def load_sweeps(paths):
    """{(app, size): {"N": elements, "mpi1": ms, "tess": {odf: (chares, ms)}}}"""
    runs = defaultdict(list)
    info = {}
    for p in paths:
        for r in read_csv(p):
            try:
                ms = float(r["ms_per_step"])
            except ValueError:
                continue
            key = (r["app"], int(r["size"]), r["program"], int(r["ranks"]), int(r["odf"]))
            runs[key].append(ms)
            info[key] = (int(r["elements"]), int(r["chares"]))
    out = {}
    for (app, size, prog, ranks, odf), v in runs.items():
        d = out.setdefault((app, size), {"N": info[(app, size, prog, ranks, odf)][0],
                                         "mpi1": None, "tess": {}})
        if prog == "mpi" and ranks == 1:
            d["mpi1"] = statistics.median(v)
        elif prog == "tess" and ranks == 1:
            d["tess"][odf] = (info[(app, size, prog, ranks, odf)][1], statistics.median(v))
    return out


class Counts:
    """Per app, the per-chare-step counts against ODF, interpolated in log ODF (clamped)."""

    def __init__(self, path):
        self.rows = defaultdict(list)
        for r in read_csv(path):
            self.rows[r["app"]].append({k: (float(v) if k != "app" else v) for k, v in r.items()})
        for v in self.rows.values():
            v.sort(key=lambda r: r["odf"])

    def has(self, app):
        return app in self.rows

    def get(self, app, odf, key):
        rows = self.rows[app]
        if odf <= rows[0]["odf"]:
            return rows[0][key]
        if odf >= rows[-1]["odf"]:
            return rows[-1][key]
        for a, b in zip(rows, rows[1:]):
            if a["odf"] <= odf <= b["odf"]:
                t = (math.log(odf) - math.log(a["odf"])) / (math.log(b["odf"]) - math.log(a["odf"]))
                return a[key] + t * (b[key] - a[key])
        return rows[-1][key]

    def sme(self, app, odf):
        return (self.get(app, odf, "stream_ops"), self.get(app, odf, "dev_msgs"),
                self.get(app, odf, "entries"))


# ---- the fit --------------------------------------------------------------------------------

def nnls(X, y):
    try:
        from scipy.optimize import nnls as sp_nnls
        import numpy as np
        x, _ = sp_nnls(np.array(X), np.array(y))
        return list(x)
    except ImportError:
        import numpy as np
        x, *_ = np.linalg.lstsq(np.array(X), np.array(y), rcond=None)
        return [max(0.0, v) for v in x]


def fit(sweeps, counts, min_ratio):
    """Returns (params [t_op, t_msg, t_ent] µs, the rows used, the matrix rank)."""
    import numpy as np
    X, y, used = [], [], []
    for (app, size), d in sorted(sweeps.items()):
        if not d["mpi1"] or not counts.has(app):
            continue
        for odf, (c, ms) in sorted(d["tess"].items()):
            if ms / d["mpi1"] < min_ratio:
                continue
            s, m, e = counts.sme(app, odf)
            # each row weighted by 1/T: relative residuals, so the slow runs do not dominate
            w = 1.0 / (ms * 1e3)
            X.append([c * s * w, c * m * w, c * e * w])
            y.append(1.0)
            used.append((app, size, odf, c, ms))
    if not X:
        return None, used, 0
    A = np.array(X)
    rank = int(np.linalg.matrix_rank(A, tol=1e-6 * max(1.0, np.abs(A).max())))
    fit.cond = float(np.linalg.cond(A / np.linalg.norm(A, axis=0))) if rank == 3 else float("inf")
    return nnls(X, y), used, rank


def host_us(counts, app, odf, p):
    s, m, e = counts.sme(app, odf)
    return odf * (p[0] * s + p[1] * m + p[2] * e)


def crossing_pred(counts, app, g_us, p, limit=LIMIT):
    """The chares per GPU at which H(C) = limit * G (C >= 1, on a log grid), or None."""
    prev = None
    for i in range(0, 1201):
        c = 10 ** (i / 200.0)  # 1 .. 1e6
        h = host_us(counts, app, c, p)
        if h >= limit * g_us:
            if prev is None:
                return 1.0
            # interpolate in log C between the grid points
            c0, h0 = prev
            t = (limit * g_us - h0) / (h - h0) if h != h0 else 0
            return math.exp(math.log(c0) + t * (math.log(c) - math.log(c0)))
        prev = (c, h)
    return None


def crossing_meas(d):
    """Measured: elements per chare where Tessera / MPI(1) passes LIMIT (log-interpolated)."""
    pts = sorted(((d["N"] / c, ms / d["mpi1"]) for c, ms in d["tess"].values()), reverse=True)
    if not pts or not d["mpi1"]:
        return None
    if pts[0][1] > LIMIT:
        return "ODF 1 above"
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if y1 > LIMIT >= y0:
            t = (LIMIT - y0) / (y1 - y0)
            return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
    return "not reached"


# ---- the projection -------------------------------------------------------------------------

def kernel_time_us(sweeps, app, n):
    """G at n elements on one GPU: log-log interpolation between the swept sizes' 1-rank MPI
    times; above the largest, proportional to n (a full GPU); below the smallest, the smallest
    segment's slope clamped to [0, 1] (a GPU that is not full does not get slower per element
    as the problem shrinks)."""
    pts = sorted((d["N"], d["mpi1"] * 1e3) for (a, _), d in sweeps.items()
                 if a == app and d["mpi1"])
    if not pts:
        return None
    if len(pts) == 1:
        return pts[0][1] * n / pts[0][0]
    if n >= pts[-1][0]:
        return pts[-1][1] * n / pts[-1][0]
    if n <= pts[0][0]:
        a, b = pts[0], pts[1]
        k = min(1.0, max(0.0, math.log(b[1] / a[1]) / math.log(b[0] / a[0])))
        return a[1] * (n / a[0]) ** k
    a, b = next((a, b) for a, b in zip(pts, pts[1:]) if a[0] <= n <= b[0])
    k = math.log(b[1] / a[1]) / math.log(b[0] / a[0])
    return a[1] * (n / a[0]) ** k


def project(sweeps, counts, p, app, N, gpus, odf, lat_us, gbs, out):
    rows = counts.rows[app]
    ref = rows[-1]  # the counted run with the most chares: the most interior-like chares
    epc_ref = ref["elements"] / ref["chares"]
    dim = DIMS[app]
    head = (f"\n### {app}: {N:.4g} elements in all, ODF {odf} on one process x one PE per GPU\n\n"
            "| GPUs | elements per GPU | G µs | H µs | net µs (MPI) | MPI µs | Tessera µs | "
            "Tessera, net overlapped | Tessera / MPI | speedup MPI | speedup Tessera |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    out.append(head)
    base_m = base_t = None
    for P in gpus:
        n = N / P
        g = kernel_time_us(sweeps, app, n)
        h = host_us(counts, app, odf, p)
        if P > 1:
            surf = (n / epc_ref) ** ((dim - 1) / dim)
            bytes_gpu = ref["dev_bytes"] * surf
            msgs_mpi = ref["dev_msgs"]
            net_m = lat_us * msgs_mpi + bytes_gpu / (gbs * 1e3)
            net_t = lat_us * msgs_mpi * odf ** ((dim - 1) / dim) + bytes_gpu / (gbs * 1e3)
        else:
            net_m = net_t = 0.0
        t_m = g + net_m
        t_t = max(g, h) + net_t
        t_o = max(g, h, net_t)
        base_m = base_m or t_m
        base_t = base_t or t_t
        out.append(f"| {P} | {n:.3g} | {g:.1f} | {h:.1f} | {net_m:.1f} | {t_m:.1f} | {t_t:.1f} | "
                   f"{t_o:.1f} | {t_t / t_m:.3f} | {base_m / t_m:.2f} | {base_t / t_t:.2f} |\n")


# ---- main -----------------------------------------------------------------------------------

def mechanism_table(path):
    rows = read_csv(path)
    out = ["\n### Host µs per chare step, per mechanism (bench_finegrain, 1 process x 1 PE, "
           "local)\n\n| mechanism | M | µs per chare step | launch | per message beyond the "
           "launch | entries | posts | runtime rest | raw |\n"
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"]
    for r in rows:
        out.append(f"| {r.get('mechanism', '')} | {r['m']} | {r['tess_us_per_step']} | "
                   f"{r['tess_launch_us']} | {r['tess_us_per_msg_xl']} | "
                   f"{r.get('tess_entry_us', '')} | {r.get('tess_post_us', '')} | "
                   f"{r.get('tess_rest_us', '')} | {r['raw_us_per_step']} |\n")
    return out


def calls_table(path):
    """The single CUDA calls and the chare step as calls and as a graph replay (µs each)."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.endswith("us per call"):
                name, v = line[:-len("us per call")].rsplit(None, 1)
                rows.append((name.strip(), v))
    if not rows:
        return ["\n(no --calls figures in " + path + ")\n"]
    out = ["\n### Host µs per CUDA call (bench_finegrain --calls, 8 streams round robin)\n\n"
           "| call | host µs |\n| --- | --- |\n"]
    out += [f"| {n} | {v} |\n" for n, v in rows]
    return out


def self_test(counts_path):
    """Sweeps made from the model itself with known costs (every app of the counts, three sizes,
    ODF 1-64): the fit must give the costs back and the crossings the model's own. Returns the
    exit status."""
    truth = [2.5, 4.0, 1.5]
    counts = Counts(counts_path)
    sweeps = {}
    for app in sorted(counts.rows):
        for k, n in enumerate((2e5, 2e6, 2e7)):
            g = n * 1e-3 * (1 + 0.1 * k)  # µs: 1 ns an element, a little dearer when larger
            d = {"N": n, "mpi1": g / 1e3, "tess": {}}
            for odf in (1, 2, 4, 8, 16, 27, 64):
                d["tess"][odf] = (odf, max(g, host_us(counts, app, odf, truth)) / 1e3)
            sweeps[(app, k)] = d
    p, used, rank = fit(sweeps, counts, 1.3)
    bad = 0
    if p is None or rank < 3:
        print(f"self-test: no full-rank fit (rank {rank}, {len(used)} runs)")
        return 1
    for name, got, want in zip(("t_op", "t_msg", "t_ent"), p, truth):
        ok = abs(got - want) <= 0.01 * want
        bad += not ok
        print(f"self-test: {name} fitted {got:.4f}, true {want:.4f}: {'ok' if ok else 'WRONG'}")
    for (app, k), d in sorted(sweeps.items()):
        c = crossing_pred(counts, app, d["mpi1"] * 1e3, p)
        c0 = crossing_pred(counts, app, d["mpi1"] * 1e3, truth)
        if c0 is None:
            continue
        # the crossing is where the host's time is 1.10 x the GPU's
        r0 = host_us(counts, app, c0, truth) / (d["mpi1"] * 1e3)
        ok = c is not None and abs(c - c0) <= 0.02 * c0 and (c0 == 1.0 or abs(r0 - LIMIT) <= 0.002)
        bad += not ok
        print(f"self-test: {app} size {k}: crossing at {c:.4g} chares, the true model's {c0:.4g} "
              f"(H / G there {r0:.4f}): {'ok' if ok else 'WRONG'}")
    print(f"self-test: {len(used)} host-bound runs fitted, {'FAILED' if bad else 'passed'}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true",
                    help="fit sweeps made by the model with known costs (no other input needed)")
    ap.add_argument("--sweep", nargs="+")
    ap.add_argument("--counts")
    ap.add_argument("--mechanisms")
    ap.add_argument("--calls", help="bench_finegrain --calls output (calls.txt): the graph replay")
    ap.add_argument("--min-ratio", type=float, default=1.3,
                    help="runs at least this much slower than MPI(1) are host-bound (1.3)")
    ap.add_argument("--table", help="write the generated tables (markdown) here")
    ap.add_argument("--project", nargs="*", default=None,
                    help="APP:ELEMENTS global problems to project (default: each app's largest "
                         "swept problem x 8)")
    ap.add_argument("--gpus", default="1,2,4,8,16,32,64")
    ap.add_argument("--odf", type=float, default=8)
    ap.add_argument("--net-latency-us", type=float, default=5.0,
                    help="assumed host-visible cost of one message between GPUs of different "
                         "nodes (5 µs)")
    ap.add_argument("--net-gbs", type=float, default=25.0,
                    help="assumed network bandwidth per GPU, GB/s (25: one 200 Gb/s NIC)")
    a = ap.parse_args()
    if a.self_test:
        import os
        try:
            import numpy  # noqa: F401
        except ImportError:
            print("self-test: skipped (no numpy for /usr/bin/python3)")
            sys.exit(77)
        sys.exit(self_test(a.counts or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "app-counts.csv")))
    if not a.sweep or not a.counts:
        ap.error("--sweep and --counts are needed (or --self-test)")

    sweeps = load_sweeps(a.sweep)
    counts = Counts(a.counts)
    p, used, rank = fit(sweeps, counts, a.min_ratio)
    out = ["<!-- generated by bench/finegrain/fit-cost-model.py; do not edit -->\n",
           f"Fitted on {len(used)} host-bound runs (Tessera / MPI(1) >= {a.min_ratio}) of "
           f"{len({u[0] for u in used})} apps; design matrix rank {rank} of 3.\n\n"]
    if p is None:
        print("fit-cost-model.py: no host-bound run to fit (lower --min-ratio?)", file=sys.stderr)
        sys.exit(1)
    if rank < 3:
        out.append("**The counts of the runs used do not separate the three costs (rank < 3):** "
                   "the split between them is not determined, only their sum along the apps' "
                   "mixes.\n\n")
    out.append("| cost | fitted host µs |\n| --- | --- |\n")
    for name, v in zip(("per stream operation (launch, copy, memset)", "per device message",
                        "per entry"), p):
        out.append(f"| {name} | {v:.3f} |\n")
    out.append(f"| per device message with its entry | {p[1] + p[2]:.3f} |\n")
    cond = getattr(fit, "cond", float("inf"))
    out.append(f"\nCondition number of the (column-normalised) system: {cond:.3g}. Entries "
               "outnumber messages only by the continuations and reduction callbacks, so the "
               "split between a message and its entry is the least determined part; their sum "
               "is the figure to use.\n")
    # residuals
    res = []
    for app, size, odf, c, ms in used:
        pred = host_us(counts, app, odf, p) / 1e3
        res.append((pred - ms) / ms)
    if res:
        rms = math.sqrt(sum(r * r for r in res) / len(res))
        out.append(f"\nRelative error of the fitted H on the runs used: rms {rms:.3f}, worst "
                   f"{max(res, key=abs):+.3f}.\n")

    out.append("\n### Where Tessera / MPI(1) crosses 1.10 (elements per chare)\n\n"
               "| app | size | elements | MPI(1) ms | predicted chares per GPU | predicted "
               "elements per chare | measured elements per chare |\n"
               "| --- | --- | --- | --- | --- | --- | --- |\n")
    for (app, size), d in sorted(sweeps.items()):
        if not d["mpi1"] or not counts.has(app):
            continue
        c = crossing_pred(counts, app, d["mpi1"] * 1e3, p)
        m = crossing_meas(d)
        ms = m if isinstance(m, str) or m is None else f"{m:.4g}"
        pc = "-" if c is None else f"{c:.3g}"
        pe = "-" if c is None else f"{d['N'] / c:.4g}"
        out.append(f"| {app} | {size} | {d['N']} | {d['mpi1']:.4g} | {pc} | {pe} | {ms or '-'} |\n")

    gpus = [int(x) for x in a.gpus.split(",")]
    projects = a.project
    if projects is None:
        projects = []
        for app in ("lulesh", "minimd"):
            ns = [d["N"] for (x, _), d in sweeps.items() if x == app]
            if ns and counts.has(app):
                projects.append(f"{app}:{max(ns) * 8}")
    if projects:
        out.append("\n### Strong scaling, projected (not measured)\n\nAssumptions: "
                   "docs/cost-model.md; network "
                   f"{a.net_latency_us} µs a message, {a.net_gbs} GB/s a GPU.\n")
    for spec in projects:
        app, n = spec.split(":")
        if not counts.has(app) or kernel_time_us(sweeps, app, 1) is None:
            print(f"fit-cost-model.py: no sweep or counts for {app}", file=sys.stderr)
            continue
        project(sweeps, counts, p, app, float(n), gpus, a.odf, a.net_latency_us, a.net_gbs, out)
    if a.mechanisms:
        out += mechanism_table(a.mechanisms)
    if a.calls:
        out += calls_table(a.calls)
    text = "".join(out)
    print(text)
    if a.table:
        with open(a.table, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
