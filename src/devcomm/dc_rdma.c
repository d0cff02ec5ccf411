/* dc_rdma.c — the RDMA path between nodes (and between virtual nodes): its setup (the bounce
 * buffers, when staged), the dispatch of sends and control messages, acknowledgements, and the
 * direct path.
 *
 * direct: the sender registers each buffer's allocation once (cache keyed by allocation id,
 * released least-recently-used and at finalize) and, when its stream has reached the send,
 * sends address and key. The receiver waits until its own stream has reached the delivery
 * point (so that the get cannot overwrite data still in use), gets every buffer with UCX, runs
 * the entry once the gets completed (the data is then in place, WAIT_COMPLETE or not), and
 * acknowledges, which releases the registrations and runs the sender's done callback.
 *
 * staged, when UCX cannot reach device memory, goes through pinned bounce buffers:
 * dc_staged.c. */
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

/* What a completed get names (a GOT notice carries a pointer to it). */
typedef struct dc_got {
    int   is_chunk;
    void *what;
} dc_got_t;

/* ThreadSanitizer cannot see an order made through another process. A send slot is filled by
 * the host backend's executor, announced by the PE that saw the copy complete, and read by UCX
 * serving the peer's get, on whichever PE progresses the lane the get came in on; it is filled
 * again only after the peer acknowledged the chunk, which it does once its get completed. With
 * one UCX worker per PE the reading PE and the announcing one share no lock and the order goes
 * through the peer (the lanes' TSan edge does not cover a progress call that was already
 * running when the announcement left), so TSan builds mark the bounce buffers as memory whose
 * accesses are ordered elsewhere. A direct send's registered buffer is the same case (written
 * by the executor, read by UCX serving the peer's get) and is marked when registered; TSan
 * keeps such marks after the memory is freed, which only the host backend's device arena can
 * reuse. Every byte is still checked by the device-message and migration tests. Other builds
 * have nothing here. */
#if defined(__SANITIZE_THREAD__)
void AnnotateBenignRaceSized(const char *file, int line, const volatile void *mem, long size,
                             const char *description);
#define dc_tsan_cross_process(mem, size)                                                         \
    AnnotateBenignRaceSized(__FILE__, __LINE__, (mem), (long)(size),                           \
                            "RDMA bounce buffers: ordered through the peer process")
#else
#define dc_tsan_cross_process(mem, size) ((void)(mem), (void)(size))
#endif

static int dc_mem_type(void)
{
    switch (tess_gpu_backend()) {
    case TESS_GPU_CUDA: return TESS_NET_MEM_CUDA;
    case TESS_GPU_HIP:  return TESS_NET_MEM_ROCM;
    default:            return TESS_NET_MEM_HOST;
    }
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

static tess_status_t rdma_exchange_bounce(void)
{
    int       len = (int)dc.peers[tess_rt.rank].bounce_rkey_len;
    int      *lens = tess_calloc((size_t)tess_rt.size, sizeof(int), "key lengths");
    int      *displs = tess_calloc((size_t)tess_rt.size, sizeof(int), "key offsets");
    uint64_t *bases = tess_calloc((size_t)tess_rt.size, sizeof(uint64_t), "bounce addresses");
    char     *keys = NULL;
    tess_status_t st = TESS_ERR_NO_MEMORY;
    if (!lens || !displs || !bases)
        goto out;
    uint64_t base = (uint64_t)(uintptr_t)dc.bounce;
    MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, tess_rt.comm);
    MPI_Allgather(&base, 1, MPI_UINT64_T, bases, 1, MPI_UINT64_T, tess_rt.comm);
    size_t total = 0;
    for (int i = 0; i < tess_rt.size; i++) {
        displs[i] = (int)total;
        total += (size_t)lens[i];
    }
    keys = tess_malloc(total, "bounce keys");
    if (!keys)
        goto out;
    MPI_Allgatherv(dc.peers[tess_rt.rank].bounce_rkey, len, MPI_BYTE, keys, lens, displs,
                   MPI_BYTE, tess_rt.comm);
    for (int i = 0; i < tess_rt.size; i++) {
        if (i == tess_rt.rank)
            continue;
        dc_peer_t *p       = &dc.peers[i];
        p->bounce_raddr    = bases[i];
        p->bounce_rkey_len = (size_t)lens[i];
        p->bounce_rkey     = tess_malloc((size_t)lens[i], "a bounce key");
        if (!p->bounce_rkey)
            goto out;
        memcpy(p->bounce_rkey, keys + displs[i], (size_t)lens[i]);
    }
    dc.peers[tess_rt.rank].bounce_raddr = base;
    st = TESS_OK;
out:
    free(lens);
    free(displs);
    free(bases);
    free(keys);
    return st;
}

tess_status_t dc_rdma_init(void)
{
    tess_status_t st = tess_hmap_init(&dc_staged_recvs, 64);
    if (st == TESS_OK)
        st = tess_hmap_init(&dc_staged_early, 16);
    if (st != TESS_OK)
        return st;
    int want_staged = !strcmp(tess_cfg.rdma, "staged") ||
                      (!strcmp(tess_cfg.rdma, "auto") && !tess_net_mem_type_supported(dc_mem_type()));
    int cannot = !tess_net_mem_type_supported(dc_mem_type());
    if (!strcmp(tess_cfg.rdma, "direct") && cannot)
        return tess_error(TESS_ERR_UNSUPPORTED, "TESS_RDMA=direct, but this UCX cannot access "
                          "%s memory (UCX built without that transport; tessera-info lists "
                          "them, tools/build-ucx.sh builds one with CUDA)",
                          tess_gpu_backend_name());
    /* Both ends of a transfer must agree: stage everywhere if anyone must. */
    MPI_Allreduce(&want_staged, &dc.rdma_staged, 1, MPI_INT, MPI_MAX, tess_rt.comm);
    if (dc.rdma_staged && !strcmp(tess_cfg.rdma, "auto") && tess_rt.rank == 0)
        tess_warn("devcomm: TESS_RDMA=auto: %s; RDMA between nodes goes through pinned host "
                  "buffers (staged)", cannot ? "this UCX cannot access device memory directly"
                                             : "another process's UCX cannot access device memory");
    if (!dc.rdma_staged)
        tess_gpu_set_free_hook(rdma_forget);
    long chunk[2] = {-(long)tess_cfg.bounce_chunk, (long)tess_cfg.bounce_chunk};
    MPI_Allreduce(MPI_IN_PLACE, chunk, 2, MPI_LONG, MPI_MAX, tess_rt.comm);
    if (-chunk[0] != chunk[1] || tess_cfg.bounce_chunk < 4096)
        return tess_error(TESS_ERR_INVALID, "TESS_BOUNCE_CHUNK must be the same everywhere and "
                          ">= 4096 (it is %zu here)", tess_cfg.bounce_chunk);
    if (!dc.rdma_staged)
        return TESS_OK;

    dc.chunk   = tess_cfg.bounce_chunk;
    dc.nbounce = tess_cfg.bounce_count;
    size_t size = 2 * (size_t)dc.nbounce * dc.chunk;
    if ((st = tess_gpu->host_alloc(size, &dc.bounce)) != TESS_OK)
        return st;
    dc_tsan_cross_process(dc.bounce, size);
    dc_peer_t *me = &dc.peers[tess_rt.rank];
    const void *rkey;
    st = tess_net_mem_register(dc.bounce, size, TESS_NET_MEM_HOST, &dc.bounce_mem, &rkey,
                               &me->bounce_rkey_len);
    if (st != TESS_OK)
        return st;
    me->bounce_rkey = tess_malloc(me->bounce_rkey_len, "the bounce key");
    dc.bsend_free   = tess_malloc((size_t)dc.nbounce * sizeof(int), "send slots");
    dc.brecv_free   = tess_malloc((size_t)dc.nbounce * sizeof(int), "receive slots");
    if (!me->bounce_rkey || !dc.bsend_free || !dc.brecv_free)
        return TESS_ERR_NO_MEMORY;
    memcpy(me->bounce_rkey, rkey, me->bounce_rkey_len);
    for (int i = 0; i < dc.nbounce; i++) {
        dc.bsend_free[dc.bsend_nfree++] = dc.nbounce - 1 - i;
        dc.brecv_free[dc.brecv_nfree++] = dc.nbounce - 1 - i;
    }
    tess_info("devcomm: RDMA through %d x %zu-byte pinned bounce buffers", dc.nbounce, dc.chunk);
    return rdma_exchange_bounce();
}

void dc_rdma_fini(void)
{
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
    it = 0;
    while (tess_hmap_next(&dc_staged_recvs, &it, &key, &val))
        free(val);
    tess_hmap_fini(&dc_staged_recvs);
    size_t stray = 0;
    it           = 0;
    while (tess_hmap_next(&dc_staged_early, &it, &key, &val))
        for (dc_rchunk_t *ch = val, *next; ch; ch = next) {
            next = ch->next;
            free(ch);
            stray++;
        }
    if (stray)
        tess_warn("devcomm: %zu chunk notices never matched a staged RDMA message", stray);
    tess_hmap_fini(&dc_staged_early);
    if (dc.bounce_mem)
        tess_net_mem_deregister(dc.bounce_mem);
    if (dc.bounce)
        tess_gpu->host_free(dc.bounce);
    free(dc.bsend_free);
    free(dc.brecv_free);
    while (dc.chunk_wait) {
        dc_rchunk_t *c = dc.chunk_wait;
        dc.chunk_wait  = c->next;
        free(c);
    }
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

static tess_status_t rdma_send_direct(int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                                      size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                                      tess_gpu_stream_h stream, tess_dev_done_fn_t done,
                                      void *done_arg)
{
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
    tess_msg_t *m = dc_ctl_alloc(DC_K_RDMA, nbufs, header_len, extra, &c);
    dc_ctl_fill(c, a0, a1, bufs, nbufs, header, header_len, DC_K_RDMA);
    /* The registrations stay with the sender's record until the acknowledgement. */
    c->msg_id = dc_sent_add(done, done_arg, regs);
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

tess_status_t dc_rdma_send(int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                           size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                           tess_gpu_stream_h stream, tess_dev_done_fn_t done, void *done_arg)
{
    if (dc.rdma_staged)
        return dc_staged_send(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream, done,
                              done_arg);
    return rdma_send_direct(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream, done,
                            done_arg);
}

/* ---- receiving --------------------------------------------------------------------------- */

void dc_got_post(int pe, int is_chunk, void *what)
{
    dc_got_t *g = tess_malloc(sizeof(*g), "a completion notice");
    tess_msg_t *m = tess_core_msg_alloc(sizeof(uint64_t));
    if (!g || !m)
        tess_fatal("out of memory noting a completed get");
    g->is_chunk = is_chunk;
    g->what     = what;
    *(uint64_t *)tess_msg_payload(m) = (uint64_t)(uintptr_t)g;
    dc_send_ctl(m, DC_K_GOT, pe);
}

static void recv_direct_done(dc_rrecv_t *rr);

/* Direct receives whose gets completed in network progress on the receiving PE itself, oldest
 * first: the completion callbacks run under the lane's lock, where an entry that sends cannot
 * run, so they are finished by dc_rdma_progress, which the scheduler calls right after the
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
        dc_got_post(rr->pe, 0, rr);
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

unsigned dc_rdma_progress(void)
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
    return n;
}

/* The receiver's stream reached the delivery point: get every buffer (on the receiving PE).
 * Gets that complete as they start (a transport that copies at once) finish the receive here,
 * entry and all. */
static void direct_start_gets(void *arg)
{
    dc_rrecv_t *rr = arg;
    if (rr->waited)
        atomic_fetch_sub(&rdma_waiting_recvs, 1);
    dc_recv_t  *r  = rr->r;
    int         n  = 0;
    for (int i = 0; i < r->m.nbufs; i++)
        n += r->sizes[i] > 0;
    atomic_store(&rr->gets, n + 1);
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
    }
}

/* Receiving streams known idle, for direct receives with one PE per process. A get may start
 * once the receiver's stream has reached the delivery point; asking the device whether it has
 * costs 1.5-2 us with CUDA, on the latency path of every message. With one PE per process, no
 * thread but this PE's enqueues work on the process's element streams during a phase (the
 * user's entries and callbacks and the runtime's own work all run on it), so a stream that this
 * PE found idle while it had no work is still idle as long as the PE has run nothing since
 * (tess_core_work_gen unchanged). The PE asks, in passes that found no work, about the streams
 * of its last few direct receives; a receive for one found idle then starts its gets at once.
 * Busy ones are asked again at most every DC_QUIET_RETRY_NS. PE thread only. */
#define DC_QUIET_MAX      4
#define DC_QUIET_RETRY_NS 5000

static _Thread_local struct {
    int               n, next;             /* streams listed; the slot to replace next */
    int               all_idle;            /* every listed stream was idle at gen */
    int               checked;             /* idle[] holds for gen */
    uint64_t          gen, retry_ns;
    tess_gpu_stream_h s[DC_QUIET_MAX];
    bool              idle[DC_QUIET_MAX];
} dc_quiet;

static bool dc_quiet_known_idle(tess_gpu_stream_h s)
{
    if (tess_rt.ppn != 1 || !dc_quiet.checked || dc_quiet.gen != tess_core_work_gen())
        return false;
    for (int i = 0; i < dc_quiet.n; i++)
        if (dc_quiet.s[i] == s)
            return dc_quiet.idle[i];
    return false;
}

/* A direct receive asked the device about stream s: list it for the next idle passes. */
static void dc_quiet_note(tess_gpu_stream_h s)
{
    if (tess_rt.ppn != 1)
        return;
    for (int i = 0; i < dc_quiet.n; i++)
        if (dc_quiet.s[i] == s)
            return;
    int i = dc_quiet.n < DC_QUIET_MAX ? dc_quiet.n++ : dc_quiet.next;
    dc_quiet.next = (i + 1) % DC_QUIET_MAX;
    dc_quiet.s[i]    = s;
    dc_quiet.idle[i] = false;
    dc_quiet.all_idle = 0;
}

void dc_rdma_idle(tess_pe_t *pe)
{
    (void)pe;
    if (!dc_quiet.n)
        return;
    uint64_t gen = tess_core_work_gen();
    if (dc_quiet.checked && dc_quiet.gen == gen &&
        (dc_quiet.all_idle || tess_time_ns() < dc_quiet.retry_ns))
        return;
    int all = 1;
    for (int i = 0; i < dc_quiet.n; i++) {
        dc_quiet.idle[i] = tess_gpu->stream_query(dc_quiet.s[i]) == TESS_OK;
        all &= dc_quiet.idle[i];
    }
    dc_quiet.gen      = gen;
    dc_quiet.checked  = 1;
    dc_quiet.all_idle = all;
    dc_quiet.retry_ns = all ? 0 : tess_time_ns() + DC_QUIET_RETRY_NS;
}

static void recv_direct(tess_msg_t *m)
{
    const dc_ctl_t *c  = tess_msg_payload(m);
    dc_rrecv_t     *rr = tess_calloc(1, sizeof(*rr), "an RDMA receive");
    if (!rr)
        tess_fatal("out of memory receiving an RDMA message");
    rr->kind        = DC_K_RDMA;
    rr->pe          = tess_core_pe_id();
    rr->src         = tess_core_pe_process(m->hdr.src_pe);
    rr->ack_pe      = m->hdr.src_pe;
    rr->ack.kind    = DC_K_RDMA;
    rr->ack.event   = -1;
    rr->ack.msg_id  = c->msg_id;
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
    tess_status_t q = TESS_INPROGRESS;
    if (!atomic_load(&rdma_waiting_recvs)) {
        if (dc_quiet_known_idle(rr->r->stream)) {
            dc_count(DC_C_RDMA_QUIET_RECVS, 1);
            q = TESS_OK;
        } else {
            q = tess_gpu->stream_query(rr->r->stream);
            dc_quiet_note(rr->r->stream);
        }
    }
    if (q == TESS_OK) {
        dc_count(DC_C_RDMA_IDLE_RECVS, 1);
        direct_start_gets(rr);
        return;
    }
    rr->waited = 1;
    atomic_fetch_add(&rdma_waiting_recvs, 1);
    if (q != TESS_INPROGRESS ||
        tess_core_gpu_then_event(rr->r->stream, direct_start_gets, rr) != TESS_OK)
        tess_fatal("cannot wait for the receiver's stream: %s", tess_error_detail());
}

/* Every get of a direct receive completed (on its PE): the data is in place. Nothing of the
 * message was enqueued on the receiver's stream, so WAIT_COMPLETE is met as it is: the entry
 * runs now, without an event recorded and polled on that stream. The acknowledgement goes
 * after it, so that a reply the entry sends is not queued behind it at either end. */
static void recv_direct_done(dc_rrecv_t *rr)
{
    rr->r->flags &= ~TESS_DC_WAIT_COMPLETE;
    dc_recv_finish(rr->r);
    dc_send_ack(rr->ack_pe, &rr->ack);
    free(rr);
}

void dc_rdma_recv(tess_msg_t *m, unsigned kind)
{
    switch (kind) {
    case DC_K_RDMA:
        recv_direct(m);
        return;
    case DC_K_RSTAGED:
        if (!dc.rdma_staged)
            tess_fatal("a staged RDMA message from PE %d, but this process has no bounce "
                       "buffers", m->hdr.src_pe);
        dc_staged_recv_header(m);
        return;
    case DC_K_CHUNK:
        dc_staged_recv_chunk(m);
        return;
    case DC_K_GOT: {
        dc_got_t *g = (dc_got_t *)(uintptr_t)*(uint64_t *)tess_msg_payload(m);
        tess_core_msg_free(m);
        if (g->is_chunk)
            dc_staged_chunk_arrived(g->what);
        else
            recv_direct_done(g->what);
        free(g);
        return;
    }
    }
}

void dc_rdma_release(const dc_ack_msg_t *ack)
{
    pthread_mutex_lock(&dc.lock);
    if (ack->kind == DC_K_CHUNK) {
        if (ack->offset >= (uint64_t)dc.nbounce || dc.bsend_nfree >= dc.nbounce) {
            pthread_mutex_unlock(&dc.lock);
            tess_fatal("devcomm: an acknowledgement for send slot %llu, which is not in use",
                       (unsigned long long)ack->offset);
        }
        dc.bsend_free[dc.bsend_nfree++] = (int)ack->offset;
    } else if (ack->kind == DC_K_RDMA && !ack->msg_id) {
        pthread_mutex_unlock(&dc.lock);
        tess_fatal("devcomm: an RDMA acknowledgement without its send");
    }
    pthread_mutex_unlock(&dc.lock);
}

void dc_rdma_release_regs(dc_sent_t *rec)
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
