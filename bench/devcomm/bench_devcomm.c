/*
 * bench_devcomm — device-message latency, bandwidth, overdecomposed exchange and
 * communication-computation overlap, each against its raw baseline measured in the same run.
 *
 *   mpirun -np 1 bench_devcomm +ppn 2                        d2d (two PEs of one process)
 *   TESS_IPC=staged|direct mpirun -np 2 bench_devcomm        ipc (two processes of a node)
 *   TESS_VNODE_SIZE=1 mpirun -np 2 bench_devcomm             rdma (two virtual nodes)
 *
 * Options: --csv-dir DIR (appends DIR/latbw.csv, DIR/odf.csv, DIR/goals.csv), --quick,
 * --reps N, --target-ms MS (time of one repetition of one point), --min-size BYTES,
 * --max-size BYTES (latbw: the message sizes measured),
 * --max-volume BYTES, --what latbw,exchange,overlap (lat or bw: that half of latbw alone, no
 * goals), --expect PATH (fail unless the runtime
 * takes that path: d2d, ipc-staged, ipc-direct, rdma-staged, rdma-direct; rdma: either),
 * --budget-s S (skip the points that would start after S seconds of measuring).
 *
 * latbw: for sizes 8 B … 64 MiB, the one-way latency of a ping-pong (entry registered with
 * WAIT_COMPLETE: runs once the data is in place; "latency-so": stream-ordered delivery, the
 * entry runs once the copy is enqueued; on the direct RDMA path also "lat-ready": as
 * "latency", each entry sending the data it got on as TESS_STREAM_READY, which it is) against
 * raw copies completed one at a time; and
 * the bandwidth of a stream of messages with a window in flight (source-done callbacks recycle
 * the buffers) against raw copies back to back on one stream. exchange: a fixed volume split
 * over ODF sender/receiver pairs, there and back, time per exchange; overlap: the same with an
 * O(n) kernel after each receive. Every repetition runs the baseline and Tessera back to back
 * and medians of --reps are reported; the goals (for the H200) are printed PASS/MISS.
 */
#include "dcb.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

dcb_cfg_t dcb;

static const char *labels[] = {"d2d", "ipc-staged", "ipc-direct", "rdma-staged", "rdma-direct"};

static FILE *csv_latbw, *csv_odf, *csv_goals;

/* ---- helpers ---------------------------------------------------------------------------------- */

double dcb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dcb_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

_Noreturn void dcb_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_devcomm (rank %d): ", dcb.rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

int dcb_iters(double per, double target, int lo, int hi)
{
    double n = per > 0 ? target / per : hi;
    if (n < lo)
        return lo;
    if (n > hi)
        return hi;
    return (int)n;
}

static const char *size_text(size_t s, char *buf, size_t len)
{
    if (s >= (1u << 20) && s % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", s >> 20);
    else if (s >= 1024 && s % 1024 == 0)
        snprintf(buf, len, "%zuK", s >> 10);
    else
        snprintf(buf, len, "%zuB", s);
    return buf;
}

static size_t parse_size(const char *s)
{
    char  *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return (size_t)v;
}

static FILE *open_csv(const char *dir, const char *name, const char *header)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "a");
    if (!f)
        dcb_die("cannot open %s", path);
    if (ftell(f) == 0)
        fprintf(f, "%s\n", header);
    return f;
}

/* ---- configuration -------------------------------------------------------------------------- */

static size_t sizes[16];
static int    nsizes;
static size_t volumes[8];
static int    nvolumes;
static int    odfs[8];
static int    nodfs;

static size_t window_of(size_t size)
{
    if (size < (16u << 20))
        return 8;
    size_t w = (64u << 20) / size;
    return w < 2 ? 2 : w;
}

static void make_config(size_t min_size, size_t max_size, size_t max_volume)
{
    static const size_t full[] = {8, 64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                  1 << 20, 4 << 20, 16 << 20, 64 << 20};
    static const size_t quick[] = {8, 4 << 10, 256 << 10};
    static const size_t vfull[] = {256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    static const size_t vquick[] = {256 << 10, 1 << 20};
    const size_t *s  = dcb.quick ? quick : full;
    int           ns = dcb.quick ? 3 : 12;
    for (int i = 0; i < ns; i++)
        if (s[i] >= min_size && s[i] <= max_size)
            sizes[nsizes++] = s[i];
    const size_t *v  = dcb.quick ? vquick : vfull;
    int           nv = dcb.quick ? 2 : 5;
    for (int i = 0; i < nv; i++)
        if (v[i] <= max_volume)
            volumes[nvolumes++] = v[i];
    for (int o = 1; o <= DCB_ODF_MAX; o *= dcb.quick ? 4 : 2)
        odfs[nodfs++] = o;
}

/* ---- time budget ------------------------------------------------------------------------------ */

static double t_start, budget_s;
static int    skipped;

/* Rank 0's word on whether the run is out of time (then the remaining points are skipped, so
 * that a run under a timeout ends cleanly with what it measured). Collective. */
static int over_budget(void)
{
    int over = budget_s > 0 && dcb_now() - t_start > budget_s;
    MPI_Bcast(&over, 1, MPI_INT, 0, MPI_COMM_WORLD);
    skipped += over;
    return over;
}

/* ---- latency and bandwidth ------------------------------------------------------------------ */

typedef struct point {
    size_t size;
    double raw, tess; /* medians: us for latency, GB/s for bandwidth */
} point_t;

static point_t lat_pts[16], so_pts[16], rdy_pts[16], bw_pts[16];

static void report_latbw(const char *metric, size_t size, size_t window, int iters, double raw,
                         double tess, const char *unit)
{
    if (dcb.rank != 0)
        return;
    char sz[32];
    printf("%-11s %-10s %6s  %-20s %11.4g  tessera %11.4g %-4s  tess/raw %6.2f\n", dcb.label,
           metric, size_text(size, sz, sizeof(sz)), dcb_raw_name(), raw, tess, unit, tess / raw);
    fflush(stdout);
    if (csv_latbw)
        fprintf(csv_latbw, "%s,%s,%zu,%zu,%d,%s,%.4f,%.4f,%s,%.4f\n", dcb.label, metric, size,
                window, iters, dcb_raw_name(), raw, tess, unit, tess / raw);
    if (csv_latbw)
        fflush(csv_latbw); /* a run stopped by its timeout keeps what it measured */
}

/* Direct RDMA: how often the receivers asked the device whether their stream had reached the
 * delivery point (1.5-2 us each with CUDA), per message since the counts c0, and the share of
 * receives that knew without asking then (the others asked on the message's path); the active
 * messages both processes posted to UCX per message (announcements, acknowledgements and the
 * few host messages of the measurement) and the acknowledgements per message. */
static void report_questions(const char *metric, size_t size, const uint64_t c0[DCB_RDMA_COUNTS])
{
    uint64_t c1[DCB_RDMA_COUNTS];
    dcb_tess_rdma_counts(c1);
    char   sz[32];
    double n = (double)(c1[0] - c0[0]);
    if (dcb.rank == 0 && n > 0)
        printf("# %-9s %-10s %6s: %.2f questions about the receiving stream a message, "
               "%.0f%% of receives knew it idle without one; %.2f active messages a message, "
               "%.2f acknowledgements a message\n", dcb.label, metric,
               size_text(size, sz, sizeof(sz)), (double)(c1[1] - c0[1]) / n,
               100.0 * (double)(c1[2] - c0[2]) / n, (double)(c1[3] - c0[3]) / n,
               (double)(c1[4] - c0[4]) / n);
}

static void latency_point(size_t size, int wait_complete, point_t *out)
{
    double base[64], tess[64];
    /* Warm up (mappings, registrations) and estimate. */
    dcb_tess_latency(size, 3, wait_complete);
    double est   = dcb_tess_latency(size, 3, wait_complete);
    int    iters = dcb_iters(2 * est, dcb.target_s, 2, 200000);
    double rest  = dcb_raw_latency(size, 3);
    int    riters = dcb_iters(rest, dcb.target_s, 3, 400000);
    uint64_t c0[DCB_RDMA_COUNTS] = {0};
    if (dcb.path == DCB_RDMA_DIRECT)
        dcb_tess_rdma_counts(c0);
    for (int r = 0; r < dcb.reps; r++) {
        base[r] = dcb_raw_latency(size, riters) * 1e6;
        tess[r] = dcb_tess_latency(size, iters, wait_complete) * 1e6;
    }
    out->size = size;
    out->raw  = dcb_median(base, dcb.reps);
    out->tess = dcb_median(tess, dcb.reps);
    const char *metric = wait_complete == 2 ? "lat-ready" : wait_complete ? "latency" : "latency-so";
    report_latbw(metric, size, 1, iters, out->raw, out->tess, "us");
    if (dcb.path == DCB_RDMA_DIRECT)
        report_questions(metric, size, c0);
}

static void stream_point(size_t size, point_t *out)
{
    double base[64], tess[64];
    int    w    = (int)window_of(size);
    dcb_tess_stream(size, w, 2 * w, 1);
    double est  = dcb_tess_stream(size, w, 2 * w, 0);
    int    msgs = dcb_iters(est, dcb.target_s, 2 * w, 200000);
    double rest = dcb_raw_stream(size, w, 2 * w);
    int    rmsg = dcb_iters(rest, dcb.target_s, 2 * w, 400000);
    uint64_t c0[DCB_RDMA_COUNTS] = {0};
    if (dcb.path == DCB_RDMA_DIRECT)
        dcb_tess_rdma_counts(c0);
    for (int r = 0; r < dcb.reps; r++) {
        base[r] = size / dcb_raw_stream(size, w, rmsg) * 1e-9;
        tess[r] = size / dcb_tess_stream(size, w, msgs, r == 0) * 1e-9;
    }
    out->size = size;
    out->raw  = dcb_median(base, dcb.reps);
    out->tess = dcb_median(tess, dcb.reps);
    report_latbw("bandwidth", size, (size_t)w, msgs, out->raw, out->tess, "GB/s");
    if (dcb.path == DCB_RDMA_DIRECT)
        report_questions("bandwidth", size, c0);
}

/* ---- goals ------------------------------------------------------------------------------------ */

static void goal(const char *what, size_t size, double measured, double target, int higher)
{
    if (dcb.rank != 0)
        return;
    int  ok = higher ? measured >= target : measured <= target;
    char sz[32];
    printf("GOAL %-11s %-36s at %5s: %6.3f (%s %.2f)  %s%s\n", dcb.label, what,
           size_text(size, sz, sizeof(sz)), measured, higher ? ">=" : "<=", target,
           ok ? "PASS" : "MISS",
           tess_gpu_backend() == TESS_GPU_CUDA ? "" : "  (not the target machine: host backend)");
    if (csv_goals)
        fprintf(csv_goals, "%s,%s,%zu,%.4f,%s%.2f,%s,%s\n", dcb.label, what, size, measured,
                higher ? ">=" : "<=", target, ok ? "PASS" : "MISS", tess_gpu_backend_name());
    if (csv_goals)
        fflush(csv_goals);
}

/* The worst tess/raw bandwidth ratio at sizes >= 16 MiB (or at the largest size measured). */
static double worst_bw_ratio(size_t *at)
{
    double worst = INFINITY;
    for (int i = 0; i < nsizes; i++)
        if (bw_pts[i].size >= (16u << 20) && bw_pts[i].tess / bw_pts[i].raw < worst) {
            worst = bw_pts[i].tess / bw_pts[i].raw;
            *at   = bw_pts[i].size;
        }
    if (worst == INFINITY) {
        *at   = bw_pts[nsizes - 1].size;
        worst = bw_pts[nsizes - 1].tess / bw_pts[nsizes - 1].raw;
    }
    return worst;
}

static void goals(void)
{
    size_t at = 0;
    double bw = worst_bw_ratio(&at);
    double lat = lat_pts[0].tess / lat_pts[0].raw;
    switch (dcb.path) {
    case DCB_D2D:
        goal("bandwidth tess/raw (worst at >=16M)", at, bw, 0.95, 1);
        goal("latency tess/raw", lat_pts[0].size, lat, 1.2, 0);
        break;
    case DCB_IPC_DIRECT:
        goal("bandwidth tess/raw-ipc (worst at >=16M)", at, bw, 0.9, 1);
        goal("latency tess/raw-ipc-copy", lat_pts[0].size, lat, 2.0, 0);
        break;
    case DCB_IPC_STAGED:
        goal("bandwidth tess/raw-ipc (worst at >=16M)", at, bw, 0.45, 1);
        goal("latency tess/raw-ipc-copy", lat_pts[0].size, lat, 2.0, 0);
        break;
    case DCB_RDMA_DIRECT: /* against ucp_get of device memory (UCX with CUDA transports) */
        goal("bandwidth tess/raw-get (worst at >=16M)", at, bw, 0.9, 1);
        goal("latency tess/raw-get", lat_pts[0].size, lat, 1.5, 0);
        goal("latency tess/raw-get, sends marked ready", rdy_pts[0].size,
             rdy_pts[0].tess / rdy_pts[0].raw, 1.5, 0);
        break;
    default:
        if (dcb.rank == 0)
            printf("GOAL %-11s (none set for this path)\n", dcb.label);
        break;
    }
}

/* ---- exchange and overlap -------------------------------------------------------------------- */

static void exchange_point(size_t volume, int odf, int kernel)
{
    double base[64], tess[64];
    dcb_tess_exchange(volume, odf, 2, kernel);
    double est   = dcb_tess_exchange(volume, odf, 2, kernel);
    int    iters = dcb_iters(est, dcb.target_s, 2, 100000);
    double rest  = dcb_raw_exchange(volume, odf, 2, kernel);
    int    riter = dcb_iters(rest, dcb.target_s, 2, 100000);
    for (int r = 0; r < dcb.reps; r++) {
        base[r] = dcb_raw_exchange(volume, odf, riter, kernel) * 1e6;
        tess[r] = dcb_tess_exchange(volume, odf, iters, kernel) * 1e6;
    }
    double mb = dcb_median(base, dcb.reps), mt = dcb_median(tess, dcb.reps);
    if (dcb.rank != 0)
        return;
    const char *metric = kernel ? "overlap" : "exchange";
    char        sz[32];
    printf("%-11s %-9s %5s odf %2d  %-20s %10.2f  tessera %10.2f us  tess/raw %6.2f\n",
           dcb.label, metric, size_text(volume, sz, sizeof(sz)), odf, dcb_raw_name(), mb, mt,
           mt / mb);
    fflush(stdout);
    if (csv_odf)
        fprintf(csv_odf, "%s,%s,%zu,%d,%zu,%d,%s,%.3f,%.3f,%.4f\n", dcb.label, metric, volume, odf,
                volume / (size_t)odf, iters, dcb_raw_name(), mb, mt, mt / mb);
    if (csv_odf)
        fflush(csv_odf);
}

/* ---- main ------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &dcb.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &dcb.nprocs);
    /* One stream per element of the exchange array, so that no two pairs share one. */
    tess_params_t params = {.field_mask = TESS_PARAM_FIELD_STREAMS, .streams = 2 * DCB_ODF_MAX + 4};
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, &params) != TESS_OK)
        dcb_die("tess_init: %s", tess_error_detail());

    const char *csv_dir = NULL, *what = "latbw,exchange,overlap", *expect = NULL;
    size_t      min_size = 0, max_size = 64u << 20, max_volume = 64u << 20;
    double      target_ms = -1;
    dcb.reps = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick"))
            dcb.quick = 1;
        else if (!strcmp(a, "--csv-dir") && v)
            csv_dir = argv[++i];
        else if (!strcmp(a, "--reps") && v)
            dcb.reps = atoi(argv[++i]);
        else if (!strcmp(a, "--target-ms") && v)
            target_ms = atof(argv[++i]);
        else if (!strcmp(a, "--min-size") && v)
            min_size = parse_size(argv[++i]);
        else if (!strcmp(a, "--max-size") && v)
            max_size = parse_size(argv[++i]);
        else if (!strcmp(a, "--max-volume") && v)
            max_volume = parse_size(argv[++i]);
        else if (!strcmp(a, "--what") && v)
            what = argv[++i];
        else if (!strcmp(a, "--expect") && v)
            expect = argv[++i];
        else if (!strcmp(a, "--budget-s") && v)
            budget_s = atof(argv[++i]);
        else
            dcb_die("unknown option %s (see the comment at the top of bench_devcomm.c)", a);
    }
    if (dcb.reps < 1 || dcb.reps > 64)
        dcb.reps = dcb.quick ? 3 : 5;
    dcb.target_s = (target_ms > 0 ? target_ms : dcb.quick ? 3 : 20) * 1e-3;
    if (tess_num_pes() != 2)
        dcb_die("needs exactly 2 PEs: -np 1 with +ppn 2, or -np 2 with +ppn 1");
    make_config(min_size, max_size, max_volume);
    if (!nsizes || !nvolumes)
        dcb_die("--min-size / --max-size / --max-volume leave nothing to measure");

    size_t cap = 0;
    for (int i = 0; i < nsizes; i++)
        if (window_of(sizes[i]) * sizes[i] > cap)
            cap = window_of(sizes[i]) * sizes[i];
    size_t odf_cap = volumes[nvolumes - 1];
    dcb_tess_init(cap, odf_cap);

    /* Which path does the runtime take here? One small ping-pong tells. */
    dcb.label = "?";
    dcb_tess_latency(64, 2, 1);
    dcb.path = dcb_tess_path_taken();
    if (dcb.path < 0)
        dcb_die("the messages did not all take one path (TESS_IPC/TESS_RDMA mixed?)");
    dcb.label = labels[dcb.path];
    if (expect && strcmp(expect, dcb.label) && !(!strcmp(expect, "rdma") && dcb.path >= 3))
        dcb_die("expected the %s path, but the runtime took %s", expect, dcb.label);
    dcb_raw_init(cap > odf_cap ? cap : odf_cap);
    if (csv_dir && dcb.rank == 0 && (strstr(what, "lat") || strstr(what, "bw"))) {
        csv_latbw = open_csv(csv_dir, "latbw.csv",
                             "path,metric,size,window,iters,baseline,raw,tessera,unit,ratio");
        csv_goals = open_csv(csv_dir, "goals.csv",
                             "path,goal,size,measured,target,verdict,backend");
    }
    if (csv_dir && dcb.rank == 0 && (strstr(what, "exchange") || strstr(what, "overlap")))
        csv_odf = open_csv(csv_dir, "odf.csv", "path,metric,volume,odf,chunk,iters,baseline,"
                                               "raw_us,tessera_us,ratio");
    if (dcb.rank == 0) {
        printf("# bench_devcomm: path %s, %s backend, %d process(es) x %d PE(s), %d reps, "
               "%.0f ms per point and repetition; baseline %s\n", dcb.label,
               tess_gpu_backend_name(), dcb.nprocs, tess_ppn(), dcb.reps, dcb.target_s * 1e3,
               dcb_raw_name());
        if (dcb.path == DCB_RDMA_STAGED)
            printf("# rdma-staged: the runtime stages through pinned host buffers (UCX cannot "
                   "reach this device memory, or TESS_RDMA=staged), and so does the raw "
                   "baseline: device-to-host, "
                   "ucp_get of host memory, host-to-device, each stage timed alone (latency: "
                   "their sum; stream and exchange: the slowest stage, a perfect pipeline)\n");
        fflush(stdout);
    }

    t_start = dcb_now();
    /* "latbw": both; "lat" or "bw" alone: that half (no goals). */
    int do_lat = strstr(what, "lat") != NULL, do_bw = strstr(what, "bw") != NULL;
    if (do_lat || do_bw) {
        int n = 0;
        for (; n < nsizes && !over_budget(); n++) {
            if (do_lat) {
                latency_point(sizes[n], 1, &lat_pts[n]);
                latency_point(sizes[n], 0, &so_pts[n]);
                if (dcb.path == DCB_RDMA_DIRECT) /* where a send asks the device about its stream */
                    latency_point(sizes[n], 2, &rdy_pts[n]);
            }
            if (do_bw)
                stream_point(sizes[n], &bw_pts[n]);
        }
        nsizes = n;
        if (n && do_lat && do_bw)
            goals();
    }
    for (int kernel = 0; kernel < 2; kernel++) {
        if (!strstr(what, kernel ? "overlap" : "exchange"))
            continue;
        for (int v = 0; v < nvolumes; v++)
            for (int o = 0; o < nodfs; o++)
                if (volumes[v] / (size_t)odfs[o] >= 4096 && !over_budget())
                    exchange_point(volumes[v], odfs[o], kernel);
    }
    if (skipped && dcb.rank == 0)
        printf("# %s: out of the %.1f s budget: %d point(s) skipped\n", dcb.label, budget_s,
               skipped);

    int taken = dcb_tess_path_taken();
    if (taken != dcb.path)
        dcb_die("some messages left the %s path during the run", dcb.label);
    if (csv_latbw)
        fclose(csv_latbw);
    if (csv_odf)
        fclose(csv_odf);
    if (csv_goals)
        fclose(csv_goals);
    dcb_raw_fini();
    dcb_tess_fini();
    tess_finalize();
    MPI_Finalize();
    return 0;
}
