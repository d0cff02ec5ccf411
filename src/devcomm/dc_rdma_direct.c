/* dc_rdma_direct.c — the rdma direct path between nodes (and between virtual nodes), where UCX
 * can reach device memory.
 *
 * The sender registers each buffer's allocation once (cache keyed by allocation id, released
 * least-recently-used and at finalize) and, when its stream has reached the send, sends
 * address and key. The receiver waits until its own stream has reached the delivery point (so
 * that the get cannot overwrite data still in use), gets every buffer with UCX, runs the entry
 * once the gets completed (the data is then in place, WAIT_COMPLETE or not), and acknowledges,
 * which releases the registrations and runs the sender's done callback.
 *
 * Acknowledgements (DC_K_RACK) are coalesced per receiving PE and sender PE: one names up to
 * TESS_RDMA_ACK_MAX sends, and a sender's leave at the end of a pass's progress once they are
 * at least as many as its receives with gets still in flight here (half its window; at once
 * when none is), or after TESS_RDMA_ACK_HOLD_US of idle passes ("coalesced acknowledgements"
 * below). The sender completes each named send in order, and what their done callbacks send
 * (a window refilled) goes coalesced into one active message per process. */
#include "dc_int.h"

#include <stdlib.h>

typedef struct dc_reg {
    tess_net_mem_h mem;
    const void    *rkey;
    size_t         rkey_len;
    int            refs;
    int            cached;   /* in dc.regs (else released when its message is acknowledged) */
    uint64_t       last_use, alloc_id;
    uint64_t       serial;   /* this process's registrations, counted from 1 */
} dc_reg_t;

/* Receiver state of a direct message. */
typedef struct dc_rrecv {
    int        waited;   /* its gets waited for the stream (rdma_waiting_recvs) */
    struct dc_rrecv *next_done; /* in its PE's list of completed receives */
    int        pe;       /* receiving PE */
    int        src;      /* sending process */
    dc_recv_t *r;
    _Atomic int gets;    /* gets in flight */
    uint64_t   msg_id;   /* the sender's record, named in the acknowledgement */
    int        ack_pe;
    int        counted;  /* its gets counted in its sender's acknowledgement slot */
    uint64_t   raddr[TESS_DEV_MAX_BUFS];
    uint64_t   key_id[TESS_DEV_MAX_BUFS];
    const void *rkey[TESS_DEV_MAX_BUFS]; /* in the control message (r->keep) */
    size_t     rkey_len[TESS_DEV_MAX_BUFS];
} dc_rrecv_t;

/* ---- coalesced acknowledgements (receiver) ------------------------------------------------ */

/* A receiving PE acknowledges the direct sends it finished per sender PE, several in one
 * message (DC_K_RACK). An id is noted when its entry has run (rack_add). A sender's pending
 * acknowledgements leave once they are at least as many as its receives whose gets are still
 * in flight here (half of what this PE sees of the sender's window): at once when they are two
 * or more; a single one at the end of the scheduler pass's device-message progress
 * (rdma_direct_progress, right after the network progress that completed the gets), where a
 * second one of the same pass may join it; and at once when TESS_RDMA_ACK_MAX are pending. So
 * a sender keeping a window in flight gets it back in halves (in pairs where gets complete as
 * they start), one message each, and refills it in bursts (which the core coalesces into one
 * message as well), while the rest keeps the receiver's gets busy; a ping-pong, or a sender
 * with one message in flight, is acknowledged at the end of the pass, as before. An
 * acknowledgement waits only for gets in flight at this PE (a copy, never a kernel or another
 * message), and an idle PE holds one back TESS_RDMA_ACK_HOLD_US at most (copies slower than
 * that, as on the host backend, are acknowledged one by one). While any is pending the layer
 * counts busy (a phase does not end past them). Each PE's own, touched by its thread only. */
#define RACK_PEERS 16 /* senders a PE tracks at once (others are acknowledged one by one) */

typedef struct rack_peer {
    int      pe;         /* the sender PE (a slot is free with gets and count both 0) */
    uint32_t gets;       /* its receives whose gets are in flight on this PE */
    uint32_t count;      /* acknowledgements pending */
    uint64_t held_ns;    /* when an idle pass first found them held back (0: none has) */
    uint64_t ids[DC_RACK_MAX];
} rack_peer_t;

typedef struct rack_pe {
    int         pending; /* slots with acknowledgements pending */
    rack_peer_t peer[RACK_PEERS];
} rack_pe_t;

static rack_pe_t *racks; /* [ppn] */

static rack_pe_t *rack_mine(void)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe && racks ? &racks[tess_core_pe_local(pe)] : NULL;
}

/* The slot of sender PE `pe` (a free one taken for it), NULL when all are in use. */
static rack_peer_t *rack_slot(rack_pe_t *rp, int pe)
{
    rack_peer_t *free_slot = NULL;
    for (int i = 0; i < RACK_PEERS; i++) {
        rack_peer_t *s = &rp->peer[i];
        if (s->pe == pe && (s->gets || s->count))
            return s;
        if (!free_slot && !s->gets && !s->count)
            free_slot = s;
    }
    if (free_slot)
        free_slot->pe = pe;
    return free_slot;
}

static void rack_send(int dst_pe, const uint64_t *ids, uint32_t n)
{
    tess_msg_t *m = tess_core_msg_alloc(sizeof(dc_rack_msg_t) + n * sizeof(uint64_t));
    if (!m)
        tess_fatal("out of memory acknowledging device messages");
    dc_rack_msg_t *a = tess_msg_payload(m);
    a->n   = n;
    a->pad = 0;
    memcpy(a + 1, ids, n * sizeof(uint64_t));
    dc_count(DC_C_RDMA_ACKS, 1);
    dc_count(DC_C_RDMA_ACKED, n);
    dc_send_ctl(m, DC_K_RACK, dst_pe);
}

static void rack_flush_slot(rack_pe_t *rp, rack_peer_t *s)
{
    rack_send(s->pe, s->ids, s->count);
    s->count   = 0;
    s->held_ns = 0;
    if (--rp->pending == 0)
        atomic_fetch_sub(&dc.busy, 1);
}

/* Send the calling PE's pending acknowledgements of the senders with no more gets in flight
 * here than acknowledgements pending; in an idle pass (`idle`) also those held back for
 * TESS_RDMA_ACK_HOLD_US of idle passes (the clock is read only then). How many messages. */
static unsigned rack_flush(bool idle)
{
    rack_pe_t *rp  = rack_mine();
    unsigned   n   = 0;
    uint64_t   now = 0;
    for (int i = 0; rp && rp->pending && i < RACK_PEERS; i++) {
        rack_peer_t *s = &rp->peer[i];
        if (!s->count)
            continue;
        if (s->count < s->gets) {
            if (!idle)
                continue;
            if (!now)
                now = tess_time_ns();
            if (!s->held_ns || now - s->held_ns < (uint64_t)tess_cfg.rdma_ack_hold_us * 1000) {
                if (!s->held_ns)
                    s->held_ns = now;
                continue;
            }
        }
        rack_flush_slot(rp, s);
        n++;
    }
    return n;
}

/* Receive rr starts its gets (on its PE). */
static void rack_gets_begin(dc_rrecv_t *rr)
{
    rack_pe_t   *rp = rack_mine();
    rack_peer_t *s  = rp && tess_core_pe_id() == rr->pe ? rack_slot(rp, rr->ack_pe) : NULL;
    if (s) {
        s->gets++;
        rr->counted = 1;
    }
}

/* Receive rr has finished (its entry ran, on its PE): note its acknowledgement. */
static void rack_add(dc_rrecv_t *rr)
{
    rack_pe_t   *rp = rack_mine();
    rack_peer_t *s  = rp ? rack_slot(rp, rr->ack_pe) : NULL;
    if (s && rr->counted)
        s->gets--;
    if (!s || tess_cfg.rdma_ack_max <= 1) {
        rack_send(rr->ack_pe, &rr->msg_id, 1);
        return;
    }
    if (!s->count && rp->pending++ == 0)
        atomic_fetch_add(&dc.busy, 1);
    s->ids[s->count++] = rr->msg_id;
    /* Two or more that reach the gets in flight leave at once: where gets complete as they
     * start (a whole window's announcements taken in one pass), the sender refills in pairs
     * while the receiver goes on, instead of the whole window at the end of the pass. */
    if (s->count >= (uint32_t)tess_cfg.rdma_ack_max || s->count >= DC_RACK_MAX ||
        (s->count >= 2 && s->count >= s->gets))
        rack_flush_slot(rp, s);
}

/* ---- init / fini ------------------------------------------------------------------------- */

static void reg_release(struct dc_reg *g);

/* The gpu layer is about to free allocation alloc_id (tess_gpu_free, or a migrated element's
 * old buffers): drop its cached registration, at once if no send uses it, else when the last
 * one is acknowledged. Alloc ids are never reused, so a new allocation at the same address gets
 * a new registration and key in any case; this keeps freed memory from staying registered. */
static void rdma_forget(uint64_t alloc_id)
{
    pthread_mutex_lock(&dc.lock);
    dc_reg_t *g = tess_hmap_remove(&dc.regs, alloc_id);
    if (g) {
        g->cached = 0;
        dc.stats.reg_forgets++;
        if (!g->refs)
            reg_release(g);
    }
    pthread_mutex_unlock(&dc.lock);
}

static tess_status_t rdma_direct_init(void)
{
    racks = tess_calloc((size_t)tess_rt.ppn, sizeof(*racks), "the PEs' RDMA acknowledgements");
    if (!racks)
        return TESS_ERR_NO_MEMORY;
    tess_status_t st = tess_hmap_init(&dc.regs, 64);
    if (st != TESS_OK) {
        free(racks);
        racks = NULL;
        return st;
    }
    if (!dc.rdma_staged)
        tess_gpu_set_free_hook(rdma_forget);
    return TESS_OK;
}

static void rdma_direct_fini(void)
{
    for (int i = 0; racks && i < tess_rt.ppn; i++)
        if (racks[i].pending)
            tess_warn("devcomm: PE %d kept acknowledgements of %d senders' RDMA sends unsent",
                      i, racks[i].pending);
    free(racks);
    racks = NULL;
    tess_gpu_set_free_hook(NULL);
    size_t   it = 0;
    uint64_t key;
    void    *val;
    while (tess_hmap_next(&dc.regs, &it, &key, &val)) {
        dc_reg_t *g = val;
        tess_net_mem_deregister(g->mem);
        dc.stats.reg_releases++;
        free(g);
    }
    tess_hmap_fini(&dc.regs);
}

/* ---- registrations (lock held) ----------------------------------------------------------- */

static void reg_release(struct dc_reg *g)
{
    tess_net_mem_deregister(g->mem);
    dc.stats.reg_releases++;
    free(g);
}

static dc_reg_t *reg_get(const tess_dev_buf_t *b)
{
    tess_gpu_ptr_info_t info = {0};
    tess_gpu->ptr_query(b->ptr, &info);
    int       mt = info.is_device ? dc_mem_type() : TESS_NET_MEM_HOST;
    dc_reg_t *g  = info.alloc_id ? tess_hmap_get(&dc.regs, info.alloc_id) : NULL;
    if (g) {
        dc.stats.reg_hits++;
    } else {
        if (info.alloc_id && dc.regs.count >= DC_REG_CACHE) {
            size_t    it = 0;
            uint64_t  k, best_key = 0;
            void     *v;
            dc_reg_t *best = NULL;
            while (tess_hmap_next(&dc.regs, &it, &k, &v)) {
                dc_reg_t *c = v;
                if (!c->refs && (!best || c->last_use < best->last_use)) {
                    best     = c;
                    best_key = k;
                }
            }
            if (best) {
                tess_hmap_remove(&dc.regs, best_key);
                reg_release(best);
            }
        }
        g = tess_calloc(1, sizeof(*g), "a registration");
        /* A cached registration covers the whole allocation; others the buffer alone. */
        void  *addr = info.alloc_id && info.base ? info.base : b->ptr;
        size_t len  = info.alloc_id && info.base ? info.size : b->size;
        if (!g || tess_net_mem_register(addr, len, mt, &g->mem, &g->rkey, &g->rkey_len) != TESS_OK)
            tess_fatal("devcomm: cannot register a %zu-byte buffer for RDMA: %s", len,
                       tess_error_detail());
        dc_tsan_cross_process(addr, len);
        if (g->rkey_len > DC_RKEY_MAX)
            tess_fatal("devcomm: a UCX key of %zu bytes (at most %d)", g->rkey_len, DC_RKEY_MAX);
        g->alloc_id = info.alloc_id;
        g->serial   = ++dc.reg_serial;
        if (info.alloc_id) {
            g->cached = 1;
            if (tess_hmap_put(&dc.regs, info.alloc_id, g) != TESS_OK)
                tess_fatal("out of memory caching a registration");
        }
        dc.stats.reg_creates++;
    }
    g->refs++;
    g->last_use = ++dc.reg_clock;
    return g;
}

/* ---- direct: sending --------------------------------------------------------------------- */

typedef struct rdma_ctl_cont {
    tess_msg_t *m;
    int         dst_pe;
} rdma_ctl_cont_t;

/* Announcements and get starts waiting for a stream, process-wide: one that finds its stream
 * idle goes at once only while none waits, so none overtakes an earlier one. */
static _Atomic int rdma_waiting_sends, rdma_waiting_recvs;

static void rdma_send_ctl_cont(void *arg)
{
    rdma_ctl_cont_t *c = arg;
    dc_send_ctl(c->m, DC_K_RDMA, c->dst_pe);
    free(c);
    atomic_fetch_sub(&rdma_waiting_sends, 1);
}

static tess_status_t rdma_direct_send(const dc_send_t *s)
{
    const tess_dev_buf_t *bufs   = s->bufs;
    int                   nbufs  = s->nbufs, dst_pe = s->dst_pe;
    tess_gpu_stream_h     stream = s->stream;
    dc_reg_t *regs[TESS_DEV_MAX_BUFS] = {0};
    size_t    extra = 0;
    pthread_mutex_lock(&dc.lock);
    dc.stats.rdma_direct++;
    for (int i = 0; i < nbufs; i++) {
        if (!bufs[i].size)
            continue;
        regs[i] = reg_get(&bufs[i]);
        extra += regs[i]->rkey_len;
    }
    pthread_mutex_unlock(&dc.lock);
    dc_ctl_t   *c;
    tess_msg_t *m = dc_ctl_alloc(DC_K_RDMA, nbufs, s->header_len, extra, &c);
    dc_ctl_fill(c, s, DC_K_RDMA);
    /* The registrations stay with the sender's record until the acknowledgement. */
    c->msg_id = dc_sent_add(s->done, s->done_arg, &dc_rdma_direct_path, regs);
    dc_rec_rdma_t *rec  = dc_recs(c);
    char          *keys = (char *)dc_extra(c, DC_K_RDMA);
    uint32_t       off  = 0;
    for (int i = 0; i < nbufs; i++) {
        if (!regs[i])
            continue;
        rec[i].raddr    = (uint64_t)(uintptr_t)bufs[i].ptr;
        rec[i].rkey_off = off;
        rec[i].rkey_len = (uint32_t)regs[i]->rkey_len;
        rec[i].key_id   = regs[i]->cached ? regs[i]->serial : 0;
        memcpy(keys + off, regs[i]->rkey, regs[i]->rkey_len);
        off += (uint32_t)regs[i]->rkey_len;
    }
    /* Announce once the data is ready on the sender's stream: at once from a stream with
     * nothing left to run (no event to record and poll), else when an event says so. From
     * the PE's ready stream (TESS_STREAM_READY: the caller says the buffers are complete) at
     * once without asking the device. */
    tess_status_t q = atomic_load(&rdma_waiting_sends) ? TESS_INPROGRESS
                      : dc_is_ready_stream(stream)       ? TESS_OK
                                                         : tess_gpu->stream_query(stream);
    if (q != TESS_OK && q != TESS_INPROGRESS)
        return q;
    if (q == TESS_OK) {
        dc_count(DC_C_RDMA_IDLE_SENDS, 1);
        dc_send_ctl(m, DC_K_RDMA, dst_pe);
        return TESS_OK;
    }
    rdma_ctl_cont_t *k = tess_malloc(sizeof(*k), "an RDMA announcement");
    if (!k)
        tess_fatal("out of memory");
    *k = (rdma_ctl_cont_t){m, dst_pe};
    atomic_fetch_add(&rdma_waiting_sends, 1);
    tess_status_t st = tess_core_gpu_then_event(stream, rdma_send_ctl_cont, k);
    if (st != TESS_OK) {
        atomic_fetch_sub(&rdma_waiting_sends, 1);
        free(k);
    }
    return st;
}

/* ---- receiving --------------------------------------------------------------------------- */

static void recv_direct_done(dc_rrecv_t *rr);
static void recv_direct_done_notice(void *arg);

/* Direct receives whose gets completed in network progress on the receiving PE itself, oldest
 * first: the completion callbacks run under the lane's lock, where an entry that sends cannot
 * run, so they are finished by rdma_direct_progress, which the scheduler calls right after the
 * network progress, in the same pass (no notice through the PE's queue). Only the PE's own
 * thread touches its list. */
static _Thread_local dc_rrecv_t *done_head TESS_TLS_FAST, *done_tail TESS_TLS_FAST;

/* Completion of a get (from network progress, on some PE of this process). */
static void direct_get_done(void *arg, tess_status_t status)
{
    dc_rrecv_t *rr = arg;
    if (status != TESS_OK)
        tess_fatal("devcomm: an RDMA get from process %d failed: %s", rr->src,
                   tess_error_detail());
    if (atomic_fetch_sub(&rr->gets, 1) != 1)
        return;
    if (tess_core_pe_id() != rr->pe) {
        dc_notify(rr->pe, recv_direct_done_notice, rr);
        return;
    }
    atomic_fetch_add(&dc.busy, 1); /* until finished: not a message, and not network work */
    rr->next_done = NULL;
    if (done_tail)
        done_tail->next_done = rr;
    else
        done_head = rr;
    done_tail = rr;
}

static unsigned rdma_direct_progress(void)
{
    unsigned n = 0;
    while (done_head) {
        dc_rrecv_t *rr = done_head;
        done_head      = rr->next_done;
        if (!done_head)
            done_tail = NULL;
        dc_count(DC_C_RDMA_FAST_RECVS, 1);
        recv_direct_done(rr);
        atomic_fetch_sub(&dc.busy, 1);
        n++;
    }
    unsigned acks = rack_flush(false); /* sends only: they run nothing */
    tess_core_work_ran_nothing(acks);
    return n + acks;
}

/* The receiver's stream reached the delivery point: get every buffer (on the receiving PE).
 * Gets that complete as they start (a transport that copies at once) finish the receive here,
 * entry and all: then true. */
static bool direct_start_gets(dc_rrecv_t *rr)
{
    if (rr->waited)
        atomic_fetch_sub(&rdma_waiting_recvs, 1);
    dc_recv_t  *r  = rr->r;
    int         n  = 0;
    for (int i = 0; i < r->m.nbufs; i++)
        n += r->sizes[i] > 0;
    atomic_store(&rr->gets, n + 1);
    rack_gets_begin(rr);
    for (int i = 0; i < r->m.nbufs; i++) {
        if (!r->sizes[i])
            continue;
        tess_status_t st = tess_net_get(rr->src, r->dst[i], r->sizes[i], rr->raddr[i],
                                        rr->rkey[i], rr->rkey_len[i], rr->key_id[i],
                                        direct_get_done, rr);
        if (st == TESS_OK)
            atomic_fetch_sub(&rr->gets, 1); /* not the last: the +1 below is still held */
        else if (st != TESS_INPROGRESS)
            tess_fatal("devcomm: cannot start an RDMA get: %s", tess_error_detail());
    }
    /* The +1 held while starting: the last reference when every get is done already. */
    if (atomic_fetch_sub(&rr->gets, 1) == 1) {
        dc_count(DC_C_RDMA_FAST_RECVS, 1);
        recv_direct_done(rr);
        return true;
    }
    return false;
}

static void direct_start_gets_cont(void *arg)
{
    direct_start_gets(arg);
}

/* Receiving streams known idle, for direct receives with one PE per process. A get may start
 * once the receiver's stream has reached the delivery point; asking the device whether it has
 * costs 1.5-2 us with CUDA, on the latency path of every message, and on the receiver's thread,
 * the busier end of a stream of messages. With one PE per process, no thread but this PE's
 * enqueues work on the process's element streams during a phase (the user's entries and
 * callbacks and the runtime's own work all run on it), so a stream that this PE found idle is
 * still idle as long as the PE has run nothing since (tess_core_work_gen unchanged).
 *
 * Two ways to know without asking at the receive:
 *  - in passes that found no work, the PE asks about the streams of its recent direct receives
 *    (speculation: a receive for one found idle then starts its gets at once), again after
 *    each pass with work, up to DC_QUIET_ASKS answers "idle" per receive for it: a PE that only
 *    sends is not kept asking about the stream of a receive long past. Busy ones are asked
 *    again at most every DC_QUIET_RETRY_NS, DC_QUIET_BUSY times (a long kernel is not asked
 *    about all along). Where an answer "idle" did not pay (the next
 *    receive came after more work in the same pass, so it asked again), the stream is skipped
 *    for the next 1, 3, 7, then 15 receives (one more every other time: speculation resumes
 *    2 or 3, 4 or 5, ... 16 or 17 receives later, so that a periodic pattern of receives, say
 *    one idle round of four, is not always met at the same phase), until one finds it known
 *    idle again: a stream of messages whose entries run between arrivals pays one question a
 *    message, not two;
 *  - a receive that found its stream idle and started its gets without running anything (no
 *    entry ran: the gets did not complete at once) leaves what is known valid past its own
 *    handler: the dispatch moves work_gen on by exactly one after each message, so a receive
 *    handled next, with nothing in between, still knows (several announcements that arrive
 *    together ask once).
 * PE thread only. */
#define DC_QUIET_MAX      4
#define DC_QUIET_RETRY_NS 5000
#define DC_QUIET_SKIP_MAX 15
#define DC_QUIET_ASKS     2 /* answers "idle" in idle passes per receive */
#define DC_QUIET_BUSY     8 /* answers "busy" in idle passes per receive */

static _Thread_local struct {
    int               n, next;             /* streams listed; the slot to replace next */
    int               checked;             /* idle[] holds for gen */
    uint64_t          gen, retry_ns;
    tess_gpu_stream_h s[DC_QUIET_MAX];
    bool              idle[DC_QUIET_MAX];
    uint8_t           want[DC_QUIET_MAX];  /* idle-pass answers "idle" left before the next
                                            * receive for it */
    uint8_t           busy[DC_QUIET_MAX];  /* and answers "busy" */
    bool              asked[DC_QUIET_MAX]; /* idle[] true from an idle-pass question */
    bool              spec[DC_QUIET_MAX];  /* found idle in an idle pass since the last receive */
    uint8_t           skip[DC_QUIET_MAX];  /* receives to come without speculation */
    uint8_t           backoff[DC_QUIET_MAX];
    uint8_t           odd[DC_QUIET_MAX];   /* alternates: one more receive skipped */
} dc_quiet;

static int dc_quiet_slot(tess_gpu_stream_h s)
{
    for (int i = 0; i < dc_quiet.n; i++)
        if (dc_quiet.s[i] == s)
            return i;
    return -1;
}

/* What is known holds for the current work_gen; else it is forgotten (nothing known idle). */
static void dc_quiet_sync(uint64_t gen)
{
    if (dc_quiet.checked && dc_quiet.gen == gen)
        return;
    for (int i = 0; i < dc_quiet.n; i++)
        dc_quiet.idle[i] = dc_quiet.asked[i] = false;
    dc_quiet.checked  = 1;
    dc_quiet.gen      = gen;
    dc_quiet.retry_ns = 0;
}

/* A direct receive for stream s (one PE per process): whether s is known idle. Also notes s
 * for the idle passes' questions, and whether the last one paid. */
static bool dc_quiet_recv(tess_gpu_stream_h s)
{
    if (tess_rt.ppn != 1)
        return false;
    dc_quiet_sync(tess_core_work_gen());
    int i = dc_quiet_slot(s);
    if (i < 0) {
        i = dc_quiet.n < DC_QUIET_MAX ? dc_quiet.n++ : dc_quiet.next;
        dc_quiet.next = (i + 1) % DC_QUIET_MAX;
        dc_quiet.s[i]    = s;
        dc_quiet.idle[i] = dc_quiet.asked[i] = dc_quiet.spec[i] = false;
        dc_quiet.skip[i] = dc_quiet.backoff[i] = dc_quiet.odd[i] = 0;
        dc_quiet.want[i] = DC_QUIET_ASKS;
        dc_quiet.busy[i] = DC_QUIET_BUSY;
        return false;
    }
    bool known = dc_quiet.idle[i];
    if (known && dc_quiet.asked[i]) { /* the speculation paid */
        dc_quiet.backoff[i] = 0;
        dc_quiet.skip[i]    = 0;
    } else if (!known && dc_quiet.spec[i]) { /* found idle since the last receive, and the
                                               * answer was spent on work in between */
        dc_count(DC_C_RDMA_SPEC_SPENT, 1);
        unsigned b = dc_quiet.backoff[i] * 2u + 1;
        dc_quiet.backoff[i] = (uint8_t)(b > DC_QUIET_SKIP_MAX ? DC_QUIET_SKIP_MAX : b);
        dc_quiet.odd[i] ^= 1;
        dc_quiet.skip[i] = (uint8_t)(dc_quiet.backoff[i] + dc_quiet.odd[i]);
    }
    dc_quiet.spec[i] = false;
    dc_quiet.busy[i] = DC_QUIET_BUSY;
    if (dc_quiet.skip[i]) {
        dc_quiet.skip[i]--;
        dc_quiet.want[i] = 0;
    } else {
        dc_quiet.want[i] = DC_QUIET_ASKS;
    }
    return known;
}

/* The receive for stream s found it idle and started its gets, and ran nothing (its handler
 * returns next, and the dispatch moves work_gen on by one): s, and what else was known, stays
 * known past the handler. */
static void dc_quiet_carry(tess_gpu_stream_h s)
{
    if (tess_rt.ppn != 1)
        return;
    uint64_t gen = tess_core_work_gen();
    dc_quiet_sync(gen);
    int i = dc_quiet_slot(s);
    if (i >= 0 && !dc_quiet.idle[i]) {
        dc_quiet.idle[i]  = true;
        dc_quiet.asked[i] = false;
    }
    dc_quiet.gen = gen + 1;
}

static void rdma_direct_idle(tess_pe_t *pe)
{
    (void)pe;
    rack_flush(true);
    if (!dc_quiet.n)
        return;
    dc_quiet_sync(tess_core_work_gen());
    if (dc_quiet.retry_ns && tess_time_ns() < dc_quiet.retry_ns)
        return;
    int busy = 0;
    for (int i = 0; i < dc_quiet.n; i++) {
        if (dc_quiet.idle[i] || !dc_quiet.want[i] || !dc_quiet.busy[i])
            continue;
        dc_count(DC_C_RDMA_RECV_QUERIES, 1);
        if (tess_gpu->stream_query(dc_quiet.s[i]) == TESS_OK) {
            dc_quiet.idle[i] = dc_quiet.asked[i] = dc_quiet.spec[i] = true;
            dc_quiet.want[i]--;
            dc_count(DC_C_RDMA_SPEC_IDLE, 1);
        } else {
            busy |= --dc_quiet.busy[i] > 0;
            dc_count(DC_C_RDMA_SPEC_BUSY, 1);
        }
    }
    dc_quiet.retry_ns = busy ? tess_time_ns() + DC_QUIET_RETRY_NS : 0;
}

static void rack_recv(tess_msg_t *m);

static bool rdma_direct_recv(tess_msg_t *m, unsigned kind)
{
    if (kind == DC_K_RACK) {
        rack_recv(m);
        return true;
    }
    const dc_ctl_t *c  = tess_msg_payload(m);
    dc_rrecv_t     *rr = tess_calloc(1, sizeof(*rr), "an RDMA receive");
    if (!rr)
        tess_fatal("out of memory receiving an RDMA message");
    rr->pe          = tess_core_pe_id();
    rr->src         = tess_core_pe_process(m->hdr.src_pe);
    rr->ack_pe      = m->hdr.src_pe;
    rr->msg_id      = c->msg_id;
    const dc_rec_rdma_t *rec  = dc_recs((dc_ctl_t *)c);
    const char          *keys = dc_extra(c, DC_K_RDMA);
    for (uint32_t i = 0; i < c->nbufs; i++) {
        if (!c->sizes[i])
            continue;
        rr->raddr[i]    = rec[i].raddr;
        rr->rkey_len[i] = rec[i].rkey_len;
        rr->rkey[i]     = keys + rec[i].rkey_off;
        rr->key_id[i]   = rec[i].key_id;
    }
    rr->r = dc_recv_begin(m, DC_K_RDMA);
    /* The gets land in memory the receiver's stream may still use: they start when it has
     * reached this point — now, if nothing is left to run on it. */
    tess_gpu_stream_h stream = rr->r->stream;
    tess_status_t     q      = TESS_INPROGRESS;
    if (!atomic_load(&rdma_waiting_recvs)) {
        if (dc_quiet_recv(stream)) {
            dc_count(DC_C_RDMA_QUIET_RECVS, 1);
            q = TESS_OK;
        } else {
            dc_count(DC_C_RDMA_RECV_QUERIES, 1);
            q = tess_gpu->stream_query(stream);
        }
    }
    if (q == TESS_OK) {
        dc_count(DC_C_RDMA_IDLE_RECVS, 1);
        if (!direct_start_gets(rr))
            dc_quiet_carry(stream);
        return true;
    }
    rr->waited = 1;
    atomic_fetch_add(&rdma_waiting_recvs, 1);
    if (q != TESS_INPROGRESS ||
        tess_core_gpu_then_event(stream, direct_start_gets_cont, rr) != TESS_OK)
        tess_fatal("cannot wait for the receiver's stream: %s", tess_error_detail());
    return true;
}

/* Every get of a direct receive completed (on its PE): the data is in place. Nothing of the
 * message was enqueued on the receiver's stream, so WAIT_COMPLETE is met as it is: the entry
 * runs now, without an event recorded and polled on that stream. The acknowledgement is
 * noted after it, so that a reply the entry sends is not queued behind it at either end, and
 * leaves with the others of the pass (rack_add). */
static void recv_direct_done(dc_rrecv_t *rr)
{
    rr->r->flags &= ~TESS_DC_WAIT_COMPLETE;
    dc_recv_finish(rr->r);
    rack_add(rr);
    free(rr);
}

static void recv_direct_done_notice(void *arg)
{
    recv_direct_done(arg);
}

/* ---- acknowledgements -------------------------------------------------------------------- */

/* An acknowledgement of direct RDMA sends (validated): each send record completes, in the
 * order the receiver finished them. A direct send holds no staging resource (its
 * registrations go with the record), so no waiting send is pumped. The done callbacks of
 * several often send again (a window refilled): the announcements they make go coalesced,
 * one message to each process. */
static void rack_recv(tess_msg_t *m)
{
    const dc_rack_msg_t *a   = tess_msg_payload(m);
    const uint64_t      *ids = (const uint64_t *)(a + 1);
    if (a->n > 1)
        tess_core_coalesce_begin();
    for (uint32_t i = 0; i < a->n; i++) {
        if (!ids[i])
            tess_fatal("devcomm: an RDMA acknowledgement from PE %d names no send",
                       m->hdr.src_pe);
        dc_complete(ids[i], "an RDMA acknowledgement");
    }
    if (a->n > 1)
        tess_core_coalesce_end();
    tess_core_msg_free(m);
}

/* The send record completed: its registrations are released (cached ones stay cached). */
static void rdma_direct_release_sent(dc_sent_t *rec)
{
    pthread_mutex_lock(&dc.lock);
    for (int i = 0; i < TESS_DEV_MAX_BUFS; i++) {
        dc_reg_t *g = rec->regs[i];
        if (g && --g->refs == 0 && !g->cached)
            reg_release(g);
        rec->regs[i] = NULL;
    }
    pthread_mutex_unlock(&dc.lock);
}

const dc_path_ops_t dc_rdma_direct_path = {
    .name         = "rdma direct",
    .kinds        = DC_KIND(DC_K_RDMA) | DC_KIND(DC_K_RACK),
    .init         = rdma_direct_init,
    .fini         = rdma_direct_fini,
    .send         = rdma_direct_send,
    .recv         = rdma_direct_recv,
    .release_sent = rdma_direct_release_sent,
    .progress     = rdma_direct_progress,
    .idle         = rdma_direct_idle,
};
