/* gpu_bench.c — the shared part of the GPU-layer benchmarks (see gpu_bench.h). */
#include "gpu_bench.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bg_kind_t   bg_kind = BG_KIND_HOST;
int         bg_sms;
const char *bg_prog = "bench";

int        bg_split_on;
bg_split_t bg_split;

static char bg_kind_buf[64];
static _Thread_local char bg_err[256];

/* ---- time, statistics, options ----------------------------------------------------------- */

double bg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bg_median(double *v, int n)
{
    if (n < 1)
        return NAN;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bg_percentile(double *v, size_t n, double p)
{
    if (n < 1)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return v[rank < 1 ? 0 : rank > n ? n - 1 : rank - 1];
}

int bg_parse_list(const char *s, long *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        long  v = strtol(s, &end, 10);
        if (end == s || v < 1 || n == max)
            return -1;
        out[n++] = v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

void bg_die(const char *prog, const char *what, const char *detail)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, detail && *detail ? detail : "(no detail)");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

FILE *bg_csv_open(const char *path, const char *header)
{
    FILE *f = fopen(path, "a");
    if (!f) {
        perror(path);
        return NULL;
    }
    if (ftell(f) == 0)
        fprintf(f, "%s\n", header);
    return f;
}

void bg_split_reset(void)
{
    atomic_store(&bg_split.launch_ns, 0);
    atomic_store(&bg_split.arm_ns, 0);
    atomic_store(&bg_split.poll_ns, 0);
    atomic_store(&bg_split.polls, 0);
    atomic_store(&bg_split.kernels, 0);
}

/* ---- the kernel chares launch ------------------------------------------------------------ */

static void bg_host_empty(void *args) { (void)args; }

void bg_setup(const char *prog)
{
    bg_prog = prog;
    if (tess_gpu_backend() == TESS_GPU_CUDA && bg_cuda_available()) {
        if (bg_cuda_init(tess_gpu_device(), 32, &bg_sms))
            bg_die(prog, "CUDA set-up", bg_cuda_error());
        bg_kind = BG_KIND_CUDA;
        snprintf(bg_kind_buf, sizeof(bg_kind_buf), "cuda empty kernel <<<%d, 32>>>", bg_sms);
        return;
    }
    bg_kind = BG_KIND_HOST;
    bg_sms  = 0;
    snprintf(bg_kind_buf, sizeof(bg_kind_buf), "empty host function (%s backend)",
             tess_gpu_backend_name());
}

const char *bg_kind_text(void) { return bg_kind_buf; }

const char *bg_error(void) { return bg_kind == BG_KIND_CUDA ? bg_cuda_error() : bg_err; }

int bg_launch(tess_stream_t stream)
{
    if (bg_kind == BG_KIND_CUDA)
        return bg_cuda_launch_empty(stream);
    tess_status_t st = tess_gpu_launch_host(stream, bg_host_empty, NULL, 0);
    if (st == TESS_OK)
        return 0;
    snprintf(bg_err, sizeof(bg_err), "tess_gpu_launch_host: %s", tess_error_detail());
    return -1;
}

/* ---- the raw baseline ---------------------------------------------------------------------- */

static void bg_host_mark(void *args)
{
    bg_chain_t *c;
    memcpy(&c, args, sizeof(c));
    atomic_store_explicit(&c->flag, 1, memory_order_release);
}

/* Launch the empty kernel and arm the chain's completion. 0 or -1. */
static inline int chain_fire(bg_chain_t *c)
{
    if (bg_kind == BG_KIND_CUDA && bg_split_on) {
        double t0 = bg_now_ns();
        int    rc = bg_cuda_launch_empty(c->stream);
        double t1 = bg_now_ns();
        rc        = rc || bg_cuda_record(c->event, c->stream);
        bg_split_add(&bg_split.launch_ns, t0, t1);
        bg_split_add(&bg_split.arm_ns, t1, bg_now_ns());
        atomic_fetch_add_explicit(&bg_split.kernels, 1, memory_order_relaxed);
        return rc ? -1 : 0;
    }
    if (bg_kind == BG_KIND_CUDA)
        return bg_cuda_launch_empty(c->stream) || bg_cuda_record(c->event, c->stream) ? -1 : 0;
    atomic_store_explicit(&c->flag, 0, memory_order_relaxed);
    if (tess_gpu_launch_host(c->stream, bg_host_empty, NULL, 0) != TESS_OK ||
        tess_gpu_launch_host(c->stream, bg_host_mark, &c, sizeof(c)) != TESS_OK) {
        snprintf(bg_err, sizeof(bg_err), "tess_gpu_launch_host: %s", tess_error_detail());
        return -1;
    }
    return 0;
}

/* 1 completed, 0 not yet, -1 error. */
static inline int chain_poll(bg_chain_t *c)
{
    if (bg_kind == BG_KIND_CUDA && bg_split_on) {
        double t0 = bg_now_ns();
        int    q  = bg_cuda_query(c->event);
        bg_split_add(&bg_split.poll_ns, t0, bg_now_ns());
        atomic_fetch_add_explicit(&bg_split.polls, 1, memory_order_relaxed);
        return q;
    }
    if (bg_kind == BG_KIND_CUDA)
        return bg_cuda_query(c->event);
    return atomic_load_explicit(&c->flag, memory_order_acquire);
}

void bg_raw_init(bg_raw_t *r, int nthreads, int nchains, tess_stream_t *streams)
{
    size_t n = (size_t)nthreads * (size_t)nchains;
    memset(r, 0, sizeof(*r));
    r->nthreads = nthreads;
    r->nchains  = nchains;
    r->chains   = aligned_alloc(64, n * sizeof(bg_chain_t));
    if (!r->chains)
        bg_die(bg_prog, "raw baseline", "out of memory");
    memset(r->chains, 0, n * sizeof(bg_chain_t));
    r->own_streams = bg_kind == BG_KIND_CUDA;
    for (size_t i = 0; i < n; i++) {
        bg_chain_t *c = &r->chains[i];
        if (bg_kind == BG_KIND_CUDA) {
            if (bg_cuda_stream_create(&c->stream) || bg_cuda_event_create(&c->event))
                bg_die(bg_prog, "raw baseline streams and events", bg_cuda_error());
        } else {
            c->stream = streams[i];
        }
    }
}

void bg_raw_fini(bg_raw_t *r)
{
    size_t n = (size_t)r->nthreads * (size_t)r->nchains;
    for (size_t i = 0; r->own_streams && i < n; i++) {
        bg_cuda_event_destroy(r->chains[i].event);
        bg_cuda_stream_destroy(r->chains[i].stream);
    }
    free(r->chains);
    r->chains = NULL;
}

typedef struct raw_thread {
    pthread_t          thread;
    bg_chain_t        *chains;
    int                n;
    double             seconds;
    pthread_barrier_t *start;
    double             t0, last;
    int64_t            count;
    int                err;
    char               msg[256];
} raw_thread_t;

static void *raw_thread_main(void *arg)
{
    raw_thread_t *t = arg;
    if (bg_kind == BG_KIND_CUDA && bg_cuda_bind()) {
        t->err = 1;
        snprintf(t->msg, sizeof(t->msg), "%s", bg_cuda_error());
    }
    pthread_barrier_wait(t->start);
    if (t->err)
        return NULL;
    t->t0           = bg_now_ns();
    double deadline = t->t0 + t->seconds * 1e9;
    int    live     = t->n;
    for (int i = 0; i < t->n; i++) {
        bg_chain_t *c = &t->chains[i];
        c->done       = 0;
        c->count      = 0;
        if (chain_fire(c))
            goto fail;
    }
    while (live > 0) {
        for (int i = 0; i < t->n; i++) {
            bg_chain_t *c = &t->chains[i];
            if (c->done)
                continue;
            int q = chain_poll(c);
            if (q == 0)
                continue;
            if (q < 0)
                goto fail;
            c->count++;
            double now = bg_now_ns();
            if (now < deadline) {
                if (chain_fire(c))
                    goto fail;
            } else {
                c->done    = 1;
                c->last_ns = now;
                live--;
            }
        }
    }
    t->count = 0;
    t->last  = t->t0;
    for (int i = 0; i < t->n; i++) {
        t->count += t->chains[i].count;
        if (t->chains[i].last_ns > t->last)
            t->last = t->chains[i].last_ns;
    }
    return NULL;
fail:
    t->err = 1;
    snprintf(t->msg, sizeof(t->msg), "%s", bg_error());
    return NULL;
}

double bg_raw_rate(bg_raw_t *r, int chains, double seconds)
{
    if (chains > r->nchains)
        bg_die(bg_prog, "raw baseline", "more chains than set up");
    raw_thread_t     *th = calloc((size_t)r->nthreads, sizeof(*th));
    pthread_barrier_t start;
    if (!th)
        bg_die(bg_prog, "raw baseline", "out of memory");
    pthread_barrier_init(&start, NULL, (unsigned)r->nthreads);
    for (int i = 0; i < r->nthreads; i++) {
        th[i].chains  = &r->chains[(size_t)i * (size_t)r->nchains];
        th[i].n       = chains;
        th[i].seconds = seconds;
        th[i].start   = &start;
        if (pthread_create(&th[i].thread, NULL, raw_thread_main, &th[i]))
            bg_die(bg_prog, "raw baseline", "pthread_create failed");
    }
    double  t0 = INFINITY, last = 0;
    int64_t count = 0;
    for (int i = 0; i < r->nthreads; i++) {
        pthread_join(th[i].thread, NULL);
        if (th[i].err)
            bg_die(bg_prog, "raw baseline", th[i].msg);
        count += th[i].count;
        t0   = th[i].t0 < t0 ? th[i].t0 : t0;
        last = th[i].last > last ? th[i].last : last;
    }
    pthread_barrier_destroy(&start);
    free(th);
    return last > t0 ? (double)count / ((last - t0) * 1e-9) : 0.0;
}

void bg_raw_roundtrip(bg_raw_t *r, int iters, double *samples_ns)
{
    bg_chain_t *c = &r->chains[0];
    if (bg_kind == BG_KIND_CUDA && bg_cuda_bind())
        bg_die(bg_prog, "raw round trip", bg_cuda_error());
    for (int i = 0; i < iters; i++) {
        double t0 = bg_now_ns();
        if (chain_fire(c))
            bg_die(bg_prog, "raw round trip", bg_error());
        int q;
        while ((q = chain_poll(c)) == 0)
            ;
        if (q < 0)
            bg_die(bg_prog, "raw round trip", bg_error());
        samples_ns[i] = bg_now_ns() - t0;
    }
}
