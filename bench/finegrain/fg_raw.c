/*
 * fg_raw.c — bench_finegrain's raw baseline: the same chare steps as the Tessera side (the
 * same kernel, the same copies), issued by one thread in a loop, as a CUDA programmer would
 * write them without a runtime: per chare and step, for each of its M neighbours a stream wait
 * on that neighbour's event and a copy of its message, then the kernel launch and an event
 * record. On the host backend the same calls go to the backend's streams and events.
 */
#include "fg.h"

#include "gpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tessera/gpu.h>

/* ---- the host backend's operations ---------------------------------------------------------- */

static void hck(tess_status_t st, const char *what)
{
    if (st != TESS_OK) {
        fprintf(stderr, "bench_finegrain: raw %s: %s\n", what, tess_error_detail());
        exit(1);
    }
}

static void *h_stream_create(void)
{
    tess_gpu_stream_h s;
    hck(tess_gpu->stream_create(&s), "stream_create");
    return s;
}
static void h_stream_destroy(void *s) { tess_gpu->stream_destroy(s); }
static void h_stream_sync(void *s) { hck(tess_gpu->stream_sync(s), "stream_sync"); }
static void *h_event_create(void)
{
    tess_gpu_event_h e;
    hck(tess_gpu->event_create(0, &e), "event_create");
    return e;
}
static void h_event_destroy(void *e) { tess_gpu->event_destroy(e); }
static void h_event_record(void *e, void *s) { hck(tess_gpu->event_record(e, s), "event_record"); }
static void h_stream_wait(void *s, void *e) { hck(tess_gpu->stream_wait_event(s, e), "wait"); }
static void h_copy(void *dst, const void *src, size_t n, void *s)
{
    hck(tess_gpu->memcpy_async(dst, src, n, s), "memcpy_async");
}

static void step_host(void *arg)
{
    const fg_args_t *a   = arg;
    int32_t          bad = 0;
    if (a->delay_us > 0) {
        struct timespec d = {a->delay_us / 1000000, (long)(a->delay_us % 1000000) * 1000};
        nanosleep(&d, NULL);
    }
    TESS_KERNEL_LOOP(e, (int64_t)a->m * a->words)
        bad += fg_point(a, e);
    if (bad)
        *a->err += bad;
}

void fg_step_host_launch(void *stream, const fg_args_t *a)
{
    hck(tess_gpu_launch_host(stream, step_host, a, sizeof(*a)), "the step kernel");
}

static const fg_raw_ops_t host_ops = {
    "host backend", h_stream_create, h_stream_destroy, h_stream_sync, h_event_create,
    h_event_destroy, h_event_record, h_stream_wait, h_copy, fg_step_host_launch,
};

const fg_raw_ops_t *fg_raw_host_ops(void) { return &host_ops; }

/* ---- the raw loop ------------------------------------------------------------------------- */

typedef struct raw_chare {
    void    *stream, *ev[2];
    int32_t *recv[2], *send[2], *err;
} raw_chare_t;

static void *dalloc(size_t n)
{
    void *p;
    hck(tess_gpu_malloc(&p, n), "device memory");
    return p;
}

double fg_raw_run(const fg_raw_ops_t *ops, int nchares, int m, int words, int warmup, int steps,
                  int64_t *errors_p, double *launch_p)
{
    size_t       bytes = (size_t)words * sizeof(int32_t);
    raw_chare_t *c     = calloc((size_t)nchares, sizeof(*c));
    if (!c) {
        fprintf(stderr, "bench_finegrain: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < nchares; i++) {
        c[i].stream = ops->stream_create();
        for (int p = 0; p < 2; p++) {
            c[i].ev[p]   = ops->event_create();
            c[i].recv[p] = dalloc((size_t)m * bytes);
            c[i].send[p] = dalloc((size_t)m * bytes);
        }
        c[i].err = dalloc(sizeof(int32_t));
        hck(tess_gpu_memset_async(c[i].err, 0, sizeof(int32_t), c[i].stream), "memset");
        /* Step 0's messages: the kernel without a check writes them. */
        fg_args_t a = {c[i].recv[0], c[i].send[0], c[i].err, i, -1, m, words, 0, 0, nchares, 0, 0,
                       NULL};
        ops->step(c[i].stream, &a);
        ops->event_record(c[i].ev[1], c[i].stream);
    }
    double t0 = 0, launch = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            for (int i = 0; i < nchares; i++)
                ops->stream_sync(c[i].stream);
            t0     = tess_wtime();
            launch = 0;
        }
        int p = s % 2;
        for (int i = 0; i < nchares; i++) {
            for (int k = 0; k < m; k++) {
                int from = fg_wrap((int64_t)i - fg_offset(k, 0), 0, nchares);
                /* The sender's step s messages are ready at its event of step s - 1. */
                ops->stream_wait(c[i].stream, c[from].ev[1 - p]);
                ops->copy(c[i].recv[p] + (size_t)k * words, c[from].send[p] + (size_t)k * words,
                          bytes, c[i].stream);
            }
            fg_args_t a = {c[i].recv[p], c[i].send[1 - p], c[i].err, i, s, m, words, 1,
                           0, nchares, 0, 0, NULL};
            double tl = tess_wtime();
            ops->step(c[i].stream, &a);
            launch += tess_wtime() - tl;
            ops->event_record(c[i].ev[p], c[i].stream);
        }
    }
    for (int i = 0; i < nchares; i++)
        ops->stream_sync(c[i].stream);
    double  t      = tess_wtime() - t0;
    int64_t errors = 0;
    for (int i = 0; i < nchares; i++) {
        int32_t e = 0;
        hck(tess_gpu_memcpy_async(&e, c[i].err, sizeof(e), c[i].stream), "error read-back");
        ops->stream_sync(c[i].stream);
        errors += e;
        ops->stream_destroy(c[i].stream);
        for (int p = 0; p < 2; p++) {
            ops->event_destroy(c[i].ev[p]);
            tess_gpu_free(c[i].recv[p]);
            tess_gpu_free(c[i].send[p]);
        }
        tess_gpu_free(c[i].err);
    }
    free(c);
    *errors_p = errors;
    *launch_p = launch;
    return t;
}
