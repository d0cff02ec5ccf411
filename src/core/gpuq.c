/* gpuq.c — GPU completion continuations: per PE, a FIFO of (event, continuation) for each
 * stream that has some waiting. Every scheduler pass looks at every stream, not only the oldest
 * entry, so one slow stream never holds back the continuations of other streams. Events
 * recorded on one stream complete in the order they were recorded, and a PE adds a stream's
 * entries in that order, so a pass queries only the head of each stream's FIFO: a host that
 * runs many iterations ahead of its device keeps many entries waiting, and querying all of them
 * every pass would cost more than the work. Entries whose event's stream is unknown (tess_core_
 * gpu_when) wait in one more list that is queried in full. Events come from the PE's pool.
 *
 * Stream signals (TESS_GPU_POLL, tess_gpuq_setup): where the backend can, a continuation
 * enqueues a write of the next value of its stream's word instead of recording an event, and
 * the poll reads the word: a load from host memory where an event query is a call into the
 * driver that costs more than a microsecond while the device is busy. Entries with events
 * (tess_core_gpu_when, tess_core_gpu_then_event, or no word to be had) are queried as before.
 * The runtime's own waits after copies keep to events: on the H200 a stream signal behind a
 * copy-engine copy holds the stream up (a stream of 16-64 MiB device messages lost 10-18% of
 * its bandwidth with signals); a small copy signals from the copy kernel itself.
 * Only the PE's own thread touches its lists. */
#include "core_int.h"
#include "core/trace.h"

#include <stdio.h>
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

/* Room for one more entry in f. */
static tess_status_t gpuq_reserve(tess_pe_t *pe, gpuq_fifo_t *f)
{
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
    return TESS_OK;
}

static void gpuq_push(tess_pe_t *pe, gpuq_fifo_t *f, gpuq_item_t it)
{
    if (tess_unlikely(tess_trace_on)) {
        it.trace_t0    = tess_time_ns();
        it.trace_track = f->stream ? tess_core_trace_stream_track(f->stream) : TESS_TRACK_OTHER;
    }
    f->items[(f->head + f->count++) % f->cap] = it;
    pe->gq_count++;
    tess_count_sent(pe, 1);
}

/* ---- stream signals ---------------------------------------------------------------------- */

#define GPUQ_CHUNK 64   /* signal words a PE allocates at a time */
/* auto: a device backend signals only with up to this many PEs on the device (the PEs of
 * every process that uses it). Enqueuing a signal takes a lock in the CUDA driver that the PEs
 * of a process contend for: on the H200 tess_gpu_then cost 1.3-1.8 us with 1 PE, 3-4 with 4
 * and 6-8 with 8, against 0.7-1 for an event record; the launch rate at 8 PEs fell to
 * 0.88-0.93 of raw with signals against 0.99-1.06 with events, while at 1 and 2 PEs signals
 * gave 1.0-1.36 against 0.80-1.10. Processes sharing the GPU under MPS contend as well: 4
 * processes of 1 PE gave 0.75-0.88 with signals against 0.90-0.99 with events. */
#define GPUQ_SIGNAL_MAX_PES 2
#define GPUQ_CHECK 4096 /* polls finding nothing complete between checks for a failed device */

static int gpuq_use_signals;

int tess_gpuq_signals(void) { return gpuq_use_signals; }

tess_status_t tess_gpuq_setup(void)
{
    gpuq_use_signals = 0;
    if (!strcmp(tess_cfg.gpu_poll, "event"))
        return TESS_OK;
    char why[256] = "";
    int pes_on_gpu = tess_cfg.ppn * tess_gpu_device_procs();
    if (!strcmp(tess_cfg.gpu_poll, "auto") && tess_gpu->kind != TESS_GPU_HOST &&
        pes_on_gpu > GPUQ_SIGNAL_MAX_PES) {
        tess_info("GPU completions are polled with events: with %d PEs on the GPU (%d per "
                  "process) stream signals contend in the driver (TESS_GPU_POLL=signal to use "
                  "them)", pes_on_gpu, tess_cfg.ppn);
        return TESS_OK;
    }
    if (!tess_gpu->stream_signal) {
        snprintf(why, sizeof(why), "the %s backend has none", tess_gpu->name);
    } else {
        /* One write, waited for: a driver that takes the call but never writes is caught here
         * rather than as a hang later. */
        _Atomic uint32_t *w  = NULL;
        tess_gpu_stream_h s  = tess_gpu_pool_stream(0);
        tess_status_t     st = tess_gpu->signal_alloc(1, &w);
        if (st == TESS_OK && (st = tess_gpu->stream_signal(s, w, 1)) == TESS_OK)
            st = tess_gpu->stream_sync(s);
        if (st != TESS_OK)
            snprintf(why, sizeof(why), "%s", st == TESS_ERR_UNSUPPORTED ? "not supported here"
                                                                        : tess_error_detail());
        else if (atomic_load_explicit(w, memory_order_acquire) != 1)
            snprintf(why, sizeof(why), "a test write did not arrive");
        if (w)
            tess_gpu->signal_free(w);
    }
    if (*why) {
        if (!strcmp(tess_cfg.gpu_poll, "signal"))
            return tess_error(TESS_ERR_UNSUPPORTED, "TESS_GPU_POLL=signal: no stream signals "
                              "(%s)", why);
        tess_info("GPU completions are polled with events: no stream signals (%s)", why);
        return TESS_OK;
    }
    gpuq_use_signals = 1;
    tess_info("GPU completions are seen through stream signals");
    return TESS_OK;
}

/* A chunk of signal words for pe (pinned memory: not allocated on a hot path if it can be
 * helped, so the first chunk comes at PE creation). */
static tess_status_t gpuq_chunk_new(tess_pe_t *pe)
{
    _Atomic uint32_t **chunks = realloc(pe->gq_chunks, (pe->gq_nchunks + 1) * sizeof(*chunks));
    if (!chunks)
        return TESS_ERR_NO_MEMORY;
    pe->gq_chunks = chunks;
    tess_status_t st = tess_gpu->signal_alloc(GPUQ_CHUNK, &chunks[pe->gq_nchunks]);
    if (st != TESS_OK)
        return st;
    pe->gq_nchunks++;
    pe->gq_chunk_used = 0;
    return TESS_OK;
}

tess_status_t tess_gpuq_pe_init(tess_pe_t *pe)
{
    return gpuq_use_signals ? gpuq_chunk_new(pe) : TESS_OK;
}

/* A fresh signal word of this PE (0, as is a new slot's `issued`), or NULL. */
static _Atomic uint32_t *gpuq_word_new(tess_pe_t *pe)
{
    if ((!pe->gq_nchunks || pe->gq_chunk_used == GPUQ_CHUNK) && gpuq_chunk_new(pe) != TESS_OK)
        return NULL;
    return &pe->gq_chunks[pe->gq_nchunks - 1][pe->gq_chunk_used++];
}

/* TESS_OK once the entry's work is complete, TESS_INPROGRESS, or the device's error. */
static inline tess_status_t gpuq_done(const gpuq_fifo_t *f, const gpuq_item_t *it)
{
    if (it->event)
        return tess_gpu->event_query(it->event);
    uint32_t seen = atomic_load_explicit(f->word, memory_order_acquire);
    return (int32_t)(seen - it->seq) >= 0 ? TESS_OK : TESS_INPROGRESS;
}

/* Signals are not errors: a failed device writes none. Now and then, while nothing completes,
 * ask the streams themselves; a stream idle twice running with its signal unseen is a bug. */
static void gpuq_check(tess_pe_t *pe)
{
    for (size_t i = 1; i < pe->gq_nfifos; i++) {
        gpuq_fifo_t       *f  = &pe->gq_fifos[i];
        const gpuq_item_t *it = &f->items[f->head];
        if (!f->count || it->event)
            continue;
        tess_status_t st = tess_gpu->stream_query(f->stream);
        if (st != TESS_OK && st != TESS_INPROGRESS)
            tess_fatal("a GPU operation failed: %s", tess_error_detail());
        if (st == TESS_INPROGRESS || gpuq_done(f, it) == TESS_OK)
            continue;
        if (pe->gq_suspect == f->stream && pe->gq_suspect_seq == it->seq)
            tess_fatal("internal: stream %p is idle but its signal %u never arrived (the word "
                       "holds %u)", (void *)f->stream, it->seq,
                       atomic_load_explicit(f->word, memory_order_relaxed));
        pe->gq_suspect     = f->stream;
        pe->gq_suspect_seq = it->seq;
    }
}

/* With signals: f's word (made if need be) and *seq_p the value to ask of it next; 0 where
 * the entry waits on an event instead. gpuq_signalled records it once enqueued. */
static int gpuq_next_signal(tess_pe_t *pe, gpuq_fifo_t *f, uint32_t *seq_p)
{
    if (!gpuq_use_signals || !(f->word || (f->word = gpuq_word_new(pe))))
        return 0;
    *seq_p = f->issued + 1;
    return 1;
}

static void gpuq_signalled(tess_pe_t *pe, gpuq_fifo_t *f, uint32_t seq, tess_gpu_cont_fn_t fn,
                           void *arg)
{
    f->issued = seq;
    gpuq_push(pe, f, (gpuq_item_t){NULL, fn, arg, seq, 0, 0, 0});
}

static tess_status_t gpuq_then(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn, void *arg,
                               int signal)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_unlikely(!pe))
        tess_fatal("internal: GPU continuation outside a PE");
    gpuq_fifo_t  *f  = gpuq_fifo(pe, stream);
    tess_status_t st = gpuq_reserve(pe, f);
    if (st != TESS_OK)
        return st;
    uint32_t seq;
    if (signal && gpuq_next_signal(pe, f, &seq)) {
        if ((st = tess_gpu->stream_signal(stream, f->word, seq)) == TESS_OK)
            gpuq_signalled(pe, f, seq, fn, arg);
        return st;
    }
    /* Events (and where no signal word could be had). */
    tess_gpu_event_h ev;
    if ((st = tess_gpu_evpool_get(&pe->evpool, &ev)) != TESS_OK)
        return st;
    st = tess_gpu->event_record(ev, stream);
    if (st != TESS_OK) {
        tess_gpu_evpool_put(&pe->evpool, ev);
        return st;
    }
    gpuq_push(pe, f, (gpuq_item_t){ev, fn, arg, 0, 1, 0, 0});
    return TESS_OK;
}

tess_status_t tess_core_gpu_then(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn, void *arg)
{
    return gpuq_then(stream, fn, arg, 1);
}

tess_status_t tess_core_gpu_then_event(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn,
                                        void *arg)
{
    return gpuq_then(stream, fn, arg, 0);
}

tess_status_t tess_core_gpu_copy_then(void *dst, const void *src, size_t size,
                                      tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn,
                                      void *arg)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_unlikely(!pe))
        tess_fatal("internal: GPU continuation outside a PE");
    if (gpuq_use_signals && tess_gpu->memcpy_signal_async &&
        size <= tess_gpu->memcpy_signal_max) {
        gpuq_fifo_t  *f  = gpuq_fifo(pe, stream);
        tess_status_t st = gpuq_reserve(pe, f);
        uint32_t      seq;
        if (st != TESS_OK)
            return st;
        if (gpuq_next_signal(pe, f, &seq)) {
            st = tess_gpu->memcpy_signal_async(dst, src, size, stream, f->word, seq);
            if (st == TESS_OK)
                gpuq_signalled(pe, f, seq, fn, arg);
            return st;
        }
    }
    tess_status_t st = tess_gpu->memcpy_async(dst, src, size, stream);
    return st == TESS_OK ? tess_core_gpu_then_event(stream, fn, arg) : st;
}

tess_status_t tess_core_gpu_then_same(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn,
                                      void *arg)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_unlikely(!pe))
        tess_fatal("internal: GPU continuation outside a PE");
    gpuq_fifo_t *f = gpuq_fifo(pe, stream);
    if (f && f->count) {
        gpuq_item_t last = f->items[(f->head + f->count - 1) % f->cap];
        if (!last.event) { /* a signal: the entry after it waits for the same value */
            tess_status_t st = gpuq_reserve(pe, f);
            if (st != TESS_OK)
                return st;
            gpuq_push(pe, f, (gpuq_item_t){NULL, fn, arg, last.seq, 0, 0, 0});
            return TESS_OK;
        }
    }
    return tess_core_gpu_then_event(stream, fn, arg);
}

tess_status_t tess_core_gpu_when(tess_gpu_event_h event, tess_gpu_cont_fn_t fn, void *arg)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_unlikely(!pe))
        tess_fatal("internal: GPU continuation outside a PE");
    gpuq_fifo_t  *f  = gpuq_fifo(pe, NULL);
    tess_status_t st = gpuq_reserve(pe, f);
    if (st == TESS_OK)
        gpuq_push(pe, f, (gpuq_item_t){event, fn, arg, 0, 0, 0, 0});
    return st;
}

/* A continuation's wait (async, on its stream's track: from the request to the pass that saw
 * it complete) and its run (on the PE). */
static void gpuq_trace(tess_pe_t *pe, const gpuq_item_t *it, uint64_t run_t0)
{
    char stream[24];
    snprintf(stream, sizeof(stream), "PE %d", pe->global);
    tess_trace_record(it->trace_track, TESS_TEV_WAIT, NULL, "gpu wait", stream, it->trace_t0,
                      run_t0 - it->trace_t0, ((uint64_t)(pe->global + 1) << 40) | ++pe->trace_waits,
                      0);
    tess_trace_record((uint32_t)pe->local, TESS_TEV_SPAN, "gpu", "continuation", NULL, run_t0,
                      tess_time_ns() - run_t0, 0, 0);
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
        tess_status_t st = nready < TESS_ARRAY_LEN(ready) ? gpuq_done(u, it) : TESS_INPROGRESS;
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
            tess_status_t st = gpuq_done(f, &f->items[f->head]);
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
    if (!nready && gpuq_use_signals && ++pe->gq_dry % GPUQ_CHECK == 0)
        gpuq_check(pe);
    for (size_t i = 0; i < nready; i++) {
        if (ready[i].pooled)
            tess_gpu_evpool_put(&pe->evpool, ready[i].event);
        uint64_t tr_t0 = ready[i].trace_t0 ? tess_time_ns() : 0;
#ifdef TESS_LOOP_PROFILE
        uint64_t t0 = tess_ticks();
        ready[i].fn(ready[i].arg);
        pe->lp_ticks[LP_CONT] += tess_ticks() - t0;
#else
        ready[i].fn(ready[i].arg);
#endif
        if (tess_unlikely(tr_t0))
            gpuq_trace(pe, &ready[i], tr_t0);
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
            if (gpuq_done(f, &f->items[(f->head + k) % f->cap]) != TESS_INPROGRESS)
                return 1;
    }
    return 0;
}

void tess_gpuq_fini(tess_pe_t *pe)
{
    if (pe->gq_count)
        tess_warn("PE %d: %zu GPU continuations never ran", pe->global, pe->gq_count);
    /* Signals still to come would write freed words: let their streams drain first. */
    for (size_t i = 0; pe->gq_count && i < pe->gq_nfifos; i++)
        if (pe->gq_fifos[i].count && pe->gq_fifos[i].word)
            (void)tess_gpu->stream_sync(pe->gq_fifos[i].stream);
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
    for (size_t i = 0; i < pe->gq_nchunks; i++)
        tess_gpu->signal_free(pe->gq_chunks[i]);
    free(pe->gq_chunks);
    pe->gq_chunks  = NULL;
    pe->gq_nchunks = pe->gq_chunk_used = 0;
    pe->gq_fifos  = NULL;
    pe->gq_nfifos = pe->gq_fifos_cap = 0;
    pe->gq_count  = 0;
}
