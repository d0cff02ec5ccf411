/* devcomm.c — device messages: path choice, control messages (allocation,
 * validation, dispatch), the receiver's post/deliver sequence, acknowledgements and
 * source-done callbacks, the FIFO of sends waiting for resources, and the layer's set-up. */
#include "dc_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

dc_state_t dc;

static const char *const dc_path_names[] = {"d2d", "ipc", "rdma"};

const char *tess_dc_path_name(int path)
{
    return path >= 0 && path < 3 ? dc_path_names[path] : "?";
}

void tess_dc_set_ops(const tess_dc_ops_t *ops)
{
    dc.ops = ops;
}

void tess_dc_get_stats(tess_dc_stats_t *stats_p)
{
    pthread_mutex_lock(&dc.lock);
    *stats_p = dc.stats;
    pthread_mutex_unlock(&dc.lock);
    uint64_t n[DC_C_N];
    for (int k = 0; k < DC_C_N; k++)
        n[k] = atomic_load_explicit(&dc.off_pe[k], memory_order_relaxed);
    for (int i = 0; dc.pes && i < tess_rt.ppn; i++)
        for (int k = 0; k < DC_C_N; k++)
            n[k] += atomic_load_explicit(&dc.pes[i].count[k], memory_order_relaxed);
    for (int p = 0; p < 3; p++)
        stats_p->sent[p] = n[DC_C_SENT + p];
    stats_p->d2d_events       = n[DC_C_D2D_EVENTS];
    stats_p->d2d_batched      = n[DC_C_D2D_BATCHED];
    stats_p->d2d_rb_launches  = n[DC_C_RB_LAUNCHES];
    stats_p->d2d_rb_shared    = n[DC_C_RB_SHARED];
    stats_p->d2d_rb_flips     = n[DC_C_RB_FLIPS];
    stats_p->d2d_rb_unjoined  = n[DC_C_RB_UNJOINED];
    stats_p->d2d_in_place     = n[DC_C_IN_PLACE];
    stats_p->rdma_idle_sends  = n[DC_C_RDMA_IDLE_SENDS];
    stats_p->rdma_idle_recvs  = n[DC_C_RDMA_IDLE_RECVS];
    stats_p->rdma_quiet_recvs = n[DC_C_RDMA_QUIET_RECVS];
    stats_p->rdma_fast_recvs  = n[DC_C_RDMA_FAST_RECVS];
    tess_net_rkey_stats(&stats_p->rkey_unpacks, &stats_p->rkey_hits);
}

int tess_dc_path_to(int dst)
{
    if (dst == tess_rt.rank)
        return dc.forced_path == TESS_DC_RDMA ? TESS_DC_RDMA : TESS_DC_D2D;
    int same_node = tess_rt.node_of[dst] == tess_rt.node;
    if (dc.forced_path == TESS_DC_RDMA)
        return TESS_DC_RDMA;
    if (dc.forced_path == TESS_DC_IPC && same_node)
        return TESS_DC_IPC;
    return tess_rt.vnode_of[dst] == tess_rt.vnode ? TESS_DC_IPC : TESS_DC_RDMA;
}

/* ---- the process's plain events ---------------------------------------------------------- */

tess_status_t dc_event_get(tess_gpu_event_h *e_p)
{
    dc_pe_t *p = dc_pe_mine();
    if (p && p->nev > 0) {
        *e_p = p->ev[--p->nev];
        return TESS_OK;
    }
    pthread_mutex_lock(&dc.lock);
    if (dc.ev_nfree > 0) {
        *e_p = dc.ev_free[--dc.ev_nfree];
        pthread_mutex_unlock(&dc.lock);
        return TESS_OK;
    }
    pthread_mutex_unlock(&dc.lock);
    /* The pool only grows when every event is in flight. */
    return tess_gpu->event_create(0, e_p);
}

static void dc_event_put_cb(void *arg)
{
    dc_event_put(arg);
}

/* fn(arg) once `waiter` is past the event waits enqueued on it so far, so that the event may
 * be recorded again: at once where a wait captures the record it waits for; elsewhere an event
 * recorded again while an earlier record is pending is a hazard (backends that track only the
 * latest record), so a continuation on the waiting stream, which the scan of the continuation
 * list checks in stream order. */
void dc_after_wait(tess_gpu_stream_h waiter, tess_gpu_cont_fn_t fn, void *arg)
{
    if (tess_gpu->wait_captures_record)
        fn(arg);
    else if (tess_core_gpu_then_event(waiter, fn, arg) != TESS_OK)
        tess_fatal("cannot watch an event: %s", tess_error_detail());
}

void dc_event_put_when_done(tess_gpu_event_h e, tess_gpu_stream_h waiter)
{
    dc_after_wait(waiter, dc_event_put_cb, e);
}

void dc_event_put(tess_gpu_event_h e)
{
    dc_pe_t *p = dc_pe_mine();
    if (p && p->nev < DC_EV_CACHE) {
        p->ev[p->nev++] = e;
        return;
    }
    pthread_mutex_lock(&dc.lock);
    if (dc.ev_nfree == dc.ev_cap) {
        size_t            cap = dc.ev_cap ? dc.ev_cap * 2 : 64;
        tess_gpu_event_h *f   = realloc(dc.ev_free, cap * sizeof(*f));
        if (!f) {
            pthread_mutex_unlock(&dc.lock);
            tess_gpu->event_destroy(e);
            return;
        }
        dc.ev_free = f;
        dc.ev_cap  = cap;
    }
    dc.ev_free[dc.ev_nfree++] = e;
    pthread_mutex_unlock(&dc.lock);
}

/* ---- control messages -------------------------------------------------------------------- */

tess_msg_t *dc_ctl_alloc(unsigned kind, int nbufs, size_t header_len, size_t extra_len,
                         dc_ctl_t **ctl_p)
{
    size_t      size = sizeof(dc_ctl_t) + (size_t)nbufs * dc_rec_size(kind) + header_len +
                       extra_len;
    tess_msg_t *m    = tess_core_msg_alloc(size);
    if (!m)
        tess_fatal("out of memory for a %zu-byte device-message control message", size);
    *ctl_p = tess_msg_payload(m);
    memset(*ctl_p, 0, sizeof(dc_ctl_t));
    (*ctl_p)->event     = -1;
    (*ctl_p)->extra_len = (uint32_t)extra_len;
    return m;
}

void dc_ctl_fill(dc_ctl_t *c, uint64_t a0, uint64_t a1, const tess_dev_buf_t *bufs, int nbufs,
                 const void *header, size_t header_len, unsigned kind)
{
    c->a0         = a0;
    c->a1         = a1;
    c->nbufs      = (uint32_t)nbufs;
    c->header_len = (uint32_t)header_len;
    for (int i = 0; i < nbufs; i++)
        c->sizes[i] = bufs[i].size;
    if (header_len)
        memcpy((void *)dc_header(c, kind), header, header_len);
}

void dc_send_ctl(tess_msg_t *m, unsigned kind, int dst_pe)
{
    m->hdr.handler = dc.h_ctl;
    m->hdr.flags   = (uint16_t)kind;
    m->hdr.dst_pe  = dst_pe;
    if (tess_unlikely(tess_trace_on) && (kind <= DC_K_RSTAGED || kind == DC_K_PHEAD)) {
        /* A device message: its flow ends where the receiver delivers it. */
        const dc_ctl_t *c     = tess_msg_payload(m);
        uint64_t        bytes = 0;
        for (uint32_t i = 0; i < c->nbufs && i < TESS_DEV_MAX_BUFS; i++)
            bytes += c->sizes[i];
        int path = kind == DC_K_D2D ? 0 : kind == DC_K_STAGED || kind == DC_K_PHEAD ? 1
                   : kind == DC_K_DIRECT ? 2 : 3;
        tess_trace_record(tess_trace_self_track(), TESS_TEV_FLOW_OUT, NULL, "devmsg",
                          tess_core_trace_path_names[path], tess_time_ns(), 0,
                          tess_core_trace_next_flow() | TESS_TRACE_FLOW_DEV, bytes);
    }
    tess_core_send(m);
}

void dc_send_ack(int src_pe, const dc_ack_msg_t *ack)
{
    tess_msg_t *m = tess_core_msg_alloc(sizeof(*ack));
    if (!m)
        tess_fatal("out of memory acknowledging a device message");
    memcpy(tess_msg_payload(m), ack, sizeof(*ack));
    dc_send_ctl(m, DC_K_ACK, src_pe);
}

uint64_t dc_sent_add(tess_dev_done_fn_t done, void *done_arg, struct dc_reg **regs)
{
    dc_sent_t *rec = tess_calloc(1, sizeof(*rec), "a send record");
    if (!rec)
        tess_fatal("out of memory recording a device message");
    rec->done     = done;
    rec->done_arg = done_arg;
    rec->pe       = tess_core_pe_id();
    if (regs)
        memcpy(rec->regs, regs, sizeof(rec->regs));
    pthread_mutex_lock(&dc.lock);
    uint64_t id = ++dc.next_sent;
    tess_status_t st = tess_hmap_put(&dc.sent, id, rec);
    pthread_mutex_unlock(&dc.lock);
    if (st != TESS_OK)
        tess_fatal("out of memory recording a device message");
    return id;
}

static void dc_send_done(int pe, uint64_t id)
{
    tess_msg_t *m = tess_core_msg_alloc(sizeof(uint64_t));
    if (!m)
        tess_fatal("out of memory sending a source-done notice");
    *(uint64_t *)tess_msg_payload(m) = id;
    dc_send_ctl(m, DC_K_DONE, pe);
}

/* Complete a send record: on its sender's PE, or by a source-done notice to that PE. */
static void dc_complete(uint64_t id, const char *from)
{
    pthread_mutex_lock(&dc.lock);
    dc_sent_t *rec = id ? tess_hmap_get(&dc.sent, id) : NULL;
    int        pe  = rec ? rec->pe : -1;
    if (rec && pe == tess_core_pe_id())
        tess_hmap_remove(&dc.sent, id);
    pthread_mutex_unlock(&dc.lock);
    if (!rec)
        tess_fatal("devcomm: %s names send %llu, which is not outstanding", from,
                   (unsigned long long)id);
    if (pe != tess_core_pe_id()) {
        dc_send_done(pe, id);
        return;
    }
    dc_rdma_release_regs(rec);
    if (rec->done)
        rec->done(rec->done_arg);
    free(rec);
}

void dc_run_done(uint64_t id)
{
    if (id)
        dc_complete(id, "a local completion");
}

/* ---- validation -------------------------------------------------------------------------- */

static tess_status_t dc_corrupt(const tess_msg_t *m, const char *what)
{
    return tess_error(TESS_ERR_CORRUPT, "device-message control message (kind %u, %llu bytes) "
                      "from PE %d: %s", m->hdr.flags, (unsigned long long)m->hdr.size,
                      m->hdr.src_pe, what);
}

tess_status_t tess_dc_validate(const tess_msg_t *m)
{
    unsigned kind = m->hdr.flags;
    size_t   size = m->hdr.size;
    if (kind == 0 || kind >= DC_K_MAX)
        return dc_corrupt(m, "unknown kind");
    if (m->hdr.src_pe < 0 || m->hdr.src_pe >= tess_core_num_pes())
        return dc_corrupt(m, "source PE out of range");
    int src = tess_core_pe_process(m->hdr.src_pe);
    switch (kind) {
    case DC_K_ACK:
        return size == sizeof(dc_ack_msg_t) ? TESS_OK : dc_corrupt(m, "acknowledgement size");
    case DC_K_DONE:
        return size == sizeof(uint64_t) ? TESS_OK : dc_corrupt(m, "done-notice size");
    case DC_K_GOT:
        return src == tess_rt.rank && size == sizeof(uint64_t) ? TESS_OK
                                                                : dc_corrupt(m, "local notice");
    case DC_K_CHUNK: {
        if (size != sizeof(dc_chunk_msg_t))
            return dc_corrupt(m, "chunk size");
        const dc_chunk_msg_t *ch = tess_msg_payload((tess_msg_t *)m);
        if (ch->buf >= TESS_DEV_MAX_BUFS || ch->len == 0 || ch->len > dc.chunk ||
            (int)ch->slot >= dc.nbounce || ch->nchunks == 0)
            return dc_corrupt(m, "chunk fields out of range");
        return TESS_OK;
    }
    case DC_K_PPART: {
        if (size != sizeof(dc_part_msg_t))
            return dc_corrupt(m, "part size");
        const dc_peer_t     *p  = &dc.peers[src];
        const dc_part_msg_t *pt = tess_msg_payload((tess_msg_t *)m);
        if (p->node_index < 0)
            return dc_corrupt(m, "an IPC message from a process of another node");
        if (pt->event < 0 || pt->event >= p->nipc || pt->buf >= TESS_DEV_MAX_BUFS ||
            pt->len == 0 || pt->nparts == 0 || pt->slot % DC_ALIGN || pt->slot > p->comm_size ||
            pt->len > p->comm_size - pt->slot)
            return dc_corrupt(m, "part fields out of range");
        return TESS_OK;
    }
    default:
        break;
    }
    if (size < sizeof(dc_ctl_t))
        return dc_corrupt(m, "shorter than its fixed part");
    const dc_ctl_t *c = tess_msg_payload((tess_msg_t *)m);
    if (c->nbufs > TESS_DEV_MAX_BUFS)
        return dc_corrupt(m, "too many buffers");
    if (size != sizeof(*c) + c->nbufs * dc_rec_size(kind) + c->header_len + c->extra_len)
        return dc_corrupt(m, "sizes do not add up");
    if (kind == DC_K_D2D && src != tess_rt.rank)
        return dc_corrupt(m, "a same-process message from another process");
    if (kind == DC_K_PHEAD && dc.peers[src].node_index < 0)
        return dc_corrupt(m, "an IPC message from a process of another node");
    if (kind == DC_K_STAGED || kind == DC_K_DIRECT) {
        const dc_peer_t *p = &dc.peers[src];
        if (p->node_index < 0)
            return dc_corrupt(m, "an IPC message from a process of another node");
        if (c->event < (kind == DC_K_DIRECT ? -1 : 0) || c->event >= p->nipc)
            return dc_corrupt(m, "event index out of range");
    }
    if (kind == DC_K_STAGED) {
        const dc_rec_staged_t *r = dc_recs((dc_ctl_t *)c);
        size_t                 cs = dc.peers[src].comm_size;
        for (uint32_t i = 0; i < c->nbufs; i++)
            if (r[i].offset % DC_ALIGN || r[i].offset > cs || c->sizes[i] > cs - r[i].offset)
                return dc_corrupt(m, "slot outside the sender's comm buffer");
    }
    if (kind == DC_K_RDMA) {
        const dc_rec_rdma_t *r = dc_recs((dc_ctl_t *)c);
        for (uint32_t i = 0; i < c->nbufs; i++)
            if (c->sizes[i] && (r[i].rkey_len == 0 || r[i].rkey_len > DC_RKEY_MAX ||
                                r[i].rkey_off > c->extra_len ||
                                r[i].rkey_len > c->extra_len - r[i].rkey_off))
                return dc_corrupt(m, "remote key outside the message");
    }
    return TESS_OK;
}

/* ---- receiving --------------------------------------------------------------------------- */

dc_recv_t *dc_recv_begin(tess_msg_t *m, unsigned kind)
{
    const dc_ctl_t  *c  = tess_msg_payload(m);
    dc_pe_t         *p  = dc_pe_mine();
    dc_recv_t       *r  = p ? p->recv_free : NULL;
    if (r) {
        p->recv_free = r->next;
        p->nrecv--;
        memset(r, 0, sizeof(*r));
    } else if (!(r = tess_calloc(1, sizeof(*r), "a device-message receive"))) {
        tess_fatal("out of memory receiving a device message");
    }
    memcpy(r->sizes, c->sizes, sizeof(r->sizes));
    if (kind == DC_K_D2D) { /* the offer of the sources (TESS_ENTRY_IN_PLACE) */
        const dc_rec_d2d_t *rec = dc_recs((dc_ctl_t *)c);
        for (uint32_t i = 0; i < c->nbufs; i++)
            r->dst[i] = (void *)(uintptr_t)rec[i].src;
    }
    r->m = (tess_dc_msg_t){.a0 = c->a0, .a1 = c->a1, .src_pe = m->hdr.src_pe,
                           .header = dc_header(c, kind), .header_len = c->header_len,
                           .nbufs = (int)c->nbufs, .sizes = r->sizes};
    r->keep = m;
    if (tess_unlikely(tess_trace_on)) {
        r->trace_flow = m->hdr.pad ? tess_core_trace_flow(m->hdr.src_pe, m->hdr.pad) |
                                         TESS_TRACE_FLOW_DEV : 0;
        r->trace_path = kind == DC_K_D2D ? 0 : kind == DC_K_STAGED || kind == DC_K_PHEAD ? 1
                        : kind == DC_K_DIRECT ? 2 : 3;
    }
    tess_status_t st = dc.ops->post(&r->m, r->dst, &r->stream, &r->flags);
    if (st == TESS_ERR_NOT_FOUND) {
        /* The target moved on: receive into temporaries and send them after it. */
        r->forward = 1;
        r->stream  = dc.stream;
        r->flags   = 0;
        memset(r->dst, 0, sizeof(r->dst));
        for (int i = 0; i < r->m.nbufs; i++)
            if (r->sizes[i] && tess_gpu->mem_alloc(r->sizes[i], &r->dst[i]) != TESS_OK)
                tess_fatal("out of device memory forwarding a device message");
        return r;
    }
    if (st != TESS_OK)
        tess_fatal("device message: the post function failed: %s", tess_error_detail());
    for (int i = 0; i < r->m.nbufs; i++)
        if (r->sizes[i] && !r->dst[i])
            tess_fatal("device message: the post function gave no destination for buffer %d "
                       "(%zu bytes)", i, r->sizes[i]);
    return r;
}

void dc_recv_free(dc_recv_t *r)
{
    tess_core_msg_free(r->keep);
    dc_pe_t *p = dc_pe_mine();
    if (p && p->nrecv < DC_RECV_CACHE) {
        r->next      = p->recv_free;
        p->recv_free = r;
        p->nrecv++;
    } else {
        free(r);
    }
}

static void dc_deliver_cont(void *arg)
{
    dc_recv_t *r = arg;
    TESS_HOP_MARK(TESS_HOP_DONE);
    dc_deliver(r);
    dc_recv_free(r);
}

void dc_recv_finish(dc_recv_t *r)
{
    if (r->forward) {
        pthread_mutex_lock(&dc.lock);
        dc.stats.forwarded++;
        pthread_mutex_unlock(&dc.lock);
        uint64_t tr_t0 = TESS_TRACE_NOW();
        dc.ops->forward(&r->m, r->dst, r->stream);
        if (tess_unlikely(tr_t0))
            tess_trace_record(tess_trace_self_track(), TESS_TEV_DEVMSG, NULL, "forward",
                              tess_core_trace_path_names[r->trace_path], tr_t0,
                              tess_time_ns() - tr_t0, r->trace_flow, dc_recv_bytes(r));
        dc_recv_free(r);
        return;
    }
    if (r->flags & TESS_DC_WAIT_COMPLETE) {
        tess_status_t st = r->marked ? tess_core_gpu_then_same(r->stream, dc_deliver_cont, r)
                                     : tess_core_gpu_then_event(r->stream, dc_deliver_cont, r);
        if (st != TESS_OK)
            tess_fatal("cannot wait for a device message: %s", tess_error_detail());
        return;
    }
    dc_deliver(r);
    dc_recv_free(r);
}

void tess_dc_free_temp(void *buf)
{
    if (buf)
        tess_gpu->mem_free(buf);
}

/* ---- sending ----------------------------------------------------------------------------- */

tess_status_t tess_dc_send(int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                           size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                           tess_gpu_stream_h stream, tess_dev_done_fn_t done, void *done_arg)
{
    if (nbufs < 0 || nbufs > TESS_DEV_MAX_BUFS)
        return tess_error(TESS_ERR_INVALID, "a device message has %d buffers (0 to %d)", nbufs,
                          TESS_DEV_MAX_BUFS);
    for (int i = 0; i < nbufs; i++)
        if (bufs[i].size && !bufs[i].ptr)
            return tess_error(TESS_ERR_INVALID, "device buffer %d of %zu bytes is NULL", i,
                              bufs[i].size);
    if (header_len && !header)
        return tess_error(TESS_ERR_INVALID, "a device message header of %zu bytes is NULL",
                          header_len);
    TESS_HOP_MARK(TESS_HOP_SEND);
    int path = tess_dc_path_to(tess_core_pe_process(dst_pe));
    dc_count(DC_C_SENT + path, 1);
    switch (path) {
    case TESS_DC_D2D:
        return dc_d2d_send(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream, done,
                           done_arg);
    case TESS_DC_IPC:
        return dc_ipc_send(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream, done,
                           done_arg);
    default:
        return dc_rdma_send(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream, done,
                            done_arg);
    }
}

/* ---- sends waiting for resources --------------------------------------------------------- */

void dc_pending_push(dc_pending_t *p)
{
    pthread_mutex_lock(&dc.lock);
    p->next = NULL;
    if (dc.pending_tail)
        dc.pending_tail->next = p;
    else
        dc.pending = p;
    dc.pending_tail = p;
    dc.stats.deferred++;
    atomic_fetch_add(&dc.busy, 1);
    pthread_mutex_unlock(&dc.lock);
}

void dc_pending_push_staged(int kind, int dst_pe, struct dc_rsend *rs, struct dc_psend *ps)
{
    dc_pending_t *p = tess_calloc(1, sizeof(*p), "a waiting staged send");
    if (!p)
        tess_fatal("out of memory queueing a device message");
    p->kind   = kind;
    p->dst_pe = dst_pe;
    p->rs     = rs;
    p->ps     = ps;
    dc_pending_push(p);
}

/* Issue waiting sends in order while resources last (the issue functions take the lock).
 * One thread pumps at a time; a thread that finds the pump busy asks it to go round again. */
void dc_pump(void)
{
    for (;;) {
        if (pthread_mutex_trylock(&dc.pump_lock) != 0) {
            atomic_store(&dc.pump_again, 1);
            break;
        }
        atomic_store(&dc.pump_again, 0);
        for (;;) {
            pthread_mutex_lock(&dc.lock);
            dc_pending_t *p = dc.pending;
            pthread_mutex_unlock(&dc.lock);
            if (!p)
                break;
            int issued = p->kind == DC_K_CHUNK ? dc_rdma_issue_pending(p)
                                               : dc_ipc_issue_pending(p);
            if (!issued)
                break;
            pthread_mutex_lock(&dc.lock);
            dc.pending = p->next;
            if (!dc.pending)
                dc.pending_tail = NULL;
            pthread_mutex_unlock(&dc.lock);
            atomic_fetch_sub(&dc.busy, 1);
            if (p->ready)
                dc_event_put_when_done(p->ready, dc.stream);
            free(p->header);
            free(p);
        }
        pthread_mutex_unlock(&dc.pump_lock);
        if (!atomic_load(&dc.pump_again))
            break;
    }
    dc_rdma_pump_chunks();
}

/* ---- the control-message handler --------------------------------------------------------- */

static bool dc_ctl_handler(tess_msg_t *m)
{
    tess_status_t st = tess_dc_validate(m);
    if (st != TESS_OK)
        tess_fatal("%s", tess_error_detail());
    unsigned kind = m->hdr.flags;
    if (kind != DC_K_D2D)
        dc_rb_flush();
    switch (kind) {
    case DC_K_D2D:
        return dc_d2d_recv(m);
    case DC_K_STAGED:
    case DC_K_DIRECT:
    case DC_K_PHEAD:
    case DC_K_PPART:
        dc_ipc_recv(m, kind);
        break;
    case DC_K_RDMA:
    case DC_K_RSTAGED:
    case DC_K_CHUNK:
    case DC_K_GOT:
        dc_rdma_recv(m, kind);
        break;
    case DC_K_ACK: {
        dc_ack_msg_t ack;
        memcpy(&ack, tess_msg_payload(m), sizeof(ack));
        tess_core_msg_free(m);
        if (ack.kind == DC_K_STAGED || ack.kind == DC_K_DIRECT)
            dc_ipc_release(&ack);
        else if (ack.kind == DC_K_CHUNK || ack.kind == DC_K_RDMA)
            dc_rdma_release(&ack);
        else
            tess_fatal("devcomm: an acknowledgement of unknown kind %u from PE %d", ack.kind,
                       m->hdr.src_pe);
        if (ack.msg_id)
            dc_complete(ack.msg_id, "an acknowledgement");
        dc_pump();
        break;
    }
    case DC_K_DONE: {
        uint64_t id = *(uint64_t *)tess_msg_payload(m);
        tess_core_msg_free(m);
        dc_complete(id, "a source-done notice");
        break;
    }
    }
    return true;
}

/* ---- layer ------------------------------------------------------------------------------- */

static int dc_busy(void)
{
    return atomic_load(&dc.busy) > 0;
}

static unsigned dc_progress(tess_pe_t *pe)
{
    (void)pe;
    return dc_rdma_progress();
}

tess_gpu_stream_h dc_pe_stream(tess_gpu_stream_h *table)
{
    tess_pe_t *pe = tess_core_pe_self();
    if (!pe)
        return NULL;
    int               local = tess_core_pe_local(pe);
    tess_gpu_stream_h s     = table[local]; /* this PE's entry: no other thread touches it */
    if (!s && tess_gpu->stream_create(&s) == TESS_OK)
        table[local] = s;
    return s;
}

tess_gpu_stream_h tess_dc_ready_stream(void)
{
    return dc_pe_stream(dc.ready_streams);
}

bool dc_is_ready_stream(tess_gpu_stream_h s)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe && s && dc.ready_streams[tess_core_pe_local(pe)] == s;
}

static void dc_pe_streams_destroy(tess_gpu_stream_h *table)
{
    if (!table)
        return;
    for (int i = 0; i < tess_rt.ppn; i++)
        if (table[i])
            tess_gpu->stream_destroy(table[i]);
    free(table);
}

static int dc_parse_path(void)
{
    for (int p = 0; p < 3; p++)
        if (!strcasecmp(tess_cfg.devcomm_path, dc_path_names[p]))
            return p;
    return -1;
}

tess_status_t tess_devcomm_init(void)
{
    tess_status_t st;
    memset(&dc, 0, sizeof(dc));
    pthread_mutex_init(&dc.lock, NULL);
    pthread_mutex_init(&dc.pump_lock, NULL);
    dc.forced_path = dc_parse_path();
    dc.ipc_mode    = !strcasecmp(tess_cfg.ipc, "staged") ? 1
                   : !strcasecmp(tess_cfg.ipc, "direct") ? 2 : 0;
    dc.rb_comm     = !strcasecmp(tess_cfg.batch_stream, "on")    ? DC_RB_ON
                   : !strcasecmp(tess_cfg.batch_stream, "off")   ? DC_RB_OFF
                   : !strcasecmp(tess_cfg.batch_stream, "adapt") ? DC_RB_AUTO
                   : tess_gpu->memcpy_batch_async                ? DC_RB_AUTO
                                                                 : DC_RB_OFF;
    st = tess_gpu->stream_create(&dc.stream);
    if (st != TESS_OK)
        return st;
    dc.rb_streams    = tess_calloc((size_t)tess_rt.ppn, sizeof(*dc.rb_streams),
                                   "the PEs' batch-copy streams");
    dc.ready_streams = tess_calloc((size_t)tess_rt.ppn, sizeof(*dc.ready_streams),
                                   "the PEs' ready streams");
    dc.pes           = tess_aligned_alloc(TESS_CACHELINE, (size_t)tess_rt.ppn * sizeof(*dc.pes),
                                          "the PEs' device-message state");
    if (dc.pes)
        memset(dc.pes, 0, (size_t)tess_rt.ppn * sizeof(*dc.pes));
    if (!dc.rb_streams || !dc.ready_streams || !dc.pes) {
        st = tess_error(TESS_ERR_NO_MEMORY, "devcomm: no memory for the PEs' streams");
        goto err_destroy_stream;
    }
    if ((st = tess_hmap_init(&dc.exports, 64)) != TESS_OK ||
        (st = tess_hmap_init(&dc.maps, 64)) != TESS_OK ||
        (st = tess_hmap_init(&dc.regs, 64)) != TESS_OK ||
        (st = tess_hmap_init(&dc.sent, 64)) != TESS_OK)
        goto err_destroy_stream;

    MPI_Comm node_comm;
    if (MPI_Comm_split(tess_rt.comm, tess_rt.node, tess_rt.rank, &node_comm) != MPI_SUCCESS) {
        st = tess_error(TESS_ERR_MPI, "devcomm: MPI_Comm_split by node failed");
        goto err_destroy_stream;
    }
    st = dc_ipc_init(node_comm);
    MPI_Comm_free(&node_comm);
    if (st != TESS_OK)
        goto err_destroy_stream;
    st = dc_rdma_init();
    if (st != TESS_OK)
        goto err_ipc_fini;
    st = tess_core_handler_register("devcomm", dc_ctl_handler, &dc.h_ctl);
    if (st == TESS_OK)
        tess_core_handler_set_flush(dc.h_ctl, dc_rb_flush);
    if (st != TESS_OK)
        goto err_rdma_fini;
    static const tess_core_layer_t layer = {.name = "devcomm", .progress = dc_progress,
                                             .idle = dc_rdma_idle, .busy = dc_busy};
    st = tess_core_layer_add(&layer);
    if (st != TESS_OK)
        goto err_rdma_fini;
    return TESS_OK;

err_rdma_fini:
    dc_rdma_fini();
err_ipc_fini:
    dc_ipc_fini();
err_destroy_stream:
    free(dc.rb_streams);
    free(dc.ready_streams);
    free(dc.pes);
    tess_hmap_fini(&dc.sent);
    tess_hmap_fini(&dc.regs);
    tess_hmap_fini(&dc.maps);
    tess_hmap_fini(&dc.exports);
    tess_gpu->stream_destroy(dc.stream);
    pthread_mutex_destroy(&dc.lock);
    return st;
}

/* TESS_VERBOSE: each process's device-message counters, one line on stderr at finalize. */
static void dc_print_stats(void)
{
    tess_dc_stats_t s;
    tess_dc_get_stats(&s);
    fprintf(stderr, "[tessera] process %d device messages: d2d %llu (in batches %llu: %llu copy "
            "launches, %llu on a batch stream, %llu changes of choice; %llu buffers in place), "
            "ipc %llu (staged %llu, direct %llu), rdma %llu (staged %llu, direct %llu), waited "
            "for staging %llu\n",
            tess_rt.rank, (unsigned long long)s.sent[0], (unsigned long long)s.d2d_batched,
            (unsigned long long)s.d2d_rb_launches, (unsigned long long)s.d2d_rb_shared,
            (unsigned long long)s.d2d_rb_flips, (unsigned long long)s.d2d_in_place,
            (unsigned long long)s.sent[1],
            (unsigned long long)s.staged, (unsigned long long)s.direct,
            (unsigned long long)s.sent[2], (unsigned long long)s.rdma_staged,
            (unsigned long long)s.rdma_direct, (unsigned long long)s.deferred);
}

void tess_devcomm_fini(void)
{
    if (!dc.stream)
        return;
    if (tess_cfg.verbose)
        dc_print_stats();
    tess_gpu->stream_sync(dc.stream);
    while (dc.pending) {
        dc_pending_t *p = dc.pending;
        dc.pending      = p->next;
        tess_warn("devcomm: a device message to PE %d never found a staging resource",
                  p->dst_pe);
        free(p->header);
        free(p);
    }
    dc_rdma_fini();
    dc_ipc_fini();
    for (int i = 0; i < tess_rt.ppn; i++) {
        dc_pe_t *p = &dc.pes[i];
        while (p->nev > 0)
            tess_gpu->event_destroy(p->ev[--p->nev]);
        dc_sev_free_list(p->sev_free);
        while (p->recv_free) {
            dc_recv_t *r = p->recv_free;
            p->recv_free = r->next;
            free(r);
        }
    }
    free(dc.pes);
    dc.pes = NULL;
    for (size_t i = 0; i < dc.ev_nfree; i++)
        tess_gpu->event_destroy(dc.ev_free[i]);
    free(dc.ev_free);
    dc_sev_free_list(dc.sev_free);
    if (dc.sent.count)
        tess_warn("devcomm: %zu device messages were never acknowledged", dc.sent.count);
    size_t   it = 0;
    uint64_t key;
    void    *val;
    while (tess_hmap_next(&dc.sent, &it, &key, &val))
        free(val);
    tess_hmap_fini(&dc.sent);
    tess_hmap_fini(&dc.regs);
    tess_hmap_fini(&dc.maps);
    tess_hmap_fini(&dc.exports);
    dc_pe_streams_destroy(dc.rb_streams);
    dc_pe_streams_destroy(dc.ready_streams);
    tess_gpu->stream_destroy(dc.stream);
    pthread_mutex_destroy(&dc.pump_lock);
    pthread_mutex_destroy(&dc.lock);
    memset(&dc, 0, sizeof(dc));
}
