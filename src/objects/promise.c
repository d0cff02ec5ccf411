/* promise.c — TESS_CHECK: the run-time checks of what device entries' flags (TESS_ENTRY_BATCH,
 * TESS_ENTRY_SENDER_ORDERED, TESS_ENTRY_IN_PLACE) and TESS_STREAM_READY sends promise
 * (include/tessera/gpu.h says what each promises and how it is checked). With the option off
 * nothing here runs: each hook is one branch on tess_cfg.check or on the entry word's bit.
 *
 * A device message within a process to an entry with one of those flags carries the address of
 * its record (promise_t) after the header, and TESS_OBJ_PROMISE_BIT in its entry word; the
 * record says who sent it and keeps what the checks compare: copies of the buffers as sent (in
 * the sender's stream order) and as the receiver's work left them, and tickets of a process-wide
 * clock taken on the device streams where the sender's data became ready and where the
 * receiver's work on it completed. A broken promise ends the job (tess_fatal) naming the
 * receiving array, element and entry, the message (its sender and number) and the buffer. */
#include "objects.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define PROMISE_FLAGS (TESS_ENTRY_BATCH | TESS_ENTRY_SENDER_ORDERED | TESS_ENTRY_IN_PLACE)

/* A device buffer kept for comparisons (reused: freeing device memory waits for the device). */
typedef struct promise_snap {
    struct promise_snap *next;
    size_t               cap;
    void                *ptr;
} promise_snap_t;

/* Who sent a message, and to whom (for the report). */
typedef struct promise_msg {
    char         sender[112]; /* "element (3) of array 'x'" or "PE 0 outside an entry" */
    uint64_t     seq;         /* the sender's device-message number, from 1 */
    const char  *file;
    int          line;
    uint32_t     array;       /* the receiver */
    int64_t      linear;
    tess_entry_t entry;
} promise_msg_t;

typedef struct promise {
    _Atomic int      refs;
    unsigned         flags; /* the receiving entry's, of PROMISE_FLAGS */
    promise_msg_t    msg;
    int              nbufs;
    void            *src[TESS_DEV_MAX_BUFS];
    size_t           size[TESS_DEV_MAX_BUFS];
    void            *dst[TESS_DEV_MAX_BUFS];
    tess_gpu_event_h sent_ev;  /* after the sender-side copies and ticket */
    /* TESS_ENTRY_IN_PLACE: the buffers as sent, and as the receiver's work left them. */
    promise_snap_t  *sent[TESS_DEV_MAX_BUFS];
    promise_snap_t  *used[TESS_DEV_MAX_BUFS];
    unsigned         in_place; /* buffers the post function took in place */
    /* TESS_ENTRY_BATCH: posted, its entry not run yet (the element's list). */
    tess_ctx_h       elem;
    struct promise  *next_pending;
    /* TESS_ENTRY_SENDER_ORDERED: the message received into dst[i] before, while the receiver's
     * work on it still ran at this one's post; tickets of the clock. */
    struct promise  *prev[TESS_DEV_MAX_BUFS];
    _Atomic uint64_t t_ready;  /* the sender's stream reached the send */
    _Atomic uint64_t t_used;   /* the receiver's stream finished the entry's work */
} promise_t;

static struct {
    pthread_mutex_t   lock;
    tess_gpu_stream_h stream; /* reads device memory back */
    promise_snap_t   *free_snaps;
    tess_hmap_t       last;   /* destination address -> promise_t received there last (a ref) */
    int               have_last;
    _Atomic uint64_t  clock;
    /* Per element (by array and linear index, so that it follows a migration): the device
     * messages sent from its entries, and the batched messages posted to it whose entries have
     * not run. Kept here rather than in the element's header, which every element pays for. */
    pthread_mutex_t   elock;
    tess_hmap_t       elems;  /* tess_obj_key -> promise_elem_t */
    int               have_elems;
} pc = {.lock = PTHREAD_MUTEX_INITIALIZER, .elock = PTHREAD_MUTEX_INITIALIZER};

typedef struct promise_elem {
    uint64_t        dev_sends;
    struct promise *pending;
} promise_elem_t;

/* ---- helpers ----------------------------------------------------------------------------- */

static void promise_close_open(void);

/* The check state of element e (made on first use). Only e's PE uses what it returns. */
static promise_elem_t *promise_elem_of(tess_ctx_h e)
{
    uint64_t        key = tess_obj_key(e->array->id, e->linear);
    promise_elem_t *pe  = NULL;
    pthread_mutex_lock(&pc.elock);
    if (!pc.have_elems && tess_hmap_init(&pc.elems, 64) == TESS_OK)
        pc.have_elems = 1;
    if (pc.have_elems) {
        pe = tess_hmap_get(&pc.elems, key);
        if (!pe && (pe = calloc(1, sizeof(*pe))) && tess_hmap_put(&pc.elems, key, pe) != TESS_OK) {
            free(pe);
            pe = NULL;
        }
    }
    pthread_mutex_unlock(&pc.elock);
    if (!pe)
        tess_fatal("TESS_CHECK: out of memory for the checks of element %lld of array '%s'",
                   (long long)e->linear, e->array->name);
    return pe;
}

static void promise_describe_sender(promise_msg_t *w)
{
    obj_pe_t  *op = tess_obj_pe();
    tess_ctx_h e  = op ? op->current : NULL;
    if (e) {
        char idx[48];
        snprintf(w->sender, sizeof(w->sender), "element %s of array '%s'",
                 tess_obj_index_text(e->array, tess_obj_ctx_index(e), idx, sizeof(idx)), e->array->name);
        w->seq = ++promise_elem_of(e)->dev_sends;
    } else {
        static _Thread_local uint64_t outside;
        snprintf(w->sender, sizeof(w->sender), "PE %d outside an entry", tess_core_pe_id());
        w->seq = ++outside;
    }
}

_Noreturn static void promise_broken(const promise_msg_t *w, const char *flag, const char *fmt,
                                     ...) TESS_PRINTF(3, 4);
_Noreturn static void promise_broken(const promise_msg_t *w, const char *flag, const char *fmt,
                                     ...)
{
    char    what[640], idx[48];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const tess_array_t *a = tess_obj_arrays[w->array];
    tess_fatal("TESS_CHECK: the promise of %s is broken: message %llu from %s (sent at %s:%d) "
               "to entry '%s' of element %s of array '%s': %s", flag,
               (unsigned long long)w->seq, w->sender, w->file, w->line, tess_entry_name(w->entry),
               tess_obj_index_text(a, tess_obj_delinearize(a, w->linear), idx, sizeof(idx)),
               a->name, what);
}

/* Copy n bytes of device memory to the host now (any thread). */
static void promise_fetch(void *host, const void *dev, size_t n)
{
    pthread_mutex_lock(&pc.lock);
    tess_status_t st = pc.stream ? TESS_OK : tess_gpu->stream_create(&pc.stream);
    if (st == TESS_OK)
        st = tess_gpu->memcpy_async(host, dev, n, pc.stream);
    if (st == TESS_OK)
        st = tess_gpu->stream_sync(pc.stream);
    pthread_mutex_unlock(&pc.lock);
    if (st != TESS_OK)
        tess_fatal("TESS_CHECK: cannot read %zu bytes of device memory back: %s", n,
                   tess_error_detail());
}

static uint8_t *promise_host_copy(const void *dev, size_t n)
{
    uint8_t *h = tess_malloc(n ? n : 1, "a checked buffer's copy");
    if (!h)
        tess_fatal("TESS_CHECK: out of memory copying a %zu-byte buffer", n);
    if (n)
        promise_fetch(h, dev, n);
    return h;
}

/* The first byte where a and b differ, or -1. */
static int64_t promise_first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (int64_t)i;
    return -1;
}

static promise_snap_t *promise_snap_get(size_t n)
{
    pthread_mutex_lock(&pc.lock);
    promise_snap_t **pp = &pc.free_snaps, *s = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= n) {
            s   = *pp;
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&pc.lock);
    if (s)
        return s;
    s = tess_calloc(1, sizeof(*s), "a checked buffer's copy");
    if (!s || tess_gpu->mem_alloc(n, &s->ptr) != TESS_OK)
        tess_fatal("TESS_CHECK: no device memory for a copy of a %zu-byte buffer", n);
    s->cap = n;
    return s;
}

static void promise_snap_put(promise_snap_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&pc.lock);
    s->next       = pc.free_snaps;
    pc.free_snaps = s;
    pthread_mutex_unlock(&pc.lock);
}

static void promise_release(promise_t *p)
{
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int i = 0; i < p->nbufs; i++) {
        promise_snap_put(p->sent[i]);
        promise_snap_put(p->used[i]);
        promise_release(p->prev[i]);
    }
    if (p->sent_ev)
        tess_gpu->event_destroy(p->sent_ev);
    free(p);
}

/* Host functions on device streams: a ticket of the clock. They touch nothing else (a CUDA
 * host function may not call the runtime), and the record outlives them (sent_ev, then_event). */
static void promise_stamp_ready(void *args)
{
    promise_t *p;
    memcpy(&p, args, sizeof(p));
    atomic_store(&p->t_ready, atomic_fetch_add(&pc.clock, 1) + 1);
}

static void promise_stamp_used(void *args)
{
    promise_t *p;
    memcpy(&p, args, sizeof(p));
    atomic_store(&p->t_used, atomic_fetch_add(&pc.clock, 1) + 1);
}

/* ---- TESS_STREAM_READY ------------------------------------------------------------------- */

/* A send marked ready: the buffers as they were at the call, compared once the work enqueued on
 * the sender's stream before the send has completed and the runtime is done with them (the
 * user's done callback waits for both). */
typedef struct promise_ready {
    promise_msg_t      msg;
    int                waits, busy;
    int                nbufs;
    const void        *buf[TESS_DEV_MAX_BUFS];
    size_t             size[TESS_DEV_MAX_BUFS];
    uint8_t           *at_send[TESS_DEV_MAX_BUFS];
    tess_dev_done_fn_t done;
    void              *done_arg;
} promise_ready_t;

static void promise_ready_step(void *arg)
{
    promise_ready_t *r = arg;
    if (--r->waits > 0)
        return;
    for (int i = 0; i < r->nbufs; i++) {
        uint8_t *now = promise_host_copy(r->buf[i], r->size[i]);
        int64_t  k   = promise_first_diff(r->at_send[i], now, r->size[i]);
        if (k >= 0)
            promise_broken(&r->msg, "TESS_STREAM_READY", "buffer %d (%zu bytes at %p) changed "
                           "after the send that called it complete: byte %lld was 0x%02x at "
                           "the send and is 0x%02x once the work enqueued on the sender's "
                           "stream before the send has completed (the stream was %s at the "
                           "send): work still enqueued wrote it, so the transfer may have read "
                           "either", i, r->size[i], r->buf[i], (long long)k, r->at_send[i][k],
                           now[k], r->busy ? "busy" : "idle");
        free(now);
        free(r->at_send[i]);
    }
    if (r->done)
        r->done(r->done_arg);
    free(r);
}

static void promise_ready_done(void *arg)
{
    promise_ready_step(arg);
}

static void promise_ready_send(const promise_msg_t *w, const tess_dev_buf_t *bufs, int nbufs,
                               tess_dev_done_fn_t *done_p, void **done_arg_p)
{
    promise_ready_t *r = tess_calloc(1, sizeof(*r), "a checked send");
    if (!r)
        tess_fatal("TESS_CHECK: out of memory checking a send");
    r->msg      = *w;
    r->nbufs    = nbufs;
    r->done     = *done_p;
    r->done_arg = *done_arg_p;
    for (int i = 0; i < nbufs; i++) {
        r->buf[i]     = bufs[i].ptr;
        r->size[i]    = bufs[i].size;
        r->at_send[i] = promise_host_copy(bufs[i].ptr, bufs[i].size);
    }
    r->waits      = 1;
    obj_pe_t  *op = tess_obj_pe();
    tess_ctx_h e  = op ? op->current : NULL;
    if (e) { /* the stream where readiness was promised: the sender's own */
        r->busy = tess_gpu->stream_query(e->stream) == TESS_INPROGRESS;
        if (tess_core_gpu_then_event(e->stream, promise_ready_step, r) != TESS_OK)
            tess_fatal("TESS_CHECK: cannot watch a stream: %s", tess_error_detail());
        r->waits++;
    }
    *done_p     = promise_ready_done;
    *done_arg_p = r;
}

/* ---- the sender ------------------------------------------------------------------------- */

void tess_obj_promise_send(tess_array_t *a, int64_t linear, tess_entry_t entry, int dest,
                           int ready, obj_promise_send_t *s, const char *file, int line)
{
    promise_msg_t w = {.file = file, .line = line, .array = a->id, .linear = linear,
                       .entry = entry};
    promise_close_open();
    promise_describe_sender(&w);
    if (ready)
        promise_ready_send(&w, s->bufs, s->nbufs, &s->done, &s->done_arg);
    unsigned f = tess_obj_entries[entry].flags & PROMISE_FLAGS;
    if (!f || tess_core_pe_process(dest) != tess_rt.rank)
        return;
    promise_t *p = tess_calloc(1, sizeof(*p), "a checked device message");
    char      *h = tess_malloc(s->header_len + sizeof(p), "a checked device message's header");
    if (!p || !h)
        tess_fatal("TESS_CHECK: out of memory checking a device message");
    atomic_init(&p->refs, 1); /* the message's */
    p->flags = f;
    p->msg   = w;
    p->nbufs = s->nbufs;
    for (int i = 0; i < s->nbufs; i++) {
        p->src[i]  = s->bufs[i].ptr;
        p->size[i] = s->bufs[i].size;
    }
    /* In the sender's stream order, right where the transfer reads the buffers. */
    tess_status_t st = TESS_OK;
    for (int i = 0; (f & TESS_ENTRY_IN_PLACE) && i < s->nbufs && st == TESS_OK; i++)
        if (p->size[i]) {
            p->sent[i] = promise_snap_get(p->size[i]);
            st = tess_gpu->memcpy_async(p->sent[i]->ptr, p->src[i], p->size[i], s->stream);
        }
    if (st == TESS_OK && (f & TESS_ENTRY_SENDER_ORDERED))
        st = tess_gpu->launch_host(s->stream, promise_stamp_ready, &p, sizeof(p));
    if (st == TESS_OK && (st = tess_gpu->event_create(0, &p->sent_ev)) == TESS_OK)
        st = tess_gpu->event_record(p->sent_ev, s->stream);
    if (st != TESS_OK)
        tess_fatal("TESS_CHECK: cannot enqueue the checks of a device message: %s",
                   tess_error_detail());
    if (s->header_len)
        memcpy(h, s->header, s->header_len);
    memcpy(h + s->header_len, &p, sizeof(p));
    s->header = s->scratch = h;
    s->header_len += sizeof(p);
    s->a0 |= TESS_OBJ_PROMISE_BIT;
}

/* ---- the receiver ----------------------------------------------------------------------- */

void *tess_obj_promise_of(const tess_dc_msg_t *m, size_t *header_len_p)
{
    promise_t *p;
    if (m->header_len < sizeof(p))
        tess_fatal("internal: a checked device message without its record");
    *header_len_p = m->header_len - sizeof(p);
    memcpy(&p, (const char *)m->header + *header_len_p, sizeof(p));
    return p;
}

static int promise_overlap(const void *a, size_t an, const void *b, size_t bn)
{
    const char *x = a, *y = b;
    return an && bn && x < y + bn && y < x + an;
}

void tess_obj_promise_post(void *rec, tess_ctx_h e, void *const *offer, void *const *dst)
{
    promise_t *p = rec;
    for (int i = 0; i < p->nbufs; i++) {
        p->dst[i] = dst[i];
        if (p->size[i] && offer[i] && dst[i] == offer[i])
            p->in_place |= 1u << i;
    }
    if (p->flags & TESS_ENTRY_BATCH) {
        /* A post runs ahead of the entries of earlier messages to the element only with
         * batching: naming what one of those still receives into means the choice did not
         * take their entries into account. */
        promise_elem_t *pe = promise_elem_of(e);
        for (promise_t *q = pe->pending; q; q = q->next_pending)
            for (int i = 0; i < p->nbufs; i++)
                for (int j = 0; j < q->nbufs; j++)
                    if (!(p->in_place & (1u << i)) && !(q->in_place & (1u << j)) &&
                        promise_overlap(p->dst[i], p->size[i], q->dst[j], q->size[j]))
                        promise_broken(&p->msg, "TESS_ENTRY_BATCH", "the post function named "
                                       "%p (%zu bytes) for buffer %d, where buffer %d of message "
                                       "%llu from %s, posted before and whose entry has not run "
                                       "yet, is received (%p, %zu bytes): a post function of a "
                                       "batched entry runs before the entries of earlier "
                                       "messages, so its choice must not depend on what they "
                                       "change", p->dst[i], p->size[i], i, j,
                                       (unsigned long long)q->msg.seq, q->msg.sender, q->dst[j],
                                       q->size[j]);
        p->elem            = e;
        p->next_pending = pe->pending;
        pe->pending     = p;
    }
    if (!(p->flags & TESS_ENTRY_SENDER_ORDERED))
        return;
    pthread_mutex_lock(&pc.lock);
    if (!pc.have_last && tess_hmap_init(&pc.last, 64) == TESS_OK)
        pc.have_last = 1;
    for (int i = 0; pc.have_last && i < p->nbufs; i++) {
        if (!p->size[i] || (p->in_place & (1u << i)))
            continue;
        uint64_t   key = (uint64_t)(uintptr_t)p->dst[i];
        promise_t *q   = tess_hmap_get(&pc.last, key);
        if (q == p) /* two buffers of one message into one place */
            continue;
        /* Only a use still running can be overwritten by a copy that does not wait for it. */
        if (q && !atomic_load(&q->t_used)) {
            atomic_fetch_add(&q->refs, 1);
            p->prev[i] = q;
        }
        atomic_fetch_add(&p->refs, 1); /* the map's */
        if (tess_hmap_put(&pc.last, key, p) != TESS_OK)
            tess_fatal("TESS_CHECK: out of memory tracking destinations");
        if (q) {
            pthread_mutex_unlock(&pc.lock);
            promise_release(q); /* the map's reference */
            pthread_mutex_lock(&pc.lock);
        }
    }
    pthread_mutex_unlock(&pc.lock);
}

static void promise_consumed_check(void *arg)
{
    promise_t *p = arg;
    if (tess_gpu->event_sync(p->sent_ev) != TESS_OK)
        tess_fatal("TESS_CHECK: waiting for a sender's stream failed: %s", tess_error_detail());
    for (int i = 0; i < p->nbufs; i++) {
        if (!(p->in_place & (1u << i)))
            continue;
        uint8_t *was = promise_host_copy(p->sent[i]->ptr, p->size[i]);
        uint8_t *now = promise_host_copy(p->used[i]->ptr, p->size[i]);
        int64_t  k   = promise_first_diff(was, now, p->size[i]);
        if (k >= 0)
            promise_broken(&p->msg, "TESS_ENTRY_IN_PLACE", "buffer %d (%zu bytes at %p), taken "
                           "in place, changed before the receiver's work on it completed: byte "
                           "%lld was 0x%02x when sent and 0x%02x when the work the entry "
                           "enqueued had run: the sender must not change or free it until its "
                           "protocol orders that after the receiver's reads", i, p->size[i],
                           p->src[i], (long long)k, was[k], now[k]);
        free(was);
        free(now);
    }
    uint64_t ready = atomic_load(&p->t_ready);
    for (int i = 0; i < p->nbufs; i++) {
        promise_t *q = p->prev[i];
        if (!q)
            continue;
        uint64_t used = atomic_load(&q->t_used);
        if (!used || ready < used)
            promise_broken(&p->msg, "TESS_ENTRY_SENDER_ORDERED", "buffer %d went to %p (%zu "
                           "bytes), where message %llu from %s went before: the sender's data "
                           "was ready before the work the receiver's entry enqueued on that one "
                           "had completed, so the copy, which waits for the sender only, may "
                           "have overwritten what that work still used (the sender's step must "
                           "be ordered after the receiver's last use of the destination)", i,
                           p->dst[i], p->size[i], (unsigned long long)q->msg.seq, q->msg.sender);
        p->prev[i] = NULL;
        promise_release(q);
    }
    /* The destination map may keep the record a while: not its copies. */
    for (int i = 0; i < p->nbufs; i++) {
        promise_snap_put(p->sent[i]);
        promise_snap_put(p->used[i]);
        p->sent[i] = p->used[i] = NULL;
    }
    promise_release(p);
}

/* The receiver's use of p's data ends here on `stream`: copy what it took in place, take the
 * clock's ticket, and compare once that has run. */
static void promise_close(promise_t *p, tess_gpu_stream_h stream)
{
    tess_status_t st = TESS_OK;
    for (int i = 0; i < p->nbufs && st == TESS_OK; i++)
        if (p->in_place & (1u << i)) {
            p->used[i] = promise_snap_get(p->size[i]);
            st = tess_gpu->memcpy_async(p->used[i]->ptr, p->src[i], p->size[i], stream);
        }
    if (st == TESS_OK && (p->flags & TESS_ENTRY_SENDER_ORDERED))
        st = tess_gpu->launch_host(stream, promise_stamp_used, &p, sizeof(p));
    if (st == TESS_OK)
        st = tess_core_gpu_then_event(stream, promise_consumed_check, p);
    if (st != TESS_OK)
        tess_fatal("TESS_CHECK: cannot enqueue the checks of a device message: %s",
                   tess_error_detail());
}

/* A device send from the receiving element during the entry ends the use there: a protocol
 * lets the sender go on when it hears from the receiver, and work the entry enqueues after the
 * send (the next step, say) is no longer the use of this message. */
static void promise_close_open(void)
{
    obj_pe_t *op = tess_obj_pe();
    if (op && op->promise_open) {
        promise_close(op->promise_open, op->promise_stream);
        op->promise_open = NULL;
    }
}

void tess_obj_promise_deliver(void *rec, tess_gpu_stream_h stream)
{
    promise_t *p = rec;
    if (p->elem) {
        for (promise_t **pp = &promise_elem_of(p->elem)->pending; *pp; pp = &(*pp)->next_pending)
            if (*pp == p) {
                *pp = p->next_pending;
                break;
            }
        p->elem = NULL;
    }
    promise_close_open();
    obj_pe_t *op       = tess_obj_pe();
    op->promise_open   = p;
    op->promise_stream = stream;
}

void tess_obj_promise_consumed(void *rec)
{
    obj_pe_t *op = tess_obj_pe();
    if (op->promise_open == rec)
        promise_close_open();
}

void tess_obj_promise_drop(void *rec)
{
    promise_t *p = rec;
    /* Forwarded: its checks stay behind (sent_ev orders the sender-side work before the
     * record goes). */
    if (tess_gpu->event_sync(p->sent_ev) != TESS_OK)
        tess_fatal("TESS_CHECK: waiting for a sender's stream failed: %s", tess_error_detail());
    promise_release(p);
}

void tess_obj_promise_fini(void)
{
    if (pc.have_elems) {
        size_t   it = 0;
        uint64_t key;
        void    *val;
        while (tess_hmap_next(&pc.elems, &it, &key, &val))
            free(val);
        tess_hmap_fini(&pc.elems);
        pc.have_elems = 0;
    }
    if (pc.have_last) {
        size_t   it = 0;
        uint64_t key;
        void    *val;
        while (tess_hmap_next(&pc.last, &it, &key, &val))
            promise_release(val);
        tess_hmap_fini(&pc.last);
        pc.have_last = 0;
    }
    while (pc.free_snaps) {
        promise_snap_t *s = pc.free_snaps;
        pc.free_snaps     = s->next;
        tess_gpu->mem_free(s->ptr);
        free(s);
    }
    if (pc.stream)
        tess_gpu->stream_destroy(pc.stream);
    pc.stream = NULL;
}
