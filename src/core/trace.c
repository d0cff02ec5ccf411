/* trace.c (core) — the process side of the timeline trace: clock alignment over MPI, device
 * spans timed with events, and the job's one trace file, gathered to rank 0 at finalize. */
#include "core_int.h"
#include "core/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

const char *const tess_core_trace_path_names[4] = {"d2d", "ipc-staged", "ipc-direct", "rdma"};
int               tess_core_trace_copies;

#define SYNC_ROUNDS 16
#define DEV_MAX     8192 /* pending device spans per thread and phase */

typedef struct {
    int64_t  off;  /* this process's clock minus rank 0's, ns */
    uint64_t rtt;  /* the best round trip it was measured with, ns */
    uint64_t at;   /* local time of the measurement */
} trace_sync_t;

typedef struct dev_span {
    tess_gpu_event_h b, e;
    int              id;    /* the handle dev_begin gave (spans move when others resolve) */
    uint32_t         track;
    uint8_t          kind;
    char             name[24], sub[24];
    uint64_t         bytes;
} dev_span_t;

/* A PE thread's device spans: registered once (under trace.lock) so finalize can free them. */
typedef struct dev_state {
    struct dev_state *next;
    tess_gpu_evpool_t pool;
    dev_span_t       *spans;
    int               n, open, next_id;
    tess_gpu_event_h  anchor;
    uint64_t          anchor_ns; /* host time of the anchor event */
    int               anchored;
    uint64_t          dropped;
} dev_state_t;

static struct {
    trace_sync_t      init, fini;
    uint64_t          epoch; /* rank 0's time at init */
    tess_gpu_stream_h anchor_stream;
    pthread_mutex_t   lock;
    dev_state_t      *devs;          /* guarded by lock */
    _Atomic uint8_t *_Atomic streams_seen; /* [pool size + 1]; set once, under lock */
    size_t            nstreams;
    uint64_t          anchor_err_ns; /* largest anchor uncertainty */
} trace = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local dev_state_t *dev_self;

/* ---- clocks ------------------------------------------------------------------------------ */

/* Rank 0 measures every rank's offset by ping-pong (the best of SYNC_ROUNDS round trips) and
 * sends it back. Collective. */
static trace_sync_t trace_clock_sync(void)
{
    trace_sync_t me = {0, 0, tess_time_ns()};
    MPI_Comm     c  = tess_rt.comm;
    if (tess_rt.rank == 0) {
        for (int r = 1; r < tess_rt.size; r++) {
            trace_sync_t best = {0, UINT64_MAX, 0};
            for (int k = 0; k < SYNC_ROUNDS; k++) {
                uint64_t t0 = tess_time_ns(), tr;
                MPI_Send(&t0, 1, MPI_UINT64_T, r, 0, c);
                MPI_Recv(&tr, 1, MPI_UINT64_T, r, 0, c, MPI_STATUS_IGNORE);
                uint64_t t1 = tess_time_ns();
                if (t1 - t0 < best.rtt) {
                    best.rtt = t1 - t0;
                    best.off = (int64_t)tr - (int64_t)(t0 + (t1 - t0) / 2);
                }
            }
            int64_t msg[2] = {best.off, (int64_t)best.rtt};
            MPI_Send(msg, 2, MPI_INT64_T, r, 1, c);
        }
    } else {
        for (int k = 0; k < SYNC_ROUNDS; k++) {
            uint64_t t0, tr;
            MPI_Recv(&t0, 1, MPI_UINT64_T, 0, 0, c, MPI_STATUS_IGNORE);
            tr = tess_time_ns();
            MPI_Send(&tr, 1, MPI_UINT64_T, 0, 0, c);
        }
        int64_t msg[2];
        MPI_Recv(msg, 2, MPI_INT64_T, 0, 1, c, MPI_STATUS_IGNORE);
        me.off = msg[0];
        me.rtt = (uint64_t)msg[1];
    }
    return me;
}

tess_status_t tess_core_trace_init(void)
{
    int on = tess_cfg.trace[0] != '\0';
    tess_trace_setup(on, (size_t)tess_cfg.trace_events);
    if (!on)
        return TESS_OK;
    tess_trace_thread_track(0); /* the main thread is PE 0 */
    tess_core_trace_copies = tess_cfg.trace_copies;
    trace.init  = trace_clock_sync();
    trace.epoch = trace.init.at - (uint64_t)trace.init.off;
    MPI_Bcast(&trace.epoch, 1, MPI_UINT64_T, 0, tess_rt.comm);
    return TESS_OK;
}

uint64_t tess_core_trace_next_flow(void)
{
    tess_pe_t *pe = tess_pe_self_;
    return pe ? tess_core_trace_flow(pe->global, pe->trace_seq + 1) : 0;
}

/* ---- streams and device spans ------------------------------------------------------------ */

uint32_t tess_core_trace_stream_track(tess_gpu_stream_h s)
{
    size_t n = tess_gpu_pool_size(), i = 0;
    while (i < n && tess_gpu_pool_stream(i) != s)
        i++;
    tess_pe_t *pe = i == n ? tess_core_pe_self() : NULL;
    if (pe) /* a stream of a PE's own (its batch or copy stream): a track for each PE */
        i = n + 1 + (size_t)tess_core_pe_local(pe);
    _Atomic uint8_t *seen = atomic_load_explicit(&trace.streams_seen, memory_order_acquire);
    if (seen && i <= trace.nstreams + (size_t)tess_rt.ppn) /* nstreams was written before
                                                             * streams_seen */
        atomic_store_explicit(&seen[i], 1, memory_order_relaxed);
    return TESS_TRACK_STREAM + (uint32_t)i;
}

static dev_state_t *dev_state(void)
{
    if (dev_self)
        return dev_self;
    dev_state_t *d = tess_calloc(1, sizeof(*d), "trace device spans");
    if (!d)
        return NULL;
    d->spans = tess_calloc(DEV_MAX, sizeof(*d->spans), "trace device spans");
    if (!d->spans || tess_gpu_evpool_init(&d->pool, TESS_GPU_EVENT_TIMING, 16) != TESS_OK) {
        free(d->spans);
        free(d);
        return NULL;
    }
    pthread_mutex_lock(&trace.lock);
    if (!trace.anchor_stream && tess_gpu->stream_create(&trace.anchor_stream) != TESS_OK)
        trace.anchor_stream = NULL;
    if (!atomic_load_explicit(&trace.streams_seen, memory_order_relaxed)) {
        trace.nstreams = tess_gpu_pool_size();
        atomic_store_explicit(&trace.streams_seen,
                              tess_calloc(trace.nstreams + 1 + (size_t)tess_rt.ppn, 1,
                                          "trace streams"),
                              memory_order_release);
    }
    d->next    = trace.devs;
    trace.devs = d;
    pthread_mutex_unlock(&trace.lock);
    dev_self = d;
    return d;
}

/* Host time of a device instant: an event recorded on an idle stream and waited for, placed
 * half-way between the record call and the wait's return (the uncertainty is half of that). */
static int dev_anchor(dev_state_t *d)
{
    if (d->anchored)
        return 1;
    if (!trace.anchor_stream ||
        (!d->anchor && tess_gpu_evpool_get(&d->pool, &d->anchor) != TESS_OK))
        return 0;
    uint64_t t0 = tess_time_ns();
    if (tess_gpu->event_record(d->anchor, trace.anchor_stream) != TESS_OK ||
        tess_gpu->event_sync(d->anchor) != TESS_OK)
        return 0;
    uint64_t t1  = tess_time_ns();
    d->anchor_ns = t0 + (t1 - t0) / 2;
    d->anchored  = 1;
    pthread_mutex_lock(&trace.lock);
    trace.anchor_err_ns = TESS_MAX(trace.anchor_err_ns, (t1 - t0) / 2);
    pthread_mutex_unlock(&trace.lock);
    return 1;
}

static void dev_resolve(dev_state_t *d, int wait);

int tess_core_trace_dev_begin(tess_gpu_stream_h s)
{
    dev_state_t *d = dev_state();
    if (!d || !dev_anchor(d))
        return -1;
    if (d->n == DEV_MAX)
        dev_resolve(d, 0); /* make room: the spans the device has finished */
    if (d->n == DEV_MAX) {
        d->dropped++;
        return -1;
    }
    dev_span_t *sp = &d->spans[d->n];
    if (tess_gpu_evpool_get(&d->pool, &sp->b) != TESS_OK)
        return -1;
    if (tess_gpu->event_record(sp->b, s) != TESS_OK) {
        tess_gpu_evpool_put(&d->pool, sp->b);
        return -1;
    }
    sp->e       = NULL;
    sp->id      = d->next_id;
    d->next_id  = (d->next_id + 1) & INT32_MAX;
    d->open++;
    d->n++;
    return sp->id;
}

void tess_core_trace_dev_end(int h, tess_gpu_stream_h s, tess_trace_kind_t kind,
                             const char *name, const char *sub, uint64_t bytes)
{
    dev_state_t *d = dev_self;
    int          i = d && h >= 0 ? d->n : 0;
    while (i-- > 0 && d->spans[i].id != h) /* open spans are the recent ones */
        ;
    if (i < 0 || d->spans[i].e)
        return;
    dev_span_t *sp = &d->spans[i];
    d->open--;
    if (tess_gpu_evpool_get(&d->pool, &sp->e) != TESS_OK)
        return;
    if (tess_gpu->event_record(sp->e, s) != TESS_OK) {
        tess_gpu_evpool_put(&d->pool, sp->e);
        sp->e = NULL;
        return;
    }
    sp->track = tess_core_trace_stream_track(s);
    sp->kind  = (uint8_t)kind;
    snprintf(sp->name, sizeof(sp->name), "%s", name ? name : "");
    snprintf(sp->sub, sizeof(sp->sub), "%s", sub ? sub : "");
    sp->bytes = bytes;
}

static uint64_t dev_time(dev_state_t *d, tess_gpu_event_h e)
{
    float ms = 0;
    if (tess_gpu->event_sync(e) != TESS_OK ||
        tess_gpu->event_elapsed_ms(d->anchor, e, &ms) != TESS_OK || !(ms >= 0))
        return 0; /* (an event before the anchor, or NaN, has no place on the host's clock) */
    return d->anchor_ns + (uint64_t)((double)ms * 1e6);
}

/* Record the spans whose end the device has reached (all of them, waiting, with `wait`) and
 * keep the others, in order. Open spans (no end yet) stay unless waiting: those are dropped. */
static void dev_resolve(dev_state_t *d, int wait)
{
    int out = 0;
    for (int i = 0; i < d->n; i++) {
        dev_span_t *sp = &d->spans[i];
        if (!wait && (!sp->e || tess_gpu->event_query(sp->e) != TESS_OK)) {
            d->spans[out++] = *sp;
            continue;
        }
        if (sp->e) {
            uint64_t b = dev_time(d, sp->b), e = dev_time(d, sp->e);
            if (b && e >= b)
                tess_trace_record(sp->track, (tess_trace_kind_t)sp->kind, "gpu", sp->name, sp->sub,
                                  b, e - b, 0, sp->bytes);
            tess_gpu_evpool_put(&d->pool, sp->e);
        }
        tess_gpu_evpool_put(&d->pool, sp->b);
    }
    d->n = out;
}

void tess_core_trace_phase_begin(void)
{
    dev_state_t *d = dev_state();
    if (d)
        dev_anchor(d);
}

void tess_core_trace_phase_end(void)
{
    dev_state_t *d = dev_self;
    if (!d)
        return;
    if (d->open)
        tess_warn("trace: %d device span(s) begun in this phase were not ended", d->open);
    dev_resolve(d, 1);
    d->open     = 0;
    d->anchored = 0;
}

/* ---- the file ---------------------------------------------------------------------------- */

/* Names of this process and its tracks, as Chrome metadata events. */
static char *trace_meta(size_t *len_p)
{
    size_t cap = 256 + (size_t)(2 * tess_rt.ppn + trace.nstreams + 2) * 160, len = 0;
    char  *p   = tess_malloc(cap, "trace metadata");
    if (!p)
        return NULL;
    len += (size_t)snprintf(p + len, cap - len,
                            "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":"
                            "\"rank %d\"}},\n{\"ph\":\"M\",\"pid\":%d,\"name\":"
                            "\"process_sort_index\",\"args\":{\"sort_index\":%d}}",
                            tess_rt.rank, tess_rt.rank, tess_rt.rank, tess_rt.rank);
    for (int i = 0; i < tess_rt.ppn; i++)
        len += (size_t)snprintf(p + len, cap - len,
                                ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\","
                                "\"args\":{\"name\":\"PE %d\"}}", tess_rt.rank, i,
                                tess_rt.rank * tess_rt.ppn + i);
    for (size_t i = 0; trace.streams_seen && i <= trace.nstreams + (size_t)tess_rt.ppn; i++) {
        if (!atomic_load(&trace.streams_seen[i]))
            continue;
        char name[48];
        if (i <= trace.nstreams)
            snprintf(name, sizeof(name), "stream %zu%s", i, i == trace.nstreams ? " (other)" : "");
        else
            snprintf(name, sizeof(name), "streams of PE %d", tess_rt.rank * tess_rt.ppn +
                                                             (int)(i - trace.nstreams - 1));
        len += (size_t)snprintf(p + len, cap - len,
                                ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,\"name\":"
                                "\"thread_name\",\"args\":{\"name\":\"%s\"}}",
                                tess_rt.rank, TESS_TRACK_STREAM + i, name);
    }
    len += (size_t)snprintf(p + len, cap - len,
                            ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\","
                            "\"args\":{\"name\":\"runtime\"}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                            "\"name\":\"thread_name\",\"args\":{\"name\":\"PE %d waves\"}},\n"
                            "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":"
                            "{\"name\":\"load balancing\"}}",
                            tess_rt.rank, TESS_TRACK_OTHER, tess_rt.rank, TESS_TRACK_MPI,
                            tess_rt.rank * tess_rt.ppn, tess_rt.rank, TESS_TRACK_LB);
    *len_p = len;
    return p;
}

static void trace_send_text(const char *p, size_t len, int to)
{
    for (size_t off = 0; off < len || off == 0; off += 1u << 30) {
        int n = (int)TESS_MIN(len - off, (size_t)1 << 30);
        MPI_Send(p + off, n, MPI_CHAR, to, 2, tess_rt.comm);
        if (len == 0)
            break;
    }
}

static int trace_recv_text(FILE *f, int from, uint64_t len)
{
    size_t chunk = (size_t)TESS_MIN(len, (uint64_t)1 << 30);
    char  *buf   = malloc(chunk ? chunk : 1);
    int    ok    = buf != NULL;
    for (uint64_t off = 0; off < len || off == 0; off += 1u << 30) {
        int n = (int)TESS_MIN(len - off, (uint64_t)1 << 30);
        MPI_Recv(ok ? buf : NULL, ok ? n : 0, MPI_CHAR, from, 2, tess_rt.comm, MPI_STATUS_IGNORE);
        if (ok && (!f || (n && fwrite(buf, 1, (size_t)n, f) != (size_t)n)))
            ok = 0;
        if (len == 0)
            break;
    }
    free(buf);
    return ok;
}

void tess_core_trace_fini(void)
{
    if (!tess_trace_on)
        return;
    trace.fini = trace_clock_sync();

    /* Every PE resolved its device spans at the end of its last phase; free their state. */
    uint64_t dev_dropped = 0;
    pthread_mutex_lock(&trace.lock);
    for (dev_state_t *d = trace.devs, *next; d; d = next) {
        next = d->next;
        dev_dropped += d->dropped;
        if (d->anchor)
            tess_gpu_evpool_put(&d->pool, d->anchor);
        tess_gpu_evpool_fini(&d->pool);
        free(d->spans);
        free(d);
    }
    trace.devs = NULL;
    if (trace.anchor_stream)
        tess_gpu->stream_destroy(trace.anchor_stream);
    trace.anchor_stream = NULL;
    pthread_mutex_unlock(&trace.lock);
    dev_self = NULL;

    uint64_t recorded, dropped;
    tess_trace_counts(&recorded, &dropped);
    dropped += dev_dropped;
    tess_trace_clock_t clk = {.t_a = trace.init.at, .off_a = trace.init.off,
                              .t_b = trace.fini.at, .off_b = trace.fini.off, .epoch = trace.epoch};
    char  *ev = NULL, *meta;
    size_t ev_len = 0, meta_len = 0;
    if (tess_trace_serialize(tess_rt.rank, &clk, &ev, &ev_len) != TESS_OK)
        tess_warn("trace: %s", tess_error_detail());
    meta = trace_meta(&meta_len);

    /* Per rank: text lengths, events, drops, clock figures. */
    uint64_t mine[8] = {meta ? meta_len : 0, ev_len, recorded, dropped, (uint64_t)trace.init.off,
                        trace.init.rtt, (uint64_t)trace.fini.off, trace.fini.rtt};
    uint64_t *all = tess_rt.rank == 0 ? tess_calloc((size_t)tess_rt.size * 8, 8, "trace") : NULL;
    MPI_Gather(mine, 8, MPI_UINT64_T, all, 8, MPI_UINT64_T, 0, tess_rt.comm);
    uint64_t anchor_err = trace.anchor_err_ns, anchor_max = 0;
    MPI_Reduce(&anchor_err, &anchor_max, 1, MPI_UINT64_T, MPI_MAX, 0, tess_rt.comm);
    if (tess_rt.rank != 0) {
        trace_send_text(meta, mine[0], 0);
        trace_send_text(ev, ev_len, 0);
    } else if (all) {
        FILE *f  = fopen(tess_cfg.trace, "w");
        int   ok = f != NULL;
        if (!f)
            tess_warn("trace: cannot open %s: %s", tess_cfg.trace, strerror(errno));
        uint64_t tot_rec = 0, tot_drop = 0, rtt_max = 0, drift_max = 0;
        if (f)
            fputs("{\"traceEvents\":[\n", f);
        for (int r = 0; r < tess_rt.size; r++) {
            const uint64_t *a = &all[r * 8];
            tot_rec += a[2];
            tot_drop += a[3];
            rtt_max   = TESS_MAX(rtt_max, TESS_MAX(a[5], a[7]));
            int64_t d = (int64_t)a[6] - (int64_t)a[4];
            drift_max = TESS_MAX(drift_max, (uint64_t)(d < 0 ? -d : d));
            if (r == 0) {
                if (f && meta && fwrite(meta, 1, meta_len, f) != meta_len)
                    ok = 0;
                if (f && ev_len && (fputs(",\n", f) < 0 || fwrite(ev, 1, ev_len, f) != ev_len))
                    ok = 0;
            } else {
                if (f && fputs(",\n", f) < 0)
                    ok = 0;
                ok &= trace_recv_text(f, r, a[0]);
                if (f && a[1] && fputs(",\n", f) < 0)
                    ok = 0;
                ok &= trace_recv_text(f, r, a[1]);
            }
        }
        if (f) {
            fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"tessera_trace\":1,"
                    "\"ranks\":%d,\"ppn\":%d,\"events\":%" PRIu64 ",\"dropped_events\":%" PRIu64
                    ",\"clock_rtt_max_ns\":%" PRIu64 ",\"clock_drift_max_ns\":%" PRIu64
                    ",\"device_anchor_err_ns\":%" PRIu64 ",\"clock\":[",
                    tess_rt.size, tess_rt.ppn, tot_rec, tot_drop, rtt_max, drift_max, anchor_max);
            for (int r = 0; r < tess_rt.size; r++)
                fprintf(f, "%s{\"rank\":%d,\"offset_init_ns\":%" PRId64 ",\"offset_fini_ns\":%"
                        PRId64 ",\"rtt_init_ns\":%" PRIu64 ",\"rtt_fini_ns\":%" PRIu64 "}",
                        r ? "," : "", r, (int64_t)all[r * 8 + 4], (int64_t)all[r * 8 + 6],
                        all[r * 8 + 5], all[r * 8 + 7]);
            fputs("]}}\n", f);
            if (fclose(f) != 0)
                ok = 0;
        }
        if (!ok)
            tess_warn("trace: writing %s failed", tess_cfg.trace);
        if (tot_drop)
            tess_warn("trace: %" PRIu64 " events were dropped (buffers full; raise "
                      "TESS_TRACE_EVENTS)", tot_drop);
        tess_info("trace: %" PRIu64 " events in %s; clocks aligned to within %.1f us "
                  "(best round trip/2), drift between init and finalize %.1f us",
                  tot_rec, tess_cfg.trace, rtt_max / 2e3, drift_max / 1e3);
        free(all);
    }
    free(meta);
    free(ev);
    tess_trace_reset();
    free((void *)atomic_exchange(&trace.streams_seen, NULL));
    trace.anchor_err_ns = 0;
    tess_trace_setup(0, 0);
    tess_core_trace_copies = 0;
}
