/*
 * events.c — the host backend's own events: slots in shared-memory event segments (shm.c, so
 * that other processes can open them: ipc.c), handed out from a free list once every record of
 * the slot has run; the checks, queries and timing that need no executor. Recording and
 * waiting are stream operations (enqueue.c), synchronising waits for the executors (exec.c).
 *
 * Threads: every function may be called from any thread (evs.lock guards the free list and the
 * segments; a slot's counters are atomics).
 */
#include "host.h"

#include <stdlib.h>

tess_status_t tess_gpu_host_event_check(tess_gpu_event_h e, const char *fn)
{
    if (tess_unlikely(!e || e->magic != TESS_GPU_HOST_EVENT_MAGIC))
        return tess_error(TESS_ERR_INVALID, "%s: %p is not a live event", fn, (void *)e);
    return TESS_OK;
}

tess_status_t tess_gpu_host_event_query(tess_gpu_event_h e)
{
    tess_status_t st = tess_gpu_host_event_check(e, "event_query");
    if (st == TESS_OK)
        st = tess_gpu_host_fault_check("event_query");
    if (st != TESS_OK)
        return st;
    return tess_gpu_host_slot_complete(e->slot) ? TESS_OK : TESS_INPROGRESS;
}

tess_status_t tess_gpu_host_event_elapsed_ms(tess_gpu_event_h start, tess_gpu_event_h end,
                                             float *ms_p)
{
    tess_status_t st;
    if ((st = tess_gpu_host_event_check(start, "event_elapsed_ms")) != TESS_OK ||
        (st = tess_gpu_host_event_check(end, "event_elapsed_ms")) != TESS_OK)
        return st;
    if (!ms_p)
        return tess_error(TESS_ERR_INVALID, "event_elapsed_ms: ms_p is NULL");
    tess_gpu_event_h ev[2] = {start, end};
    uint64_t         t[2];
    for (int i = 0; i < 2; i++) {
        if (!(ev[i]->flags & TESS_GPU_EVENT_TIMING))
            return tess_error(TESS_ERR_INVALID, "event_elapsed_ms: the %s event was created "
                              "without TESS_GPU_EVENT_TIMING", i ? "end" : "start");
        if (atomic_load_explicit(&ev[i]->slot->recorded, memory_order_acquire) == 0 ||
            !tess_gpu_host_slot_complete(ev[i]->slot))
            return tess_error(TESS_ERR_INVALID, "event_elapsed_ms: the %s event has %s",
                              i ? "end" : "start",
                              atomic_load(&ev[i]->slot->recorded) ? "not completed yet"
                                                                  : "never been recorded");
        t[i] = atomic_load_explicit(&ev[i]->slot->t_ns, memory_order_relaxed);
    }
    *ms_p = (float)(((double)t[1] - (double)t[0]) / 1e6);
    return TESS_OK;
}

static struct {
    pthread_mutex_t   lock;
    tess_vec_t        segs; /* tess_gpu_host_shm_t * */
    size_t            next_slot; /* in the last segment */
    tess_vec_t        all;  /* every own event struct, live or free */
    tess_gpu_event_h  free_head, free_tail;
} evs = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A slot whose records have all run: waits that captured it are satisfied, so handing it to a
 * new event cannot release them early. evs.lock held. */
static tess_gpu_event_h event_take_free(void)
{
    tess_gpu_event_h prev = NULL;
    for (tess_gpu_event_h e = evs.free_head; e; prev = e, e = e->next) {
        if (!tess_gpu_host_slot_complete(e->slot))
            continue;
        if (prev)
            prev->next = e->next;
        else
            evs.free_head = e->next;
        if (evs.free_tail == e)
            evs.free_tail = prev;
        return e;
    }
    return NULL;
}

static tess_status_t event_new_slot(tess_gpu_event_h *e_p)
{
    tess_gpu_host_shm_t *shm = evs.segs.count ? evs.segs.items[evs.segs.count - 1] : NULL;
    tess_gpu_host_evseg_hdr_t *hdr = shm ? shm->base : NULL;
    tess_status_t st;
    if (!shm || evs.next_slot == hdr->nslots) {
        st = tess_gpu_host_shm_create('e', TESS_GPU_HOST_EVSEG_SIZE, &shm);
        if (st != TESS_OK)
            return st;
        if ((st = tess_vec_push(&evs.segs, shm)) != TESS_OK) {
            tess_gpu_host_shm_destroy(shm);
            return st;
        }
        hdr            = shm->base;
        hdr->nslots    = (TESS_GPU_HOST_EVSEG_SIZE - sizeof(*hdr)) / sizeof(tess_gpu_host_evslot_t);
        hdr->slot_size = sizeof(tess_gpu_host_evslot_t);
        hdr->magic     = TESS_GPU_HOST_EVSEG_MAGIC;
        evs.next_slot  = 0;
    }
    tess_gpu_event_h e = tess_calloc(1, sizeof(*e), "an event");
    if (!e)
        return TESS_ERR_NO_MEMORY;
    if ((st = tess_vec_push(&evs.all, e)) != TESS_OK) {
        free(e);
        return st;
    }
    e->shm  = shm;
    e->slot = (tess_gpu_host_evslot_t *)(hdr + 1) + evs.next_slot++;
    *e_p    = e;
    return TESS_OK;
}

tess_status_t tess_gpu_host_event_create(unsigned flags, tess_gpu_event_h *e_p)
{
    if (!e_p || (flags & ~(unsigned)(TESS_GPU_EVENT_TIMING | TESS_GPU_EVENT_IPC)))
        return tess_error(TESS_ERR_INVALID, "event_create: unknown flags %#x or e_p NULL", flags);
    if ((flags & TESS_GPU_EVENT_TIMING) && (flags & TESS_GPU_EVENT_IPC))
        return tess_error(TESS_ERR_INVALID, "event_create: an IPC event cannot be timed (as "
                          "with CUDA)");
    tess_status_t st = TESS_OK;
    pthread_mutex_lock(&evs.lock);
    tess_gpu_event_h e = event_take_free();
    if (!e)
        st = event_new_slot(&e);
    if (st == TESS_OK) {
        e->flags = flags;
        e->next  = e->prev = NULL;
        e->magic = TESS_GPU_HOST_EVENT_MAGIC;
        /* The counters stay as they are (monotonic); only IPC handles of the old event die. */
        atomic_fetch_add_explicit(&e->slot->gen, 1, memory_order_relaxed);
        *e_p = e;
    }
    pthread_mutex_unlock(&evs.lock);
    return st;
}

tess_status_t tess_gpu_host_event_destroy(tess_gpu_event_h e)
{
    tess_status_t st = tess_gpu_host_event_check(e, "event_destroy");
    if (st != TESS_OK)
        return st;
    if (e->flags & TESS_GPU_HOST_EVENT_OPENED)
        return tess_error(TESS_ERR_INVALID, "event_destroy: %p was opened through IPC (close it "
                          "with ipc_event_close)", (void *)e);
    pthread_mutex_lock(&evs.lock);
    e->magic = 0;
    e->next  = NULL;
    if (evs.free_tail)
        evs.free_tail->next = e;
    else
        evs.free_head = e;
    evs.free_tail = e;
    pthread_mutex_unlock(&evs.lock);
    return TESS_OK;
}

void tess_gpu_host_events_fini(void)
{
    for (size_t i = 0; i < evs.all.count; i++)
        free(evs.all.items[i]);
    tess_vec_fini(&evs.all);
    for (size_t i = 0; i < evs.segs.count; i++)
        tess_gpu_host_shm_destroy(evs.segs.items[i]);
    tess_vec_fini(&evs.segs);
    evs.free_head = evs.free_tail = NULL;
    evs.next_slot = 0;
}
