/* dc_rdma_staged.c — the rdma staged path, when UCX cannot reach device memory (here or in
 * another process: every process stages if one must): a pipeline of pinned bounce buffers on
 * both sides. The sender copies chunks device-to-host into its send slots and announces each
 * one; the receiver gets it into a receive slot and copies it host-to-device on its stream.
 * Chunks of one message move through the three stages concurrently; acknowledgements recycle
 * the send slots, completed host-to-device copies the receive slots. */
#include "dc_int.h"

#include <stdlib.h>

typedef struct dc_chunk {
    uint32_t buf;
    uint64_t offset, len;
} dc_chunk_t;

/* Sender state of a staged message. */
typedef struct dc_rsend {
    int                dst_pe;
    uint64_t           msg_id;
    tess_dev_buf_t     bufs[TESS_DEV_MAX_BUFS];
    dc_chunk_t        *chunks;
    uint32_t           nchunks, next, staged;
    tess_gpu_event_h   ready;
    int                waited;   /* dc.stream waits on ready */
    uint64_t           sent_id;  /* record completed once every chunk is staged */
} dc_rsend_t;

/* Receiver state of a staged message. */
typedef struct dc_rrecv {
    int        pe;       /* receiving PE */
    int        src;      /* sending process */
    dc_recv_t *r;
    uint32_t   nchunks, copied;
} dc_rrecv_t;

/* A chunk on the receiver side, from its announcement to its host-to-device copy. */
typedef struct dc_rchunk {
    struct dc_rchunk *next;
    dc_rrecv_t       *rr;
    dc_chunk_msg_t    msg;
    int               slot;      /* receive slot */
    int               sender_pe;
} dc_rchunk_t;

static tess_hmap_t recvs; /* (process, msg_id) -> dc_rrecv_t, staged messages being received */
/* (process, msg_id) -> list of dc_rchunk_t: chunk notices that came before their message's
 * header. The sender announces a chunk from whichever of its PEs staged it, so the notice may
 * overtake the header; it waits here and is checked once the header is in. */
static tess_hmap_t early;

static inline char *bounce_send(int slot) { return (char *)dc.bounce + (size_t)slot * dc.chunk; }
static inline char *bounce_recv(int slot)
{
    return (char *)dc.bounce + ((size_t)dc.nbounce + (size_t)slot) * dc.chunk;
}

/* ---- init / fini ------------------------------------------------------------------------- */

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

static tess_status_t rdma_staged_init(void)
{
    tess_status_t st = tess_hmap_init(&recvs, 64);
    if (st == TESS_OK)
        st = tess_hmap_init(&early, 16);
    if (st != TESS_OK)
        return st;
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

static void rdma_staged_fini(void)
{
    size_t   it = 0;
    uint64_t key;
    void    *val;
    while (tess_hmap_next(&recvs, &it, &key, &val))
        free(val);
    tess_hmap_fini(&recvs);
    size_t stray = 0;
    it           = 0;
    while (tess_hmap_next(&early, &it, &key, &val))
        for (dc_rchunk_t *ch = val, *next; ch; ch = next) {
            next = ch->next;
            free(ch);
            stray++;
        }
    if (stray)
        tess_warn("devcomm: %zu chunk notices never matched a staged RDMA message", stray);
    tess_hmap_fini(&early);
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

/* ---- staged: sending --------------------------------------------------------------------- */

typedef struct chunk_cont {
    dc_rsend_t      *rs;
    uint32_t         chunk;
    int              slot;
    tess_gpu_event_h ev;
} chunk_cont_t;

static void chunk_staged(void *arg)
{
    chunk_cont_t *k  = arg;
    dc_rsend_t   *rs = k->rs;
    dc_event_put(k->ev);
    tess_msg_t *m = tess_core_msg_alloc(sizeof(dc_chunk_msg_t));
    if (!m)
        tess_fatal("out of memory announcing a chunk");
    dc_chunk_t     *ch = &rs->chunks[k->chunk];
    dc_chunk_msg_t *cm = tess_msg_payload(m);
    *cm = (dc_chunk_msg_t){.msg_id = rs->msg_id, .buf = ch->buf, .slot = (uint32_t)k->slot,
                           .offset = ch->offset, .len = ch->len, .nchunks = rs->nchunks};
    dc_send_ctl(m, DC_K_CHUNK, rs->dst_pe);
    free(k);
    /* Every chunk is out of the source: its buffers may be reused. */
    if (++rs->staged == rs->nchunks) {
        dc_run_done(rs->sent_id);
        dc_event_put(rs->ready);
        free(rs->chunks);
        free(rs);
    }
}

/* Stage chunks while send slots last; 1 when every chunk is on its way. */
static int rsend_issue(dc_rsend_t *rs)
{
    while (rs->next < rs->nchunks) {
        pthread_mutex_lock(&dc.lock);
        int slot = dc.bsend_nfree > 0 ? dc.bsend_free[--dc.bsend_nfree] : -1;
        pthread_mutex_unlock(&dc.lock);
        if (slot < 0)
            return 0;
        if (!rs->waited) {
            if (tess_gpu->stream_wait_event(dc.stream, rs->ready) != TESS_OK)
                tess_fatal("devcomm: stream wait failed: %s", tess_error_detail());
            rs->waited = 1;
        }
        dc_chunk_t   *ch = &rs->chunks[rs->next];
        chunk_cont_t *k  = tess_malloc(sizeof(*k), "a chunk");
        if (!k || dc_event_get(&k->ev) != TESS_OK)
            tess_fatal("out of memory staging a chunk");
        k->rs    = rs;
        k->chunk = rs->next++;
        k->slot  = slot;
        if (tess_gpu->memcpy_async(bounce_send(slot), (char *)rs->bufs[ch->buf].ptr + ch->offset,
                                   ch->len, dc.stream) != TESS_OK ||
            tess_gpu->event_record(k->ev, dc.stream) != TESS_OK)
            tess_fatal("devcomm: staging a chunk failed: %s", tess_error_detail());
        if (tess_core_gpu_when(k->ev, chunk_staged, k) != TESS_OK)
            tess_fatal("cannot wait for a staged chunk: %s", tess_error_detail());
    }
    return 1;
}

static uint32_t count_chunks(const size_t *sizes, int nbufs)
{
    uint32_t n = 0;
    for (int i = 0; i < nbufs; i++)
        n += (uint32_t)((sizes[i] + dc.chunk - 1) / dc.chunk);
    return n;
}

static tess_status_t rdma_staged_send(const dc_send_t *s)
{
    const tess_dev_buf_t *bufs   = s->bufs;
    int                   nbufs  = s->nbufs, dst_pe = s->dst_pe;
    tess_dev_done_fn_t    done   = s->done;
    void                 *done_arg = s->done_arg;
    size_t sizes[TESS_DEV_MAX_BUFS];
    for (int i = 0; i < nbufs; i++)
        sizes[i] = bufs[i].size;
    uint32_t    nchunks = count_chunks(sizes, nbufs);
    dc_ctl_t   *c;
    tess_msg_t *m = dc_ctl_alloc(DC_K_RSTAGED, nbufs, s->header_len, 0, &c);
    dc_ctl_fill(c, s, DC_K_RSTAGED);
    pthread_mutex_lock(&dc.lock);
    dc.stats.rdma_staged++;
    c->msg_id = ++dc.next_msg_id;
    pthread_mutex_unlock(&dc.lock);
    uint64_t msg_id = c->msg_id;
    dc_send_ctl(m, DC_K_RSTAGED, dst_pe);
    if (nchunks == 0) {
        /* Nothing to move: the buffers are free at once. */
        if (done)
            done(done_arg);
        return TESS_OK;
    }
    dc_rsend_t *rs = tess_calloc(1, sizeof(*rs), "a staged RDMA send");
    if (!rs || !(rs->chunks = tess_malloc(nchunks * sizeof(dc_chunk_t), "chunks")))
        tess_fatal("out of memory staging a device message");
    rs->dst_pe   = dst_pe;
    rs->msg_id   = msg_id;
    rs->nchunks  = nchunks;
    rs->sent_id  = done ? dc_sent_add(done, done_arg, NULL, NULL) : 0;
    memcpy(rs->bufs, bufs, (size_t)nbufs * sizeof(*bufs));
    uint32_t k = 0;
    for (int i = 0; i < nbufs; i++)
        for (size_t off = 0; off < sizes[i]; off += dc.chunk)
            rs->chunks[k++] = (dc_chunk_t){(uint32_t)i, off, TESS_MIN(dc.chunk, sizes[i] - off)};
    if (dc_event_get(&rs->ready) != TESS_OK || tess_gpu->event_record(rs->ready, s->stream) != TESS_OK)
        tess_fatal("devcomm: cannot record a ready event: %s", tess_error_detail());
    pthread_mutex_lock(&dc.lock);
    int queued = dc.pending != NULL;
    pthread_mutex_unlock(&dc.lock);
    if (!queued && rsend_issue(rs))
        return TESS_OK;
    dc_pending_push_staged(DC_K_CHUNK, dst_pe, rs);
    return TESS_OK;
}

static int rdma_staged_issue(dc_pending_t *p)
{
    return rsend_issue(p->staged);
}

/* ---- staged: receiving ------------------------------------------------------------------- */

static void chunk_accept(dc_rrecv_t *rr, dc_rchunk_t *ch);
static void chunk_arrived(void *arg);

static void recv_header(tess_msg_t *m)
{
    const dc_ctl_t *c  = tess_msg_payload(m);
    dc_rrecv_t     *rr = tess_calloc(1, sizeof(*rr), "a staged RDMA receive");
    if (!rr)
        tess_fatal("out of memory receiving a staged RDMA message");
    rr->pe      = tess_core_pe_id();
    rr->src     = tess_core_pe_process(m->hdr.src_pe);
    uint64_t id = c->msg_id;
    rr->nchunks = count_chunks((const size_t *)c->sizes, (int)c->nbufs);
    rr->r       = dc_recv_begin(m, DC_K_RSTAGED);
    if (rr->nchunks == 0) {
        dc_recv_finish(rr->r);
        free(rr);
        return;
    }
    uint64_t key = dc_proc_key(rr->src, id);
    pthread_mutex_lock(&dc.lock);
    tess_status_t st = tess_hmap_put(&recvs, key, rr);
    dc_rchunk_t  *ch = tess_hmap_remove(&early, key);
    pthread_mutex_unlock(&dc.lock);
    if (st != TESS_OK)
        tess_fatal("out of memory tracking a staged RDMA message");
    for (dc_rchunk_t *next; ch; ch = next) { /* notices that overtook this header */
        next = ch->next;
        chunk_accept(rr, ch);
    }
}

static void chunk_get_done(void *arg, tess_status_t status)
{
    dc_rchunk_t *ch = arg;
    if (status != TESS_OK)
        tess_fatal("devcomm: the get of a chunk from process %d failed: %s", ch->rr->src,
                   tess_error_detail());
    dc_notify(ch->rr->pe, chunk_arrived, ch);
}

static void chunk_start_get(dc_rchunk_t *ch)
{
    const dc_peer_t *p  = &dc.peers[ch->rr->src];
    uint64_t         ra = p->bounce_raddr + (uint64_t)ch->msg.slot * dc.chunk;
    tess_status_t st = tess_net_get(ch->rr->src, bounce_recv(ch->slot), ch->msg.len, ra,
                                    p->bounce_rkey, p->bounce_rkey_len, DC_BOUNCE_KEY_ID,
                                    chunk_get_done, ch);
    if (st == TESS_OK)
        chunk_get_done(ch, TESS_OK);
    else if (st != TESS_INPROGRESS)
        tess_fatal("devcomm: cannot get a chunk: %s", tess_error_detail());
}

static void pump_chunks(void)
{
    for (;;) {
        pthread_mutex_lock(&dc.lock);
        dc_rchunk_t *ch = dc.chunk_wait;
        if (!ch || dc.brecv_nfree == 0) {
            pthread_mutex_unlock(&dc.lock);
            return;
        }
        dc.chunk_wait = ch->next;
        if (!dc.chunk_wait)
            dc.chunk_wait_tail = NULL;
        ch->slot = dc.brecv_free[--dc.brecv_nfree];
        pthread_mutex_unlock(&dc.lock);
        atomic_fetch_sub(&dc.busy, 1);
        chunk_start_get(ch);
    }
}

/* A chunk notice matched to its message: checked against it, then fetched into a receive slot
 * (or queued for one). */
static void chunk_accept(dc_rrecv_t *rr, dc_rchunk_t *ch)
{
    const dc_chunk_msg_t *cm = &ch->msg;
    if (cm->buf >= (uint32_t)rr->r->m.nbufs || cm->offset > rr->r->sizes[cm->buf] ||
        cm->len > rr->r->sizes[cm->buf] - cm->offset || cm->nchunks != rr->nchunks)
        tess_fatal("device-message chunk from PE %d does not fit its message (buffer %u, "
                   "offset %llu, %llu bytes)", ch->sender_pe, cm->buf,
                   (unsigned long long)cm->offset, (unsigned long long)cm->len);
    ch->rr = rr;
    pthread_mutex_lock(&dc.lock);
    int slot = !dc.chunk_wait && dc.brecv_nfree > 0 ? dc.brecv_free[--dc.brecv_nfree] : -1;
    if (slot < 0) {
        ch->next = NULL;
        if (dc.chunk_wait_tail)
            dc.chunk_wait_tail->next = ch;
        else
            dc.chunk_wait = ch;
        dc.chunk_wait_tail = ch;
        atomic_fetch_add(&dc.busy, 1);
    }
    pthread_mutex_unlock(&dc.lock);
    if (slot >= 0) {
        ch->slot = slot;
        chunk_start_get(ch);
    }
}

static void recv_chunk(tess_msg_t *m)
{
    const dc_chunk_msg_t *cm  = tess_msg_payload(m);
    int                   src = tess_core_pe_process(m->hdr.src_pe);
    dc_rchunk_t          *ch  = tess_calloc(1, sizeof(*ch), "a chunk");
    if (!ch)
        tess_fatal("out of memory receiving a chunk");
    ch->msg       = *cm;
    ch->sender_pe = m->hdr.src_pe;
    tess_core_msg_free(m);
    uint64_t key = dc_proc_key(src, ch->msg.msg_id);
    pthread_mutex_lock(&dc.lock);
    dc_rrecv_t   *rr = tess_hmap_get(&recvs, key);
    tess_status_t st = TESS_OK;
    if (!rr) {
        ch->next = tess_hmap_get(&early, key);
        st       = tess_hmap_put(&early, key, ch);
    }
    pthread_mutex_unlock(&dc.lock);
    if (st != TESS_OK)
        tess_fatal("out of memory keeping an early chunk notice");
    if (rr)
        chunk_accept(rr, ch);
}

/* A chunk's host-to-device copy completed: its receive slot is free. */
static void chunk_copied(void *arg)
{
    dc_rchunk_t *ch = arg;
    pthread_mutex_lock(&dc.lock);
    dc.brecv_free[dc.brecv_nfree++] = ch->slot;
    pthread_mutex_unlock(&dc.lock);
    free(ch);
    pump_chunks();
}

static void chunk_arrived(void *arg)
{
    dc_rchunk_t *ch = arg;
    dc_rrecv_t  *rr = ch->rr;
    dc_recv_t  *r  = rr->r;
    int         tr = dc_trace_copy_begin(r->stream);
    if (tess_gpu->memcpy_async((char *)r->dst[ch->msg.buf] + ch->msg.offset, bounce_recv(ch->slot),
                               ch->msg.len, r->stream) != TESS_OK)
        tess_fatal("devcomm: a chunk's host-to-device copy failed: %s", tess_error_detail());
    dc_trace_copy_end(tr, r->stream, r->trace_path, ch->msg.len);
    /* The sender's slot is free as soon as the data is here. */
    dc_ack_msg_t ack = {.kind = DC_K_CHUNK, .event = -1, .offset = ch->msg.slot};
    dc_send_ack(ch->sender_pe, &ack);
    if (tess_core_gpu_then_event(r->stream, chunk_copied, ch) != TESS_OK)
        tess_fatal("cannot wait for a chunk copy: %s", tess_error_detail());
    if (++rr->copied == rr->nchunks) {
        pthread_mutex_lock(&dc.lock);
        tess_hmap_remove(&recvs, dc_proc_key(rr->src, ch->msg.msg_id));
        pthread_mutex_unlock(&dc.lock);
        dc_recv_finish(r);
        free(rr);
    }
}

static bool rdma_staged_recv(tess_msg_t *m, unsigned kind)
{
    if (kind == DC_K_CHUNK) {
        recv_chunk(m);
        return true;
    }
    if (!dc.rdma_staged)
        tess_fatal("a staged RDMA message from PE %d, but this process has no bounce "
                   "buffers", m->hdr.src_pe);
    recv_header(m);
    return true;
}

/* A chunk was acknowledged: its send slot is free. */
static void rdma_staged_release(const dc_ack_msg_t *ack)
{
    pthread_mutex_lock(&dc.lock);
    if (ack->offset >= (uint64_t)dc.nbounce || dc.bsend_nfree >= dc.nbounce) {
        pthread_mutex_unlock(&dc.lock);
        tess_fatal("devcomm: an acknowledgement for send slot %llu, which is not in use",
                   (unsigned long long)ack->offset);
    }
    dc.bsend_free[dc.bsend_nfree++] = (int)ack->offset;
    pthread_mutex_unlock(&dc.lock);
}

const dc_path_ops_t dc_rdma_staged_path = {
    .name    = "rdma staged",
    .kinds   = DC_KIND(DC_K_RSTAGED) | DC_KIND(DC_K_CHUNK),
    .init    = rdma_staged_init,
    .fini    = rdma_staged_fini,
    .send    = rdma_staged_send,
    .recv    = rdma_staged_recv,
    .issue   = rdma_staged_issue,
    .release = rdma_staged_release,
    .pump    = pump_chunks,
};
