/* batch.c — batched launches (tess_gpu_batch): the items the elements of a PE add to a batch
 * are launched as one kernel when the PE stops taking messages for the pass (the objects
 * layer's progress hook) with none left in its queue (or after a few passes), or when the
 * batch is full, and each element continues in its entry.
 *
 * Ordering is made with events from the PE's pool at the flush: one on each distinct stream of
 * the items' elements, which a per-PE batch stream waits for, and one after the launch that each
 * of those streams waits for (a batch of one launches on the element's own stream and needs
 * none). An element's event is recorded at the flush, not at its call: the launch then also
 * waits for what the runtime enqueued on the element's stream in between (deliveries), which
 * adds ordering only, and elements sharing a stream cost one event. The items travel through a
 * staging ring per (PE, batch): pinned host memory that the PE writes at the call and device
 * memory that one copy on the launch's stream fills; a region of the ring is reused once the
 * event recorded after its launch completed.
 *
 * Everything here belongs to one PE but the registry (main thread, before phases) and the count
 * of pending items (quiescence). */
#include "objects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct batch_info {
    char                       name[TESS_OBJ_NAME_LEN];
    size_t                     item_size;
    tess_gpu_batch_launch_fn_t launch;
    void                      *arg;
} batch_info_t;

void (*tess_obj_batch_pre)(tess_gpu_stream_h stream);
void (*tess_obj_batch_post)(tess_gpu_stream_h stream, const tess_ctx_h *elems, int n);

/* Passes a PE holds its pending items back while messages wait in its queue. */
#define BATCH_DEFER_PASSES 4

static batch_info_t batches[TESS_GPU_BATCH_MAX_BATCHES];
static int          nbatches;
/* Items added and whose entry has not run, on this process (quiescence). */
static _Atomic int64_t batch_open;

/* What the entry of an item needs: a message holding this, then the entry's data. */
typedef struct batch_cont {
    tess_ctx_h       elem;
    tess_entry_t     entry;
    int              batch;
    const char      *file;
    int              line;
} batch_cont_t;

/* An item waiting for its flush. */
typedef struct batch_item {
    tess_msg_t       *m;      /* its batch_cont_t */
    tess_gpu_stream_h stream; /* the element's stream at the call */
} batch_item_t;

/* A launched region of the ring: [start, end) until `ev` completed; then its events go back. */
typedef struct batch_region {
    size_t            start, end;
    tess_gpu_event_h  ev;
    tess_gpu_event_h *evs;
    int               nev;
} batch_region_t;

/* One batch on one PE. */
typedef struct batch_pe_one {
    uint8_t        *hbuf;  /* pinned staging: cap items */
    uint8_t        *dbuf;  /* device: cap items */
    size_t          cap, head;
    batch_region_t *reg;   /* FIFO of launched regions, cap entries */
    size_t          reg_first, reg_count;
    batch_item_t   *items; /* the pending ones: max entries */
    int             n;
    size_t          start; /* the ring slot of items[0] (reserved for max items) */
} batch_pe_one_t;

typedef struct obj_batch_pe {
    batch_pe_one_t    b[TESS_GPU_BATCH_MAX_BATCHES];
    int               npending;   /* batches with items */
    int               deferred;   /* passes the pending items waited for the queue to empty */
    tess_gpu_stream_h stream;     /* the batch stream (made on first use) */
    tess_vec_t        ready;      /* messages of launched items whose entries run next */
    size_t            ready_head;
    tess_hmap_t       in_batch;   /* element -> its message, while it is in a batch */
    tess_gpu_stream_h *seen;      /* flush: distinct streams */
    tess_ctx_h        *elems;     /* flush, under GPU timing: the items' elements */
} obj_batch_pe_t;

/* ---- registry ------------------------------------------------------------------------------ */

static void batch_describe(int64_t item_size, char *buf, size_t size)
{
    snprintf(buf, size, " (%lld-byte items)", (long long)item_size);
}

tess_status_t tess_gpu_batch_register(const char *name, size_t item_size,
                                      tess_gpu_batch_launch_fn_t launch, void *arg,
                                      tess_gpu_batch_t *batch_p)
{
    tess_status_t st = tess_obj_check_main("tess_gpu_batch_register");
    if (st != TESS_OK)
        return st;
    if (!name || !launch || !batch_p)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_batch_register: NULL %s",
                          !name ? "name" : !launch ? "launch function" : "batch_p");
    if (item_size < 1 || item_size > TESS_GPU_BATCH_ITEM_MAX)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_batch_register '%s': item size %zu is not "
                          "in 1..%d", name, item_size, TESS_GPU_BATCH_ITEM_MAX);
    if (nbatches == TESS_GPU_BATCH_MAX_BATCHES)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_batch_register '%s': more than %d batches",
                          name, TESS_GPU_BATCH_MAX_BATCHES);
    if (strlen(name) >= sizeof(batches[0].name))
        return tess_error(TESS_ERR_INVALID, "tess_gpu_batch_register: name '%s' is longer than "
                          "%zu characters", name, sizeof(batches[0].name) - 1);
    tess_core_collective_enter(TESS_COLL_BATCH_REGISTER);
    st = tess_obj_registration_check("tess_gpu_batch_register", "batch", "batches", nbatches,
                                     name, (int64_t)item_size, batch_describe);
    if (st != TESS_OK)
        return st;
    batch_info_t *bi = &batches[nbatches];
    snprintf(bi->name, sizeof(bi->name), "%s", name);
    bi->item_size = item_size;
    bi->launch    = launch;
    bi->arg       = arg;
    *batch_p      = nbatches++;
    return TESS_OK;
}

void tess_obj_batch_fini(void)
{
    nbatches = 0;
}

int tess_obj_batch_busy(void)
{
    return atomic_load_explicit(&batch_open, memory_order_acquire) != 0;
}

/* ---- the staging ring ------------------------------------------------------------------------- */

_Noreturn static void batch_failed(int b, const char *what)
{
    tess_fatal("tess_gpu_batch '%s': %s failed: %s", batches[b].name, what, tess_error_detail());
}

/* Retire the oldest region (its event completed or is waited for here). */
static void ring_retire(batch_pe_one_t *r, int wait, int b)
{
    batch_region_t *g = &r->reg[r->reg_first];
    if (wait && tess_gpu->event_sync(g->ev) != TESS_OK)
        batch_failed(b, "waiting for a staging region");
    tess_gpu_evpool_t *pool = tess_core_evpool();
    tess_gpu_evpool_put(pool, g->ev);
    for (int i = 0; i < g->nev; i++)
        tess_gpu_evpool_put(pool, g->evs[i]);
    free(g->evs);
    g->evs = NULL;
    r->reg_first = (r->reg_first + 1) % r->cap;
    r->reg_count--;
}

static void ring_reap(batch_pe_one_t *r)
{
    while (r->reg_count && tess_gpu->event_query(r->reg[r->reg_first].ev) == TESS_OK)
        ring_retire(r, 0, 0);
}

/* Reserve `need` contiguous items at the head of the ring: r->start. */
static tess_status_t ring_reserve(batch_pe_one_t *r, size_t need, int b)
{
    size_t sz = batches[b].item_size;
    if (!r->hbuf) {
        r->cap = (size_t)tess_cfg.gpu_batch_max * 4;
        if (r->cap < 64)
            r->cap = 64;
        tess_status_t st;
        if ((st = tess_gpu->host_alloc(r->cap * sz, (void **)&r->hbuf)) != TESS_OK)
            return st;
        if ((st = tess_gpu->mem_alloc(r->cap * sz, (void **)&r->dbuf)) != TESS_OK)
            return st;
        r->reg   = tess_calloc(r->cap, sizeof(*r->reg), "a batch's staging regions");
        r->items = tess_calloc((size_t)tess_cfg.gpu_batch_max, sizeof(*r->items),
                               "a batch's pending items");
        if (!r->reg || !r->items)
            return TESS_ERR_NO_MEMORY;
    }
    ring_reap(r);
    for (;;) {
        if (!r->reg_count) {
            r->head = 0;
            r->start = 0;
            return TESS_OK;
        }
        /* In use: [tail, head) when head > tail; else (wrapped) [tail, cap) and [0, head), and
         * head == tail is a full ring (regions are never empty). */
        size_t tail = r->reg[r->reg_first].start;
        if (r->head > tail) {
            if (r->cap - r->head >= need) {
                r->start = r->head;
                return TESS_OK;
            }
            if (tail >= need) { /* wrap: the end of the ring stays unused this round */
                r->start = 0;
                return TESS_OK;
            }
        } else if (tail - r->head >= need) {
            r->start = r->head;
            return TESS_OK;
        }
        ring_retire(r, 1, b); /* full: wait for the oldest launch */
    }
}

/* The items [start, start + n) were launched; `ev` completes after them. */
static void ring_commit(batch_pe_one_t *r, size_t n, tess_gpu_event_h ev, tess_gpu_event_h *evs,
                        int nev)
{
    batch_region_t *g = &r->reg[(r->reg_first + r->reg_count) % r->cap];
    g->start = r->start;
    g->end   = r->start + n;
    g->ev    = ev;
    g->evs   = evs;
    g->nev   = nev;
    r->reg_count++;
    r->head = g->end;
}

/* ---- per-PE state ------------------------------------------------------------------------------ */

static obj_batch_pe_t *batch_pe(obj_pe_t *op)
{
    if (tess_likely(op->batch != NULL))
        return op->batch;
    obj_batch_pe_t *bp = tess_calloc(1, sizeof(*bp), "a PE's batches");
    if (!bp)
        return NULL;
    if (tess_hmap_init(&bp->in_batch, 64) != TESS_OK) {
        free(bp);
        return NULL;
    }
    op->batch = bp;
    return bp;
}

void tess_obj_batch_pe_fini(obj_pe_t *op)
{
    obj_batch_pe_t *bp = op->batch;
    if (!bp)
        return;
    /* Items a phase ended with (tess_exit while they waited) are dropped with their entries. */
    for (size_t i = bp->ready_head; i < bp->ready.count; i++)
        tess_core_msg_free(bp->ready.items[i]);
    for (int b = 0; b < TESS_GPU_BATCH_MAX_BATCHES; b++) {
        batch_pe_one_t *r = &bp->b[b];
        for (int i = 0; i < r->n; i++)
            tess_core_msg_free(r->items[i].m);
        while (r->reg_count)
            ring_retire(r, 1, b);
        if (r->hbuf)
            tess_gpu->host_free(r->hbuf);
        if (r->dbuf)
            tess_gpu->mem_free(r->dbuf);
        free(r->reg);
        free(r->items);
    }
    if (bp->stream)
        tess_gpu->stream_destroy(bp->stream);
    tess_vec_fini(&bp->ready);
    tess_hmap_fini(&bp->in_batch);
    free(bp->seen);
    free(bp->elems);
    free(bp);
    op->batch     = NULL;
    op->batch_due = 0;
}

_Noreturn void tess_obj_batch_misuse(obj_pe_t *op, tess_ctx_h e, const char *what,
                                     const char *file, int line)
{
    tess_msg_t   *m = tess_hmap_get(&op->batch->in_batch, (uint64_t)(uintptr_t)e);
    batch_cont_t *c = tess_msg_payload(m);
    char          idx[48];
    tess_obj_misuse(file, line, "%s while element %s of array '%s' is in batch '%s' "
                    "(tess_gpu_batch at %s:%d): between tess_gpu_batch and its entry '%s' the "
                    "element enqueues no stream work", what, tess_obj_elem_text(e, idx, sizeof(idx)),
                    e->array->name, batches[c->batch].name, c->file, c->line,
                    tess_entry_name(c->entry));
}

int tess_obj_batch_holds(obj_pe_t *op, tess_ctx_h e)
{
    return tess_hmap_get(&op->batch->in_batch, (uint64_t)(uintptr_t)e) != NULL;
}

/* ---- flush --------------------------------------------------------------------------------------- */

/* Items of a batch launched at once: +tess-gpu-batch-max, or 1 when not batching. */
static int batch_limit(void)
{
    return tess_cfg.gpu_batch ? tess_cfg.gpu_batch_max : 1;
}

/* Under GPU timing: the launch's time goes to its items' elements. */
static void batch_timed(obj_batch_pe_t *bp, batch_pe_one_t *r, tess_gpu_stream_h s, int n)
{
    if (!bp->elems &&
        !(bp->elems = tess_calloc((size_t)tess_cfg.gpu_batch_max, sizeof(*bp->elems),
                                  "a batch's elements")))
        tess_fatal("out of memory timing a batch");
    for (int i = 0; i < n; i++)
        bp->elems[i] = ((batch_cont_t *)tess_msg_payload(r->items[i].m))->elem;
    tess_obj_batch_post(s, bp->elems, n);
}

/* Launch the pending items of batch b; their messages go to the ready list in order. */
static void batch_launch(obj_batch_pe_t *bp, int b)
{
    batch_pe_one_t     *r    = &bp->b[b];
    const batch_info_t *bi   = &batches[b];
    int                 n    = r->n;
    size_t              sz   = bi->item_size;
    uint8_t            *host = r->hbuf + r->start * sz;
    uint8_t            *dev  = r->dbuf + r->start * sz;
    tess_gpu_evpool_t  *pool = tess_core_evpool();
    tess_gpu_event_h    done;
    if (tess_gpu_evpool_get(pool, &done) != TESS_OK)
        batch_failed(b, "taking an event");
    /* One item launches on its element's own stream, as a launch of its own would; more go on
     * the PE's batch stream, ordered after the distinct streams of their elements, each with an
     * event recorded now (after all that is enqueued on it), which go back to the pool once
     * `done` completed. */
    tess_gpu_stream_h s     = r->items[0].stream;
    tess_gpu_event_h *evs   = NULL;
    int               nseen = 0;
    if (n > 1) {
        if (!bp->stream && tess_gpu->stream_create(&bp->stream) != TESS_OK)
            batch_failed(b, "creating the batch stream");
        if (!bp->seen &&
            !(bp->seen = tess_calloc((size_t)tess_cfg.gpu_batch_max, sizeof(*bp->seen),
                                     "a batch's streams")))
            tess_fatal("out of memory flushing batch '%s'", bi->name);
        for (int i = 0; i < n; i++) {
            int k = 0;
            while (k < nseen && bp->seen[k] != r->items[i].stream)
                k++;
            if (k == nseen)
                bp->seen[nseen++] = r->items[i].stream;
        }
        if (!(evs = tess_malloc((size_t)nseen * sizeof(*evs), "a batch's events")))
            tess_fatal("out of memory flushing batch '%s'", bi->name);
        s = bp->stream;
        for (int k = 0; k < nseen; k++)
            if (tess_gpu_evpool_get(pool, &evs[k]) != TESS_OK ||
                tess_gpu->event_record(evs[k], bp->seen[k]) != TESS_OK ||
                tess_gpu->stream_wait_event(s, evs[k]) != TESS_OK)
                batch_failed(b, "ordering the batch stream after an element's stream");
    }
    if (tess_obj_batch_pre)
        tess_obj_batch_pre(s);
    int tr = tess_unlikely(tess_trace_on) ? tess_core_trace_dev_begin(s) : -1;
    if (tess_gpu->memcpy_async(dev, host, (size_t)n * sz, s) != TESS_OK)
        batch_failed(b, "copying the items to the device");
    bi->launch(tess_gpu->native_stream(s), dev, host, n, bi->arg);
    if (tess_unlikely(tr >= 0)) /* a span named after the batch on the stream's track */
        tess_core_trace_dev_end(tr, s, TESS_TEV_SPAN, bi->name, "batch", (uint64_t)n);
    if (tess_obj_batch_post)
        batch_timed(bp, r, s, n);
    if (tess_gpu->event_record(done, s) != TESS_OK)
        batch_failed(b, "recording an event after the launch");
    for (int k = 0; k < nseen; k++)
        if (tess_gpu->stream_wait_event(bp->seen[k], done) != TESS_OK)
            batch_failed(b, "ordering an element's stream after the launch");
    ring_commit(r, (size_t)n, done, evs, nseen);
    for (int i = 0; i < n; i++)
        if (tess_vec_push(&bp->ready, r->items[i].m) != TESS_OK)
            tess_fatal("out of memory flushing batch '%s'", bi->name);
    r->n = 0;
    bp->npending--;
}

/* Run the entries of launched items, in order (those their entries launch run next time). */
static unsigned batch_run_ready(obj_pe_t *op, obj_batch_pe_t *bp)
{
    size_t   end = bp->ready.count;
    unsigned ran = 0;
    while (bp->ready_head < end) {
        tess_msg_t   *m = bp->ready.items[bp->ready_head++];
        batch_cont_t *c = tess_msg_payload(m);
        tess_hmap_remove(&bp->in_batch, (uint64_t)(uintptr_t)c->elem);
        op->batch_elems--;
        c->elem->gpu_pending--;
        atomic_fetch_sub_explicit(&batch_open, 1, memory_order_release);
        tess_obj_run_entry(op, c->elem, c->entry, c + 1, m->hdr.size - sizeof(*c));
        tess_core_msg_free(m);
        ran++;
    }
    /* Entries run since may have added more: keep those, drop what ran. */
    size_t left = bp->ready.count - bp->ready_head;
    memmove(bp->ready.items, bp->ready.items + bp->ready_head, left * sizeof(void *));
    bp->ready.count = left;
    bp->ready_head  = 0;
    return ran;
}

unsigned tess_obj_batch_progress(tess_pe_t *pe)
{
    obj_pe_t *op = *tess_core_pe_slot(pe, TESS_SLOT_OBJECTS);
    obj_batch_pe_t *bp = op ? op->batch : NULL;
    if (tess_likely(!bp) || (!bp->npending && !bp->ready.count))
        return 0;
    unsigned work = 0;
    /* Messages still queued (a pass takes at most 64) may add more items: wait for them, a
     * few passes at most. */
    if (bp->npending && !tess_core_pe_queue_empty(pe) && bp->deferred < BATCH_DEFER_PASSES) {
        bp->deferred++;
        return batch_run_ready(op, bp);
    }
    bp->deferred = 0;
    for (int b = 0; b < nbatches && bp->npending; b++)
        if (bp->b[b].n) {
            work += (unsigned)bp->b[b].n;
            batch_launch(bp, b);
        }
    return work + batch_run_ready(op, bp);
}

/* ---- the call ------------------------------------------------------------------------------------ */

tess_status_t tess_gpu_batch_loc(tess_ctx_h ctx, tess_gpu_batch_t batch, const void *item,
                                 tess_entry_t entry, const void *data, size_t size,
                                 const char *file, int line)
{
    obj_pe_t *op = tess_obj_check_continuation(ctx, entry, data, size, "tess_gpu_batch", file,
                                               line);
    if (tess_unlikely(batch < 0 || batch >= nbatches))
        tess_obj_misuse(file, line, "tess_gpu_batch to batch %d, which is not registered (%d "
                        "are)", batch, nbatches);
    if (tess_unlikely(!item))
        tess_obj_misuse(file, line, "tess_gpu_batch '%s' with a NULL item", batches[batch].name);
    obj_batch_pe_t *bp = batch_pe(op);
    if (!bp)
        return TESS_ERR_NO_MEMORY;
    tess_obj_check_batch(op, ctx, "tess_gpu_batch", file, line);

    batch_pe_one_t *r = &bp->b[batch];
    tess_status_t   st;
    if (r->n == batch_limit()) /* full since a call outside an entry: launch it first */
        batch_launch(bp, batch);
    if (!r->n && (st = ring_reserve(r, (size_t)batch_limit(), batch)) != TESS_OK)
        return st;
    tess_msg_t *m = tess_core_msg_alloc(sizeof(batch_cont_t) + size);
    if (!m)
        return TESS_ERR_NO_MEMORY;
    batch_cont_t *c = tess_msg_payload(m);
    *c = (batch_cont_t){ctx, entry, batch, file, line};
    if (size)
        memcpy(c + 1, data, size);
    batch_item_t *it = &r->items[r->n];
    *it = (batch_item_t){m, ctx->stream};
    memcpy(r->hbuf + (r->start + (size_t)r->n) * batches[batch].item_size, item,
           batches[batch].item_size);
    if (tess_hmap_put(&bp->in_batch, (uint64_t)(uintptr_t)ctx, m) != TESS_OK) {
        tess_core_msg_free(m);
        return TESS_ERR_NO_MEMORY;
    }
    op->batch_elems++;
    if (!r->n++)
        bp->npending++;
    ctx->gpu_pending++;
    atomic_fetch_add_explicit(&batch_open, 1, memory_order_relaxed);
    /* Full (or not batching): launch when the entry returns (after its own GPU timing, which
     * the launch's waits on the element's stream would otherwise join); the entries run when
     * the PE next stops. */
    if (r->n == batch_limit())
        op->batch_due = 1;
    return TESS_OK;
}

void tess_obj_batch_launch_due(obj_pe_t *op)
{
    op->batch_due = 0;
    for (int b = 0; b < nbatches; b++)
        if (op->batch->b[b].n == batch_limit())
            batch_launch(op->batch, b);
}
