/* gputime.c — the GPU time of elements for load balancing (TESS_LB_GPU_TIME): two timing
 * events bracket the stream work of each entry on its element's stream, and each batched
 * launch (tess_gpu_batch) on its stream; a PE reads the finished pairs as it goes, and all of
 * them before it reports its elements' loads, adding each pair's time to its element (a
 * launch's to its elements in equal shares). The hooks and the reading run on the PE's thread;
 * install and uninstall on the main thread at init and fini. */
#include "lb.h"

#include <stdlib.h>
#include <string.h>

/* Per-PE: GPU timing of entries and batched launches (TESS_LB_GPU_TIME). A batch's launch is
 * a group of consecutive pairs, one an element, that share its two events: the first holds the
 * group's size, the others 0; each element gets an equal share of the time. */
typedef struct lb_timing {
    uint32_t         aid;
    int64_t          linear;
    tess_gpu_event_h start, end;
    int              group;
} lb_timing_t;

struct lb_pe {
    tess_gpu_evpool_t events;
    lb_timing_t      *pairs;
    size_t            npairs, cap;
    tess_gpu_event_h  pending_start; /* recorded by the entry hook before the entry */
    tess_gpu_event_h  batch_start;   /* recorded before a batch's launch */
};

unsigned tess_lb_gputime_poll(lb_pe_t *lp, int wait)
{
    if (!lp->npairs)
        return 0;
    obj_pe_t *op   = tess_obj_pe();
    unsigned  done = 0;
    size_t    out  = 0;
    for (size_t i = 0; i < lp->npairs;) {
        lb_timing_t *t = &lp->pairs[i];
        size_t       g = (size_t)t->group;
        if (wait)
            tess_gpu->event_sync(t->end);
        if (tess_gpu->event_query(t->end) != TESS_OK) {
            memmove(&lp->pairs[out], t, g * sizeof(*t));
            out += g;
            i += g;
            continue;
        }
        float ms = 0;
        if (tess_gpu->event_elapsed_ms(t->start, t->end, &ms) == TESS_OK)
            for (size_t k = 0; k < g; k++) {
                /* The array may be gone (destroyed before its last timings were read). */
                tess_array_t *a = t[k].aid < tess_obj_narrays ? tess_obj_arrays[t[k].aid] : NULL;
                tess_ctx_h    e = a ? tess_obj_elem_find(op, a, t[k].linear) : NULL;
                if (e)
                    e->gpu_ms += ms / (double)g;
            }
        tess_gpu_evpool_put(&lp->events, t->start);
        tess_gpu_evpool_put(&lp->events, t->end);
        done++;
        i += g;
    }
    lp->npairs = out;
    return done;
}

static lb_pe_t *lb_pe_self(void)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe ? *tess_core_pe_slot(pe, TESS_SLOT_LB) : NULL;
}

static void lb_entry_pre(tess_ctx_h e)
{
    lb_pe_t *lp = lb_pe_self();
    if (tess_gpu_evpool_get(&lp->events, &lp->pending_start) != TESS_OK ||
        tess_gpu->event_record(lp->pending_start, e->stream) != TESS_OK)
        tess_fatal("GPU timing: cannot record an event: %s", tess_error_detail());
}

/* Room for n more pairs. */
static lb_timing_t *lb_pairs_add(lb_pe_t *lp, size_t n)
{
    if (lp->npairs + n > lp->cap) {
        size_t cap = lp->cap ? lp->cap * 2 : 64;
        while (cap < lp->npairs + n)
            cap *= 2;
        lb_timing_t *p = realloc(lp->pairs, cap * sizeof(*p));
        if (!p)
            tess_fatal("out of memory timing entries");
        lp->pairs = p;
        lp->cap   = cap;
    }
    lb_timing_t *t = &lp->pairs[lp->npairs];
    lp->npairs += n;
    return t;
}

static tess_gpu_event_h lb_record(lb_pe_t *lp, tess_gpu_stream_h stream)
{
    tess_gpu_event_h ev;
    if (tess_gpu_evpool_get(&lp->events, &ev) != TESS_OK ||
        tess_gpu->event_record(ev, stream) != TESS_OK)
        tess_fatal("GPU timing: cannot record an event: %s", tess_error_detail());
    return ev;
}

static void lb_entry_post(tess_ctx_h e)
{
    lb_pe_t     *lp = lb_pe_self();
    lb_timing_t *t  = lb_pairs_add(lp, 1);
    *t = (lb_timing_t){.aid = e->array->id, .linear = e->linear, .start = lp->pending_start,
                       .end = lb_record(lp, e->stream), .group = 1};
}

static void lb_batch_pre(tess_gpu_stream_h stream)
{
    lb_pe_t *lp     = lb_pe_self();
    lp->batch_start = lb_record(lp, stream);
}

static void lb_batch_post(tess_gpu_stream_h stream, const tess_ctx_h *elems, int n)
{
    lb_pe_t         *lp  = lb_pe_self();
    tess_gpu_event_h end = lb_record(lp, stream);
    lb_timing_t     *t   = lb_pairs_add(lp, (size_t)n);
    for (int i = 0; i < n; i++)
        t[i] = (lb_timing_t){.aid = elems[i]->array->id, .linear = elems[i]->linear,
                             .start = lp->batch_start, .end = end, .group = i ? 0 : n};
}

lb_pe_t *tess_lb_gputime_pe_new(void)
{
    lb_pe_t *lp = tess_calloc(1, sizeof(*lp), "per-PE load data");
    if (lp && tess_cfg.lb_gpu_time &&
        tess_gpu_evpool_init(&lp->events, TESS_GPU_EVENT_TIMING, 16) != TESS_OK) {
        free(lp);
        return NULL;
    }
    return lp;
}

void tess_lb_gputime_pe_free(lb_pe_t *lp)
{
    if (!lp)
        return;
    tess_lb_gputime_poll(lp, 1);
    if (tess_cfg.lb_gpu_time)
        tess_gpu_evpool_fini(&lp->events);
    free(lp->pairs);
    free(lp);
}

void tess_lb_gputime_install(void)
{
    tess_obj_entry_pre  = lb_entry_pre;
    tess_obj_entry_post = lb_entry_post;
    tess_obj_batch_pre  = lb_batch_pre;
    tess_obj_batch_post = lb_batch_post;
}

void tess_lb_gputime_uninstall(void)
{
    tess_obj_entry_pre  = NULL;
    tess_obj_entry_post = NULL;
    tess_obj_batch_pre  = NULL;
    tess_obj_batch_post = NULL;
}
