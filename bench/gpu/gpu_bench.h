/*
 * gpu_bench.h — what the GPU-layer benchmarks (bench_launch, bench_cont) share: timing and
 * statistics, CSV files, the empty "kernel" chares launch, and the raw baseline — chains of
 * (launch the empty kernel on a stream, arm a completion, when it has completed launch the
 * next) driven by plain threads that poll all their chains round-robin.
 *
 * Two kinds of kernel, chosen once by bg_setup() from the backend Tessera runs on:
 *   - cuda: the empty kernel <<<SMs, 32>>> of bg_cuda.cu, launched on a cudaStream_t; the raw
 *     chains use their own non-blocking streams and cudaEventRecord/cudaEventQuery.
 *   - host (host backend, CI; also HIP, which has no launcher here): a host function enqueued
 *     with tess_gpu_launch_host on the chare's stream; the raw chains use the same streams
 *     (taken from the chares outside a phase) and a host function that sets the chain's flag,
 *     so the baseline is the backend driven directly through the public API.
 */
#ifndef GPU_BENCH_H
#define GPU_BENCH_H

#include <tessera.h>
#include <tessera/gpu.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "bg_cuda.h"

/* ---- time, statistics, options ----------------------------------------------------------- */

double bg_now_ns(void);
/** Median of v[0..n) (sorts v). */
double bg_median(double *v, int n);
/** Value at percentile p (0..100) of v[0..n), nearest rank (sorts v). */
double bg_percentile(double *v, size_t n, double p);
/** Parse "1,2,4" into out[0..max); returns the count, or -1 on a bad list. */
int bg_parse_list(const char *s, long *out, int max);
/** Print "prog: what: detail" to stderr and abort the job. */
void bg_die(const char *prog, const char *what, const char *detail);

/** Open `path` for appending (rank 0); writes `header` first when the file is empty. NULL on
 *  failure (reported). */
FILE *bg_csv_open(const char *path, const char *header);

/* ---- the kernel chares launch ------------------------------------------------------------ */

typedef enum bg_kind {
    BG_KIND_CUDA = 0,
    BG_KIND_HOST = 1
} bg_kind_t;

extern bg_kind_t   bg_kind;
extern int         bg_sms;  /* SMs of the device (cuda), 0 for host */
extern const char *bg_prog; /* the program, for messages (set by bg_setup) */

/** After tess_init: choose the kind from tess_gpu_backend() and set up the CUDA side (on the
 *  device Tessera uses). Aborts on failure. */
void bg_setup(const char *prog);
/** "cuda <<<132, 32>>>" or "host function", for the table. */
const char *bg_kind_text(void);
/** Launch the empty kernel on `stream` (a chare's tess_ctx_stream). 0 or -1 (bg_error()). */
int bg_launch(tess_stream_t stream);
const char *bg_error(void);

/* ---- where the host's time goes (--breakdown) ---------------------------------------------- */

/**
 * With bg_split_on set, the raw chains and the benchmarks add the host time of their calls here
 * (nanoseconds, all threads together): launches, arming a completion (raw: the event record;
 * Tessera: tess_gpu_then) and polls (raw: the event queries; Tessera polls inside the runtime,
 * so that part is the rest of its time per kernel). Timing costs two clock reads per call, so
 * the rates of a run with the split on are a little lower than without.
 */
typedef struct bg_split {
    _Atomic uint64_t launch_ns, arm_ns, poll_ns, polls, kernels;
} bg_split_t;

extern int        bg_split_on;
extern bg_split_t bg_split;
void bg_split_reset(void);
static inline void bg_split_add(_Atomic uint64_t *sum, double t0_ns, double t1_ns)
{
    atomic_fetch_add_explicit(sum, (uint64_t)(t1_ns - t0_ns), memory_order_relaxed);
}

/* ---- the raw baseline: chains driven by threads -------------------------------------------- */

typedef struct bg_chain {
    _Alignas(64) void *stream;
    void              *event; /* cuda */
    _Atomic int        flag;  /* host: set by the host function when the kernel ran */
    int                done;
    int64_t            count;
    double             last_ns;
} bg_chain_t;

typedef struct bg_raw {
    int         nthreads, nchains; /* chains per thread (the most any run uses) */
    bg_chain_t *chains;            /* nthreads * nchains, thread t's at t * nchains */
    int         own_streams;       /* cuda: created here */
} bg_raw_t;

/**
 * Set up nthreads x nchains chains. cuda: own streams and events; host: streams[t * nchains + c]
 * (the chares' streams; may not be NULL). Aborts on failure.
 */
void bg_raw_init(bg_raw_t *r, int nthreads, int nchains, tess_stream_t *streams);
void bg_raw_fini(bg_raw_t *r);

/**
 * Kernels per second of r->nthreads threads, each driving `chains` (<= r->nchains) chains for
 * `seconds`: a chain stops at its first completion after the deadline; the rate is all
 * completions over the time from the earliest start to the last stop. Runs on new threads;
 * the caller waits. Aborts on a device error.
 */
double bg_raw_rate(bg_raw_t *r, int chains, double seconds);

/**
 * Round trips on the calling thread with chain 0: launch, arm, poll until complete, repeated
 * `iters` times; samples_ns[i] gets each one (launch to completion seen). Aborts on error.
 */
void bg_raw_roundtrip(bg_raw_t *r, int iters, double *samples_ns);

#endif /* GPU_BENCH_H */
