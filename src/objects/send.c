/* send.c — messages to elements: the send and broadcast API, delivery to the element's entry,
 * forwarding when an element has moved, and misuse reports. */
#include "objects.h"

#include <stdio.h>
#include <stdlib.h>

#define OBJ_USER_MSG 0x7e55u /* hdr.flags of a buffer from tess_msg_alloc */

uint16_t tess_obj_h_entry, tess_obj_h_bcast_proc, tess_obj_h_bcast_pe;
void (*tess_obj_entry_pre)(tess_ctx_h e);
void (*tess_obj_entry_post)(tess_ctx_h e);

typedef obj_bcast_hdr_t bcast_hdr_t;

/* ---- misuse ------------------------------------------------------------------------------ */

_Noreturn void tess_obj_misuse(const char *file, int line, const char *fmt, ...)
{
    char    what[512], where[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    obj_pe_t *op = tess_obj_pe();
    if (op && op->current) {
        char idx[48];
        tess_ctx_h e = op->current;
        snprintf(where, sizeof(where), "in entry '%s' of element %s of array '%s'",
                 tess_entry_name(op->current_entry),
                 tess_obj_elem_text(e, idx, sizeof(idx)), e->array->name);
    } else if (tess_core_pe_self()) {
        snprintf(where, sizeof(where), "on PE %d outside any entry method", tess_core_pe_id());
    } else {
        snprintf(where, sizeof(where), "outside tess_run");
    }
    tess_fatal_at(file, line, "misuse: %s; %s, called at %s:%d", what, where, file, line);
}

tess_status_t tess_obj_check_main(const char *what)
{
    tess_error_clear(); /* the first check of a public call: its detail starts empty */
    if (!tess_core_initialized())
        return tess_error(TESS_ERR_STATE, "%s: Tessera is not initialised", what);
    if (tess_core_pe_self())
        return tess_error(TESS_ERR_STATE, "%s is called inside tess_run (from an entry method, "
                          "continuation or start function on PE %d); call it from the main "
                          "thread before or after tess_run", what, tess_core_pe_id());
    if (tess_core_in_phase())
        return tess_error(TESS_ERR_STATE, "%s is called while a phase runs, from a thread that "
                          "is not a PE; call it from the main thread before or after tess_run",
                          what);
    if (!tess_core_on_main_thread())
        return tess_error(TESS_ERR_STATE, "%s must be called by the thread that called "
                          "tess_init (it makes the MPI calls)", what);
    return TESS_OK;
}

void tess_obj_check_init(const char *what, const char *file, int line)
{
    tess_error_clear(); /* the first check of a public call: its detail starts empty */
    if (tess_unlikely(!tess_core_initialized()))
        tess_obj_misuse(file, line, "%s: Tessera is not initialised (call tess_init first)",
                        what);
}

void tess_obj_check_size(size_t size, const void *data, const char *what, const char *file,
                         int line)
{
    if (tess_unlikely(size > TESS_MSG_SIZE_MAX))
        tess_obj_misuse(file, line, "%s of %zu bytes: more than the largest message (2^46 "
                        "bytes); the size is wrong (negative, or computed with an overflow?)",
                        what, size);
    if (tess_unlikely(size && !data))
        tess_obj_misuse(file, line, "%s of %zu bytes from NULL", what, size);
}

void tess_obj_check_send(tess_array_h a, const char *what, const char *file, int line)
{
    tess_obj_check_init(what, file, line);
    if (tess_unlikely(!tess_core_pe_self() || !tess_core_in_phase()))
        tess_obj_misuse(file, line, "%s outside a phase (only entry methods, continuations and "
                        "tess_run start functions may send)", what);
    if (tess_unlikely(!a))
        tess_obj_misuse(file, line, "%s to a NULL array", what);
    if (tess_unlikely(a->destroyed))
        tess_obj_misuse(file, line, "%s to array '%s', which was destroyed", what, a->name);
}

/* "entry 'E' of element (i) of array 'A'" (or "of every element" for a broadcast): the target
 * of a send, for misuse reports only. */
static const char *obj_target_text(tess_array_h a, const tess_index_t *index, tess_entry_t entry,
                                   char *buf, size_t len)
{
    char ent[80], idx[48];
    if (entry >= 0 && entry < tess_obj_nentries)
        snprintf(ent, sizeof(ent), "entry '%s'", tess_obj_entries[entry].name);
    else
        snprintf(ent, sizeof(ent), "unknown entry %d", entry);
    if (index)
        snprintf(buf, len, "%s of element %s of array '%s'", ent,
                 tess_obj_index_text(a, *index, idx, sizeof(idx)), a ? a->name : "(null)");
    else
        snprintf(buf, len, "%s of every element of array '%s'", ent, a ? a->name : "(null)");
    return buf;
}

/* Checks of a send or broadcast (index NULL) to `entry` of `a`: a phase, a live array, an index
 * in range and a registered host entry. Returns the linear index (0 for a broadcast). Every
 * report names the target array, index and entry, and the caller's file:line. */
static int64_t obj_check_target(tess_array_h a, const tess_index_t *index, tess_entry_t entry,
                                const char *what, const char *file, int line)
{
    char tgt[200];
    tess_obj_check_init(what, file, line);
    tess_obj_check_not_recording(what, file, line);
    if (tess_unlikely(!tess_core_pe_self() || !tess_core_in_phase()))
        tess_obj_misuse(file, line, "%s to %s outside a phase (only entry methods, "
                        "continuations and tess_run start functions may send)", what,
                        obj_target_text(a, index, entry, tgt, sizeof(tgt)));
    if (tess_unlikely(!a))
        tess_obj_misuse(file, line, "%s to a NULL array", what);
    if (tess_unlikely(a->destroyed))
        tess_obj_misuse(file, line, "%s to %s, which was destroyed", what,
                        obj_target_text(a, index, entry, tgt, sizeof(tgt)));
    int64_t lin = 0;
    if (index) {
        lin = tess_obj_linearize(a, *index);
        if (tess_unlikely(lin < 0)) {
            char ext[48];
            tess_index_t e = {a->ext[0], a->ndims > 1 ? a->ext[1] : 0,
                              a->ndims > 2 ? a->ext[2] : 0};
            tess_obj_misuse(file, line, "%s to %s: the index is out of range (extents %s)", what,
                            obj_target_text(a, index, entry, tgt, sizeof(tgt)),
                            tess_obj_index_text(a, e, ext, sizeof(ext)));
        }
    }
    if (tess_unlikely(entry < 0 || entry >= tess_obj_nentries))
        tess_obj_misuse(file, line, "%s to %s: %d entries are registered", what,
                        obj_target_text(a, index, entry, tgt, sizeof(tgt)), tess_obj_nentries);
    if (tess_unlikely(tess_obj_entries[entry].post != NULL))
        tess_obj_misuse(file, line, "%s to %s, which is a device entry (use tess_send_device)",
                        what, obj_target_text(a, index, entry, tgt, sizeof(tgt)));
    return lin;
}

/* ---- delivery ---------------------------------------------------------------------------- */

/* Run an entry; t0: the ticks at its start when the caller has them (0: read them here).
 * Returns the ticks at its end, which may start the next entry of a run, or 0 when more than
 * the entry ran since (hooks, tracing, a migration). */
static uint64_t obj_run_entry(obj_pe_t *op, tess_ctx_h e, tess_entry_t entry, const void *msg,
                              size_t size, uint64_t t0)
{
    op->current       = e;
    op->current_entry = entry;
    if (tess_obj_entry_pre)
        tess_obj_entry_pre(e);
    uint64_t tr_t0 = TESS_TRACE_NOW();
    if (!t0 || tess_obj_entry_pre || tr_t0)
        t0 = tess_ticks();
    tess_obj_entries[entry].fn(e, tess_obj_state(e), msg, size);
    uint64_t t1 = tess_ticks();
    e->load_ticks += t1 - t0;
    if (tess_unlikely(tr_t0))
        tess_trace_record(tess_trace_self_track(), TESS_TEV_ENTRY, NULL,
                          tess_obj_entries[entry].name, e->array->name, tr_t0,
                          tess_time_ns() - tr_t0, (uint64_t)e->linear, size);
    if (tess_obj_entry_post)
        tess_obj_entry_post(e);
    if (tess_unlikely(op->batch_due))
        tess_obj_batch_launch_due(op);
    op->current       = NULL;
    op->current_entry = -1;
    if (tess_unlikely(e->migrate_to >= 0) && e->gpu_pending == 0) {
        int dest      = e->migrate_to;
        e->migrate_to = -1;
        tess_obj_migrate_now(op, e, dest);
        return 0;
    }
    return tr_t0 || tess_obj_entry_post ? 0 : t1;
}

void tess_obj_run_entry(obj_pe_t *op, tess_ctx_h e, tess_entry_t entry, const void *msg,
                        size_t size)
{
    (void)obj_run_entry(op, e, entry, msg, size, 0);
}

void tess_obj_send_linear(tess_array_t *a, int64_t linear, tess_entry_t entry, tess_msg_t *m)
{
    m->hdr.handler = tess_obj_h_entry;
    m->hdr.a0      = ((uint64_t)a->id << 32) | (uint32_t)entry;
    m->hdr.a1      = (uint64_t)linear;
    m->hdr.dst_pe  = atomic_load_explicit(&a->loc[linear], memory_order_relaxed);
    tess_core_send(m);
}

/* An element is not here: it moved on (forward along the location table), or it is on its way
 * here (park the message until it arrives). */
static bool obj_route_missing(obj_pe_t *op, tess_msg_t *m, uint32_t aid, int64_t lin)
{
    tess_array_t *a = aid < tess_obj_narrays ? tess_obj_arrays[aid] : NULL;
    if (tess_unlikely(!a || a->destroyed || lin < 0 || lin >= a->size))
        tess_fatal("a message for element %lld of array %u, which does not exist",
                   (long long)lin, aid);
    int where = atomic_load_explicit(&a->loc[lin], memory_order_relaxed);
    if (where != tess_core_pe_id()) {
        m->hdr.dst_pe = where;
        tess_core_send(m);
        return true;
    }
    if (tess_vec_push(&op->parked, m) != TESS_OK)
        tess_fatal("out of memory parking a message for element %lld of array '%s'",
                   (long long)lin, a->name);
    return false;
}

static bool obj_entry_handler(tess_msg_t *m)
{
    obj_pe_t  *op  = tess_obj_pe();
    uint32_t   aid = (uint32_t)(m->hdr.a0 >> 32);
    int64_t    lin = (int64_t)m->hdr.a1;
    tess_ctx_h e   = tess_obj_elem_find(op, tess_obj_arrays[aid], lin);
    if (tess_unlikely(!e))
        return obj_route_missing(op, m, aid, lin);
    tess_obj_run_entry(op, e, (tess_entry_t)(uint32_t)m->hdr.a0, tess_msg_payload(m),
                       m->hdr.size);
    tess_core_msg_free(m);
    return true;
}

bool tess_obj_unpark(obj_pe_t *op, tess_ctx_h e)
{
    tess_array_t *a    = e->array;
    int64_t       lin  = e->linear;
    bool          here = true;
    for (size_t i = 0; i < op->parked.count;) {
        tess_msg_t *m = op->parked.items[i];
        if ((uint32_t)(m->hdr.a0 >> 32) != a->id || (int64_t)m->hdr.a1 != lin) {
            i++;
            continue;
        }
        /* Keep arrival order: shift instead of swapping. */
        memmove(&op->parked.items[i], &op->parked.items[i + 1],
                (op->parked.count - i - 1) * sizeof(void *));
        op->parked.count--;
        if (here) {
            tess_obj_run_entry(op, e, (tess_entry_t)(uint32_t)m->hdr.a0, tess_msg_payload(m),
                               m->hdr.size);
            tess_core_msg_free(m);
            /* An entry may have moved it on (and freed it): the rest follow it. */
            here = tess_obj_elem_find(op, a, lin) == e;
        } else {
            m->hdr.dst_pe = atomic_load_explicit(&a->loc[lin], memory_order_relaxed);
            tess_core_send(m); /* counted as sent before this one counts as processed */
        }
        tess_core_msg_done();
    }
    return here;
}

/* ---- broadcast --------------------------------------------------------------------------- */

static tess_msg_t *obj_bcast_msg(uint32_t aid, tess_entry_t entry, int root, uint64_t seq,
                                 const void *data, size_t size)
{
    tess_msg_t *m = tess_core_msg_alloc(sizeof(bcast_hdr_t) + size);
    if (!m)
        tess_fatal("out of memory broadcasting %zu bytes", size);
    bcast_hdr_t *b = tess_msg_payload(m);
    b->aid         = aid;
    b->entry       = entry;
    b->root        = root;
    b->pad         = 0;
    b->seq         = seq;
    if (size)
        memcpy(b + 1, data, size);
    return m;
}

/* A broadcast goes first to its array's root process, which numbers it (bcast.c: the one order
 * in which every PE delivers the array's broadcasts), then down a k-ary spanning tree of
 * processes (k = tree_arity) rooted there: process r's children are, counted from the root,
 * r*k+1 .. r*k+k. */
void tess_obj_broadcast(tess_array_t *a, tess_entry_t entry, const void *data, size_t size)
{
    int         root = tess_obj_bcast_root(a);
    tess_msg_t *m    = obj_bcast_msg(a->id, entry, root, 0, data, size);
    m->hdr.handler   = tess_obj_h_bcast_proc;
    m->hdr.dst_pe    = root * tess_rt.ppn;
    tess_core_send(m);
}

/* On PE 0 of each process: at the root, the broadcast's number; a copy to each child in the
 * tree, then one to every PE here. */
static bool obj_bcast_proc_handler(tess_msg_t *m)
{
    bcast_hdr_t *b    = tess_msg_payload(m);
    size_t       size = m->hdr.size - sizeof(*b);
    int64_t      np = tess_rt.size, k = tess_cfg.tree_arity;
    int64_t      rel = (tess_rt.rank - b->root + np) % np;
    if (b->seq == 0) /* only PE 0 of the root process numbers: no other thread writes this */
        b->seq = ++tess_obj_arrays[b->aid]->bcast_last;
    for (int64_t c = rel * k + 1; c <= rel * k + k && c < np; c++) {
        tess_msg_t *f  = obj_bcast_msg(b->aid, b->entry, b->root, b->seq, b + 1, size);
        f->hdr.handler = tess_obj_h_bcast_proc;
        f->hdr.dst_pe  = (int)((c + b->root) % np) * tess_rt.ppn;
        tess_core_send(f);
    }
    for (int l = 0; l < tess_rt.ppn; l++) {
        tess_msg_t *c  = l == tess_rt.ppn - 1 ? m : obj_bcast_msg(b->aid, b->entry, b->root,
                                                                   b->seq, b + 1, size);
        c->hdr.handler = tess_obj_h_bcast_pe;
        c->hdr.dst_pe  = tess_rt.rank * tess_rt.ppn + l;
        tess_core_send(c);
    }
    return true;
}

void tess_obj_bcast_run(tess_array_t *a, uint64_t seq, tess_entry_t entry, const void *data,
                        size_t size)
{
    obj_pe_t   *op = tess_obj_pe();
    tess_vec_t *v  = &a->pe_elems[tess_core_pe_local(tess_core_pe_self())];
    /* Entries may migrate their element, which edits the list: walk a copy. */
    size_t      n = v->count;
    tess_ctx_h  few[16];
    tess_ctx_h *elems = n <= 16 ? few : tess_malloc(n * sizeof(*elems), "a broadcast");
    if (!elems)
        tess_fatal("out of memory delivering a broadcast to %zu elements", n);
    if (n)
        memcpy(elems, v->items, n * sizeof(*elems));
    /* Back to back: one entry's end is the next one's start (one clock read each). */
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        tess_ctx_h e = elems[i];
        if (seq) {
            if (e->bcast_seq >= seq) /* it ran this one before it moved here */
                continue;
            e->bcast_seq = seq; /* before the entry, which may move it on */
        }
        t = obj_run_entry(op, e, entry, data, size, t);
    }
    if (elems != few)
        free(elems);
}

void tess_obj_broadcast_local(tess_array_t *a, tess_entry_t entry, const void *data, size_t size)
{
    tess_pe_t *self = tess_core_pe_self();
    int        mine = -1;
    /* This PE's elements at once when nothing waits in its queue (the message would be
     * handled next), after the messages to the others, which may run meanwhile. */
    if (self && tess_core_pe_queue_empty(self))
        mine = tess_core_pe_local(self);
    for (int l = 0; l < tess_rt.ppn; l++) {
        if (l == mine)
            continue;
        tess_msg_t *c  = obj_bcast_msg(a->id, entry, tess_rt.rank, 0, data, size);
        c->hdr.handler = tess_obj_h_bcast_pe;
        c->hdr.dst_pe  = tess_rt.rank * tess_rt.ppn + l;
        tess_core_send(c);
    }
    if (mine >= 0)
        tess_obj_bcast_run(a, 0, entry, data, size);
}

static bool obj_bcast_pe_handler(tess_msg_t *m)
{
    bcast_hdr_t *b = tess_msg_payload(m);
    if (b->seq == 0) { /* a reduction result every process got (tess_obj_broadcast_local) */
        tess_obj_bcast_run(tess_obj_arrays[b->aid], 0, b->entry, b + 1,
                           m->hdr.size - sizeof(*b));
        tess_core_msg_free(m);
    } else {
        tess_obj_bcast_receive(tess_obj_pe(), m);
    }
    return true;
}

/* ---- API --------------------------------------------------------------------------------- */

tess_status_t tess_send_loc(tess_array_h a, tess_index_t index, tess_entry_t entry,
                            const void *data, size_t size, const char *file, int line)
{
    int64_t lin = obj_check_target(a, &index, entry, "tess_send", file, line);
    tess_obj_check_size(size, data, "tess_send", file, line);
    tess_msg_t *m = tess_core_msg_alloc(size);
    if (!m)
        return TESS_ERR_NO_MEMORY;
    if (size)
        memcpy(tess_msg_payload(m), data, size);
    tess_obj_send_linear(a, lin, entry, m);
    return TESS_OK;
}

void *tess_msg_alloc(size_t size)
{
    tess_msg_t *m = tess_core_msg_alloc(size);
    if (!m)
        return NULL;
    m->hdr.flags = OBJ_USER_MSG;
    return tess_msg_payload(m);
}

void tess_msg_free(void *msg)
{
    if (msg)
        tess_core_msg_free(tess_msg_from_payload(msg));
}

tess_status_t tess_send_msg_loc(tess_array_h a, tess_index_t index, tess_entry_t entry,
                                void *msg, const char *file, int line)
{
    int64_t lin = obj_check_target(a, &index, entry, "tess_send_msg", file, line);
    tess_msg_t *m = msg ? tess_msg_from_payload(msg) : NULL;
    if (tess_unlikely(!m || m->hdr.flags != OBJ_USER_MSG)) {
        char tgt[200];
        tess_obj_misuse(file, line, "tess_send_msg to %s of a buffer that does not come from "
                        "tess_msg_alloc (or was already sent)",
                        obj_target_text(a, &index, entry, tgt, sizeof(tgt)));
    }
    m->hdr.flags = 0;
    tess_obj_send_linear(a, lin, entry, m);
    return TESS_OK;
}

tess_status_t tess_broadcast_loc(tess_array_h a, tess_entry_t entry, const void *data,
                                 size_t size, const char *file, int line)
{
    obj_check_target(a, NULL, entry, "tess_broadcast", file, line);
    tess_obj_check_size(size, data, "tess_broadcast", file, line);
    tess_obj_broadcast(a, entry, data, size);
    return TESS_OK;
}

tess_status_t tess_obj_send_init(void)
{
    tess_status_t st;
    if ((st = tess_core_handler_register("entry", obj_entry_handler, &tess_obj_h_entry)) !=
            TESS_OK ||
        (st = tess_core_handler_register("bcast-proc", obj_bcast_proc_handler,
                                         &tess_obj_h_bcast_proc)) != TESS_OK ||
        (st = tess_core_handler_register("bcast-pe", obj_bcast_pe_handler,
                                         &tess_obj_h_bcast_pe)) != TESS_OK)
        return st;
    return TESS_OK;
}
