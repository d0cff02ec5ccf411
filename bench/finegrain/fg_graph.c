/*
 * fg_graph.c — bench_finegrain --graph K: the host cost of a chare step of K stream operations
 * (a copy in, K - 2 small kernels, a copy out) issued as plain launches against the same step as
 * a step graph (tess_gpu_graph_run: recorded at the first step, replayed as one launch after),
 * in the same run.
 *
 * C chares per PE each run S steps (a message to itself between steps, no wait for the device
 * until the last); reported per chare-step: the host time of issuing the step's work (plain: the
 * K calls; graph: the tess_gpu_graph_run call), the phase's wall time × PEs per process, and the
 * ratios graph / plain. Every kernel adds 1 to the chare's buffer: the total is checked.
 */
#include "fg.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>
#include <tessera/gpu.h>

#define FG_GRAPH_WORDS 256

typedef struct gchare {
    int32_t *buf, *tmp, *host; /* device, device, pinned (read-back) */
    int      step, target, graph;
    int64_t  adds;             /* kernels issued on buf so far (the expected value) */
    uint64_t round;            /* phases run (the reduction's tag) */
    double   t_issue;
} gchare_t;

static tess_array_h gring;
static tess_entry_t G_GO, G_STEP, G_DONE, G_RESULT;
static int          g_k, g_use_cuda;

static void gck(tess_status_t st, const char *what)
{
    if (st != TESS_OK) {
        fprintf(stderr, "bench_finegrain --graph: %s: %s\n", what, tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void add_host(void *arg)
{
    int32_t *p = *(int32_t **)arg;
    for (int i = 0; i < FG_GRAPH_WORDS; i++)
        p[i]++;
}

static void add(tess_stream_t s, int32_t *p)
{
#ifdef FG_HAVE_CUDA
    if (g_use_cuda) {
        fg_add_cuda(s, p, FG_GRAPH_WORDS);
        return;
    }
#endif
    gck(tess_gpu_launch_host(s, add_host, &p, sizeof(p)), "the add kernel");
}

/* The step's K operations on the stream s. */
static void issue(tess_stream_t s, gchare_t *c)
{
    size_t bytes = FG_GRAPH_WORDS * sizeof(int32_t);
    gck(tess_gpu_memcpy_async(c->tmp, c->buf, bytes, s), "copy in");
    for (int j = 0; j < g_k - 2; j++)
        add(s, c->tmp);
    gck(tess_gpu_memcpy_async(c->buf, c->tmp, bytes, s), "copy out");
}

static void record(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    issue(tess_ctx_stream(ctx), e);
}

static void gctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    gchare_t *c     = e;
    size_t    bytes = FG_GRAPH_WORDS * sizeof(int32_t);
    gck(tess_gpu_malloc((void **)&c->buf, bytes), "device memory");
    gck(tess_gpu_malloc((void **)&c->tmp, bytes), "device memory");
    gck(tess_gpu_malloc_host((void **)&c->host, bytes), "pinned memory");
    gck(tess_gpu_memset_async(c->buf, 0, bytes, tess_ctx_stream(ctx)), "memset");
}

static void gdtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    gchare_t *c = e;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    tess_gpu_free(c->buf);
    tess_gpu_free(c->tmp);
    tess_gpu_free_host(c->host);
}

static void on_step(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    gchare_t *c  = e;
    double    t0 = tess_wtime();
    if (c->graph)
        gck(tess_gpu_graph_run(ctx, 0, 0, record, NULL), "tess_gpu_graph_run");
    else
        issue(tess_ctx_stream(ctx), c);
    c->t_issue += tess_wtime() - t0;
    c->adds += g_k - 2;
    if (++c->step < c->target) {
        gck(tess_send(gring, tess_ctx_index(ctx), G_STEP, NULL, 0), "tess_send");
        return;
    }
    gck(tess_gpu_memcpy_async(c->host, c->buf, FG_GRAPH_WORDS * sizeof(int32_t),
                              tess_ctx_stream(ctx)), "read-back");
    gck(tess_gpu_then(ctx, G_DONE, NULL, 0), "tess_gpu_then");
}

static void on_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    gchare_t *c = e;
    memcpy(&c->target, msg, sizeof(int));
    memcpy(&c->graph, (const int *)msg + 1, sizeof(int));
    c->step    = 0;
    c->t_issue = 0;
    c->round++;
    on_step(ctx, e, NULL, 0);
}

static void on_done(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    gchare_t *c      = e;
    double    v[2]   = {0, c->t_issue};
    for (int i = 0; i < FG_GRAPH_WORDS; i++)
        v[0] += c->host[i] != (int32_t)c->adds;
    gck(tess_contribute(ctx, c->round, v, 2, TESS_DOUBLE, TESS_SUM,
                        tess_cb_element(gring, tess_idx1(0), G_RESULT)), "tess_contribute");
}

static void on_result(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx;
    (void)e;
    (void)size;
    double r[3] = {tess_wtime(), 0, 0};
    memcpy(r + 1, msg, 2 * sizeof(double));
    tess_exit_with(r, sizeof(r));
}

static int g_go[2];
static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(gring, G_GO, g_go, sizeof(g_go));
}

/* One phase: every chare runs `steps` steps, plain or as a graph. Returns the wall seconds;
 * *issue_p: the chares' issue seconds summed; *errors_p: wrong words. */
static double phase(int steps, int graph, double *issue_p, double *errors_p)
{
    g_go[0] = steps;
    g_go[1] = graph;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = tess_wtime();
    gck(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL), "tess_run");
    double r[3];
    gck(tess_result(r, sizeof(r), NULL), "tess_result");
    *issue_p = r[2];
    *errors_p += r[1];
    return r[0] - t0;
}

static int gcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void fg_graph_register(void)
{
    gck(tess_entry_register("graph-go", on_go, &G_GO), "entry registration");
    gck(tess_entry_register("graph-step", on_step, &G_STEP), "entry registration");
    gck(tess_entry_register("graph-done", on_done, &G_DONE), "entry registration");
    gck(tess_entry_register("graph-result", on_result, &G_RESULT), "entry registration");
}

int fg_graph_bench(int k, int chares_per_pe, int steps, int warmup, int reps, int use_cuda)
{
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    g_k        = k;
    g_use_cuda = use_cuda;
    int nchares = chares_per_pe * tess_num_pes();
    tess_array_params_t ap = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR, .name = "graph-steps",
        .ndims = 1, .extents = {nchares}, .elem_size = sizeof(gchare_t), .ctor = gctor,
        .dtor = gdtor};
    gck(tess_array_create(&ap, &gring), "tess_array_create");
    double *wall[2], *iss[2], errors = 0, issue;
    for (int g = 0; g < 2; g++) {
        wall[g] = calloc((size_t)reps, sizeof(double));
        iss[g]  = calloc((size_t)reps, sizeof(double));
    }
    for (int i = 0; i < reps; i++)
        for (int g = 0; g < 2; g++) { /* interleaved: plain, graph, plain, graph, ... */
            if (i == 0)
                phase(warmup, g, &issue, &errors);
            wall[g][i] = phase(steps, g, &issue, &errors) * tess_ppn() /
                         ((double)chares_per_pe * tess_ppn() * steps);
            iss[g][i]  = issue / ((double)nchares * steps);
        }
    for (int g = 0; g < 2; g++) {
        qsort(wall[g], (size_t)reps, sizeof(double), gcmp);
        qsort(iss[g], (size_t)reps, sizeof(double), gcmp);
    }
    double wp = wall[0][reps / 2] * 1e6, wg = wall[1][reps / 2] * 1e6;
    double ip = iss[0][reps / 2] * 1e6, ig = iss[1][reps / 2] * 1e6;
    if (rank == 0) {
        printf("bench_finegrain --graph: %d processes x %d PEs, %d chares per PE, a step of %d "
               "operations (a copy, %d kernels, a copy), backend %s, %d steps x %d reps\n",
               nprocs, tess_ppn(), chares_per_pe, k, k - 2, tess_gpu_backend_name(), steps,
               reps);
        printf("  plain launches: %8.3f us per chare-step to issue, %8.3f us per chare-step "
               "(wall x PEs)\n", ip, wp);
        printf("  step graph:     %8.3f us per chare-step to issue, %8.3f us per chare-step "
               "(wall x PEs)\n", ig, wg);
        printf("  graph / plain: issue %.3f, wall %.3f; errors %.0f%s\n", ig / ip, wg / wp,
               errors, errors ? "  FAILED" : "");
        printf("RESULT mode=graph procs=%d ppn=%d c=%d ops=%d backend=%s plain_issue_us=%.4f "
               "graph_issue_us=%.4f issue_ratio=%.4f plain_us=%.4f graph_us=%.4f ratio=%.4f "
               "errors=%.0f\n", nprocs, tess_ppn(), chares_per_pe, k, tess_gpu_backend_name(),
               ip, ig, ig / ip, wp, wg, wg / wp, errors);
        fflush(stdout);
    }
    for (int g = 0; g < 2; g++) {
        free(wall[g]);
        free(iss[g]);
    }
    tess_array_destroy(gring);
    return errors ? 3 : 0;
}
