/*
 * app_tess.h — helpers the example apps' Tessera programs (jacobi2d_tess, minimd_tess,
 * lulesh_tess) share, as static inline functions: the number of GPUs in the job, step
 * segments, and device allocation and host-kernel launches that end the job with "PROG: WHAT
 * failed: DETAIL" when they fail (the plain MPI programs' counterpart is app_gpu.h).
 */
#ifndef APP_TESS_H
#define APP_TESS_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <tessera.h>
#include <tessera/gpu.h>

/* The program's name in failure messages (app_tess_set_prog). */
static const char *app_tess_prog = "app";

static inline void app_tess_set_prog(const char *prog)
{
    app_tess_prog = prog;
}

/* Ends the job: "PROG: WHAT failed: " and Tessera's error detail. */
static inline _Noreturn void app_tess_fail(const char *what)
{
    fprintf(stderr, "%s: %s failed: %s\n", app_tess_prog, what, tess_error_detail());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Device memory (tess_gpu_malloc; zero bytes allocate a few), or the job ends. */
static inline void *app_tess_dev_alloc(size_t bytes)
{
    void *p = NULL;
    if (tess_gpu_malloc(&p, bytes ? bytes : 8) != TESS_OK)
        app_tess_fail("device allocation");
    return p;
}

/* Pinned host memory (tess_gpu_malloc_host), or the job ends. */
static inline void *app_tess_pinned_alloc(size_t bytes)
{
    void *p = NULL;
    if (tess_gpu_malloc_host(&p, bytes ? bytes : 8) != TESS_OK)
        app_tess_fail("pinned allocation");
    return p;
}

static inline void app_tess_dev_free(void *p)
{
    if (p && tess_gpu_free(p) != TESS_OK)
        app_tess_fail("device free");
}

static inline void app_tess_pinned_free(void *p)
{
    if (p && tess_gpu_free_host(p) != TESS_OK)
        app_tess_fail("pinned free");
}

/* A copy ordered on `stream`, or the job ends. */
static inline void app_tess_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    if (tess_gpu_memcpy_async(dst, src, bytes, stream) != TESS_OK)
        app_tess_fail("copy");
}

/* Waits for `stream`, or the job ends. */
static inline void app_tess_sync(void *stream)
{
    if (tess_gpu_stream_sync(stream) != TESS_OK)
        app_tess_fail("stream synchronization");
}

/* A host function as a kernel on `stream` (the kernels' host launcher hook), or the job ends. */
static inline void app_tess_launch_host(void *stream, void (*fn)(void *args), const void *args,
                                        size_t size)
{
    if (tess_gpu_launch_host(stream, fn, args, size) != TESS_OK)
        app_tess_fail("launch");
}

/*
 * A step segment: a chare's stream work between two communication points of a step, as a
 * function fn(ctx, elem, arg) that only enqueues work on tess_ctx_stream(ctx) (kernels, copies;
 * no sends, continuations, contributions, waits, nor changes to the chare's host state). Its
 * launches' arguments depend on nothing but `key` (what changes from step to step is read by
 * the kernels from device memory, or is part of the key), so the runtime records it once per
 * slot (0..15) and key as a step graph and replays the recording after (tess_gpu_graph_run;
 * +tess-graphs 0 calls fn every time). TESS_CHECK=1 records again at each replay and compares.
 * In a timeline trace (TESS_TRACE) its device time is a span "segment" on the chare's stream.
 */
static inline void app_segment(tess_ctx_h ctx, int slot, uint64_t key, tess_gpu_record_fn_t fn,
                               void *arg)
{
    int traced = tess_trace_enabled(); /* its device time as a span "segment" on the stream */
    if (traced && tess_trace_begin(ctx, "segment") != TESS_OK)
        app_tess_fail("tess_trace_begin");
    if (tess_gpu_graph_run(ctx, slot, key, fn, arg) != TESS_OK)
        app_tess_fail("step graph");
    if (traced && tess_trace_end(ctx, "segment") != TESS_OK)
        app_tess_fail("tess_trace_end");
}

/* GPUs in the job: on each node, min(devices, processes); at least 1. */
static inline int app_count_gpus(void)
{
    MPI_Comm node;
    int      lrank, lsize, mine = 0, total = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    if (lrank == 0)
        mine = tess_gpu_num_devices() < lsize ? tess_gpu_num_devices() : lsize;
    MPI_Comm_free(&node);
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return total > 0 ? total : 1;
}

#endif
