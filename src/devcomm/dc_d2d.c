/* dc_d2d.c — the d2d path (same process): the senders' ordering points (an event recorded on
 * the sending stream, shared by the sends of a batch), the receive (a stream wait on that event
 * and a copy per buffer on the receiver's stream), and batched receives for targets that allow
 * them (one copy operation a stream for several messages, then their deliveries in order). */
#include "dc_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- D2D ordering points ----------------------------------------------------------------- */

static dc_sev_t *dc_sev_get(void)
{
    dc_pe_t  *p  = dc_pe_mine();
    dc_sev_t *sv = p ? p->sev_free : NULL;
    if (sv) {
        p->sev_free = sv->next;
        p->nsev--;
    } else {
        pthread_mutex_lock(&dc.lock);
        if ((sv = dc.sev_free))
            dc.sev_free = sv->next;
        pthread_mutex_unlock(&dc.lock);
    }
    if (!sv) {
        sv = tess_calloc(1, sizeof(*sv), "a device-message event");
        if (!sv)
            return NULL;
        if (tess_gpu->event_create(0, &sv->ev) != TESS_OK) {
            free(sv);
            return NULL;
        }
    }
    atomic_init(&sv->refs, 1);
    return sv;
}

/* Drop a reference; the last one gives the ordering point back: to the calling PE's free
 * ones while they are few, else to the process's pool. */
static void dc_sev_release(void *arg)
{
    dc_sev_t *sv = arg;
    if (atomic_fetch_sub_explicit(&sv->refs, 1, memory_order_acq_rel) != 1)
        return;
    dc_pe_t *p = dc_pe_mine();
    if (p && p->nsev < DC_SEV_CACHE) {
        sv->next    = p->sev_free;
        p->sev_free = sv;
        p->nsev++;
        return;
    }
    pthread_mutex_lock(&dc.lock);
    sv->next    = dc.sev_free;
    dc.sev_free = sv;
    pthread_mutex_unlock(&dc.lock);
}

static void dc_sev_free_list(dc_sev_t *sv)
{
    while (sv) {
        dc_sev_t *next = sv->next;
        tess_gpu->event_destroy(sv->ev);
        free(sv);
        sv = next;
    }
}

/* The current batch of this thread (a PE). */
static _Thread_local struct {
    tess_gpu_stream_h stream; /* NULL: no batch */
    int               decided;
    dc_sev_t         *sev;    /* once decided: the batch's event */
} dc_batch TESS_TLS_FAST;

void tess_dc_batch_begin(tess_gpu_stream_h stream)
{
    tess_assert(!dc_batch.stream);
    dc_batch.stream  = stream;
    dc_batch.decided = 0;
    dc_batch.sev     = NULL;
}

void tess_dc_batch_end(void)
{
    if (dc_batch.sev)
        dc_sev_release(dc_batch.sev);
    dc_batch.stream = NULL;
    dc_batch.sev    = NULL;
}

/* The ordering point for a D2D send from `stream`, with a reference for its receiver: an event
 * recorded on it, which the receiver's stream waits on. Always an event, never a query first
 * for a stream with nothing left to run: on the H200 cudaStreamQuery cost 1.5-2 us on this
 * path (the stream was seldom idle: a signal seen from inside a copy kernel comes before the
 * kernel ends), more than the record and the wait it could save (0.3-0.6 us). d2d latency with
 * the entry after completion, in one run: 1.22 of raw with the query, 1.07-1.09 without. */
static tess_status_t dc_sev_for_send(tess_gpu_stream_h stream, dc_sev_t **sev_p)
{
    int batched = dc_batch.stream && dc_batch.stream == stream;
    if (batched && dc_batch.decided) {
        atomic_fetch_add_explicit(&dc_batch.sev->refs, 1, memory_order_relaxed);
        *sev_p = dc_batch.sev;
        return TESS_OK;
    }
    dc_sev_t *sv = dc_sev_get();
    if (!sv)
        return tess_error(TESS_ERR_NO_MEMORY, "no event for a device message");
    tess_status_t st = tess_gpu->event_record(sv->ev, stream);
    if (st != TESS_OK) {
        dc_sev_release(sv);
        return st;
    }
    sv->stream = stream;
    dc_count(DC_C_D2D_EVENTS, 1);
    if (batched) {
        dc_batch.decided = 1;
        dc_batch.sev     = sv; /* the batch's reference */
        atomic_fetch_add_explicit(&sv->refs, 1, memory_order_relaxed);
    }
    *sev_p = sv;
    return TESS_OK;
}

/* ---- the d2d path ------------------------------------------------------------------------ */

static tess_status_t dc_d2d_send(const dc_send_t *s)
{
    dc_sev_t     *sv = NULL;
    tess_status_t st = dc_sev_for_send(s->stream, &sv);
    if (st != TESS_OK)
        return st;
    TESS_HOP_MARK(TESS_HOP_QUERIED);
    dc_ctl_t   *c;
    tess_msg_t *m = dc_ctl_alloc(DC_K_D2D, s->nbufs, s->header_len, 0, &c);
    dc_ctl_fill(c, s, DC_K_D2D);
    c->msg_id         = s->done ? dc_sent_add(s->done, s->done_arg, NULL, NULL) : 0;
    c->event_ptr      = (uint64_t)(uintptr_t)sv;
    dc_rec_d2d_t *rec = dc_recs(c);
    for (int i = 0; i < s->nbufs; i++)
        rec[i].src = (uint64_t)(uintptr_t)s->bufs[i].ptr;
    dc_send_ctl(m, DC_K_D2D, s->dst_pe);
    TESS_HOP_MARK(TESS_HOP_CTL_SENT);
    return TESS_OK;
}

static void dc_nothing(void *arg) { (void)arg; }

/* ---- batched d2d receives ---------------------------------------------------------------- */

#define DC_RB_MAX 64
_Static_assert(DC_RB_MAX <= 64, "dc_rb_hub_fewer_waits keeps a batch's senders in 64 bits");

/* The d2d receives this PE holds back (targets the layer above calls batchable, taken one
 * after another): their posts ran; the waits for their senders' events, their copies and their
 * deliveries (in arrival order) wait for dc_rb_flush. */
#define DC_RB_COPIES (DC_RB_MAX * TESS_DEV_MAX_BUFS)

/* A held destination range [lo, hi), in rb.dst sorted by lo: the overlap test of a new receive
 * is a binary search, not a scan of every held copy (a PE holds up to DC_RB_COPIES of them). */
typedef struct dc_rb_range {
    uintptr_t lo, hi;
} dc_rb_range_t;

typedef struct dc_rb_state {
    int             n, ncopies;
    dc_recv_t      *r[DC_RB_MAX];
    dc_sev_t       *sev[DC_RB_MAX];  /* r[i]'s sender's ordering point */
    tess_gpu_copy_t copy[DC_RB_COPIES];
    uint8_t         owner[DC_RB_COPIES]; /* the receive (index in r) a copy belongs to */
    dc_rb_range_t   dst[DC_RB_COPIES];   /* the copies' destinations, sorted by lo */
    uintptr_t       maxlen;              /* the longest of them */
} dc_rb_state_t;

/* Each thread's dc_rb_state_t (21 KiB) lies on the heap, reached through a pointer of the
 * initial-exec model (a thread-local access of this size in the general model calls
 * __tls_get_addr on every use, several times a receive), and is freed when the thread ends. */
static _Thread_local dc_rb_state_t *dc_rb_self TESS_TLS_FAST;
static pthread_key_t                dc_rb_key;
static pthread_once_t               dc_rb_once = PTHREAD_ONCE_INIT;

static void dc_rb_key_make(void)
{
    if (pthread_key_create(&dc_rb_key, free) != 0)
        tess_fatal("device messages: pthread_key_create failed");
}

static dc_rb_state_t *dc_rb_make(void)
{
    pthread_once(&dc_rb_once, dc_rb_key_make);
    dc_rb_self = tess_calloc(1, sizeof(*dc_rb_self), "a PE's held device receives");
    if (!dc_rb_self || pthread_setspecific(dc_rb_key, dc_rb_self) != 0)
        tess_fatal("out of memory for a PE's held device receives");
    return dc_rb_self;
}

#define dc_rb (*(tess_likely(dc_rb_self != NULL) ? dc_rb_self : dc_rb_make()))

/* This PE's stream for the copies of a batch that serves several streams (made on first use,
 * destroyed with the layer). */
static tess_gpu_stream_h dc_rb_stream(void)
{
    return dc_pe_stream(dc.rb_streams);
}

/* `waiter` waits for event e's record on `stream` (e back to the pool once that wait is past). */
static void dc_rb_chain(tess_gpu_stream_h waiter, tess_gpu_stream_h stream)
{
    tess_gpu_event_h e;
    if (dc_event_get(&e) != TESS_OK || tess_gpu->event_record(e, stream) != TESS_OK ||
        tess_gpu->stream_wait_event(waiter, e) != TESS_OK)
        tess_fatal("device message: ordering a batch of copies failed: %s",
                   tess_error_detail());
    dc_event_put_when_done(e, waiter);
}

/* Each of the streams waits for the work enqueued on `from` so far: one event for all of them
 * where a wait captures the record it waits for (CUDA, HIP), else one each. */
static void dc_rb_fan_out(const tess_gpu_stream_h *streams, int n, tess_gpu_stream_h from)
{
    if (!tess_gpu->wait_captures_record) {
        for (int k = 0; k < n; k++)
            dc_rb_chain(streams[k], from);
        return;
    }
    tess_gpu_event_h e;
    if (dc_event_get(&e) != TESS_OK || tess_gpu->event_record(e, from) != TESS_OK)
        tess_fatal("device message: ordering a batch of copies failed: %s",
                   tess_error_detail());
    for (int k = 0; k < n; k++)
        if (tess_gpu->stream_wait_event(streams[k], e) != TESS_OK)
            tess_fatal("device message: stream wait failed: %s", tess_error_detail());
    dc_event_put(e);
}

/* A set of at most DC_RB_MAX pointers (streams, sender events) for one flush: open addressing
 * in twice the room, so that the flush is linear in the receives it holds. Returns the index
 * of p in vals (added at the end if new; *added says which). */
#define DC_RB_SET (2 * DC_RB_MAX)

typedef struct dc_rb_set {
    int         n;
    int16_t     slot[DC_RB_SET]; /* index in vals + 1; 0: empty */
    const void *vals[DC_RB_MAX];
} dc_rb_set_t;

static int dc_rb_set_add(dc_rb_set_t *set, const void *p, bool *added)
{
    uintptr_t h = ((uintptr_t)p >> 4) * (uintptr_t)0x9E3779B97F4A7C15ull;
    for (unsigned k = (unsigned)(h >> 32) % DC_RB_SET;; k = (k + 1) % DC_RB_SET) {
        int v = set->slot[k];
        if (!v) {
            set->vals[set->n] = p;
            set->slot[k]      = (int16_t)++set->n;
            *added            = true;
            return set->n - 1;
        }
        if (set->vals[v - 1] == p) {
            *added = false;
            return v - 1;
        }
    }
}

/* `waiter` waits for sender event sv, and drops a receive's reference once past the wait
 * (`wait`: the first receive of sv here; later ones only drop theirs). An event recorded on
 * `waiter` itself needs no wait: what is enqueued on it now comes after the record. */
static void dc_wait_sender(tess_gpu_stream_h waiter, dc_sev_t *sv, bool wait)
{
    if (sv->stream == waiter) {
        dc_count(DC_C_D2D_SAME_STREAM, wait);
        dc_sev_release(sv);
        return;
    }
    if (wait && tess_gpu->stream_wait_event(waiter, sv->ev) != TESS_OK)
        tess_fatal("device message: stream wait failed: %s", tess_error_detail());
    dc_after_wait(waiter, dc_sev_release, sv);
}

/* `waiter` waits once for each distinct sender event of the held-back receives listed in idx
 * (n of them), and drops each receive's reference once past the wait. */
static void dc_rb_wait_senders(tess_gpu_stream_h waiter, const int *idx, int n)
{
    dc_rb_set_t seen;
    seen.n = 0;
    memset(seen.slot, 0, sizeof(seen.slot));
    for (int k = 0; k < n; k++) {
        dc_sev_t *sv = dc_rb.sev[idx[k]];
        bool      added;
        dc_rb_set_add(&seen, sv, &added);
        dc_wait_sender(waiter, sv, added);
    }
}

/* One copy operation of a batch on stream s (a span on the stream when tracing copies). */
static void dc_rb_copy(const tess_gpu_copy_t *copies, int n, tess_gpu_stream_h s)
{
    int tr = dc_trace_copy_begin(s);
    if (tess_gpu_memcpy_batch(copies, n, s) != TESS_OK)
        tess_fatal("device message: copy failed: %s", tess_error_detail());
    if (tess_unlikely(tr >= 0)) {
        uint64_t bytes = 0;
        for (int j = 0; j < n; j++)
            bytes += copies[j].size;
        dc_trace_copy_end(tr, s, 0, bytes);
    }
}

/* The receiving streams this PE's batch stream has waited for since the last
 * tess_dc_streams_dirty (rb_epoch): their work before that point is behind the batch stream,
 * so a SENDER_ORDERED receive for one of them needs no wait. Later batches on the same stream
 * stay behind it; per-stream copies go on the receiving stream itself. */
#define DC_RB_JOINED_MAX 128

static _Thread_local struct {
    uint64_t          epoch;
    int               n;
    tess_gpu_stream_h s[DC_RB_JOINED_MAX];
} dc_rb_joined;

void tess_dc_streams_dirty(void)
{
    atomic_fetch_add_explicit(&dc.rb_epoch, 1, memory_order_acq_rel);
}

static bool dc_rb_was_joined(tess_gpu_stream_h s, uint64_t epoch)
{
    if (dc_rb_joined.epoch != epoch) {
        dc_rb_joined.epoch = epoch;
        dc_rb_joined.n     = 0;
        return false;
    }
    for (int i = 0; i < dc_rb_joined.n; i++)
        if (dc_rb_joined.s[i] == s)
            return true;
    return false;
}

static void dc_rb_mark_joined(tess_gpu_stream_h s)
{
    if (dc_rb_joined.n < DC_RB_JOINED_MAX) /* beyond: joined again next time */
        dc_rb_joined.s[dc_rb_joined.n++] = s;
}

/* TESS_BATCH_STREAM=adapt: whether this PE's batches for several streams go through its batch
 * stream. That pays while the PE is host-bound (one launch instead of one per stream) and costs
 * while the GPU is behind: the batch stream joins the receivers' streams, so the copies for a
 * chare whose earlier work is done wait for the slowest of the batch. Which of the two holds is
 * sampled at the first batch after every DC_RB_SAMPLE receives (a query costs a few receives'
 * worth of host time) by asking whether a receiving stream is still busy with earlier work
 * (host ahead: GPU-bound); a score in [-DC_RB_HYST, DC_RB_HYST] moves one step per sample and
 * the choice flips only at its ends, so noise does not make it oscillate. */
#define DC_RB_SAMPLE 16
#define DC_RB_HYST   3

static _Thread_local struct {
    unsigned recvs;  /* receives in batches since the last sample */
    int      score;  /* > 0: streams found busy (GPU-bound) more often than idle */
    bool     direct; /* the choice: true = one launch per stream */
} dc_rb_adapt TESS_TLS_FAST;

static bool dc_rb_use_shared(tess_gpu_stream_h probe, int nrecv)
{
    if (dc.rb_comm != DC_RB_AUTO)
        return dc.rb_comm == DC_RB_ON;
    bool sample = dc_rb_adapt.recvs == 0;
    dc_rb_adapt.recvs += (unsigned)nrecv;
    if (dc_rb_adapt.recvs >= DC_RB_SAMPLE)
        dc_rb_adapt.recvs = 0;
    if (sample) {
        int busy = tess_gpu->stream_query(probe) == TESS_INPROGRESS;
        int sc   = dc_rb_adapt.score + (busy ? 1 : -1);
        sc       = sc > DC_RB_HYST ? DC_RB_HYST : sc < -DC_RB_HYST ? -DC_RB_HYST : sc;
        dc_rb_adapt.score = sc;
        if (sc == DC_RB_HYST || sc == -DC_RB_HYST) {
            bool direct = sc > 0;
            if (direct != dc_rb_adapt.direct)
                dc_count(DC_C_RB_FLIPS, 1);
            dc_rb_adapt.direct = direct;
        }
    }
    return !dc_rb_adapt.direct;
}

/* A batch with nothing to copy (every receive in place) and receives for ns > 1 streams (grp:
 * each receive's stream): whether ordering it through the batch stream takes fewer stream
 * waits than each stream waiting for its own senders. Through the batch stream: one wait per
 * distinct sender event and one per stream (and one record); direct: per stream, one wait per
 * distinct sender event of its receives. A chare's receives from many neighbours make the
 * second the larger. */
static bool dc_rb_hub_fewer_waits(const int *grp, int ns)
{
    dc_rb_set_t senders;
    uint64_t    seen[DC_RB_MAX]; /* per stream, its senders (bit: index in senders) */
    senders.n = 0;
    memset(senders.slot, 0, sizeof(senders.slot));
    memset(seen, 0, sizeof(uint64_t) * (size_t)ns);
    for (int i = 0; i < dc_rb.n; i++) {
        bool added;
        int  s = dc_rb_set_add(&senders, dc_rb.sev[i], &added);
        seen[grp[i]] |= UINT64_C(1) << s;
    }
    int direct = 0;
    for (int k = 0; k < ns; k++)
        direct += __builtin_popcountll(seen[k]);
    return senders.n + ns + 1 < direct;
}

/* Run every held-back receive: the core calls it before this PE takes a message of another
 * handler and at the end of its dispatch, and the handler before anything but a batchable
 * d2d message.
 *
 * Receives for one stream: that stream waits for their senders (once per sender event), then
 * one copy operation. Receives for several streams, where the layer batches them (rb_comm): the
 * PE's batch stream waits for each of those streams (their earlier work may still read the
 * destinations; not where the post said the senders order that) and each sender event, runs
 * all the copies as one launch, and each stream waits for it. On a GPU that is 3 calls a
 * stream and one a sender instead of a launch a stream and a wait a message: a launch costs
 * the host ten times a wait. A batch with nothing to copy (all in place) goes through the
 * batch stream too where that takes fewer waits (dc_rb_hub_fewer_waits), without the waits
 * for the receiving streams. */
static void dc_rb_flush(void)
{
    if (!dc_rb.n)
        return;
    /* The receiving streams (in order of first use) and each receive's among them; per stream,
     * its receives and its copies (counting sort: arrival order kept within a stream), and
     * whether any of its receives is not ordered by its sender. */
    dc_rb_set_t       sset;
    int               grp[DC_RB_MAX], rfirst[DC_RB_MAX + 1], ridx[DC_RB_MAX];
    int               cfirst[DC_RB_MAX + 1], cidx[DC_RB_COPIES];
    bool              unordered[DC_RB_MAX];
    tess_gpu_stream_h streams[DC_RB_MAX];
    sset.n = 0;
    memset(sset.slot, 0, sizeof(sset.slot));
    for (int i = 0; i < dc_rb.n; i++) {
        bool added;
        grp[i] = dc_rb_set_add(&sset, dc_rb.r[i]->stream, &added);
        if (added) {
            streams[grp[i]]   = dc_rb.r[i]->stream;
            unordered[grp[i]] = false;
        }
        unordered[grp[i]] |= !(dc_rb.r[i]->flags & TESS_DC_SENDER_ORDERED);
    }
    int ns = sset.n;
    memset(rfirst, 0, sizeof(int) * (size_t)(ns + 1));
    memset(cfirst, 0, sizeof(int) * (size_t)(ns + 1));
    for (int i = 0; i < dc_rb.n; i++)
        rfirst[grp[i] + 1]++;
    for (int j = 0; j < dc_rb.ncopies; j++)
        cfirst[grp[dc_rb.owner[j]] + 1]++;
    for (int k = 0; k < ns; k++) {
        rfirst[k + 1] += rfirst[k];
        cfirst[k + 1] += cfirst[k];
    }
    {
        int rpos[DC_RB_MAX], cpos[DC_RB_MAX];
        memcpy(rpos, rfirst, sizeof(int) * (size_t)ns);
        memcpy(cpos, cfirst, sizeof(int) * (size_t)ns);
        for (int i = 0; i < dc_rb.n; i++)
            ridx[rpos[grp[i]]++] = i;
        for (int j = 0; j < dc_rb.ncopies; j++)
            cidx[cpos[grp[dc_rb.owner[j]]]++] = j;
    }
    bool hub = ns > 1 && dc.rb_comm != DC_RB_OFF &&
               (dc_rb.ncopies > 1 || (!dc_rb.ncopies && dc_rb_hub_fewer_waits(grp, ns))) &&
               dc_rb_use_shared(streams[0], dc_rb.n);
    tess_gpu_stream_h comm = hub ? dc_rb_stream() : NULL;
    if (comm && !dc_rb.ncopies) {
        /* Every receive is taken in place: nothing is written, so the batch stream need not
         * wait for the receiving streams; it waits for the senders and they for it. */
        dc_rb_wait_senders(comm, ridx, dc_rb.n);
        dc_rb_fan_out(streams, ns, comm);
        dc_count(DC_C_RB_SHARED, 1);
    } else if (comm) {
        uint64_t epoch = atomic_load_explicit(&dc.rb_epoch, memory_order_acquire);
        for (int k = 0; k < ns; k++) {
            /* The batch stream waits for a receiving stream unless every receive of the batch
             * on it is ordered by its sender already (TESS_DC_SENDER_ORDERED) and it waited for
             * that stream since the stream last took work no sender orders. */
            if (!dc_rb_was_joined(streams[k], epoch) || unordered[k]) {
                dc_rb_chain(comm, streams[k]);
                dc_rb_mark_joined(streams[k]);
            } else {
                dc_count(DC_C_RB_UNJOINED, 1);
            }
        }
        dc_rb_wait_senders(comm, ridx, dc_rb.n);
        dc_rb_copy(dc_rb.copy, dc_rb.ncopies, comm);
        dc_rb_fan_out(streams, ns, comm);
        dc_count(DC_C_RB_LAUNCHES, 1);
        dc_count(DC_C_RB_SHARED, 1);
    } else {
        tess_gpu_copy_t batch[DC_RB_COPIES];
        for (int k = 0; k < ns; k++) {
            tess_gpu_stream_h s = streams[k];
            dc_rb_wait_senders(s, ridx + rfirst[k], rfirst[k + 1] - rfirst[k]);
            int n = 0;
            for (int j = cfirst[k]; j < cfirst[k + 1]; j++)
                batch[n++] = dc_rb.copy[cidx[j]];
            if (n)
                dc_rb_copy(batch, n, s);
            dc_count(DC_C_RB_LAUNCHES, n > 0);
        }
    }
    int n         = dc_rb.n;
    dc_rb.n       = 0;
    dc_rb.ncopies = 0;
    dc_rb.maxlen  = 0;
    if (n > 1)
        dc_count(DC_C_D2D_BATCHED, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        dc_recv_t      *r = dc_rb.r[i];
        const dc_ctl_t *c = tess_msg_payload(r->keep);
        dc_done_after(r->stream, c->msg_id); /* its source-done callback, if it has one */
        dc_deliver(r);
        dc_recv_free(r);
        tess_core_msg_done();
    }
}

/* Whether buffer i of r is taken in place: its post left the offered source as destination
 * (TESS_ENTRY_IN_PLACE). Nothing to copy then; the receiving stream's wait for the sender
 * orders the reads. */
static inline bool dc_in_place(const dc_recv_t *r, const dc_rec_d2d_t *rec, int i)
{
    return r->dst[i] == (void *)(uintptr_t)rec[i].src;
}

/* The first held destination range whose lo is at or above x. */
static int dc_rb_range_at(uintptr_t x)
{
    int lo = 0, hi = dc_rb.ncopies;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (dc_rb.dst[mid].lo < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether a destination of r overlaps one of a held-back copy (which must then go first). A
 * held range meeting [a, a + len) starts before a + len and, being at most maxlen long, after
 * a - maxlen: the ranges between those bounds, found by binary search, are the candidates. */
static int dc_rb_overlaps(const dc_recv_t *r, const size_t *bytes)
{
    for (int i = 0; i < r->m.nbufs; i++) {
        if (!bytes[i])
            continue;
        uintptr_t a = (uintptr_t)r->dst[i], e = a + bytes[i];
        for (int j = dc_rb_range_at(e) - 1; j >= 0 && dc_rb.dst[j].lo + dc_rb.maxlen > a; j--)
            if (dc_rb.dst[j].hi > a)
                return 1;
    }
    return 0;
}

/* Hold copy `c` of receive `owner`: in the copy list and, by its destination, in the ranges. */
static void dc_rb_hold_copy(tess_gpu_copy_t c, int owner)
{
    int                 j = dc_rb.ncopies, at = dc_rb_range_at((uintptr_t)c.dst);
    const dc_rb_range_t rg = {(uintptr_t)c.dst, (uintptr_t)c.dst + c.size};
    memmove(&dc_rb.dst[at + 1], &dc_rb.dst[at], sizeof(dc_rb.dst[0]) * (size_t)(j - at));
    dc_rb.dst[at]   = rg;
    dc_rb.copy[j]   = c;
    dc_rb.owner[j]  = (uint8_t)owner;
    dc_rb.ncopies   = j + 1;
    if (c.size > dc_rb.maxlen)
        dc_rb.maxlen = c.size;
}

/* ---- the d2d receive ---------------------------------------------------------------------- */

/* Returns false when the message is held back in the batch (counted processed at the flush). */
static bool dc_d2d_recv(tess_msg_t *m, unsigned kind)
{
    (void)kind;
    TESS_HOP_MARK(TESS_HOP_CTL_RECV);
    const dc_ctl_t *c     = tess_msg_payload(m);
    int             batch = dc.ops->batchable && dc.ops->batchable(c->a0, c->a1);
    if (!batch || dc_rb.n == DC_RB_MAX)
        dc_rb_flush();
    dc_recv_t      *r   = dc_recv_begin(m, DC_K_D2D);
    TESS_HOP_MARK(TESS_HOP_POSTED);
    dc_sev_t        *sv = (dc_sev_t *)(uintptr_t)c->event_ptr;
    if (!sv)
        tess_fatal("device message from PE %d: a d2d control message without its ordering "
                   "event", m->hdr.src_pe);
    const dc_rec_d2d_t *rec   = dc_recs((dc_ctl_t *)c);
    size_t              bytes[TESS_DEV_MAX_BUFS]; /* to copy: 0 for a buffer taken in place */
    size_t              moved  = 0;
    int                 nplace = 0;
    for (int i = 0; i < r->m.nbufs; i++) {
        bool place = r->sizes[i] && dc_in_place(r, rec, i);
        bytes[i]   = place ? 0 : r->sizes[i];
        moved += bytes[i];
        nplace += place;
    }
    if (nplace)
        dc_count(DC_C_IN_PLACE, (uint64_t)nplace);
    batch = batch && !r->forward && !(r->flags & TESS_DC_WAIT_COMPLETE);
    if (!batch || dc_rb_overlaps(r, bytes))
        dc_rb_flush();
    if (batch) {
        dc_rb.sev[dc_rb.n] = sv; /* waited for at the flush */
        for (int i = 0; i < r->m.nbufs; i++)
            if (bytes[i])
                dc_rb_hold_copy((tess_gpu_copy_t){r->dst[i], (void *)(uintptr_t)rec[i].src,
                                                  bytes[i]},
                                dc_rb.n);
        dc_rb.r[dc_rb.n++] = r;
        TESS_HOP_MARK(TESS_HOP_ISSUED);
        return false;
    }
    dc_wait_sender(r->stream, sv, true);
    int last = -1;
    for (int i = 0; i < r->m.nbufs; i++)
        if (bytes[i])
            last = i;
    /* The last copy carries the completion that the source-done callback and a delivery after
     * completion wait for: a small one signals it from the copy itself. */
    r->marked = last >= 0 && (c->msg_id || (r->flags & TESS_DC_WAIT_COMPLETE));
    int tr    = dc_trace_copy_begin(r->stream);
    for (int i = 0; i < r->m.nbufs; i++) {
        void         *src = (void *)(uintptr_t)rec[i].src;
        tess_status_t st  = TESS_OK;
        if (i == last && r->marked)
            st = tess_core_gpu_copy_then(r->dst[i], src, bytes[i], r->stream,
                                         c->msg_id ? dc_done_cont : dc_nothing,
                                         c->msg_id ? dc_done_cont_arg(c->msg_id) : NULL);
        else if (bytes[i])
            st = tess_gpu->memcpy_async(r->dst[i], src, bytes[i], r->stream);
        if (st != TESS_OK)
            tess_fatal("device message: copy failed: %s", tess_error_detail());
    }
    dc_trace_copy_end(tr, r->stream, 0, moved);
    if (!r->marked)
        dc_done_after(r->stream, c->msg_id);
    dc_recv_finish(r);
    TESS_HOP_MARK(TESS_HOP_ISSUED);
    return true;
}


/* The process's ordering points and each PE's free ones (the layer's fini). */
static void dc_d2d_fini(void)
{
    for (int i = 0; dc.pes && i < tess_rt.ppn; i++) {
        dc_sev_free_list(dc.pes[i].sev_free);
        dc.pes[i].sev_free = NULL;
        dc.pes[i].nsev     = 0;
    }
    dc_sev_free_list(dc.sev_free);
    dc.sev_free = NULL;
}

const dc_path_ops_t dc_d2d_path = {
    .name  = "d2d",
    .kinds = DC_KIND(DC_K_D2D),
    .fini  = dc_d2d_fini,
    .send  = dc_d2d_send,
    .recv  = dc_d2d_recv,
    .flush = dc_rb_flush,
};
