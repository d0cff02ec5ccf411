/*
 * dcb_raw.c — the raw baselines of bench_devcomm, measured in the same run as Tessera:
 *
 *   d2d   cudaMemcpyAsync device-to-device on one stream, completion seen by polling an event
 *         (host backend: the backend's copy and event query);
 *   ipc   rank 1 opens rank 0's allocation through CUDA IPC (handle exchanged over MPI) and
 *         copies through the mapping on one stream, event-polled (host backend: its IPC
 *         mapping of the shared-memory arena);
 *   rdma  an own UCX context (dcb_ucx.c): ucp_get of rank 0's memory. When the runtime stages
 *         (UCX without CUDA transports, as on the H200) the baseline stages too: device-to-host
 *         on rank 0, ucp_get of pinned host memory, host-to-device on rank 1, each stage
 *         measured on its own; latency is their sum, a stream's time per message the slowest
 *         stage (a perfect pipeline), an exchange that per chunk (so the baseline is a bound).
 */
#include "dcb.h"

#include "gpu/gpu.h"

#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the host backend's (or HIP's) ops, through the runtime's gpu layer --------------------- */

static void ck(tess_status_t st, const char *what)
{
    if (st != TESS_OK)
        dcb_die("raw %s: %s", what, tess_error_detail());
}

static void *h_stream_create(void)
{
    tess_gpu_stream_h s;
    ck(tess_gpu->stream_create(&s), "stream_create");
    return s;
}
static void h_stream_destroy(void *s) { tess_gpu->stream_destroy(s); }
static void *h_event_create(void)
{
    tess_gpu_event_h e;
    ck(tess_gpu->event_create(0, &e), "event_create");
    return e;
}
static void h_event_destroy(void *e) { tess_gpu->event_destroy(e); }
static void h_copy(void *dst, const void *src, size_t n, void *s)
{
    ck(tess_gpu->memcpy_async(dst, src, n, s), "memcpy_async");
}
static void h_record_poll(void *e, void *s)
{
    ck(tess_gpu->event_record(e, s), "event_record");
    tess_status_t st;
    while ((st = tess_gpu->event_query(e)) == TESS_INPROGRESS)
        ;
    ck(st, "event_query");
}
static void h_ipc_export(void *ptr, void *handle)
{
    ck(tess_gpu->ipc_mem_export(ptr, handle), "ipc_mem_export");
}
static void *h_ipc_open(const void *handle)
{
    void *p;
    ck(tess_gpu->ipc_mem_open(handle, &p), "ipc_mem_open");
    return p;
}
static void h_ipc_close(void *p) { tess_gpu->ipc_mem_close(p); }

static const dcb_dev_ops_t host_ops = {
    .name = "backend", .stream_create = h_stream_create, .stream_destroy = h_stream_destroy,
    .event_create = h_event_create, .event_destroy = h_event_destroy, .copy = h_copy,
    .record_poll = h_record_poll, .ipc_export = h_ipc_export, .ipc_open = h_ipc_open,
    .ipc_close = h_ipc_close};

_Static_assert(DCB_IPC_HANDLE == TESS_GPU_IPC_HANDLE_SIZE, "IPC handle sizes differ");

/* ---- state ---------------------------------------------------------------------------------- */

static struct {
    const dcb_dev_ops_t *ops;
    void  *s, *e;
    char  *a, *b;    /* own device buffers; b only with d2d */
    char  *peer;     /* ipc, rank 1: rank 0's `a` through the mapping */
    char  *h;        /* rdma staged: pinned host buffer */
    size_t cap;
    int    staged;
    char   name[64];
} raw;

/* Rank root's figure on every rank. The rank that waits yields its core meanwhile: on a host
 * with few cores a spinning MPI_Bcast would slow the measuring rank's backend threads. */
static double bcast(int root, double v)
{
    MPI_Request req;
    int         done = 0;
    MPI_Ibcast(&v, 1, MPI_DOUBLE, root, MPI_COMM_WORLD, &req);
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done)
            return v;
        sched_yield();
    }
}

static int is_ipc(void) { return dcb.path == DCB_IPC_STAGED || dcb.path == DCB_IPC_DIRECT; }
static int is_rdma(void) { return dcb.path == DCB_RDMA_STAGED || dcb.path == DCB_RDMA_DIRECT; }

void dcb_raw_init(size_t cap)
{
    raw.ops = &host_ops;
#ifdef DCB_HAVE_CUDA
    if (tess_gpu_backend() == TESS_GPU_CUDA)
        raw.ops = &dcb_cuda_ops;
#endif
    raw.cap = cap;
    raw.s   = raw.ops->stream_create();
    raw.e   = raw.ops->event_create();
    if (tess_gpu_malloc((void **)&raw.a, cap) != TESS_OK)
        dcb_die("raw: no %zu bytes of device memory: %s", cap, tess_error_detail());
    if (dcb.path == DCB_D2D) {
        if (tess_gpu_malloc((void **)&raw.b, cap) != TESS_OK)
            dcb_die("raw: no %zu bytes of device memory: %s", cap, tess_error_detail());
        snprintf(raw.name, sizeof(raw.name), "raw-memcpyAsync-d2d");
    } else if (is_ipc()) {
        char h[DCB_IPC_HANDLE];
        memset(h, 0, sizeof(h));
        if (dcb.rank == 0)
            raw.ops->ipc_export(raw.a, h);
        MPI_Bcast(h, sizeof(h), MPI_BYTE, 0, MPI_COMM_WORLD);
        if (dcb.rank == 1)
            raw.peer = raw.ops->ipc_open(h);
        snprintf(raw.name, sizeof(raw.name), "raw-ipc-mapping-copy");
    } else {
        raw.staged = dcb.path == DCB_RDMA_STAGED;
        if (raw.staged && tess_gpu_malloc_host((void **)&raw.h, cap) != TESS_OK)
            dcb_die("raw: no %zu bytes of pinned memory: %s", cap, tess_error_detail());
        char *mine = raw.staged ? raw.h : raw.a;
        dcb_ucx_init(mine, mine, cap);
        snprintf(raw.name, sizeof(raw.name), raw.staged ? "raw-d2h+ucp_get+h2d" : "raw-ucp_get");
    }
    /* First touch: page in and warm both directions. */
    raw.ops->copy(raw.a, raw.a + cap / 2, cap / 2, raw.s);
    raw.ops->record_poll(raw.e, raw.s);
    MPI_Barrier(MPI_COMM_WORLD);
}

void dcb_raw_fini(void)
{
    if (is_rdma())
        dcb_ucx_fini();
    if (raw.peer)
        raw.ops->ipc_close(raw.peer);
    MPI_Barrier(MPI_COMM_WORLD); /* nobody frees memory another still maps */
    if (raw.h)
        tess_gpu_free_host(raw.h);
    tess_gpu_free(raw.a);
    if (raw.b)
        tess_gpu_free(raw.b);
    raw.ops->event_destroy(raw.e);
    raw.ops->stream_destroy(raw.s);
}

const char *dcb_raw_name(void)
{
    return raw.name;
}

/* ---- building blocks, each timed on the calling rank ----------------------------------------- */

/* `iters` copies, alternating dst<-src and src<-dst, each completed before the next. */
static double copies_serial(char *x, char *y, size_t size, int iters)
{
    double t0 = dcb_now();
    for (int i = 0; i < iters; i++) {
        if (i & 1)
            raw.ops->copy(x, y, size, raw.s);
        else
            raw.ops->copy(y, x, size, raw.s);
        raw.ops->record_poll(raw.e, raw.s);
    }
    return (dcb_now() - t0) / iters;
}

/* `msgs` copies dst+k*size <- src+k*size (k = i mod window) on one stream, then one poll. */
static double copies_bulk(char *dst, const char *src, size_t size, int window, int msgs)
{
    double t0 = dcb_now();
    for (int i = 0; i < msgs; i++) {
        size_t off = (size_t)(i % window) * size;
        raw.ops->copy(dst + off, src + off, size, raw.s);
    }
    raw.ops->record_poll(raw.e, raw.s);
    return (dcb_now() - t0) / msgs;
}

/* `count` kernels over chunks of `size` bytes of x (count/odf rounds of odf chunks). */
static double kernels_bulk(char *x, size_t size, int odf, int count)
{
    double t0 = dcb_now();
    for (int i = 0; i < count; i++)
        dcb_scale(raw.s, (float *)(x + (size_t)(i % odf) * size), size / sizeof(float));
    raw.ops->record_poll(raw.e, raw.s);
    return (dcb_now() - t0) / count;
}

/* One exchange through x (sender side) and y (receiver side): odf chunks forward, then back,
 * with a kernel after each arrival when asked; completed by one poll. */
static double exchange_stream(char *x, char *y, size_t volume, int odf, int iters, int kernel)
{
    size_t chunk = volume / (size_t)odf;
    double t0    = dcb_now();
    for (int it = 0; it < iters; it++) {
        for (int p = 0; p < odf; p++) {
            raw.ops->copy(y + p * chunk, x + p * chunk, chunk, raw.s);
            if (kernel)
                dcb_scale(raw.s, (float *)(y + p * chunk), chunk / sizeof(float));
        }
        for (int p = 0; p < odf; p++) {
            raw.ops->copy(x + p * chunk, y + p * chunk, chunk, raw.s);
            if (kernel)
                dcb_scale(raw.s, (float *)(x + p * chunk), chunk / sizeof(float));
        }
        raw.ops->record_poll(raw.e, raw.s);
    }
    return (dcb_now() - t0) / iters;
}

/* Staged RDMA stages, rank 0 then rank 1: device-to-host there, get, host-to-device here. */
typedef struct stages {
    double d2h, get, h2d;
} stages_t;

static stages_t staged_latency(size_t size, int iters)
{
    stages_t t = {0, 0, 0};
    double   v = 0;
    if (dcb.rank == 0) {
        double t0 = dcb_now();
        for (int i = 0; i < iters; i++) {
            raw.ops->copy(raw.h, raw.a, size, raw.s);
            raw.ops->record_poll(raw.e, raw.s);
        }
        v = (dcb_now() - t0) / iters;
    }
    t.d2h = bcast(0, v);
    t.get = dcb_ucx_get_latency(size, iters);
    if (dcb.rank == 1) {
        double t0 = dcb_now();
        for (int i = 0; i < iters; i++) {
            raw.ops->copy(raw.a, raw.h, size, raw.s);
            raw.ops->record_poll(raw.e, raw.s);
        }
        v = (dcb_now() - t0) / iters;
    }
    t.h2d = bcast(1, v);
    return t;
}

static stages_t staged_bulk(size_t size, int window, int msgs)
{
    stages_t t = {0, 0, 0};
    double   v = 0;
    if (dcb.rank == 0)
        v = copies_bulk(raw.h, raw.a, size, window, msgs);
    t.d2h = bcast(0, v);
    t.get = dcb_ucx_get_bulk(size, msgs);
    if (dcb.rank == 1)
        v = copies_bulk(raw.a, raw.h, size, window, msgs);
    t.h2d = bcast(1, v);
    return t;
}

static double max3(stages_t t)
{
    double m = t.d2h > t.get ? t.d2h : t.get;
    return m > t.h2d ? m : t.h2d;
}

/* ---- the baselines --------------------------------------------------------------------------- */

double dcb_raw_latency(size_t size, int iters)
{
    if (dcb.path == DCB_D2D)
        return copies_serial(raw.a, raw.b, size, iters);
    if (is_ipc()) {
        double v = dcb.rank == 1 ? copies_serial(raw.peer, raw.a, size, iters) : 0;
        return bcast(1, v);
    }
    if (!raw.staged)
        return dcb_ucx_get_latency(size, iters);
    stages_t t = staged_latency(size, iters);
    return t.d2h + t.get + t.h2d;
}

double dcb_raw_stream(size_t size, int window, int msgs)
{
    if (dcb.path == DCB_D2D)
        return copies_bulk(raw.b, raw.a, size, window, msgs);
    if (is_ipc()) {
        double v = dcb.rank == 1 ? copies_bulk(raw.a, raw.peer, size, window, msgs) : 0;
        return bcast(1, v);
    }
    if (!raw.staged)
        return dcb_ucx_get_bulk(size, msgs);
    return max3(staged_bulk(size, window, msgs));
}

double dcb_raw_exchange(size_t volume, int odf, int iters, int kernel)
{
    if (dcb.path == DCB_D2D)
        return exchange_stream(raw.a, raw.b, volume, odf, iters, kernel);
    if (is_ipc()) {
        double v = dcb.rank == 1 ? exchange_stream(raw.peer, raw.a, volume, odf, iters, kernel)
                                 : 0;
        return bcast(1, v);
    }
    /* RDMA: odf chunks each way, each chunk at the rate of the slowest stage (staged) or of a
     * get (direct), plus the kernels run one after another on rank 1. */
    size_t chunk = volume / (size_t)odf;
    int    count = odf * iters;
    double per   = raw.staged ? max3(staged_bulk(chunk, odf, count))
                              : dcb_ucx_get_bulk(chunk, count);
    double k = 0;
    if (kernel) {
        double v = dcb.rank == 1 ? kernels_bulk(raw.a, chunk, odf, count) : 0;
        k        = bcast(1, v);
    }
    return 2.0 * odf * (per + k);
}
