/*
 * app_tess.h — helpers the example apps' Tessera programs (jacobi2d_tess, minimd_tess,
 * lulesh_tess) share, as static inline functions: the number of GPUs in the job, step
 * segments, and device allocation and host-kernel launches that end the job with "PROG: WHAT
 * failed: DETAIL" when they fail (the plain MPI programs' counterpart is app_gpu.h).
 */
#ifndef APP_TESS_H
#define APP_TESS_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/*
 * APP_SEGMENT_CHECK=1 in the environment (a test of the programs, host backend): app_segment
 * replays as a recorded graph would. The first call of a slot and key for a chare runs the
 * segment and records what it enqueues (host launches with a copy of their arguments, copies:
 * app_tess_launch_host, app_tess_copy, and a program's own launcher through app_segment_note);
 * a later call with the same key re-issues the recording instead, and a new key records anew. A
 * segment whose launches depend on anything but its key then runs with stale arguments and the
 * answer changes: the tests compare it with that of a run without the mode, bit for bit. The
 * recordings are kept to the end of the run.
 */
enum { APP_SEG_LAUNCH = 0, APP_SEG_COPY = 1 };

typedef struct app_seg_op {
    int         kind;
    void      (*fn)(void *args);
    void       *dst;
    const void *src;
    size_t      size;
    _Alignas(16) unsigned char args[256];
} app_seg_op_t;

typedef struct app_seg_rec {
    void               *elem;
    int64_t             linear; /* the chare's index (another may come to the same address) */
    int                 slot, recorded;
    uint64_t            key;
    app_seg_op_t       *ops;
    int                 n, cap;
    struct app_seg_rec *next;
} app_seg_rec_t;

static pthread_mutex_t               app_seg_lock = PTHREAD_MUTEX_INITIALIZER;
static app_seg_rec_t                *app_seg_recs[256];
static _Thread_local app_seg_rec_t *app_seg_recording;

static inline int app_segment_check(void)
{
    static atomic_int on = -1;
    int               v  = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("APP_SEGMENT_CHECK");
        v             = e && *e && *e != '0';
        if (v && tess_gpu_backend() != TESS_GPU_HOST) { /* GPU kernels are not recorded here */
            fprintf(stderr, "%s: APP_SEGMENT_CHECK works on the host backend only: off\n",
                    app_tess_prog);
            v = 0;
        }
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

/* While a segment is being recorded (APP_SEGMENT_CHECK), keep a host launch (fn with `size`
 * bytes of arguments at src) or a copy (dst, src, size) it enqueues. */
static inline void app_segment_note(int kind, void (*fn)(void *), void *dst, const void *src,
                                    size_t size)
{
    app_seg_rec_t *r = app_seg_recording;
    if (!r)
        return;
    if (r->n == r->cap) {
        int           cap = r->cap ? 2 * r->cap : 16;
        app_seg_op_t *ops = realloc(r->ops, (size_t)cap * sizeof(*ops));
        if (!ops) {
            fprintf(stderr, "%s: out of memory recording a step segment\n", app_tess_prog);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        r->ops = ops, r->cap = cap;
    }
    app_seg_op_t *o = &r->ops[r->n++];
    *o              = (app_seg_op_t){.kind = kind, .fn = fn, .dst = dst, .src = src, .size = size};
    if (kind == APP_SEG_LAUNCH)
        memcpy(o->args, src, size < sizeof(o->args) ? size : sizeof(o->args));
}

/* The recording of (elem, its index, slot), made empty when there is none. */
static inline app_seg_rec_t *app_segment_rec(void *elem, int64_t linear, int slot)
{
    unsigned       h = (unsigned)(((uintptr_t)elem >> 4) * 31u + (unsigned)slot) % 256u;
    app_seg_rec_t *r;
    pthread_mutex_lock(&app_seg_lock);
    for (r = app_seg_recs[h]; r; r = r->next)
        if (r->elem == elem && r->linear == linear && r->slot == slot)
            break;
    if (!r && (r = calloc(1, sizeof(*r)))) {
        *r              = (app_seg_rec_t){.elem = elem, .linear = linear, .slot = slot,
                                          .next = app_seg_recs[h]};
        app_seg_recs[h] = r;
    }
    pthread_mutex_unlock(&app_seg_lock);
    if (!r) {
        fprintf(stderr, "%s: out of memory recording a step segment\n", app_tess_prog);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return r;
}

/* A copy ordered on `stream`, or the job ends. */
static inline void app_tess_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    app_segment_note(APP_SEG_COPY, NULL, dst, src, bytes);
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
    app_segment_note(APP_SEG_LAUNCH, fn, NULL, args, size);
    if (tess_gpu_launch_host(stream, fn, args, size) != TESS_OK)
        app_tess_fail("launch");
}

/*
 * A step segment: a chare's stream work between two communication points of a step, as a
 * function fn(ctx, elem, arg) that only enqueues work on tess_ctx_stream(ctx) (kernels, copies;
 * no sends, continuations, contributions, waits, nor changes to the chare's host state). Its
 * launches' arguments must depend on nothing but `key` (what changes from step to step is read
 * by the kernels from device memory, or is part of the key), so that the runtime may record the
 * segment once per slot (0..15) and key and replay the recording. Today a direct call (or, with
 * APP_SEGMENT_CHECK, the replay above).
 */
static inline void app_segment(tess_ctx_h ctx, void *elem, int slot, uint64_t key,
                               void (*fn)(tess_ctx_h, void *, void *), void *arg)
{
    if (!app_segment_check()) {
        fn(ctx, elem, arg);
        return;
    }
    app_seg_rec_t *r = app_segment_rec(elem, tess_ctx_linear(ctx), slot);
    tess_stream_t  s = tess_ctx_stream(ctx);
    if (r->recorded && r->key == key) { /* the replay */
        for (int i = 0; i < r->n; i++) {
            const app_seg_op_t *o = &r->ops[i];
            if ((o->kind == APP_SEG_LAUNCH ? tess_gpu_launch_host(s, o->fn, o->args, o->size)
                                           : tess_gpu_memcpy_async(o->dst, o->src, o->size, s)) !=
                TESS_OK)
                app_tess_fail("replaying a step segment");
        }
        return;
    }
    r->key = key, r->n = 0, r->recorded = 0;
    app_seg_recording = r;
    fn(ctx, elem, arg);
    app_seg_recording = NULL;
    r->recorded       = 1;
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
