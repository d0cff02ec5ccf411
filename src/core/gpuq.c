/* gpuq.c — GPU completion continuations: per PE, a FIFO of (event, continuation) for each
 * stream that has some waiting. Every scheduler pass looks at every stream, not only the oldest
 * entry, so one slow stream never holds back the continuations of other streams. Events
 * recorded on one stream complete in the order they were recorded, and a PE adds a stream's
 * entries in that order, so a pass queries only the head of each stream's FIFO: a host that
 * runs many iterations ahead of its device keeps many entries waiting, and querying all of them
 * every pass would cost more than the work. Entries whose event's stream is unknown (tess_core_
 * gpu_when) wait in one more list that is queried in full. Events come from the PE's pool.
 * Only the PE's own thread touches its lists. */
#include "core_int.h"

#include <stdlib.h>
#include <string.h>

tess_gpu_evpool_t *tess_core_evpool(void)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe ? &pe->evpool : NULL;
}

/* The FIFO of `stream` (NULL: the list of unknown streams), made when it has none. */
static gpuq_fifo_t *gpuq_fifo(tess_pe_t *pe, tess_gpu_stream_h stream)
{
    if (tess_unlikely(!pe->gq_fifos_cap)) {
        pe->gq_fifos = tess_calloc(8, sizeof(*pe->gq_fifos), "GPU continuation lists");
        if (!pe->gq_fifos)
            return NULL;
        pe->gq_fifos_cap = 8;
        pe->gq_nfifos    = 1; /* [0]: unknown streams */
    }
    if (!stream)
        return &pe->gq_fifos[0];
    for (size_t i = 1; i < pe->gq_nfifos; i++)
        if (pe->gq_fifos[i].stream == stream)
            return &pe->gq_fifos[i];
    if (pe->gq_nfifos == pe->gq_fifos_cap) {
        size_t       cap = pe->gq_fifos_cap * 2;
        gpuq_fifo_t *f   = realloc(pe->gq_fifos, cap * sizeof(*f));
        if (!f)
            return NULL;
        memset(f + pe->gq_fifos_cap, 0, (cap - pe->gq_fifos_cap) * sizeof(*f));
        pe->gq_fifos     = f;
        pe->gq_fifos_cap = cap;
    }
    gpuq_fifo_t *f = &pe->gq_fifos[pe->gq_nfifos++];
    f->stream      = stream;
    f->head = f->count = 0;
    return f;
}

static tess_status_t gpuq_add(tess_pe_t *pe, tess_gpu_event_h event, tess_gpu_stream_h stream,
                              int pooled, tess_gpu_cont_fn_t fn, void *arg)
{
    gpuq_fifo_t *f = gpuq_fifo(pe, stream);
    if (f && f->count == f->cap) {
        size_t       cap   = f->cap ? f->cap * 2 : 16;
        gpuq_item_t *items = malloc(cap * sizeof(*items));
        if (items) {
            for (size_t i = 0; i < f->count; i++)
                items[i] = f->items[(f->head + i) % f->cap];
            free(f->items);
            f->items = items;
            f->cap   = cap;
            f->head  = 0;
        } else {
            f = NULL;
        }
    }
    if (!f)
        return tess_error(TESS_ERR_NO_MEMORY, "cannot grow the GPU continuation list of PE %d",
                          pe->global);
    f->items[(f->head + f->count++) % f->cap] = (gpuq_item_t){event, fn, arg, pooled};
    pe->gq_count++;
    tess_count_sent(pe, 1);
    return TESS_OK;
}

tess_status_t tess_core_gpu_then(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn, void *arg)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_unlikely(!pe))
        tess_fatal("internal: GPU continuation outside a PE");
    tess_gpu_event_h ev;
    tess_status_t    st = tess_gpu_evpool_get(&pe->evpool, &ev);
    if (st != TESS_OK)
        return st;
    st = tess_gpu->event_record(ev, stream);
    if (st != TESS_OK) {
        tess_gpu_evpool_put(&pe->evpool, ev);
        return st;
    }
    st = gpuq_add(pe, ev, stream, 1, fn, arg);
    if (st != TESS_OK)
        tess_gpu_evpool_put(&pe->evpool, ev);
    return st;
}

tess_status_t tess_core_gpu_when(tess_gpu_event_h event, tess_gpu_cont_fn_t fn, void *arg)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_unlikely(!pe))
        tess_fatal("internal: GPU continuation outside a PE");
    return gpuq_add(pe, event, NULL, 0, fn, arg);
}

unsigned tess_gpuq_poll(tess_pe_t *pe)
{
    /* Completed entries leave their FIFO in order (continuations of one stream run in the
     * order they were requested); they run after the scan, since they may add entries. */
    gpuq_item_t ready[32];
    size_t      nready = 0;
    /* Unknown streams: every entry is queried; those still waiting keep their order. */
    gpuq_fifo_t *u   = &pe->gq_fifos[0];
    size_t       out = 0;
    for (size_t i = 0; i < u->count; i++) {
        gpuq_item_t  *it = &u->items[(u->head + i) % u->cap];
        tess_status_t st = nready < TESS_ARRAY_LEN(ready) ? tess_gpu->event_query(it->event)
                                                          : TESS_INPROGRESS;
        if (st == TESS_INPROGRESS) {
            u->items[(u->head + out++) % u->cap] = *it;
            continue;
        }
        if (st != TESS_OK)
            tess_fatal("a GPU operation failed: %s", tess_error_detail());
        ready[nready++] = *it;
    }
    u->count = out;
    /* Streams: the head of each, then the entries after it while they are complete. */
    for (size_t i = 1; i < pe->gq_nfifos && nready < TESS_ARRAY_LEN(ready);) {
        gpuq_fifo_t *f = &pe->gq_fifos[i];
        while (f->count && nready < TESS_ARRAY_LEN(ready)) {
            tess_status_t st = tess_gpu->event_query(f->items[f->head].event);
            if (st == TESS_INPROGRESS)
                break;
            if (st != TESS_OK)
                tess_fatal("a GPU operation failed: %s", tess_error_detail());
            ready[nready++] = f->items[f->head];
            f->head = (f->head + 1) % f->cap;
            f->count--;
        }
        if (f->count) {
            i++;
            continue;
        }
        /* Empty: the last FIFO takes its place; this slot's buffer moves to the end. */
        gpuq_fifo_t spare              = *f;
        *f                             = pe->gq_fifos[pe->gq_nfifos - 1];
        pe->gq_fifos[--pe->gq_nfifos] = spare;
    }
    pe->gq_count -= nready;
    for (size_t i = 0; i < nready; i++) {
        if (ready[i].pooled)
            tess_gpu_evpool_put(&pe->evpool, ready[i].event);
        ready[i].fn(ready[i].arg);
        tess_count_processed(pe, 1);
    }
    return (unsigned)nready;
}

int tess_gpuq_any_done(tess_pe_t *pe)
{
    for (size_t i = 0; i < pe->gq_nfifos; i++) {
        gpuq_fifo_t *f = &pe->gq_fifos[i];
        size_t       n = i ? TESS_MIN(f->count, 1) : f->count; /* heads of streams */
        for (size_t k = 0; k < n; k++)
            if (tess_gpu->event_query(f->items[(f->head + k) % f->cap].event) != TESS_INPROGRESS)
                return 1;
    }
    return 0;
}

void tess_gpuq_fini(tess_pe_t *pe)
{
    if (pe->gq_count)
        tess_warn("PE %d: %zu GPU continuations never ran", pe->global, pe->gq_count);
    for (size_t i = 0; i < pe->gq_fifos_cap; i++) {
        gpuq_fifo_t *f = &pe->gq_fifos[i];
        for (size_t k = 0; i < pe->gq_nfifos && k < f->count; k++) {
            gpuq_item_t *it = &f->items[(f->head + k) % f->cap];
            if (it->pooled)
                tess_gpu_evpool_put(&pe->evpool, it->event);
        }
        free(f->items);
    }
    free(pe->gq_fifos);
    pe->gq_fifos  = NULL;
    pe->gq_nfifos = pe->gq_fifos_cap = 0;
    pe->gq_count  = 0;
}
