/*
 * dcb.h — shared by the files of bench_devcomm (the device-message benchmarks): the run's
 * configuration, timing and reporting helpers, the raw baselines and the Tessera measurements.
 *
 *   bench_devcomm.c  options, the driver loops, CSV and table output, the goals
 *   dcb_tess.c       Tessera: ping-pong, message stream, overdecomposed exchange (+ kernel)
 *   dcb_raw.c        raw baselines: D2D copies, copies through a CUDA IPC mapping, staging
 *   dcb_raw_cuda.c   the raw device operations on the CUDA runtime (only with CUDA)
 *   dcb_ucx.c        raw baseline of the RDMA path: an own UCX context and ucp_get
 *   dcb_scale.c      the O(n) kernel after each receive: CUDA launcher or host loop
 */
#ifndef DCB_H
#define DCB_H

#include <tessera.h>
#include <tessera/gpu.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DCB_ODF_MAX 64

/* The path under test, as the runtime actually took it (from tess_dc_get_stats). */
enum dcb_path { DCB_D2D, DCB_IPC_STAGED, DCB_IPC_DIRECT, DCB_RDMA_STAGED, DCB_RDMA_DIRECT };

typedef struct dcb_cfg {
    int    rank, nprocs;
    int    path;           /* enum dcb_path */
    const char *label;     /* "d2d", "ipc-staged", … */
    int    reps;           /* repetitions per point; medians are reported */
    double target_s;       /* time one repetition of one measurement should take */
    int    quick;
} dcb_cfg_t;

extern dcb_cfg_t dcb;

double dcb_now(void);                           /* seconds, monotonic */
double dcb_median(double *v, int n);
_Noreturn void dcb_die(const char *fmt, ...);
/* Iterations for a measurement of `target` seconds whose iterations take about `per` seconds,
 * clamped to [lo, hi]. The same answer on every rank when `per` is the same. */
int dcb_iters(double per, double target, int lo, int hi);

/* ---- raw device operations (dcb_raw.c, dcb_raw_cuda.c) ------------------------------------- */

#define DCB_IPC_HANDLE 128

/* What the raw baselines need of the device, called straight on the vendor runtime (CUDA) or
 * on the host backend's ops. Failures end the run. Main thread only. */
typedef struct dcb_dev_ops {
    const char *name;
    void *(*stream_create)(void);
    void  (*stream_destroy)(void *s);
    void *(*event_create)(void);
    void  (*event_destroy)(void *e);
    void  (*copy)(void *dst, const void *src, size_t n, void *s);
    /** Record e on s, then poll it until it completed. */
    void  (*record_poll)(void *e, void *s);
    void  (*ipc_export)(void *ptr, void *handle);
    void *(*ipc_open)(const void *handle);
    void  (*ipc_close)(void *ptr);
} dcb_dev_ops_t;

#ifdef DCB_HAVE_CUDA
extern const dcb_dev_ops_t dcb_cuda_ops;
#endif

/* ---- the kernel (dcb_scale.c, dcb_scale_cuda.cu) -------------------------------------------- */

/** x[i] = a x[i] + b for n floats, in order on `stream` (a tess_stream_t of the backend). */
void dcb_scale(tess_stream_t stream, float *x, size_t n);
#ifdef DCB_HAVE_CUDA
void dcb_scale_cuda(void *cuda_stream, float *x, size_t n, float a, float b);
#endif

/* ---- raw baselines (dcb_raw.c, dcb_ucx.c) --------------------------------------------------- */

/** Set up the baselines of dcb.path (collective), with buffers of `cap` bytes per side. */
void dcb_raw_init(size_t cap);
void dcb_raw_fini(void);
/** The baseline's name for the CSV ("raw-cudaMemcpyAsync", …). */
const char *dcb_raw_name(void);
/* Each returns seconds on every rank (collective). */
double dcb_raw_latency(size_t size, int iters);          /* one-way, per copy */
double dcb_raw_stream(size_t size, int window, int msgs); /* per message */
double dcb_raw_exchange(size_t volume, int odf, int iters, int kernel); /* per exchange */

/* RDMA baseline with an own UCX context (dcb_ucx.c). Staged: pinned host memory on both sides
 * (the device side is copied by the caller); direct: the given buffers. */
void   dcb_ucx_init(void *src0, void *dst1, size_t cap);
void   dcb_ucx_fini(void);
/* On rank 1: get `size` bytes from rank 0's buffer, one at a time (per get) or `count`
 * outstanding (per get). Rank 0 progresses meanwhile. Collective; seconds on every rank. */
double dcb_ucx_get_latency(size_t size, int iters);
double dcb_ucx_get_bulk(size_t size, int count);

/* ---- Tessera (dcb_tess.c) ------------------------------------------------------------------- */

void   dcb_tess_init(size_t cap, size_t odf_cap);
void   dcb_tess_fini(void);
/** One-way latency of a device-message ping-pong; `wait_complete`: the entry runs once the data
 *  is in place (else as soon as the copy is enqueued); 2: that, and the entry sends the data
 *  it got on as TESS_STREAM_READY (complete: no stream to wait for). */
double dcb_tess_latency(size_t size, int iters, int wait_complete);
/** Time per message of a stream of `msgs` messages, `window` in flight. `check` verifies
 *  the data that arrived last. */
double dcb_tess_stream(size_t size, int window, int msgs, int check);
/** Time per exchange: `odf` pairs each move volume/odf bytes there and back (with a kernel
 *  over them on each side when `kernel`). */
double dcb_tess_exchange(size_t volume, int odf, int iters, int kernel);
/** The path the runtime took for the messages so far (enum dcb_path; -1 mixed or none). */
int    dcb_tess_path_taken(void);
/** Over all processes, so far: direct RDMA messages sent, the receivers' questions to the
 *  device about their streams (tess_dc_stats_t rdma_recv_queries), the receives that
 *  started their gets without one (rdma_quiet_recvs), the active messages posted to UCX
 *  (am_sends, every kind) and the acknowledgements of direct RDMA sends (rdma_acks).
 *  Collective. */
#define DCB_RDMA_COUNTS 5
void   dcb_tess_rdma_counts(uint64_t counts[DCB_RDMA_COUNTS]);

#endif /* DCB_H */
