/*
 * bench_finegrain — the host cost of a fine-grained chare step, against the same work issued
 * raw from one thread in the same run.
 *
 *   mpirun -np 1 bench_finegrain -m 4 [+ppn P]               neighbours in the same process (d2d)
 *   mpirun -np 2 bench_finegrain -m 4 --where remote         neighbours in the other process (ipc)
 *
 * C chares per PE (-c, default 8) form a ring. Each step of a chare: once the M messages of the
 * step (-m, even; -b bytes each, default 4096) from its neighbours at ring offsets ±1, ±2, …
 * are in, one kernel on its stream checks them and writes the M messages of the next step,
 * which go out to the same neighbours with one tess_send_device_many. `--where local` (the
 * default) keeps every neighbour in the chare's own process (the ring of its process's chares);
 * `--where remote` puts them all in the next and previous processes (offsets ± (chares per
 * process + 1), ± (… + 2), …), so every message crosses processes.
 *
 * The raw baseline (each process, from its main thread, after the Tessera runs): the same
 * chares of one process as a ring, each step per chare M × (stream wait on the sender's event +
 * a device-to-device copy) + the kernel + an event record; with CUDA these are the CUDA runtime
 * calls themselves, on the host backend the backend's. So the baseline is what a careful CUDA
 * program pays for the same copies and launches from one thread, without a runtime. (For
 * --where remote it still copies within its process: the same calls, a cheaper path.)
 *
 * Reported: host time per chare-step (Tessera: the timed phase's wall time × PEs per process /
 * the chare-steps of a process, i.e. PE time per chare-step while the PEs are saturated; raw:
 * wall time / chare-steps) and per message (that / M), medians of -r repetitions of -s steps
 * after -w warm-up steps. Also per message beyond the step's kernel launch ((per chare-step -
 * its launch) / M, the launch timed in the same steps, on both sides): the cost messages add to
 * a step the chare would launch anyway. Every received word is checked by the kernels: any error fails the run.
 *
 * Options: -c C, -m M, -b BYTES, -s STEPS (1000), -w WARMUP (100), -r REPS (3),
 * --where local|remote, --no-raw, --csv FILE (a row appended; header when the file is new),
 * --calls (with CUDA: also the host cost of each single CUDA call a chare step makes, of
 * one chare step issued as calls against replayed as a CUDA graph, of a step that first waits
 * for 4 senders' events with the waits as calls against as event-wait nodes inside its graph,
 * and the raw steps a second that 1, 2, 4 and 8 threads of one process issue at once: what more
 * PEs can gain at most),
 * --procs-rate (CUDA only, and nothing else runs: the raw chare steps a second that one thread
 * in each of the job's processes issues at once; bench/finegrain/procs-rate.sh runs it at 1, 2,
 * 4 and 8 processes under MPS: what more processes can gain at most),
 * --delay-us N (each step kernel waits N µs first: sleeps on the host backend, spins on the
 * GPU's global timer with CUDA, so that a copy not ordered after its sender's kernel reads
 * stale data and the check counts it: a test of the ordering),
 * --sender-ordered (the receiving entry also TESS_ENTRY_SENDER_ORDERED, as Jacobi2D's and
 * LULESH's halos register theirs: the ring is a symmetric exchange whose buffers go by step
 * parity, so a step's messages are ready only after every receiver's use of that parity),
 * --in-place (the receiving entry also TESS_ENTRY_IN_PLACE, as Jacobi2D's -halos inplace: within
 * a process nothing is copied and the step kernel reads each message in its sender's buffer,
 * which the sender rewrites only in its step after next, after this chare's next message),
 * --graph K (instead of the ring: a chare step of K stream operations issued as plain launches
 * against the same step as a step graph, tess_gpu_graph_run, in the same run: fg_graph.c).
 *
 * Each run names its mechanism — copy or in-place, sender-ordered or not, and TESS_BATCH_STREAM
 * (batch-auto when unset) — on its RESULT line and in its CSV row; the row also splits the
 * chare step's host time into the sends, the entries, the posts and the runtime's rest.
 */
#include "fg.h"

#include "devcomm/devcomm.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>
#include <tessera/gpu.h>

static struct {
    int         c, m, bytes, steps, warmup, reps, remote, raw, calls, delay_us, sender_ordered;
    int         in_place, graph, procs_rate;
    const char *csv;
} opt = {8, 4, 4096, 1000, 100, 3, 0, 1, 0, 0, 0, 0, 0, 0, NULL};

static int        rank, nprocs, words, np_chares, nchares;
static int        use_cuda;
static tess_array_h ring;
static tess_entry_t E_GO, E_MSG, E_CHECKED, E_RESULT;
static int        phase_target;

_Noreturn static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_finegrain (rank %d): %s%s%s\n", rank, what, detail ? ": " : "",
            detail ? detail : "");
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

static void ck(tess_status_t st, const char *what)
{
    if (st != TESS_OK)
        die(what, tess_error_detail());
}

/* ---- the chares ---------------------------------------------------------------------------- */

typedef struct fg_hdr {
    int32_t step, slot;
} fg_hdr_t;

typedef struct fg_chare {
    int32_t  me, base, ring, shift;
    int      step, target, got[2], started, finished_at;
    int32_t *recv[2], *send[2], *err, *err_host;
    /* --in-place: per parity, where each slot's message lies (the sender's buffer, or NULL:
     * in recv) as the posts said, and the table the kernel reads (device, and its pinned
     * source), uploaded when it changes: at the first steps (a sender's buffers stay put). */
    const int32_t *at[2][FG_MAX_M], *at_up[2][FG_MAX_M];
    const int32_t **at_dev[2], **at_pin[2];
    double   t_launch, t_send, t_entry, t_post; /* host seconds in the phase so far */
} fg_chare_t;

/* What a phase reports: its errors and where the chares' host time went (summed). */
enum { R_ERRORS, R_LAUNCH, R_SEND, R_ENTRY, R_POST, R_N };

static void launch_step(tess_stream_t s, const fg_args_t *a)
{
#ifdef FG_HAVE_CUDA
    if (use_cuda) {
        fg_step_cuda(s, a);
        return;
    }
#endif
    fg_step_host_launch(s, a);
}

static void chare_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    fg_chare_t *c    = e;
    size_t      slab = (size_t)opt.m * (size_t)words * sizeof(int32_t);
    c->me            = tess_ctx_index(ctx).x;
    if (opt.remote) {
        c->base  = 0;
        c->ring  = nchares;
        c->shift = np_chares;
    } else {
        c->base  = c->me / np_chares * np_chares;
        c->ring  = np_chares;
        c->shift = 0;
    }
    for (int p = 0; p < 2; p++) {
        ck(tess_gpu_malloc((void **)&c->recv[p], slab), "device memory");
        ck(tess_gpu_malloc((void **)&c->send[p], slab), "device memory");
    }
    ck(tess_gpu_malloc((void **)&c->err, sizeof(int32_t)), "device memory");
    ck(tess_gpu_malloc_host((void **)&c->err_host, sizeof(int32_t)), "pinned memory");
    ck(tess_gpu_memset_async(c->err, 0, sizeof(int32_t), tess_ctx_stream(ctx)), "memset");
    if (opt.in_place)
        for (int p = 0; p < 2; p++) {
            size_t n = (size_t)opt.m * sizeof(int32_t *);
            ck(tess_gpu_malloc((void **)&c->at_dev[p], n), "device memory");
            ck(tess_gpu_malloc_host((void **)&c->at_pin[p], n), "pinned memory");
            ck(tess_gpu_memset_async(c->at_dev[p], 0, n, tess_ctx_stream(ctx)), "memset");
        }
    c->finished_at = -1;
}

static void chare_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    fg_chare_t *c = e;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    for (int p = 0; p < 2; p++) {
        tess_gpu_free(c->recv[p]);
        tess_gpu_free(c->send[p]);
    }
    tess_gpu_free(c->err);
    tess_gpu_free_host(c->err_host);
    for (int p = 0; p < 2 && opt.in_place; p++) {
        tess_gpu_free(c->at_dev[p]);
        tess_gpu_free_host(c->at_pin[p]);
    }
}

/* The messages of step `step` (in send[step % 2]) to every neighbour, after the kernel. */
static void send_step(fg_chare_t *c, int step)
{
    fg_hdr_t        h[FG_MAX_M];
    tess_dev_buf_t  b[FG_MAX_M];
    tess_dev_send_t s[FG_MAX_M];
    size_t          bytes = (size_t)words * sizeof(int32_t);
    for (int k = 0; k < opt.m; k++) {
        int32_t to = fg_wrap((int64_t)c->me + fg_offset(k, c->shift), c->base, c->ring);
        h[k]       = (fg_hdr_t){step, k};
        b[k]       = (tess_dev_buf_t){c->send[step % 2] + (size_t)k * words, bytes};
        s[k]       = (tess_dev_send_t){ring, tess_idx1(to), E_MSG, &h[k], sizeof(h[k]), &b[k], 1,
                                       NULL, NULL};
    }
    ck(tess_send_device_many(s, opt.m, NULL), "tess_send_device_many");
}

/* --in-place: the kernel's table of where parity p's messages lie, uploaded on the chare's
 * stream when a post changed it. The pinned source is rewritten only after the stream drained
 * (never again once every neighbour has sent twice). */
static const int32_t *const *slot_table(tess_stream_t st, fg_chare_t *c, int p)
{
    size_t n = (size_t)opt.m * sizeof(c->at[p][0]);
    if (memcmp(c->at_up[p], c->at[p], n)) {
        tess_gpu_stream_sync(st);
        memcpy(c->at_up[p], c->at[p], n);
        memcpy(c->at_pin[p], c->at[p], n);
        ck(tess_gpu_memcpy_async(c->at_dev[p], c->at_pin[p], n, st), "slot table upload");
    }
    return (const int32_t *const *)c->at_dev[p];
}

static void advance(tess_ctx_h ctx, fg_chare_t *c)
{
    tess_stream_t st = tess_ctx_stream(ctx);
    while (c->step < c->target && c->got[c->step % 2] == opt.m) {
        int p       = c->step % 2;
        c->got[p]   = 0;
        fg_args_t a = {c->recv[p], c->send[1 - p], c->err, c->me, c->step, opt.m, words, 1,
                       c->base, c->ring, c->shift, opt.delay_us, NULL};
        if (opt.in_place)
            a.slots = slot_table(st, c, p);
        double t0 = tess_wtime();
        launch_step(st, &a);
        double t1 = tess_wtime();
        c->step++;
        send_step(c, c->step);
        c->t_launch += t1 - t0;
        c->t_send += tess_wtime() - t1;
    }
    /* Messages may come before this phase's go: nothing to finish until it came. */
    if (c->started && c->step == c->target && c->finished_at != c->target) {
        c->finished_at = c->target;
        ck(tess_gpu_memcpy_async(c->err_host, c->err, sizeof(int32_t), st), "read-back");
        ck(tess_gpu_then(ctx, E_CHECKED, NULL, 0), "tess_gpu_then");
    }
}

static void msg_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                     const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)stream_p;
    double          t0 = tess_wtime();
    fg_chare_t     *c  = e;
    const fg_hdr_t *h  = header;
    if (header_len != sizeof(*h) || nbufs != 1 ||
        sizes[0] != (size_t)words * sizeof(int32_t) || h->slot < 0 || h->slot >= opt.m)
        die("a malformed message", NULL);
    /* --in-place: within the process the runtime offers the sender's buffer; the step kernel
     * reads it there. The sender writes that parity again in its step after next, which waits
     * for this chare's next message, sent after the kernel that reads it. */
    if (opt.in_place && dst[0])
        c->at[h->step % 2][h->slot] = dst[0];
    else {
        dst[0]                      = c->recv[h->step % 2] + (size_t)h->slot * words;
        c->at[h->step % 2][h->slot] = NULL;
    }
    c->t_post += tess_wtime() - t0;
}

static void on_msg(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    double          t0 = tess_wtime();
    fg_chare_t     *c  = e;
    const fg_hdr_t *h  = msg;
    c->got[h->step % 2]++;
    advance(ctx, c);
    c->t_entry += tess_wtime() - t0;
}

static void on_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    fg_chare_t *c = e;
    c->target     = *(const int *)msg;
    if (!c->started) {
        /* Step 0's messages: the kernel without a check writes them. */
        c->started  = 1;
        fg_args_t a = {c->recv[0], c->send[0], c->err, c->me, -1, opt.m, words, 0, c->base,
                       c->ring, c->shift, opt.delay_us, NULL};
        launch_step(tess_ctx_stream(ctx), &a);
        send_step(c, 0);
    }
    advance(ctx, c);
}

static void on_checked(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    fg_chare_t *c    = e;
    double      v[R_N] = {*c->err_host, c->t_launch, c->t_send, c->t_entry, c->t_post};
    c->t_launch = c->t_send = c->t_entry = c->t_post = 0;
    ck(tess_contribute(ctx, (uint64_t)c->target, v, R_N, TESS_DOUBLE, TESS_SUM,
                       tess_cb_element(ring, tess_idx1(0), E_RESULT)),
       "tess_contribute");
}

typedef struct result {
    double t_end;
    double v[R_N];
} result_t;

static void on_result(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx;
    (void)e;
    (void)size;
    result_t r = {tess_wtime(), {0}};
    memcpy(r.v, msg, sizeof(r.v));
    tess_exit_with(&r, sizeof(r));
}

static void start_phase(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(ring, E_GO, &phase_target, sizeof(phase_target));
}

static int ring_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext;
    (void)npes;
    (void)arg;
    return i.x / opt.c;
}

/* ---- main ---------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: bench_finegrain [-c CHARES_PER_PE] [-m MESSAGES (even)] "
                        "[-b BYTES] [-s STEPS] [-w WARMUP] [-r REPS] [--where local|remote] "
                        "[--no-raw] [--calls] [--procs-rate] [--sender-ordered] [--in-place] [--delay-us N] "
                        "[--graph OPS (>= 3)] [--csv FILE]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-raw")) {
            opt.raw = 0;
            continue;
        }
        if (!strcmp(a, "--calls")) {
            opt.calls = 1;
            continue;
        }
        if (!strcmp(a, "--procs-rate")) {
            opt.procs_rate = 1;
            continue;
        }
        if (!strcmp(a, "--sender-ordered")) {
            opt.sender_ordered = 1;
            continue;
        }
        if (!strcmp(a, "--in-place")) {
            opt.in_place = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "-c"))
            opt.c = atoi(v);
        else if (!strcmp(a, "-m"))
            opt.m = atoi(v);
        else if (!strcmp(a, "-b"))
            opt.bytes = atoi(v);
        else if (!strcmp(a, "-s"))
            opt.steps = atoi(v);
        else if (!strcmp(a, "-w"))
            opt.warmup = atoi(v);
        else if (!strcmp(a, "-r"))
            opt.reps = atoi(v);
        else if (!strcmp(a, "--delay-us"))
            opt.delay_us = atoi(v);
        else if (!strcmp(a, "--graph"))
            opt.graph = atoi(v);
        else if (!strcmp(a, "--csv"))
            opt.csv = v;
        else if (!strcmp(a, "--where") && (!strcmp(v, "local") || !strcmp(v, "remote")))
            opt.remote = !strcmp(v, "remote");
        else
            usage();
    }
    if (opt.c < 1 || opt.m < 2 || opt.m % 2 || opt.m > FG_MAX_M || opt.bytes < 8 ||
        opt.bytes % 4 || opt.steps < 1 || opt.warmup < 0 || opt.reps < 1 ||
        (opt.graph && opt.graph < 3))
        usage();
    if (opt.remote && nprocs < 2) {
        if (rank == 0)
            fprintf(stderr, "bench_finegrain: --where remote needs at least 2 processes\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* The mechanism a run measures, for its table row: the receiving entry's flags and the batch
 * stream setting (TESS_BATCH_STREAM; unset: auto). */
static void mechanism_name(char *buf, size_t len, const char *batch_stream)
{
    snprintf(buf, len, "%s%s%s/batch-%s", opt.in_place ? "in-place" : "copy",
             opt.sender_ordered ? "+sender-ordered" : "", opt.remote ? "/remote" : "",
             batch_stream && *batch_stream ? batch_stream : "auto");
}

static result_t run_phase(int target)
{
    phase_target = target;
    if (tess_run(TESS_RUN_UNTIL_EXIT, start_phase, NULL) != TESS_OK)
        die("tess_run failed", tess_error_detail());
    result_t r;
    ck(tess_result(&r, sizeof(r), NULL), "tess_result");
    return r;
}

/* --procs-rate (CUDA): raw chare steps from one thread in each process at once, as calls, graph
 * replays and kernel launches alone (fg_cuda_proc_steps), without the runtime; the steps a second
 * of all processes together. Run at 1, 2, 4, 8 processes (under MPS) to see whether processes
 * add the issue rate that threads of one process do not. */
#ifdef FG_HAVE_CUDA
static void procs_go(void) { MPI_Barrier(MPI_COMM_WORLD); }
#endif

static int procs_rate(int cuda)
{
#ifdef FG_HAVE_CUDA
    static const char *const mode[3] = {"calls", "graph", "kernels"};
    const int                steps   = 4096;
    if (!cuda) {
        if (rank == 0)
            fprintf(stderr, "bench_finegrain: --procs-rate needs the CUDA backend\n");
        return 77;
    }
    for (int m = 0; m < 3; m++) {
        double us = fg_cuda_proc_steps(m, steps, procs_go), slowest;
        MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("RESULT-PROCS mode=%s procs=%d steps_per_s=%.0f\n", mode[m], nprocs,
                   nprocs * steps / slowest * 1e6);
    }
    fflush(stdout);
    return 0;
#else
    (void)cuda;
    if (rank == 0)
        fprintf(stderr, "bench_finegrain: --procs-rate needs a CUDA build\n");
    return 77;
#endif
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, NULL) != TESS_OK) {
        fprintf(stderr, "tess_init failed: %s\n", tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    parse(argc, argv);
    use_cuda  = tess_gpu_backend() == TESS_GPU_CUDA;
    words     = opt.bytes / 4;
    np_chares = opt.c * tess_ppn();
    nchares   = np_chares * nprocs;

    ck(tess_entry_register("go", on_go, &E_GO), "entry registration");
    unsigned flags = TESS_ENTRY_BATCH | (opt.sender_ordered ? TESS_ENTRY_SENDER_ORDERED : 0u) |
                     (opt.in_place ? TESS_ENTRY_IN_PLACE : 0u);
    ck(tess_entry_register_device("msg", msg_post, on_msg, flags, &E_MSG), "entry registration");
    ck(tess_entry_register("checked", on_checked, &E_CHECKED), "entry registration");
    ck(tess_entry_register("result", on_result, &E_RESULT), "entry registration");
    fg_graph_register();
    if (opt.procs_rate) {
        int pst = procs_rate(use_cuda);
        tess_finalize();
        MPI_Finalize();
        return pst;
    }
    if (opt.graph) {
        int gst = fg_graph_bench(opt.graph, opt.c, opt.steps, opt.warmup, opt.reps, use_cuda);
        tess_finalize();
        MPI_Finalize();
        return gst;
    }
    tess_array_params_t ap = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_MAP,
        .name = "ring", .ndims = 1, .extents = {nchares}, .elem_size = sizeof(fg_chare_t),
        .ctor = chare_ctor, .dtor = chare_dtor, .map = TESS_MAP_USER, .map_fn = ring_map};
    ck(tess_array_create(&ap, &ring), "tess_array_create");

    /* Tessera: a warm-up phase, then -r timed phases of -s steps. */
    double  *tt = calloc((size_t)opt.reps, sizeof(double));
    double  *tr = calloc((size_t)opt.reps, sizeof(double));
    double  *trl = calloc((size_t)opt.reps, sizeof(double)); /* raw: launch seconds per rep */
    double  *tb[R_N];
    for (int k = 0; k < R_N; k++)
        tb[k] = calloc((size_t)opt.reps, sizeof(double));
    result_t r      = run_phase(opt.warmup);
    int64_t  errors = (int64_t)r.v[R_ERRORS];
    tess_dc_stats_t st0, st1;
    tess_dc_get_stats(&st0);
    for (int i = 0; i < opt.reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = tess_wtime();
        r         = run_phase(opt.warmup + (i + 1) * opt.steps);
        tt[i]     = r.t_end - t0; /* element 0's callback runs on process 0, whose clock gave t0 */
        errors    = (int64_t)r.v[R_ERRORS]; /* cumulative */
        for (int k = R_LAUNCH; k < R_N; k++)
            tb[k][i] = r.v[k] / ((double)nchares * opt.steps); /* per chare-step */
    }
    tess_dc_get_stats(&st1);
    uint64_t sent = 0;
    for (int k = 0; k < 3; k++)
        sent += st1.sent[k] - st0.sent[k];
    double batched = sent ? (double)(st1.d2d_batched - st0.d2d_batched) / (double)sent : 0;
    double copy_ops = (double)(st1.d2d_rb_launches - st0.d2d_rb_launches) /
                      ((double)np_chares * opt.steps * opt.reps);

    /* The raw baseline: every process, from its main thread, at once. */
    int64_t raw_errors = 0;
    if (opt.raw) {
        const fg_raw_ops_t *ops = fg_raw_host_ops();
#ifdef FG_HAVE_CUDA
        if (use_cuda)
            ops = fg_raw_cuda_ops();
#endif
        for (int i = 0; i < opt.reps; i++) {
            int64_t e = 0;
            MPI_Barrier(MPI_COMM_WORLD);
            tr[i] = fg_raw_run(ops, np_chares, opt.m, words, i ? opt.warmup / 4 : opt.warmup,
                               opt.steps, &e, &trl[i]);
            raw_errors += e;
        }
        MPI_Allreduce(MPI_IN_PLACE, &raw_errors, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    }

    int status = errors || raw_errors ? 3 : 0;
    if (rank == 0) {
        double per_step = median(tt, opt.reps) * tess_ppn() / ((double)np_chares * opt.steps);
        double raw_step = opt.raw ? median(tr, opt.reps) / ((double)np_chares * opt.steps) : 0;
        double launch   = median(tb[R_LAUNCH], opt.reps);
        double raw_launch =
            opt.raw ? median(trl, opt.reps) / ((double)np_chares * opt.steps) : 0;
        double msg_xl = (per_step - launch) / opt.m, raw_msg_xl = (raw_step - raw_launch) / opt.m;
        const char *where = opt.remote ? "remote" : "local";
        const char *bs    = getenv("TESS_BATCH_STREAM");
        char        mech[64];
        mechanism_name(mech, sizeof(mech), bs);
        double t_send = median(tb[R_SEND], opt.reps), t_entry = median(tb[R_ENTRY], opt.reps);
        double t_post = median(tb[R_POST], opt.reps);
        printf("bench_finegrain: %d processes x %d PEs, %d chares per PE, M %d, %d B, %s, "
               "backend %s, %d steps x %d reps, mechanism %s\n", nprocs, tess_ppn(), opt.c,
               opt.m, opt.bytes, where, tess_gpu_backend_name(), opt.steps, opt.reps, mech);
        printf("  tessera: %8.3f us per chare-step, %7.3f us per message, %7.3f beyond the "
               "launch (%.3f)\n", per_step * 1e6, per_step * 1e6 / opt.m, msg_xl * 1e6,
               launch * 1e6);
        if (opt.raw)
            printf("  raw:     %8.3f us per chare-step, %7.3f us per message, %7.3f beyond the "
                   "launch (%.3f); tessera / raw %.3f\n", raw_step * 1e6, raw_step * 1e6 / opt.m,
                   raw_msg_xl * 1e6, raw_launch * 1e6, per_step / raw_step);
        printf("  tessera's chare-step: kernel launch %.3f us, sends %.3f us, entries in all "
               "%.3f us, posts %.3f us; the rest (runtime: receives, scheduling, polling) "
               "%.3f us\n", launch * 1e6, t_send * 1e6, t_entry * 1e6, t_post * 1e6,
               (per_step - t_entry - t_post) * 1e6);
        printf("  process 0's messages: %.0f%% d2d receives batched, %.3f batch copy "
               "operations per chare-step\n", batched * 100, copy_ops);
        printf("  errors: tessera %lld, raw %lld%s\n", (long long)errors, (long long)raw_errors,
               status ? "  FAILED" : "");
        printf("RESULT where=%s procs=%d ppn=%d c=%d m=%d bytes=%d backend=%s mechanism=%s "
               "tess_us=%.4f raw_us=%.4f ratio=%.4f errors=%lld\n", where, nprocs, tess_ppn(),
               opt.c, opt.m, opt.bytes, tess_gpu_backend_name(), mech, per_step * 1e6,
               raw_step * 1e6, opt.raw ? per_step / raw_step : 0.0,
               (long long)(errors + raw_errors));
        if (opt.csv) {
            FILE *f = fopen(opt.csv, "a");
            if (!f)
                die("cannot open the CSV file", opt.csv);
            if (ftell(f) == 0)
                fprintf(f, "where,procs,ppn,chares_per_pe,m,bytes,backend,tess_us_per_step,"
                           "raw_us_per_step,tess_us_per_msg,raw_us_per_msg,ratio,"
                           "tess_launch_us,raw_launch_us,tess_us_per_msg_xl,raw_us_per_msg_xl,"
                           "sender_ordered,in_place,batch_stream,mechanism,tess_send_us,"
                           "tess_entry_us,tess_post_us,tess_rest_us\n");
            fprintf(f, "%s,%d,%d,%d,%d,%d,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d,"
                       "%d,%s,%s,%.4f,%.4f,%.4f,%.4f\n",
                    where, nprocs, tess_ppn(), opt.c, opt.m, opt.bytes, tess_gpu_backend_name(),
                    per_step * 1e6, raw_step * 1e6, per_step * 1e6 / opt.m,
                    raw_step * 1e6 / opt.m, opt.raw ? per_step / raw_step : 0.0, launch * 1e6,
                    raw_launch * 1e6, msg_xl * 1e6, opt.raw ? raw_msg_xl * 1e6 : 0.0,
                    opt.sender_ordered, opt.in_place, bs && *bs ? bs : "auto", mech, t_send * 1e6,
                    t_entry * 1e6, t_post * 1e6, (per_step - t_entry - t_post) * 1e6);
            fclose(f);
        }
        fflush(stdout);
    }
#ifdef FG_HAVE_CUDA
    if (opt.calls && use_cuda && rank == 0) {
        printf("host cost of single CUDA calls (8 streams, round robin):\n");
        fg_cuda_calls();
        fg_cuda_thread_scaling();
        fflush(stdout);
    }
#endif
    free(tt);
    free(tr);
    free(trl);
    for (int k = 0; k < R_N; k++)
        free(tb[k]);
    tess_array_destroy(ring);
    tess_finalize();
    MPI_Finalize();
    return status;
}
