/*
 * bench_launch — rate of kernel launches against chares per PE (the paper's "rate of kernel
 * launches vs chares per thread"), against raw CUDA measured in the same run.
 *
 *   mpirun -np 1 bench_launch +ppn T [--chares 1,2,4,8,16] [--time 0.2] [--reps 5]
 *                              [--csv FILE] [--tag TEXT] [--goal 0.9] [--breakdown]
 *   mpirun -np P bench_launch +ppn 1 …      P processes on one GPU (with or without MPS)
 *
 * Tessera: C chares on each of the T PEs of each process. Each launches an empty kernel that
 * occupies every SM (<<<SMs, 32>>>, empty body) on its own stream and asks for a continuation
 * (tess_gpu_then); the continuation launches the next kernel, until `time` seconds have passed.
 * Raw CUDA: T threads per process, each driving C chains (launch the same kernel on the
 * chain's own stream, record an event, launch the next once cudaEventQuery says it completed),
 * polling all its chains round-robin. Both count kernels completed over the time from the start
 * to the last chain's stop; with several processes the rates of all processes add up.
 * Every repetition runs raw and Tessera back to back; medians of REPS are reported with the
 * ratio tessera/raw and PASS/MISS against the goal (tessera >= goal x raw).
 *
 * On the host backend (no GPU) the "kernel" is an empty host function (tess_gpu_launch_host)
 * and the raw chains drive the chares' own streams directly through the public API.
 *
 * --breakdown: after each point, where rank 0's host time per kernel went, raw against Tessera:
 * the launch call, arming the completion (raw: cudaEventRecord; Tessera: tess_gpu_then), the
 * raw event queries, and the rest (raw: its loop; Tessera: the scheduler, its event polling and
 * the dispatch of the continuation). CUDA only; the timing itself lowers both rates a little.
 *
 * Output (rank 0): a table on stdout, one CSV line per point to --csv FILE (header if new).
 */
#include "../gpu/gpu_bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROG       "bench_launch"
#define MAX_POINTS 16
#define STREAMS    256 /* stream pool: every chare its own stream up to 16 PEs x 16 chares */

static tess_array_h arr;
static tess_entry_t E_GO, E_NEXT;
static int          rank, nprocs, ppn, cmax, chares;
static double       seconds, t0_ns, deadline_ns;
static uint64_t     run_tag;

typedef struct launch_elem {
    int64_t count;
    double  last_ns;
} launch_elem_t;

/* Chares cmax*p … cmax*(p+1)-1 on PE p; a point with C chares uses the first C of each PE. */
static int launch_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext; (void)npes; (void)arg;
    return i.x / cmax;
}

static int active(tess_ctx_h ctx) { return tess_ctx_linear(ctx) % cmax < chares; }

static void fire(tess_ctx_h ctx)
{
    if (bg_split_on) {
        double t0 = bg_now_ns();
        int    rc = bg_launch(tess_ctx_stream(ctx));
        double t1 = bg_now_ns();
        if (rc)
            bg_die(PROG, "launch", bg_error());
        if (tess_gpu_then(ctx, E_NEXT, NULL, 0) != TESS_OK)
            bg_die(PROG, "tess_gpu_then", tess_error_detail());
        bg_split_add(&bg_split.launch_ns, t0, t1);
        bg_split_add(&bg_split.arm_ns, t1, bg_now_ns());
        atomic_fetch_add_explicit(&bg_split.kernels, 1, memory_order_relaxed);
        return;
    }
    if (bg_launch(tess_ctx_stream(ctx)))
        bg_die(PROG, "launch", bg_error());
    if (tess_gpu_then(ctx, E_NEXT, NULL, 0) != TESS_OK)
        bg_die(PROG, "tess_gpu_then", tess_error_detail());
}

/* Every chare contributes once per run; the reduction's return ends the phase. */
static void finish(tess_ctx_h ctx)
{
    int32_t one = 1;
    if (tess_contribute(ctx, run_tag, &one, 1, TESS_INT32, TESS_SUM, tess_cb_return()) !=
        TESS_OK)
        bg_die(PROG, "tess_contribute", tess_error_detail());
}

static void on_go(tess_ctx_h ctx, void *elem, const void *msg, size_t size)
{
    (void)msg; (void)size;
    launch_elem_t *e = elem;
    e->count         = 0;
    e->last_ns       = 0;
    if (!active(ctx)) {
        finish(ctx);
        return;
    }
    fire(ctx);
}

static void on_next(tess_ctx_h ctx, void *elem, const void *msg, size_t size)
{
    (void)msg; (void)size;
    launch_elem_t *e = elem;
    e->count++;
    double now = bg_now_ns();
    if (now < deadline_ns) {
        fire(ctx);
        return;
    }
    e->last_ns = now;
    finish(ctx);
}

/* PE 0 of each process starts its own chares. */
static void launch_start(void *arg)
{
    (void)arg;
    t0_ns       = bg_now_ns();
    deadline_ns = t0_ns + seconds * 1e9;
    int64_t first = (int64_t)rank * ppn * cmax;
    for (int64_t i = first; i < first + (int64_t)ppn * cmax; i++)
        tess_send(arr, tess_idx1((int32_t)i), E_GO, NULL, 0);
}

typedef struct acc {
    int64_t count;
    double  last_ns;
} acc_t;

static void acc_elem(tess_ctx_h ctx, void *elem, void *arg)
{
    launch_elem_t *e = elem;
    acc_t         *a = arg;
    if (!active(ctx))
        return;
    a->count += e->count;
    if (e->last_ns > a->last_ns)
        a->last_ns = e->last_ns;
}

static double tess_rate(double secs)
{
    seconds = secs;
    run_tag++;
    MPI_Barrier(MPI_COMM_WORLD);
    if (tess_run(TESS_RUN_UNTIL_EXIT, launch_start, NULL) != TESS_OK)
        bg_die(PROG, "tess_run", tess_error_detail());
    acc_t a = {0, 0};
    tess_array_foreach(arr, acc_elem, &a);
    double mine = a.last_ns > t0_ns ? (double)a.count / ((a.last_ns - t0_ns) * 1e-9) : 0, sum;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

/* --breakdown: the split of one run (bg_split since its reset) added to acc[5]: launch, arm and
 * poll nanoseconds, polls, kernels. */
static void split_acc(double acc[5])
{
    acc[0] += (double)atomic_load(&bg_split.launch_ns);
    acc[1] += (double)atomic_load(&bg_split.arm_ns);
    acc[2] += (double)atomic_load(&bg_split.poll_ns);
    acc[3] += (double)atomic_load(&bg_split.polls);
    acc[4] += (double)atomic_load(&bg_split.kernels);
}

/* One line of --breakdown (rank 0), per kernel in microseconds; `rate` is the mean rate of the
 * runs, so 1/rate per thread is the host time one thread (a PE or a raw thread) spends on a
 * kernel, and the rest is that time less the calls timed. */
static void print_split(const char *who, const char *arm, const double acc[5], double rate)
{
    double k = acc[4];
    if (rank != 0 || k == 0 || rate <= 0)
        return;
    double thread_us = 1e6 * ppn * nprocs / rate;
    double launch = acc[0] * 1e-3 / k, armed = acc[1] * 1e-3 / k, poll = acc[2] * 1e-3 / k;
    printf("  split %-7s %6.2f us/kernel = launch %5.2f + %s %5.2f", who, thread_us, launch,
           arm, armed);
    if (acc[3] > 0)
        printf(" + queries %5.2f (%.1f per kernel)", poll, acc[3] / k);
    printf(" + rest %5.2f\n", thread_us - launch - armed - poll);
}

static double raw_rate(bg_raw_t *raw, double secs)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double mine = bg_raw_rate(raw, chares, secs), sum;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

/* The host baseline drives the chares' own streams: streams[t * cmax + c] of PE t, chare c. */
static void collect_stream(tess_ctx_h ctx, void *elem, void *arg)
{
    (void)elem;
    tess_stream_t *streams = arg;
    streams[tess_ctx_linear(ctx) - (int64_t)rank * ppn * cmax] = tess_ctx_stream(ctx);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    tess_params_t params = {.field_mask = TESS_PARAM_FIELD_STREAMS, .streams = STREAMS};
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, &params) != TESS_OK)
        bg_die(PROG, "tess_init", tess_error_detail());
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    ppn = tess_ppn();

    long        list[MAX_POINTS] = {1, 2, 4, 8, 16};
    int         npoints = 5, reps = 5;
    double      secs = 0.2, goal = 0.9;
    const char *csv_path = NULL, *tag = "-";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--chares") && v) {
            npoints = bg_parse_list(v, list, MAX_POINTS);
            if (npoints < 1)
                bg_die(PROG, "--chares", "expected a list like 1,2,4,8,16");
        } else if (!strcmp(a, "--time") && v) {
            secs = atof(v);
        } else if (!strcmp(a, "--reps") && v) {
            reps = atoi(v);
        } else if (!strcmp(a, "--csv") && v) {
            csv_path = v;
        } else if (!strcmp(a, "--tag") && v) {
            tag = v;
        } else if (!strcmp(a, "--goal") && v) {
            goal = atof(v);
        } else if (!strcmp(a, "--breakdown")) {
            bg_split_on = 1;
            continue;
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: %s [+ppn T] [--chares LIST] [--time S] [--reps N] "
                                "[--csv FILE] [--tag TEXT] [--goal R] [--breakdown]\n", PROG);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        i++;
    }
    if (reps < 1 || reps > 64 || secs <= 0 || secs > 60)
        bg_die(PROG, "options", "need 1 <= --reps <= 64 and 0 < --time <= 60");
    cmax = 1;
    for (int i = 0; i < npoints; i++)
        cmax = list[i] > cmax ? (int)list[i] : cmax;

    bg_setup(PROG);
    if (tess_entry_register("go", on_go, &E_GO) != TESS_OK ||
        tess_entry_register("next", on_next, &E_NEXT) != TESS_OK)
        bg_die(PROG, "tess_entry_register", tess_error_detail());
    tess_array_params_t ap = {.field_mask = TESS_ARRAY_FIELD_MAP | TESS_ARRAY_FIELD_NAME,
                              .name = "launchers", .ndims = 1,
                              .extents = {tess_num_pes() * cmax, 1, 1},
                              .elem_size = sizeof(launch_elem_t), .map = TESS_MAP_USER,
                              .map_fn = launch_map};
    if (tess_array_create(&ap, &arr) != TESS_OK)
        bg_die(PROG, "tess_array_create", tess_error_detail());

    tess_stream_t *streams = calloc((size_t)ppn * cmax, sizeof(*streams));
    if (!streams)
        bg_die(PROG, "set-up", "out of memory");
    tess_array_foreach(arr, collect_stream, streams);
    bg_raw_t raw;
    bg_raw_init(&raw, ppn, cmax, streams);

    FILE *csv = NULL;
    if (rank == 0) {
        printf("%s: backend %s, %s; %d process%s x %d PE%s; %.2f s per run, %d reps\n", PROG,
               tess_gpu_backend_name(), bg_kind_text(), nprocs, nprocs > 1 ? "es" : "", ppn,
               ppn > 1 ? "s" : "", secs, reps);
        if (ppn * cmax > STREAMS)
            printf("%s: note: %d chares per process share %d streams\n", PROG, ppn * cmax,
                   STREAMS);
        if (bg_kind != BG_KIND_CUDA)
            printf("%s: no CUDA device: the raw baseline is the %s backend driven through the "
                   "public API, not CUDA\n", PROG, tess_gpu_backend_name());
        printf("%-6s %-5s %-8s %-10s %14s %14s %7s  %s\n", "procs", "ppn", "chares", "tag",
               "raw kernels/s", "tessera k/s", "ratio", "goal");
        fflush(stdout);
        if (csv_path)
            csv = bg_csv_open(csv_path, "bench,backend,kernel,tag,procs,ppn,chares_per_pe,"
                                        "chares_total,seconds,reps,raw_kps,tess_kps,ratio,goal,"
                                        "status");
    }

    double base[64], tess[64];
    for (int p = 0; p < npoints; p++) {
        chares = (int)list[p];
        /* Warm up both (first launches on a stream, event pools, PE wake-ups). */
        raw_rate(&raw, secs / 4);
        tess_rate(secs / 4);
        double split_raw[5] = {0}, split_tess[5] = {0};
        double sum_raw = 0, sum_tess = 0;
        for (int r = 0; r < reps; r++) {
            bg_split_reset();
            base[r] = raw_rate(&raw, secs);
            split_acc(split_raw);
            bg_split_reset();
            tess[r] = tess_rate(secs);
            split_acc(split_tess);
            sum_raw += base[r];
            sum_tess += tess[r];
        }
        double mb = bg_median(base, reps), mt = bg_median(tess, reps);
        double ratio = mb > 0 ? mt / mb : NAN;
        const char *status = ratio >= goal ? "PASS" : "MISS";
        if (rank == 0) {
            printf("%-6d %-5d %-8d %-10s %14.0f %14.0f %7.3f  %s (>= %.2f)\n", nprocs, ppn,
                   chares, tag, mb, mt, ratio, status, goal);
            fflush(stdout);
            if (csv) {
                fprintf(csv, "launch,%s,%s,%s,%d,%d,%d,%d,%.3f,%d,%.1f,%.1f,%.4f,%.2f,%s\n",
                        tess_gpu_backend_name(), bg_kind == BG_KIND_CUDA ? "cuda" : "host",
                        tag, nprocs, ppn, chares, nprocs * ppn * chares, secs, reps, mb, mt,
                        ratio, goal, status);
                fflush(csv);
            }
        }
        if (bg_split_on) {
            print_split("raw", "record", split_raw, sum_raw / reps);
            print_split("tessera", "then", split_tess, sum_tess / reps);
            fflush(stdout);
        }
    }

    if (csv)
        fclose(csv);
    bg_raw_fini(&raw);
    free(streams);
    tess_array_destroy(arr);
    tess_finalize();
    MPI_Finalize();
    return 0;
}
