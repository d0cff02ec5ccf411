/* contribute.c — contributions of elements to reductions. The contributions of one process are
 * combined here, per array and tag; a partial goes to core (and on to process 0) once no local
 * element can still contribute to that tag: for every open tag the array counts the local
 * elements that are "behind" it (have not contributed to it or to a later tag). Elements that
 * arrive or leave by migration adjust those counts, so reductions stay right across moves.
 *
 * The fast path (TESS_REDUCE=auto, broadcast callbacks, results of at most 32 bytes): partials
 * join rounds of one allreduce per array (core/reduce_fast.c: shared memory within a node) instead
 * of the tree, and every process runs a complete round on its own elements at once
 * (tess_obj_broadcast_local). Rules, per array and process:
 *   1. One round open at a time: round r + 1 is joined only after round r came back here.
 *   2. A round is joined with the lowest-tag local partial waiting (fast_ready) whose tag is
 *      above thr, the highest tag of any round back so far; or empty, when no local element
 *      and no open local partial can still contribute to a tag above thr (so that a process
 *      without elements, or whose elements contributed elsewhere, does not hold a round up).
 *   3. A partial whose tag is not above thr goes straight to process 0 (late: its element
 *      contributed after its round); so does this process's partial of a round that came back
 *      incomplete (fewer contributions than elements, or partials of different tags).
 *   4. A round that came back complete is delivered by every process to its own elements.
 * Why no tag is lost or delivered twice: every contribution is in exactly one partial, and
 * every partial is either in one round or sent to process 0 (rules 2-3). thr is the same on
 * every process when it joins round r (the same rounds came back everywhere), so no partial
 * with a tag <= thr can be in a later round. A complete round holds all `size` contributions
 * of its one tag, so no partial of that tag exists anywhere else: it is delivered once, by the
 * processes (4), and process 0 never completes it. A tag with a contribution outside complete
 * rounds has every contribution either sent direct or in incomplete rounds, whose partials
 * are then sent direct too (3): process 0 sees them all, completes it by count as for the
 * tree, and broadcasts it down the tree. Progress: a process with elements behind a tag above
 * thr joins once they contributed (or left), one without joins empty (2), so every round
 * that holds a partial completes. */
#include "objects.h"

#include <stdio.h>
#include <stdlib.h>

/* What travels with a reduction to its result. */
typedef struct red_cb {
    int32_t  kind;
    int32_t  entry;
    uint32_t aid;
    uint32_t pad;
    int64_t  linear;
} red_cb_t;

/* A broadcast callback has no element (linear is 0): the fast path's rounds carry the bytes
 * before it, so that a round's record fits the cache line of its round number. */
#define RED_CB_FAST_LEN offsetof(red_cb_t, linear)

struct obj_red_slot {
    obj_red_slot_t *next;
    uint64_t        tag;
    int64_t         behind;   /* local elements that may still contribute */
    int64_t         ncontrib; /* contributions combined here */
    int             count;
    tess_dtype_t    type;
    tess_op_t       op;
    red_cb_t        cb;
    int             direct; /* to process 0 past the tree (the fast path's late partials) */
    int             fits;   /* a broadcast callback and a size that fit the fast path's rounds */
    size_t          cap;    /* bytes at data */
    void           *data;
};

/* Field by field: c is built a field at a time just before, and a memcmp's wider loads of it
 * would wait for those stores to retire (every contribution makes this test). */
static inline int red_cb_equal(const red_cb_t *a, const red_cb_t *b)
{
    return a->kind == b->kind && a->entry == b->entry && a->aid == b->aid &&
           a->linear == b->linear;
}

static inline int elem_behind(tess_ctx_h e, uint64_t tag)
{
    return !e->contributed || e->last_tag < tag;
}

static void slot_free(obj_red_slot_t *s)
{
    free(s->data);
    free(s);
}

/* A slot done with (array lock held): kept for the next tag if none is (chained rounds allocate
 * nothing). */
static void slot_recycle(tess_array_t *a, obj_red_slot_t *s)
{
    if (a->red_spare)
        slot_free(s);
    else
        a->red_spare = s;
}

/* A slot for `bytes` of data (array lock held), fields zeroed but cap and data. */
static obj_red_slot_t *slot_get(tess_array_t *a, size_t bytes)
{
    obj_red_slot_t *s = a->red_spare;
    if (s && s->cap >= bytes) {
        a->red_spare = NULL;
    } else {
        s = tess_calloc(1, sizeof(*s), "a reduction");
        if (s && !(s->data = tess_malloc(TESS_MAX(bytes, 32), "reduction data"))) {
            free(s);
            return NULL;
        }
        if (s)
            s->cap = TESS_MAX(bytes, 32);
    }
    return s;
}

static int slot_fast(const tess_array_t *a, const obj_red_slot_t *s)
{
    return a->fast && s->fits;
}

static int fast_above_thr(const tess_array_t *a, uint64_t tag)
{
    return !a->fast_has_thr || tag > a->fast_thr;
}

/* Rule 2's empty join: nothing here can still contribute to a tag above thr (lock held). */
static int fast_nothing_behind(const tess_array_t *a)
{
    for (const obj_red_slot_t *s = a->red; s; s = s->next)
        if (slot_fast(a, s) && fast_above_thr(a, s->tag))
            return 0;
    for (int l = 0; l < tess_rt.ppn; l++)
        for (size_t k = 0; k < a->pe_elems[l].count; k++) {
            tess_ctx_h e = a->pe_elems[l].items[k];
            if (!a->fast_has_thr || !e->contributed || e->last_tag <= a->fast_thr)
                return 0;
        }
    return 1;
}

/* Join the next round if rules 1-3 allow (lock held); partials for process 0 go on *direct_p. */
static void fast_try_join(tess_array_t *a, obj_red_slot_t **direct_p)
{
    if (!a->fast)
        return;
    if (a->fast_joined > a->fast_done) {
        /* A partial waits behind an empty join, which may still be waiting to be posted. */
        if (a->fast_ready && !a->fast_mine)
            tess_core_reduce_hurry();
        return;
    }
    while (a->fast_ready && !fast_above_thr(a, a->fast_ready->tag)) {
        obj_red_slot_t *s = a->fast_ready;
        a->fast_ready     = s->next;
        s->direct         = 1;
        s->next           = *direct_p;
        *direct_p         = s;
        tess_core_reduce_hold(-1);
    }
    tess_status_t st;
    if (a->fast_ready) {
        obj_red_slot_t *s = a->fast_ready;
        a->fast_ready     = s->next;
        s->next           = NULL;
        a->fast_mine      = s;
        a->fast_joined++;
        st = tess_core_reduce_join(a->id, s->tag, s->ncontrib, a->size, s->data, s->count,
                                   s->type, s->op, &s->cb, RED_CB_FAST_LEN);
        tess_core_reduce_hold(-1);
    } else if (fast_nothing_behind(a)) {
        a->fast_joined++;
        st = tess_core_reduce_join(a->id, 0, 0, a->size, NULL, 1, TESS_INT32, TESS_SUM, NULL, 0);
    } else {
        return;
    }
    if (st != TESS_OK)
        tess_fatal("array '%s': cannot join reduction round %lld: %s", a->name,
                   (long long)a->fast_joined - 1, tess_error_detail());
}

/* Unlink the slots nobody here can contribute to any more (array lock held): those of the
 * fast path wait for a round in fast_ready; the rest are returned, to be sent on. */
static obj_red_slot_t *slots_take_done(tess_array_t *a)
{
    obj_red_slot_t *done = NULL;
    for (obj_red_slot_t **pp = &a->red; *pp;) {
        obj_red_slot_t *s = *pp;
        if (s->behind != 0) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        if (slot_fast(a, s) && fast_above_thr(a, s->tag)) {
            obj_red_slot_t **rp = &a->fast_ready;
            while (*rp && (*rp)->tag < s->tag)
                rp = &(*rp)->next;
            s->next = *rp;
            *rp     = s;
            tess_core_reduce_hold(1);
            continue;
        }
        s->direct = slot_fast(a, s);
        s->next   = done;
        done      = s;
    }
    fast_try_join(a, &done);
    return done;
}

/* Tracing: the flow of process `rank`'s part of reduction (aid, tag) to its callback. */
static inline uint64_t obj_red_flow(uint32_t aid, uint64_t tag, int rank)
{
    return (1ull << 62) | ((uint64_t)(aid & 0xfff) << 46) | ((tag & 0x3ffffffffull) << 12) |
           (uint64_t)(rank & 0xfff);
}

static void slots_submit(tess_array_t *a, obj_red_slot_t *done)
{
    while (done) {
        obj_red_slot_t *s = done;
        done              = s->next;
        TESS_TRACE(tess_trace_record(tess_trace_self_track(), TESS_TEV_RED_IN, NULL, a->name, NULL,
                                     tess_time_ns(), 0, obj_red_flow(a->id, s->tag, tess_rt.rank),
                                     (uint64_t)s->ncontrib));
        tess_status_t st =
            s->direct ? tess_core_reduce_submit_direct(a->id, s->tag, s->ncontrib, a->size,
                                                       s->data, s->count, s->type, s->op, &s->cb,
                                                       sizeof(s->cb))
                      : tess_core_reduce_submit(a->id, s->tag, s->ncontrib, a->size, s->data,
                                                s->count, s->type, s->op, &s->cb, sizeof(s->cb));
        if (st != TESS_OK)
            tess_fatal("reduction tag %llu of array '%s' cannot be sent on: %s",
                       (unsigned long long)s->tag, a->name, tess_error_detail());
        slot_free(s);
    }
}

void tess_obj_red_arrive(tess_array_t *a, tess_ctx_h e)
{
    for (obj_red_slot_t *s = a->red; s; s = s->next)
        s->behind += elem_behind(e, s->tag);
}

void tess_obj_red_leave(tess_array_t *a, tess_ctx_h e)
{
    for (obj_red_slot_t *s = a->red; s; s = s->next)
        s->behind -= elem_behind(e, s->tag);
    obj_red_slot_t *done = slots_take_done(a);
    tess_obj_array_unlock(a);
    slots_submit(a, done);
    tess_obj_array_lock(a);
}

void tess_obj_red_start(tess_array_t *a)
{
    obj_red_slot_t *direct = NULL;
    tess_obj_array_lock(a);
    a->fast = a->size > 0 && !a->reduce_tree && tess_core_reduce_fast_fits(1, TESS_INT32, 0);
    fast_try_join(a, &direct);
    tess_obj_array_unlock(a);
}

void tess_obj_red_fini(tess_array_t *a)
{
    a->fast = 0; /* its rounds end here: elements freed after this join none */
    tess_core_reduce_forget(a->id);
    for (obj_red_slot_t **lists[2] = {&a->fast_ready, &a->fast_mine}, ***l = lists;
         l < lists + 2; l++)
        while (**l) {
            obj_red_slot_t *s = **l;
            **l               = s->next;
            tess_warn("array '%s': reduction tag %llu never completed (its round did not come "
                      "back)", a->name, (unsigned long long)s->tag);
            slot_free(s);
        }
    while (a->red) {
        obj_red_slot_t *s = a->red;
        a->red            = s->next;
        tess_warn("array '%s': reduction tag %llu never completed (%lld of its local "
                  "contributions arrived)", a->name, (unsigned long long)s->tag,
                  (long long)s->ncontrib);
        slot_free(s);
    }
    if (a->red_spare) {
        slot_free(a->red_spare);
        a->red_spare = NULL;
    }
}

static void obj_reduce_result(uint32_t key, uint64_t tag, const void *cb, size_t cb_len,
                              const void *data, size_t size)
{
    uint64_t tr_t0 = TESS_TRACE_NOW();
    red_cb_t c;
    if (cb_len != sizeof(c))
        tess_fatal("internal: reduction %llu with a %zu-byte callback", (unsigned long long)tag,
                   cb_len);
    memcpy(&c, cb, sizeof(c));
    switch (c.kind) {
    case TESS_CB_ELEMENT: {
        tess_msg_t *m = tess_core_msg_alloc(size);
        if (!m)
            tess_fatal("out of memory delivering a reduction result");
        memcpy(tess_msg_payload(m), data, size);
        tess_obj_send_linear(tess_obj_arrays[c.aid], c.linear, c.entry, m);
        break;
    }
    case TESS_CB_BROADCAST:
        tess_obj_broadcast(tess_obj_arrays[c.aid], c.entry, data, size);
        break;
    case TESS_CB_RETURN:
        tess_core_exit(data, size);
        break;
    case TESS_CB_CHECKPOINT_ELEMENT:
    case TESS_CB_CHECKPOINT_BROADCAST:
        /* Held until the phase is quiet and the checkpoint taken (checkpoint.c). */
        tess_obj_ckpt_cb_hold(c.kind == TESS_CB_CHECKPOINT_ELEMENT ? TESS_CB_ELEMENT
                                                                  : TESS_CB_BROADCAST,
                              c.aid, c.linear, c.entry, tag, data, size);
        tess_core_exit(NULL, 0);
        break;
    default:
        tess_fatal("internal: reduction callback kind %d", c.kind);
    }
    if (tess_unlikely(tr_t0)) {
        uint32_t track = tess_trace_self_track();
        tess_trace_record(track, TESS_TEV_RED_OUT, NULL, "reduction callback", NULL, tr_t0,
                          tess_time_ns() - tr_t0, 0, size);
        for (int r = 0; r < tess_rt.size; r++)
            tess_trace_record(track, TESS_TEV_FLOW_IN, "reduction", NULL, NULL, tr_t0, 0,
                              obj_red_flow(key, tag, r), 0);
    }
}

/* A round of the fast path came back (PE 0; the same round on every process). */
static void obj_reduce_round(uint32_t key, const tess_reduce_round_t *r)
{
    tess_array_t *a = tess_obj_arrays[key];
    if (!a)
        tess_fatal("internal: reduction round of array %u, which is gone", key);
    obj_red_slot_t *direct = NULL;
    tess_obj_array_lock(a);
    a->fast_done++;
    if (r->ncontrib > 0) {
        a->fast_thr     = a->fast_has_thr ? TESS_MAX(a->fast_thr, r->tag_max) : r->tag_max;
        a->fast_has_thr = 1;
    }
    obj_red_slot_t *mine = a->fast_mine;
    a->fast_mine         = NULL;
    if (mine && !r->complete) {
        mine->direct = 1;
        mine->next   = direct;
        direct       = mine;
    } else if (mine) {
        slot_recycle(a, mine);
    }
    fast_try_join(a, &direct);
    tess_obj_array_unlock(a);
    if (r->complete) {
        red_cb_t c = {0};
        if (r->cb_len != RED_CB_FAST_LEN)
            tess_fatal("internal: reduction round with a %zu-byte callback", r->cb_len);
        memcpy(&c, r->cb, RED_CB_FAST_LEN);
        if (c.kind != TESS_CB_BROADCAST || c.aid >= tess_obj_narrays || !tess_obj_arrays[c.aid])
            tess_fatal("internal: reduction round of array '%s' with callback kind %d", a->name,
                       c.kind);
        tess_obj_broadcast_local(tess_obj_arrays[c.aid], c.entry, r->data, r->size);
    }
    slots_submit(a, direct);
}

static red_cb_t contribute_callback(tess_callback_t cb, const char *file, int line)
{
    char     idx[48];
    red_cb_t c = {.kind = cb.kind, .entry = cb.entry};
    switch (cb.kind) {
    case TESS_CB_ELEMENT:
    case TESS_CB_BROADCAST:
    case TESS_CB_CHECKPOINT_ELEMENT:
    case TESS_CB_CHECKPOINT_BROADCAST:
        /* tess_contribute checked the rest of tess_obj_check_send (initialised, in a phase). */
        if (tess_unlikely(!cb.array || cb.array->destroyed))
            tess_obj_check_send(cb.array, "a reduction callback", file, line);
        c.aid = cb.array->id;
        if (tess_unlikely(cb.entry < 0 || cb.entry >= tess_obj_nentries ||
                          tess_obj_entries[cb.entry].post))
            tess_obj_misuse(file, line, "reduction callback to entry %d, which is not a "
                            "registered host entry", cb.entry);
        if (cb.kind == TESS_CB_ELEMENT || cb.kind == TESS_CB_CHECKPOINT_ELEMENT) {
            c.linear = tess_obj_linearize(cb.array, cb.index);
            if (tess_unlikely(c.linear < 0))
                tess_obj_misuse(file, line, "reduction callback to index %s, out of range of "
                                "array '%s'", tess_obj_index_text(cb.array, cb.index, idx,
                                                                  sizeof(idx)), cb.array->name);
        }
        break;
    case TESS_CB_RETURN:
        c.entry = -1;
        break;
    default:
        tess_obj_misuse(file, line, "reduction callback of unknown kind %d", (int)cb.kind);
    }
    return c;
}

tess_status_t tess_contribute_loc(tess_ctx_h ctx, uint64_t tag, const void *data, int count,
                                  tess_dtype_t type, tess_op_t op, tess_callback_t cb,
                                  const char *file, int line)
{
    tess_obj_check_init("tess_contribute", file, line);
    tess_obj_check_not_recording("tess_contribute", file, line);
    obj_pe_t *opp = tess_obj_pe();
    char      idx[48];
    if (tess_unlikely(!opp || !tess_core_in_phase()))
        tess_obj_misuse(file, line, "tess_contribute outside a phase");
    /* The element whose entry runs here is one of this PE's: no lookup for it. */
    if (tess_unlikely(!ctx || (ctx != opp->current &&
                               !tess_obj_elem_is_on(opp, ctx))))
        tess_obj_misuse(file, line, "tess_contribute with a ctx that is not an element of this "
                        "PE (pass the ctx your entry method received)");
    tess_array_t *a = ctx->array;
    if (tess_unlikely(!data))
        tess_obj_misuse(file, line, "tess_contribute from NULL");
    if (tess_unlikely(tess_reduce_check(count, type, op) != TESS_OK))
        tess_obj_misuse(file, line, "tess_contribute: %s", tess_error_detail());
    red_cb_t c     = contribute_callback(cb, file, line);
    size_t   bytes = (size_t)count * tess_dtype_size(type);

    tess_obj_array_lock(a);
    if (tess_unlikely(ctx->contributed && tag == ctx->last_tag)) {
        tess_obj_array_unlock(a);
        tess_obj_misuse(file, line, "element %s of array '%s' contributed twice to reduction "
                        "tag %llu (tags must increase)",
                        tess_obj_elem_text(ctx, idx, sizeof(idx)), a->name,
                        (unsigned long long)tag);
    }
    if (tess_unlikely(ctx->contributed && tag < ctx->last_tag)) {
        tess_obj_array_unlock(a);
        tess_obj_misuse(file, line, "element %s of array '%s' contributes to reduction tag %llu, "
                        "lower than the tag of its last contribution (%llu): an element's tags "
                        "must increase", tess_obj_elem_text(ctx, idx, sizeof(idx)),
                        a->name, (unsigned long long)tag, (unsigned long long)ctx->last_tag);
    }
    obj_red_slot_t *s = a->red;
    while (s && s->tag != tag)
        s = s->next;
    if (!s) {
        s = slot_get(a, bytes);
        if (!s) {
            tess_obj_array_unlock(a);
            return TESS_ERR_NO_MEMORY;
        }
        /* Field by field: a compound literal zeroes the whole slot first. */
        s->next     = a->red;
        s->tag      = tag;
        s->behind   = 0;
        s->ncontrib = 0;
        s->count    = count;
        s->type     = type;
        s->op       = op;
        s->cb       = c;
        s->direct   = 0;
        s->fits     = c.kind == TESS_CB_BROADCAST &&
                      tess_core_reduce_fast_fits(count, type, RED_CB_FAST_LEN);
        memcpy(s->data, data, bytes);
        for (int l = 0; l < tess_rt.ppn; l++)
            for (size_t k = 0; k < a->pe_elems[l].count; k++)
                s->behind += elem_behind(a->pe_elems[l].items[k], tag);
        a->red = s;
    } else {
        if (tess_unlikely(s->count != count || s->type != type || s->op != op ||
                          !red_cb_equal(&s->cb, &c))) {
            tess_obj_array_unlock(a);
            tess_obj_misuse(file, line, "element %s of array '%s' contributes %d x %s (%s) to "
                            "reduction tag %llu, whose other contributions are %d x %s (%s), or "
                            "names another callback", tess_obj_elem_text(ctx, idx, sizeof(idx)),
                            a->name, count, tess_dtype_name(type), tess_op_name(op),
                            (unsigned long long)tag, s->count, tess_dtype_name(s->type),
                            tess_op_name(s->op));
        }
        tess_reduce_apply(op, type, s->data, data, count);
    }
    s->ncontrib++;
    /* This element stops being behind every open tag up to this one. */
    for (obj_red_slot_t *o = a->red; o; o = o->next)
        if (o->tag <= tag && elem_behind(ctx, o->tag))
            o->behind--;
    ctx->contributed = 1;
    ctx->last_tag    = tag;
    obj_red_slot_t *done = slots_take_done(a);
    tess_obj_array_unlock(a);
    slots_submit(a, done);
    return TESS_OK;
}

/* ---- a phase that can never end: which reductions wait for which elements --------------- */

#define STUCK_MAX      8 /* reductions reported */
#define STUCK_ELEMENTS 4 /* missing elements named per reduction */

typedef struct stuck_red {
    uint64_t key, tag;
} stuck_red_t;

typedef struct stuck_count {
    int64_t contrib, behind;
    int64_t missing[STUCK_ELEMENTS]; /* linear indices of elements behind, -1 unused */
} stuck_count_t;

/* The open reductions this process knows of: its own slots, and the partials it combines. */
static int stuck_local(stuck_red_t *out)
{
    int n = 0;
    {
        tess_reduce_open_t open[STUCK_MAX];
        int m = TESS_MIN(tess_core_reduce_open(open, STUCK_MAX), STUCK_MAX);
        for (int i = 0; i < m; i++)
            out[n++] = (stuck_red_t){open[i].key, open[i].tag};
    }
    for (uint32_t k = 0; k < tess_obj_narrays && n < STUCK_MAX; k++) {
        tess_array_t *a = tess_obj_arrays[k];
        tess_obj_array_lock(a);
        for (obj_red_slot_t *sl = a->red; sl && n < STUCK_MAX; sl = sl->next)
            out[n++] = (stuck_red_t){k, sl->tag};
        /* The fast path's partials: waiting for a round, or in the open one. */
        for (obj_red_slot_t *sl = a->fast_ready; sl && n < STUCK_MAX; sl = sl->next)
            out[n++] = (stuck_red_t){k, sl->tag};
        if (a->fast_mine && n < STUCK_MAX)
            out[n++] = (stuck_red_t){k, a->fast_mine->tag};
        tess_obj_array_unlock(a);
    }
    return n;
}

static void stuck_count(const stuck_red_t *r, stuck_count_t *c)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < STUCK_ELEMENTS; i++)
        c->missing[i] = -1;
    {
        tess_reduce_open_t open[64];
        int m = TESS_MIN(tess_core_reduce_open(open, 64), 64);
        for (int i = 0; i < m; i++)
            if (open[i].key == r->key && open[i].tag == r->tag)
                c->contrib += open[i].ncontrib;
    }
    tess_array_t *a = tess_obj_arrays[r->key];
    tess_obj_array_lock(a);
    for (obj_red_slot_t *sl = a->red; sl; sl = sl->next)
        if (sl->tag == r->tag)
            c->contrib += sl->ncontrib;
    for (obj_red_slot_t *sl = a->fast_ready; sl; sl = sl->next)
        if (sl->tag == r->tag)
            c->contrib += sl->ncontrib;
    if (a->fast_mine && a->fast_mine->tag == r->tag)
        c->contrib += a->fast_mine->ncontrib;
    for (int l = 0; l < tess_rt.ppn; l++)
        for (size_t k = 0; k < a->pe_elems[l].count; k++) {
            tess_ctx_h e = a->pe_elems[l].items[k];
            if (!elem_behind(e, r->tag))
                continue;
            if (c->behind < STUCK_ELEMENTS)
                c->missing[c->behind] = e->linear;
            c->behind++;
        }
    tess_obj_array_unlock(a);
}

void tess_obj_report_stuck(char *buf, size_t len)
{
    int          np = tess_rt.size;
    stuck_red_t  mine[STUCK_MAX + 1];
    stuck_red_t *all  = tess_calloc((size_t)np * (STUCK_MAX + 1), sizeof(*all), "a report");
    stuck_count_t *cs = tess_calloc((size_t)np, sizeof(*cs), "a report");
    if (!all || !cs)
        tess_fatal("out of memory reporting a phase that cannot end");
    memset(mine, 0, sizeof(mine));
    mine[0].key = (uint64_t)stuck_local(mine + 1);
    MPI_Allgather(mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE,
                  tess_rt.comm);
    /* The union, in the same order everywhere. */
    stuck_red_t u[STUCK_MAX];
    int         nu = 0;
    for (int p = 0; p < np; p++) {
        const stuck_red_t *r = all + (size_t)p * (STUCK_MAX + 1);
        for (uint64_t i = 0; i < r[0].key && nu < STUCK_MAX; i++) {
            int seen = 0;
            for (int j = 0; j < nu && !seen; j++)
                seen = u[j].key == r[1 + i].key && u[j].tag == r[1 + i].tag;
            if (!seen && r[1 + i].key < tess_obj_narrays)
                u[nu++] = r[1 + i];
        }
    }
    size_t n = strlen(buf);
    for (int i = 0; i < nu; i++) {
        stuck_count_t c;
        stuck_count(&u[i], &c);
        MPI_Gather(&c, (int)sizeof(c), MPI_BYTE, cs, (int)sizeof(c), MPI_BYTE, 0, tess_rt.comm);
        if (tess_rt.rank != 0 || n + 1 >= len)
            continue;
        tess_array_t *a = tess_obj_arrays[u[i].key];
        int64_t in = 0, behind = 0;
        for (int p = 0; p < np; p++) {
            in += cs[p].contrib;
            behind += cs[p].behind;
        }
        n += (size_t)snprintf(buf + n, len - n, "%sreduction tag %llu of array '%s' is open: %lld "
                              "of %lld contributions arrived, %lld missing (from elements",
                              i ? "; " : "open reductions: ", (unsigned long long)u[i].tag,
                              a->name, (long long)in, (long long)a->size, (long long)behind);
        int named = 0;
        for (int p = 0; p < np && named < STUCK_ELEMENTS; p++)
            for (int k = 0; k < STUCK_ELEMENTS && cs[p].missing[k] >= 0 && named < STUCK_ELEMENTS;
                 k++) {
                char idx[48];
                if (n + 1 < len)
                    n += (size_t)snprintf(buf + n, len - n, " %s", tess_obj_index_text(a,
                                          tess_obj_delinearize(a, cs[p].missing[k]), idx,
                                          sizeof(idx)));
                named++;
            }
        if (n + 1 < len)
            n += (size_t)snprintf(buf + n, len - n, "%s)", behind > named ? " ..." : "");
    }
    if (tess_rt.rank == 0 && nu == STUCK_MAX && n + 1 < len)
        snprintf(buf + n, len - n, "; and maybe more");
    free(all);
    free(cs);
}

static const char *obj_reduce_name(uint32_t key)
{
    return key < tess_obj_narrays && tess_obj_arrays[key] ? tess_obj_arrays[key]->name : NULL;
}

tess_status_t tess_obj_reduce_init(void)
{
    tess_core_reduce_set_name_fn(obj_reduce_name);
    tess_core_reduce_set_round_fn(obj_reduce_round);
    return tess_core_reduce_set_result_fn(obj_reduce_result);
}
