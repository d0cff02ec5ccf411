/* gpuq.c — GPU completion continuations: a per-PE list of (event, continuation). Every
 * scheduler pass queries every entry, not only the oldest, so one slow stream never holds back
 * the continuations of other streams. Events come from the PE's pool. */
#include "core_int.h"

#include <stdlib.h>

tess_gpu_evpool_t *tess_core_evpool(void)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe ? &pe->evpool : NULL;
}

static tess_status_t gpuq_add(tess_pe_t *pe, tess_gpu_event_h event, int pooled,
                              tess_gpu_cont_fn_t fn, void *arg)
{
    if (pe->gq_count == pe->gq_cap) {
        size_t       cap = pe->gq_cap ? pe->gq_cap * 2 : 64;
        gpuq_item_t *gq  = realloc(pe->gq, cap * sizeof(*gq));
        if (!gq)
            return tess_error(TESS_ERR_NO_MEMORY, "cannot grow the GPU continuation list to %zu",
                              cap);
        pe->gq     = gq;
        pe->gq_cap = cap;
    }
    pe->gq[pe->gq_count++] = (gpuq_item_t){event, fn, arg, pooled};
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
    st = gpuq_add(pe, ev, 1, fn, arg);
    if (st != TESS_OK)
        tess_gpu_evpool_put(&pe->evpool, ev);
    return st;
}

tess_status_t tess_core_gpu_when(tess_gpu_event_h event, tess_gpu_cont_fn_t fn, void *arg)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_unlikely(!pe))
        tess_fatal("internal: GPU continuation outside a PE");
    return gpuq_add(pe, event, 0, fn, arg);
}

unsigned tess_gpuq_poll(tess_pe_t *pe)
{
    /* Completed entries leave the list in order (continuations of one stream run in the order
     * they were requested); they run after the scan, since they may add entries. */
    gpuq_item_t ready[32];
    size_t      nready = 0, out = 0;
    for (size_t i = 0; i < pe->gq_count; i++) {
        tess_status_t st = nready < TESS_ARRAY_LEN(ready) ? tess_gpu->event_query(pe->gq[i].event)
                                                          : TESS_INPROGRESS;
        if (st == TESS_INPROGRESS) {
            pe->gq[out++] = pe->gq[i];
            continue;
        }
        if (st != TESS_OK)
            tess_fatal("a GPU operation failed: %s", tess_error_detail());
        ready[nready++] = pe->gq[i];
    }
    pe->gq_count = out;
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
    for (size_t i = 0; i < pe->gq_count; i++)
        if (tess_gpu->event_query(pe->gq[i].event) != TESS_INPROGRESS)
            return 1;
    return 0;
}

void tess_gpuq_fini(tess_pe_t *pe)
{
    if (pe->gq_count)
        tess_warn("PE %d: %zu GPU continuations never ran", pe->global, pe->gq_count);
    for (size_t i = 0; i < pe->gq_count; i++)
        if (pe->gq[i].pooled)
            tess_gpu_evpool_put(&pe->evpool, pe->gq[i].event);
    free(pe->gq);
    pe->gq       = NULL;
    pe->gq_count = pe->gq_cap = 0;
}
