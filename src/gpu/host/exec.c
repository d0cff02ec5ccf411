/*
 * exec.c — streams, the executor threads that run them, waiting for streams and events, and a
 * stream's recording into a graph (the event slots themselves are in events.c; the operations,
 * built and handed to a stream through tess_gpu_host_exec_begin and _submit, in enqueue.c).
 *
 * Scheduling. A stream is a FIFO of operations. A stream whose first operation can run sits on
 * the ready list; an executor takes it, runs that one operation outside the lock, and puts the
 * stream back if more is queued, so a stream never runs two operations at once and different
 * streams run on different executors. A stream whose first operation waits for an event that
 * has not completed sits on the blocked list instead and holds no executor: an executor that
 * completes a record re-checks the blocked streams, and while one of them waits on an event
 * another process may record (an IPC event), one idle executor polls with a growing backoff.
 * Idle executors otherwise sleep on a condition variable.
 *
 * Memory ordering. Everything an operation did happens before what the next executor does
 * with its stream (the lock), and before anything that saw its event complete (the record's
 * release on `completed`, the observer's acquire) or saw the stream idle (`done`).
 */
#include "host.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

typedef tess_gpu_host_op_t exec_op_t;

struct tess_gpu_stream {
    uint32_t                magic;
    exec_op_t              *head, *tail; /* queued, not started */
    _Atomic uint64_t        enq, done;   /* written under the lock, read without it */
    int                     running, ready, blocked, blocked_ipc, destroying, nsyncers;
    size_t                  blocked_idx;
    pthread_cond_t          cv; /* done advanced (for stream_sync and drain) */
    struct tess_gpu_stream *ready_next, *all_prev, *all_next;
    tess_gpu_graph_h        rec; /* recording a graph (graph_begin): enqueues go there */
};

typedef struct exec_thread {
    pthread_t thread;
    uint64_t  rng;
    int       polling;
} exec_thread_t;

#define EXEC_POLL_MIN_NS   5000ull
#define EXEC_POLL_MAX_NS   500000ull
#define EXEC_OP_CACHE      1024

static struct {
    pthread_mutex_t   lock;
    pthread_cond_t    work_cv;  /* executors */
    pthread_cond_t    event_cv; /* event_sync */
    tess_gpu_stream_h ready_head, ready_tail;
    tess_vec_t        blocked;
    size_t            nblocked_ipc;
    tess_gpu_stream_h all;
    exec_op_t        *free_ops;
    size_t            nfree_ops, pending;
    _Atomic int       busy;     /* pending != 0, for lock-free readers */
    int               nidle, polling, shutdown, nevsync;
    exec_thread_t    *threads;
    int               nthreads;
    tess_gpu_stream_h default_stream;
    _Atomic(tess_gpu_notify_fn_t) notify;
    int               notifying; /* executors inside a notify call (lock) */
} exec = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void exec_deadline(struct timespec *ts, uint64_t ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ns += (uint64_t)ts->tv_nsec;
    ts->tv_sec += (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

static tess_status_t exec_stream_check(tess_gpu_stream_h *s, const char *fn)
{
    if (!*s)
        *s = exec.default_stream;
    if (tess_unlikely((*s)->magic != TESS_GPU_HOST_STREAM_MAGIC || (*s)->destroying))
        return tess_error(TESS_ERR_INVALID, "%s: %p is not a live stream", fn, (void *)*s);
    return TESS_OK;
}

/* What a recording cannot hold: an error naming the call (lock held). */
static tess_status_t exec_not_recording(tess_gpu_stream_h s, const char *fn)
{
    if (tess_likely(!s->rec))
        return TESS_OK;
    s->rec->broken = 1; /* as a CUDA capture is invalidated: graph_end fails */
    return tess_error(TESS_ERR_UNSUPPORTED, "%s on stream %p, which records a graph: a graph "
                      "holds copies, sets and kernels only", fn, (void *)s);
}

/* ---- the queues (everything here runs with exec.lock held) ---------------------------------- */

static exec_op_t *op_get(void)
{
    exec_op_t *op = exec.free_ops;
    if (op) {
        exec.free_ops = op->next;
        exec.nfree_ops--;
        return op;
    }
    return tess_malloc(sizeof(*op), "a stream operation");
}

static void op_put(exec_op_t *op)
{
    if (exec.nfree_ops >= EXEC_OP_CACHE) {
        free(op);
        return;
    }
    op->next      = exec.free_ops;
    exec.free_ops = op;
    exec.nfree_ops++;
}

static void stream_free(tess_gpu_stream_h s)
{
    if (s->all_prev)
        s->all_prev->all_next = s->all_next;
    else
        exec.all = s->all_next;
    if (s->all_next)
        s->all_next->all_prev = s->all_prev;
    pthread_cond_destroy(&s->cv);
    s->magic = 0;
    free(s);
}

static void stream_maybe_free(tess_gpu_stream_h s)
{
    if (s->destroying && !s->head && !s->running && !s->ready && !s->blocked && !s->nsyncers)
        stream_free(s);
}

static void stream_retire(tess_gpu_stream_h s, exec_op_t *op)
{
    atomic_store_explicit(&s->done, atomic_load_explicit(&s->done, memory_order_relaxed) + 1,
                          memory_order_release);
    if (--exec.pending == 0)
        atomic_store_explicit(&exec.busy, 0, memory_order_relaxed);
    if (s->nsyncers)
        pthread_cond_broadcast(&s->cv);
    op_put(op);
}

static void blocked_set(tess_gpu_stream_h s, int ipc)
{
    if (!s->blocked) {
        if (tess_vec_push(&exec.blocked, s) != TESS_OK)
            tess_fatal("host backend: cannot track a blocked stream"); /* 8 bytes */
        s->blocked_idx = exec.blocked.count - 1;
        s->blocked     = 1;
        s->blocked_ipc = 0;
    }
    exec.nblocked_ipc += (size_t)ipc - (size_t)s->blocked_ipc;
    s->blocked_ipc = ipc;
    /* Another process may complete the event: make sure an idle executor starts polling. */
    if (ipc && !exec.polling && exec.nidle > 0)
        pthread_cond_signal(&exec.work_cv);
}

static void blocked_clear(tess_gpu_stream_h s)
{
    if (!s->blocked)
        return;
    size_t i = s->blocked_idx;
    tess_vec_swap_remove(&exec.blocked, i);
    if (i < exec.blocked.count)
        ((tess_gpu_stream_h)exec.blocked.items[i])->blocked_idx = i;
    exec.nblocked_ipc -= (size_t)s->blocked_ipc;
    s->blocked = s->blocked_ipc = 0;
}

static inline int wait_satisfied(const exec_op_t *op)
{
    return atomic_load_explicit(&op->u.ev.slot->completed, memory_order_acquire) >= op->u.ev.seq;
}

/* Decide what s (not running, not on the ready list) does next: consume satisfied waits, then
 * go blocked, ready, or idle. */
static void stream_advance(tess_gpu_stream_h s)
{
    while (s->head && s->head->kind == OP_WAIT) {
        exec_op_t *op = s->head;
        if (!wait_satisfied(op)) {
            blocked_set(s, op->u.ev.ipc);
            return;
        }
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        stream_retire(s, op);
    }
    blocked_clear(s);
    if (s->head) {
        s->ready      = 1;
        s->ready_next = NULL;
        if (exec.ready_tail)
            exec.ready_tail->ready_next = s;
        else
            exec.ready_head = s;
        exec.ready_tail = s;
        if (exec.nidle > 0) /* idle executors count themselves under the lock */
            pthread_cond_signal(&exec.work_cv);
    } else {
        stream_maybe_free(s);
    }
}

static tess_gpu_stream_h ready_pop(void)
{
    tess_gpu_stream_h s = exec.ready_head;
    if (s) {
        exec.ready_head = s->ready_next;
        if (!exec.ready_head)
            exec.ready_tail = NULL;
        s->ready = 0;
    }
    return s;
}

/* Returns whether some blocked stream moved on. Walks backwards: stream_advance only ever
 * removes the stream it is given, by moving the last entry (already visited) into its place. */
static int exec_recheck_blocked(void)
{
    int progress = 0;
    for (size_t i = exec.blocked.count; i-- > 0;) {
        tess_gpu_stream_h s = exec.blocked.items[i];
        if (wait_satisfied(s->head)) {
            stream_advance(s);
            progress = 1;
        }
    }
    return progress;
}

static void stream_push(tess_gpu_stream_h s, exec_op_t *op)
{
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    atomic_store_explicit(&s->enq, atomic_load_explicit(&s->enq, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (exec.pending++ == 0)
        atomic_store_explicit(&exec.busy, 1, memory_order_relaxed);
    if (!s->running && !s->ready && !s->blocked)
        stream_advance(s);
}

/* ---- the executors ------------------------------------------------------------------------ */

static void event_complete(tess_gpu_host_evslot_t *slot, uint64_t seq)
{
    uint64_t cur = atomic_load_explicit(&slot->completed, memory_order_relaxed);
    if (cur >= seq)
        return; /* a later record of the event already ran */
    atomic_store_explicit(&slot->t_ns, tess_time_ns(), memory_order_relaxed);
    while (cur < seq && !atomic_compare_exchange_weak_explicit(&slot->completed, &cur, seq,
                                                               memory_order_release,
                                                               memory_order_relaxed))
        ;
}

static void exec_run_one(exec_op_t *op)
{
    if (tess_unlikely(tess_gpu_host_fault_skip(op->kind == OP_FN, op->kind == OP_RECORD)))
        return;
    switch (op->kind) {
    case OP_COPY:
        memcpy(op->u.copy.dst, op->u.copy.src, op->u.copy.size);
        break;
    case OP_SET:
        memset(op->u.set.dst, op->u.set.value, op->u.set.size);
        break;
    case OP_FN:
        op->u.fn(op->args);
        break;
    case OP_RECORD:
        event_complete(op->u.ev.slot, op->u.ev.seq);
        break;
    case OP_SIGNAL:
        atomic_store_explicit(op->u.sig.word, op->u.sig.value, memory_order_release);
        break;
    default:
        tess_fatal("host backend: operation kind %d cannot be run", op->kind);
    }
}

static void exec_run(exec_thread_t *t, exec_op_t *op)
{
    int jitter = tess_gpu_host.params.host_jitter_us;
    if (jitter > 0) {
        t->rng ^= t->rng << 13;
        t->rng ^= t->rng >> 7;
        t->rng ^= t->rng << 17;
        uint64_t        us = t->rng % ((uint64_t)jitter + 1);
        struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    if (op->kind == OP_GRAPH) {
        tess_gpu_graph_h g = op->u.graph;
        for (size_t i = 0; i < g->n; i++)
            exec_run_one(&g->ops[i]);
        return;
    }
    exec_run_one(op);
}

static void *exec_main(void *arg)
{
    exec_thread_t *t       = arg;
    uint64_t       backoff = EXEC_POLL_MIN_NS;

    pthread_mutex_lock(&exec.lock);
    for (;;) {
        tess_gpu_stream_h s = ready_pop();
        if (s) {
            if (t->polling) {
                /* Hand polling to an idle executor while this one is busy. */
                t->polling = exec.polling = 0;
                if (exec.nblocked_ipc > 0 && exec.nidle > 0)
                    pthread_cond_signal(&exec.work_cv);
            }
            exec_op_t *op = s->head;
            s->head       = op->next;
            if (!s->head)
                s->tail = NULL;
            s->running = 1;
            pthread_mutex_unlock(&exec.lock);

            exec_run(t, op);
            int record = op->kind == OP_RECORD, signal = op->kind == OP_SIGNAL;
            if (op->kind == OP_GRAPH)
                tess_gpu_host_graph_unref(op->u.graph); /* this launch's reference */

            pthread_mutex_lock(&exec.lock);
            s->running = 0;
            stream_retire(s, op);
            if (record) {
                exec_recheck_blocked();
                if (exec.nevsync)
                    pthread_cond_broadcast(&exec.event_cv);
            }
            stream_advance(s);
            if (record || signal) {
                tess_gpu_notify_fn_t fn = atomic_load_explicit(&exec.notify, memory_order_acquire);
                if (fn) {
                    exec.notifying++;
                    pthread_mutex_unlock(&exec.lock);
                    fn();
                    pthread_mutex_lock(&exec.lock);
                    exec.notifying--;
                }
            }
            continue;
        }
        if (exec.shutdown)
            break;
        exec.nidle++;
        if (exec.nblocked_ipc > 0 && (!exec.polling || t->polling)) {
            exec.polling = t->polling = 1;
            struct timespec ts;
            exec_deadline(&ts, backoff);
            pthread_cond_timedwait(&exec.work_cv, &exec.lock, &ts);
            exec.nidle--;
            if (exec_recheck_blocked())
                backoff = EXEC_POLL_MIN_NS;
            else
                backoff = TESS_MIN(backoff * 2, EXEC_POLL_MAX_NS);
        } else {
            if (t->polling)
                t->polling = exec.polling = 0;
            backoff = EXEC_POLL_MIN_NS;
            pthread_cond_wait(&exec.work_cv, &exec.lock);
            exec.nidle--;
        }
    }
    if (t->polling)
        t->polling = exec.polling = 0;
    pthread_mutex_unlock(&exec.lock);
    return NULL;
}

/* ---- streams ---------------------------------------------------------------------------------- */

static tess_status_t stream_new(tess_gpu_stream_h *s_p)
{
    tess_gpu_stream_h s = tess_calloc(1, sizeof(*s), "a stream");
    if (!s)
        return TESS_ERR_NO_MEMORY;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&s->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        free(s);
        return tess_error(TESS_ERR_SYSTEM, "stream_create: pthread_cond_init: %s", strerror(rc));
    }
    s->magic = TESS_GPU_HOST_STREAM_MAGIC;
    pthread_mutex_lock(&exec.lock);
    s->all_next = exec.all;
    if (exec.all)
        exec.all->all_prev = s;
    exec.all = s;
    pthread_mutex_unlock(&exec.lock);
    *s_p = s;
    return TESS_OK;
}

tess_status_t tess_gpu_host_stream_create(tess_gpu_stream_h *s_p)
{
    if (!s_p)
        return tess_error(TESS_ERR_INVALID, "stream_create: s_p is NULL");
    return stream_new(s_p);
}

tess_status_t tess_gpu_host_stream_destroy(tess_gpu_stream_h s)
{
    tess_status_t st = TESS_OK;
    pthread_mutex_lock(&exec.lock);
    if (!s || s == exec.default_stream)
        st = tess_error(TESS_ERR_INVALID, "stream_destroy: the default stream cannot be destroyed");
    else if ((st = exec_stream_check(&s, "stream_destroy")) == TESS_OK) {
        /* As with cudaStreamDestroy, queued work still runs; the stream goes when it drains. */
        s->destroying = 1;
        stream_maybe_free(s);
    }
    pthread_mutex_unlock(&exec.lock);
    return st;
}

static void stream_wait_done(tess_gpu_stream_h s, uint64_t target)
{
    s->nsyncers++;
    while (atomic_load_explicit(&s->done, memory_order_acquire) < target)
        pthread_cond_wait(&s->cv, &exec.lock);
    s->nsyncers--;
    stream_maybe_free(s);
}

tess_status_t tess_gpu_host_stream_sync(tess_gpu_stream_h s)
{
    pthread_mutex_lock(&exec.lock);
    tess_status_t st = exec_stream_check(&s, "stream_sync");
    if (st == TESS_OK)
        st = exec_not_recording(s, "stream_sync");
    if (st == TESS_OK)
        stream_wait_done(s, atomic_load_explicit(&s->enq, memory_order_relaxed));
    pthread_mutex_unlock(&exec.lock);
    return st == TESS_OK ? tess_gpu_host_fault_check("stream_sync") : st;
}

tess_status_t tess_gpu_host_stream_query(tess_gpu_stream_h s)
{
    tess_status_t st = tess_gpu_host_fault_check("stream_query");
    if (st != TESS_OK)
        return st;
    if (!s)
        s = exec.default_stream;
    uint64_t enq = atomic_load_explicit(&s->enq, memory_order_acquire);
    return atomic_load_explicit(&s->done, memory_order_acquire) >= enq ? TESS_OK
                                                                       : TESS_INPROGRESS;
}

int tess_gpu_host_busy(void)
{
    return atomic_load_explicit(&exec.busy, memory_order_relaxed);
}

tess_status_t tess_gpu_host_exec_drain(void)
{
    tess_status_t st = TESS_OK;
    pthread_mutex_lock(&exec.lock);
    if (exec.pending == 0)
        goto out_unlock;
    size_t n = 0;
    for (tess_gpu_stream_h s = exec.all; s; s = s->all_next)
        n++;
    tess_gpu_stream_h *streams = tess_malloc(n * sizeof(*streams), "a device drain");
    uint64_t          *targets = tess_malloc(n * sizeof(*targets), "a device drain");
    if (!streams || !targets) {
        st = TESS_ERR_NO_MEMORY;
        goto out_free;
    }
    n = 0;
    for (tess_gpu_stream_h s = exec.all; s; s = s->all_next) {
        uint64_t enq = atomic_load_explicit(&s->enq, memory_order_relaxed);
        if (atomic_load_explicit(&s->done, memory_order_relaxed) < enq) {
            s->nsyncers++; /* keeps a destroyed stream alive until we are done with it */
            streams[n]   = s;
            targets[n++] = enq;
        }
    }
    for (size_t i = 0; i < n; i++) {
        streams[i]->nsyncers--;
        stream_wait_done(streams[i], targets[i]);
    }
out_free:
    free(streams);
    free(targets);
out_unlock:
    pthread_mutex_unlock(&exec.lock);
    return st;
}

/* ---- enqueueing (the interface of enqueue.c) ------------------------------------------------ */

tess_status_t tess_gpu_host_stream_check(tess_gpu_stream_h s, const char *fn)
{
    return exec_stream_check(&s, fn);
}

/* Lock held on return of TESS_OK. An operation a graph cannot hold (`recordable` 0) is refused
 * on a stream that records one. */
tess_status_t tess_gpu_host_exec_begin(tess_gpu_stream_h *s, const char *fn, int recordable,
                                       exec_op_t **op_p)
{
    tess_status_t st = tess_gpu_host_fault_check(fn);
    if (st != TESS_OK)
        return st;
    pthread_mutex_lock(&exec.lock);
    st = exec_stream_check(s, fn);
    if (st == TESS_OK && !recordable)
        st = exec_not_recording(*s, fn);
    if (st == TESS_OK && !(*op_p = op_get()))
        st = TESS_ERR_NO_MEMORY;
    if (st != TESS_OK)
        pthread_mutex_unlock(&exec.lock);
    return st;
}

/* Queue op on s, or record it when s records a graph (op is taken either way); unlock. */
tess_status_t tess_gpu_host_exec_submit(tess_gpu_stream_h s, exec_op_t *op)
{
    tess_status_t st = TESS_OK;
    if (tess_likely(!s->rec)) {
        stream_push(s, op);
    } else {
        st = tess_gpu_host_graph_append(s->rec, op);
        if (st != TESS_OK)
            s->rec->broken = 1;
        op_put(op);
    }
    pthread_mutex_unlock(&exec.lock);
    return st;
}

/* ---- recording a graph ------------------------------------------------------------------------ */

tess_status_t tess_gpu_host_graph_begin(tess_gpu_stream_h s)
{
    tess_status_t st = tess_gpu_host_fault_check("graph_begin");
    if (st != TESS_OK)
        return st;
    if (!s)
        return tess_error(TESS_ERR_INVALID, "graph_begin: the default stream cannot record");
    tess_gpu_graph_h g = tess_gpu_host_graph_new();
    if (!g)
        return TESS_ERR_NO_MEMORY;
    pthread_mutex_lock(&exec.lock);
    if ((st = exec_stream_check(&s, "graph_begin")) == TESS_OK && s->rec)
        st = tess_error(TESS_ERR_STATE, "graph_begin: stream %p already records a graph",
                        (void *)s);
    if (st == TESS_OK)
        s->rec = g;
    pthread_mutex_unlock(&exec.lock);
    if (st != TESS_OK)
        tess_gpu_host_graph_unref(g);
    return st;
}

tess_status_t tess_gpu_host_graph_end(tess_gpu_stream_h s, tess_gpu_graph_h *g_p)
{
    pthread_mutex_lock(&exec.lock);
    tess_status_t    st = exec_stream_check(&s, "graph_end");
    tess_gpu_graph_h g  = NULL;
    if (st == TESS_OK && !(g = s->rec))
        st = tess_error(TESS_ERR_STATE, "graph_end: stream %p records no graph", (void *)s);
    if (st == TESS_OK)
        s->rec = NULL;
    pthread_mutex_unlock(&exec.lock);
    if (st == TESS_OK && g->broken) {
        tess_gpu_host_graph_unref(g);
        return tess_error(TESS_ERR_UNSUPPORTED, "graph_end: the recording on stream %p is "
                          "invalid: an operation it cannot hold was enqueued (an event, a "
                          "signal, a sync or a graph launch; see the error of that call)",
                          (void *)s);
    }
    if (st == TESS_OK)
        *g_p = g;
    return st;
}

void tess_gpu_host_set_notify(tess_gpu_notify_fn_t fn)
{
    atomic_store_explicit(&exec.notify, fn, memory_order_release);
    /* Return only once no executor still runs the previous function (its data may go next). */
    pthread_mutex_lock(&exec.lock);
    while (exec.notifying) {
        pthread_mutex_unlock(&exec.lock);
        sched_yield();
        pthread_mutex_lock(&exec.lock);
    }
    pthread_mutex_unlock(&exec.lock);
}

/* ---- waiting for events ------------------------------------------------------------------------ */

tess_status_t tess_gpu_host_event_sync(tess_gpu_event_h e)
{
    tess_status_t st = tess_gpu_host_event_check(e, "event_sync");
    if (st != TESS_OK)
        return st;
    /* The last record issued before the call, as cudaEventSynchronize; later ones do not
     * prolong the wait. */
    uint64_t target = atomic_load_explicit(&e->slot->recorded, memory_order_acquire);
    if (atomic_load_explicit(&e->slot->completed, memory_order_acquire) >= target)
        return tess_gpu_host_fault_check("event_sync");
    /* Records by this process broadcast event_cv; another process's only show by polling. */
    int      ipc     = (e->flags & TESS_GPU_EVENT_IPC) != 0;
    uint64_t backoff = EXEC_POLL_MIN_NS;
    pthread_mutex_lock(&exec.lock);
    exec.nevsync++;
    while (atomic_load_explicit(&e->slot->completed, memory_order_acquire) < target) {
        if (ipc) {
            struct timespec ts;
            exec_deadline(&ts, backoff);
            pthread_cond_timedwait(&exec.event_cv, &exec.lock, &ts);
            backoff = TESS_MIN(backoff * 2, EXEC_POLL_MAX_NS);
        } else {
            pthread_cond_wait(&exec.event_cv, &exec.lock);
        }
    }
    exec.nevsync--;
    pthread_mutex_unlock(&exec.lock);
    return tess_gpu_host_fault_check("event_sync");
}

/* ---- init and fini -------------------------------------------------------------------------- */

static int exec_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

tess_status_t tess_gpu_host_exec_init(void)
{
    tess_status_t st;
    int           rc;
    if ((rc = exec_cond_init(&exec.work_cv)) != 0)
        return tess_error(TESS_ERR_SYSTEM, "host backend: pthread_cond_init: %s", strerror(rc));
    if ((rc = exec_cond_init(&exec.event_cv)) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "host backend: pthread_cond_init: %s", strerror(rc));
        goto err_destroy_work_cv;
    }
    exec.shutdown = 0;
    if ((st = stream_new(&exec.default_stream)) != TESS_OK)
        goto err_destroy_event_cv;

    int n = tess_gpu_host.params.host_threads;
    exec.threads = tess_calloc((size_t)n, sizeof(*exec.threads), "the executor threads");
    if (!exec.threads) {
        st = TESS_ERR_NO_MEMORY;
        goto err_free_stream;
    }
    for (exec.nthreads = 0; exec.nthreads < n; exec.nthreads++) {
        exec_thread_t *t = &exec.threads[exec.nthreads];
        t->rng = tess_random64() | 1;
        if ((rc = pthread_create(&t->thread, NULL, exec_main, t)) != 0) {
            st = tess_error(TESS_ERR_SYSTEM, "host backend: cannot start executor thread %d: %s",
                            exec.nthreads, strerror(rc));
            goto err_join;
        }
    }
    return TESS_OK;

err_join:
    pthread_mutex_lock(&exec.lock);
    exec.shutdown = 1;
    pthread_cond_broadcast(&exec.work_cv);
    pthread_mutex_unlock(&exec.lock);
    for (int i = 0; i < exec.nthreads; i++)
        pthread_join(exec.threads[i].thread, NULL);
    free(exec.threads);
    exec.threads = NULL;
err_free_stream:
    stream_free(exec.default_stream);
    exec.default_stream = NULL;
err_destroy_event_cv:
    pthread_cond_destroy(&exec.event_cv);
err_destroy_work_cv:
    pthread_cond_destroy(&exec.work_cv);
    return st;
}

void tess_gpu_host_exec_fini(void)
{
    pthread_mutex_lock(&exec.lock);
    exec.shutdown = 1;
    pthread_cond_broadcast(&exec.work_cv);
    pthread_mutex_unlock(&exec.lock);
    /* Executors leave once nothing is ready: only blocked streams may still hold work. */
    for (int i = 0; i < exec.nthreads; i++)
        pthread_join(exec.threads[i].thread, NULL);
    free(exec.threads);
    exec.threads  = NULL;
    exec.nthreads = 0;

    if (exec.pending)
        tess_warn("host backend fini: %zu stream operations never ran (waiting for events "
                  "that did not complete); dropped", exec.pending);
    while (exec.all) {
        tess_gpu_stream_h s = exec.all;
        while (s->head) {
            exec_op_t *op = s->head;
            s->head       = op->next;
            free(op);
        }
        stream_free(s);
    }
    while (exec.free_ops) {
        exec_op_t *op = exec.free_ops;
        exec.free_ops = op->next;
        free(op);
    }
    tess_vec_fini(&exec.blocked);
    exec.ready_head = exec.ready_tail = NULL;
    exec.nfree_ops = exec.pending = exec.nblocked_ipc = 0;
    atomic_store(&exec.busy, 0);
    exec.nidle = exec.polling = exec.nevsync = 0;
    exec.default_stream = NULL;
    atomic_store(&exec.notify, NULL);
    pthread_cond_destroy(&exec.work_cv);
    pthread_cond_destroy(&exec.event_cv);
}
