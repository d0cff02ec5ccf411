/* bcast.c — exactly-once broadcasts to elements that migrate. The array's root process numbers
 * its broadcasts (send.c); every PE delivers them in that order, whatever order they reach it
 * in. An element records the number of the last broadcast it ran and carries it when it moves:
 * a PE skips an element that already ran a broadcast (it came from a PE that was ahead), and
 * runs on an element that arrives behind (from a PE that was late) the broadcasts it missed,
 * from the PE's history of the phase's broadcasts. The history lasts the phase: until it
 * ends, an element may still arrive from a PE that has not delivered a broadcast; when it ends
 * (quiescence) every element has run every broadcast, so the next phase's first broadcast on
 * the PE drops it. Each PE touches only its own state. */
#include "objects.h"

#include <stdlib.h>

typedef struct obj_bcast_rec {
    uint64_t     seq;
    tess_entry_t entry;
    size_t       size;
    char         data[]; /* the broadcast's bytes */
} obj_bcast_rec_t;

struct obj_bcast_pe {
    uint64_t   delivered; /* broadcasts 1..delivered ran on this PE */
    uint64_t   first;     /* the first number of the phase's history */
    uint64_t   epoch;     /* the phase the history belongs to */
    /* The phase's records by number: first..delivered (every one delivered here this phase),
     * then any that came early (a gap before them), in order. */
    tess_vec_t hist;
};

tess_status_t tess_obj_bcast_array_init(tess_array_t *a)
{
    a->bcast = tess_calloc((size_t)tess_rt.ppn, sizeof(*a->bcast), "per-PE broadcast state");
    return a->bcast ? TESS_OK : TESS_ERR_NO_MEMORY;
}

static void bcast_hist_clear(struct obj_bcast_pe *s)
{
    for (size_t i = 0; i < s->hist.count; i++)
        free(s->hist.items[i]);
    s->hist.count = 0;
}

void tess_obj_bcast_array_fini(tess_array_t *a)
{
    if (!a->bcast)
        return;
    for (int l = 0; l < tess_rt.ppn; l++) {
        bcast_hist_clear(&a->bcast[l]);
        tess_vec_fini(&a->bcast[l].hist);
    }
    free(a->bcast);
    a->bcast = NULL;
}

/* The calling PE's state for `a`, with the history of an earlier phase dropped. */
static struct obj_bcast_pe *bcast_pe_state(tess_array_t *a)
{
    struct obj_bcast_pe *s     = &a->bcast[tess_core_pe_local(tess_core_pe_self())];
    uint64_t             epoch = tess_core_phase_epoch();
    if (tess_unlikely(s->epoch != epoch)) {
        if (s->hist.count && ((obj_bcast_rec_t *)s->hist.items[s->hist.count - 1])->seq >
                                 s->delivered)
            tess_fatal("internal: broadcast of array '%s' left undelivered at the end of a "
                       "phase (delivered %llu)", a->name, (unsigned long long)s->delivered);
        bcast_hist_clear(s);
        s->epoch = epoch;
        s->first = s->delivered + 1;
    }
    return s;
}

void tess_obj_bcast_receive(obj_pe_t *op, tess_msg_t *m)
{
    (void)op;
    const obj_bcast_hdr_t *b    = tess_msg_payload(m);
    size_t                 size = m->hdr.size - sizeof(*b);
    tess_array_t          *a    = tess_obj_arrays[b->aid];
    struct obj_bcast_pe   *s    = bcast_pe_state(a);
    if (tess_unlikely(b->seq <= s->delivered))
        tess_fatal("internal: broadcast %llu of array '%s' reached PE %d twice",
                   (unsigned long long)b->seq, a->name, tess_core_pe_id());
    obj_bcast_rec_t *r = tess_malloc(sizeof(*r) + size, "a broadcast's history");
    if (!r || tess_vec_push(&s->hist, r) != TESS_OK)
        tess_fatal("out of memory keeping a broadcast of %zu bytes to array '%s'", size, a->name);
    r->seq   = b->seq;
    r->entry = b->entry;
    r->size  = size;
    if (size)
        memcpy(r->data, b + 1, size);
    tess_core_msg_free(m);
    /* In order of number: usually it goes last already. */
    size_t i = s->hist.count - 1;
    for (; i > 0 && ((obj_bcast_rec_t *)s->hist.items[i - 1])->seq > r->seq; i--)
        s->hist.items[i] = s->hist.items[i - 1];
    s->hist.items[i] = r;
    /* Deliver what is now next in order (records first..delivered precede it). */
    for (;;) {
        size_t next = (size_t)(s->delivered + 1 - s->first);
        if (next >= s->hist.count)
            break;
        obj_bcast_rec_t *n = s->hist.items[next];
        if (n->seq != s->delivered + 1)
            break;
        s->delivered = n->seq;
        tess_obj_bcast_run(a, n->seq, n->entry, n->data, n->size);
    }
}

bool tess_obj_bcast_catch_up(obj_pe_t *op, tess_ctx_h e)
{
    tess_array_t        *a = e->array;
    struct obj_bcast_pe *s = bcast_pe_state(a);
    if (tess_likely(e->bcast_seq >= s->delivered))
        return true;
    if (tess_unlikely(e->bcast_seq + 1 < s->first))
        tess_fatal("internal: element %lld of array '%s' arrived on PE %d at broadcast %llu, "
                   "before this phase's history (from %llu)", (long long)e->linear, a->name,
                   tess_core_pe_id(), (unsigned long long)e->bcast_seq,
                   (unsigned long long)s->first);
    int64_t lin = e->linear;
    while (e->bcast_seq < s->delivered) {
        obj_bcast_rec_t *r = s->hist.items[e->bcast_seq + 1 - s->first];
        e->bcast_seq       = r->seq;
        tess_obj_run_entry(op, e, r->entry, r->data, r->size);
        if (tess_obj_elem_find(op, a, lin) != e)
            return false; /* the entry moved it on; it carries its number */
    }
    return true;
}
