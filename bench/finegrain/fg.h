/*
 * fg.h — bench_finegrain's shared definitions: the chare-step kernel's math (once for CUDA and
 * the host backend), its arguments, and the raw baseline's operations.
 *
 * A chare's step reads the M messages it received (M slots of `words` int32 each) and writes the
 * M messages it sends next. Every word carries a value that depends on its sender, step and
 * position, so the kernel checks that each received slot holds what its sender wrote for this
 * step (a wrong, stale or missing message counts an error).
 */
#ifndef FG_H
#define FG_H

#include <stddef.h>
#include <stdint.h>
#include <tessera/kernel.h>

#define FG_MAX_M 64

/* Neighbour k of a chare is at ring offset fg_offset(k, shift): +1, -1, +2, -2, … past `shift`
 * (0: the chares of this process; chares per process: those of the next and previous process).
 * The set is symmetric: a chare's receivers are also its senders, so a sender that got step s
 * from every neighbour knows they have consumed its step s-1 buffers (double buffering holds). */
static inline TESS_HD int32_t fg_offset(int k, int32_t shift)
{
    int32_t o = shift + k / 2 + 1;
    return k % 2 ? -o : o;
}

static inline TESS_HD int32_t fg_wrap(int64_t i, int32_t base, int32_t ring)
{
    int64_t r = (i - base) % ring;
    return (int32_t)(base + (r < 0 ? r + ring : r));
}

/* The value of word w of any message chare `from` sends for step `step`. */
static inline TESS_HD int32_t fg_word(int32_t from, int32_t step, int32_t w)
{
    if (w == 0)
        return from;
    if (w == 1)
        return step;
    return (int32_t)((uint32_t)from * 2654435761u + (uint32_t)step * 40503u + (uint32_t)w);
}

typedef struct fg_args {
    const int32_t *in;    /* m slots of `words`: the messages of step `step` */
    int32_t       *out;   /* m slots: the messages of step `step` + 1 */
    int32_t       *err;   /* errors found (device) */
    int32_t        me, step, m, words, check;
    int32_t        base, ring, shift; /* the ring the offsets wrap in */
    int32_t        delay_us;          /* wait that long first (a slow kernel) */
    /* --in-place: device memory holding M pointers, where message k of this step lies when it
     * was taken in place (the sender's buffer), NULL where it is in slot k of `in`; NULL: every
     * message is in `in`. */
    const int32_t *const *slots;
} fg_args_t;

/* Element e of the step: returns 1 when the received word is wrong. */
static inline TESS_HD int fg_point(const fg_args_t *a, int64_t e)
{
    int32_t k = (int32_t)(e / a->words), w = (int32_t)(e % a->words);
    int     bad = 0;
    if (a->check) {
        int32_t from = fg_wrap((int64_t)a->me - fg_offset(k, a->shift), a->base, a->ring);
        int32_t got  = a->slots && a->slots[k] ? a->slots[k][w] : a->in[e];
        bad          = got != fg_word(from, a->step, w);
    }
    a->out[e] = fg_word(a->me, a->step + 1, w);
    return bad;
}

/* The raw baseline's operations: the calls a CUDA programmer makes (cudaStreamWaitEvent,
 * cudaMemcpyAsync, a launch, cudaEventRecord) — CUDA itself with CUDA, the host backend's
 * equivalents without. */
typedef struct fg_raw_ops {
    const char *name;
    void *(*stream_create)(void);
    void (*stream_destroy)(void *s);
    void (*stream_sync)(void *s);
    void *(*event_create)(void);
    void (*event_destroy)(void *e);
    void (*event_record)(void *e, void *s);
    void (*stream_wait)(void *s, void *e);
    void (*copy)(void *dst, const void *src, size_t n, void *s);
    void (*step)(void *s, const fg_args_t *a);
} fg_raw_ops_t;

#ifdef __cplusplus
extern "C" {
#endif
/* fg_cuda.cu (CUDA builds only). */
void                fg_step_cuda(void *stream, const fg_args_t *a);
const fg_raw_ops_t *fg_raw_cuda_ops(void);
void                fg_cuda_calls(void); /* --calls: µs per CUDA call of a chare step */
void                fg_cuda_thread_scaling(void); /* --calls: raw steps/s from 1-8 threads */
/* --procs-rate: µs of `steps` raw chare steps from this process, started at go() */
double fg_cuda_proc_steps(int mode, int steps, void (*go)(void));
void                fg_add_cuda(void *stream, int32_t *p, int32_t n); /* p[0, n) += 1 */
/* fg_graph.c: --graph (entries registered with the others, on every process). */
void                fg_graph_register(void);
int                 fg_graph_bench(int ops, int chares_per_pe, int steps, int warmup, int reps,
                                   int use_cuda);
/* fg_raw.c */
const fg_raw_ops_t *fg_raw_host_ops(void);
void                fg_step_host_launch(void *stream, const fg_args_t *a);
/* The raw loop over `nchares` chares (a ring, offsets as above): `warmup` untimed steps, then
 * `steps` timed ones; returns their seconds, the errors the kernels found and the seconds the
 * timed steps spent in their kernel launches. Main thread, outside tess_run. */
double fg_raw_run(const fg_raw_ops_t *ops, int nchares, int m, int words, int warmup, int steps,
                  int64_t *errors_p, double *launch_p);
#ifdef __cplusplus
}
#endif

#endif /* FG_H */
