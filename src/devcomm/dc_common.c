/* dc_common.c — what the message paths share: the process's plain events, control messages,
 * send records and their completion (acknowledgements, source-done notices), the receiver's
 * post/deliver/forward sequence, local notices, and the FIFO of sends waiting for staging
 * resources. It reaches a path only through its table (dc_path_of, dc_paths). */
#include "dc_int.h"

#include <stdlib.h>

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

void dc_ctl_fill(dc_ctl_t *c, const dc_send_t *s, unsigned kind)
{
    c->a0         = s->a0;
    c->a1         = s->a1;
    c->nbufs      = (uint32_t)s->nbufs;
    c->header_len = (uint32_t)s->header_len;
    for (int i = 0; i < s->nbufs; i++)
        c->sizes[i] = s->bufs[i].size;
    if (s->header_len)
        memcpy((void *)dc_header(c, kind), s->header, s->header_len);
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

/* ---- acknowledgements and local notices -------------------------------------------------- */

void dc_send_ack(int src_pe, const dc_ack_msg_t *ack)
{
    tess_msg_t *m = tess_core_msg_alloc(sizeof(*ack));
    if (!m)
        tess_fatal("out of memory acknowledging a device message");
    memcpy(tess_msg_payload(m), ack, sizeof(*ack));
    dc_send_ctl(m, DC_K_ACK, src_pe);
}

typedef struct dc_ack_cont_arg {
    int          src_pe;
    dc_ack_msg_t ack;
} dc_ack_cont_arg_t;

void *dc_ack_cont_arg(int src_pe, const dc_ack_msg_t *ack)
{
    dc_ack_cont_arg_t *a = tess_malloc(sizeof(*a), "an acknowledgement");
    if (!a)
        tess_fatal("out of memory acknowledging a device message");
    a->src_pe = src_pe;
    a->ack    = *ack;
    return a;
}

void dc_ack_cont(void *arg)
{
    dc_ack_cont_arg_t *a = arg;
    dc_send_ack(a->src_pe, &a->ack);
    free(a);
}

void dc_ack_after(tess_gpu_stream_h stream, int src_pe, const dc_ack_msg_t *ack)
{
    if (tess_core_gpu_then_event(stream, dc_ack_cont, dc_ack_cont_arg(src_pe, ack)) != TESS_OK)
        tess_fatal("cannot wait for a device copy: %s", tess_error_detail());
}

/* What a local notice (DC_K_GOT) names: its payload is a pointer to it. */
typedef struct dc_notice {
    tess_gpu_cont_fn_t fn;
    void              *arg;
} dc_notice_t;

void dc_notify(int pe, tess_gpu_cont_fn_t fn, void *arg)
{
    dc_notice_t *g = tess_malloc(sizeof(*g), "a completion notice");
    tess_msg_t  *m = tess_core_msg_alloc(sizeof(uint64_t));
    if (!g || !m)
        tess_fatal("out of memory noting a completed get");
    g->fn  = fn;
    g->arg = arg;
    *(uint64_t *)tess_msg_payload(m) = (uint64_t)(uintptr_t)g;
    dc_send_ctl(m, DC_K_GOT, pe);
}

void dc_notice_run(tess_msg_t *m)
{
    dc_notice_t *g = (dc_notice_t *)(uintptr_t)*(uint64_t *)tess_msg_payload(m);
    tess_core_msg_free(m);
    g->fn(g->arg);
    free(g);
}

/* ---- send records ------------------------------------------------------------------------ */

uint64_t dc_sent_add(tess_dev_done_fn_t done, void *done_arg, const dc_path_ops_t *holder,
                     struct dc_reg **regs)
{
    dc_sent_t *rec = tess_calloc(1, sizeof(*rec), "a send record");
    if (!rec)
        tess_fatal("out of memory recording a device message");
    rec->done     = done;
    rec->done_arg = done_arg;
    rec->pe       = tess_core_pe_id();
    if (regs) {
        rec->holder = holder;
        memcpy(rec->regs, regs, sizeof(rec->regs));
    }
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
void dc_complete(uint64_t id, const char *from)
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
    if (rec->holder)
        rec->holder->release_sent(rec);
    if (rec->done)
        rec->done(rec->done_arg);
    free(rec);
}

void dc_run_done(uint64_t id)
{
    if (id)
        dc_complete(id, "a local completion");
}

void dc_done_cont(void *arg)
{
    uint64_t *id = arg;
    dc_run_done(*id);
    free(id);
}

void *dc_done_cont_arg(uint64_t id)
{
    uint64_t *d = tess_malloc(sizeof(*d), "a done continuation");
    if (!d)
        tess_fatal("out of memory waiting for a device copy");
    *d = id;
    return d;
}

void dc_done_after(tess_gpu_stream_h stream, uint64_t id)
{
    if (id && tess_core_gpu_then_event(stream, dc_done_cont, dc_done_cont_arg(id)) != TESS_OK)
        tess_fatal("cannot wait for a device copy: %s", tess_error_detail());
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

void dc_caches_fini(void)
{
    for (int i = 0; dc.pes && i < tess_rt.ppn; i++) {
        dc_pe_t *p = &dc.pes[i];
        while (p->nev > 0)
            tess_gpu->event_destroy(p->ev[--p->nev]);
        while (p->recv_free) {
            dc_recv_t *r = p->recv_free;
            p->recv_free = r->next;
            free(r);
        }
    }
    for (size_t i = 0; i < dc.ev_nfree; i++)
        tess_gpu->event_destroy(dc.ev_free[i]);
    free(dc.ev_free);
    dc.ev_free  = NULL;
    dc.ev_nfree = dc.ev_cap = 0;
}

/* ---- the PEs' own streams ---------------------------------------------------------------- */

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

void dc_defer(int kind, const dc_send_t *s, uint64_t sent_id)
{
    dc_pending_t *p = tess_calloc(1, sizeof(*p), "a waiting device message");
    if (!p || (s->header_len && !(p->header = tess_malloc(s->header_len, "a waiting header"))))
        tess_fatal("out of memory queueing a device message");
    *p = (dc_pending_t){.kind = kind, .dst_pe = s->dst_pe, .a0 = s->a0, .a1 = s->a1,
                        .nbufs = s->nbufs, .sent_id = sent_id, .header = p->header,
                        .header_len = s->header_len};
    memcpy(p->bufs, s->bufs, (size_t)s->nbufs * sizeof(*s->bufs));
    if (s->header_len)
        memcpy(p->header, s->header, s->header_len);
    if (dc_event_get(&p->ready) != TESS_OK ||
        tess_gpu->event_record(p->ready, s->stream) != TESS_OK)
        tess_fatal("devcomm: cannot record a ready event: %s", tess_error_detail());
    dc_pending_push(p);
}

dc_send_t dc_deferred_send(const dc_pending_t *p)
{
    if (tess_gpu->stream_wait_event(dc.stream, p->ready) != TESS_OK)
        tess_fatal("devcomm: stream wait failed: %s", tess_error_detail());
    return (dc_send_t){.dst_pe = p->dst_pe, .a0 = p->a0, .a1 = p->a1, .header = p->header,
                       .header_len = p->header_len, .bufs = p->bufs, .nbufs = p->nbufs,
                       .stream = dc.stream};
}

void dc_pending_push_staged(int kind, int dst_pe, void *staged)
{
    dc_pending_t *p = tess_calloc(1, sizeof(*p), "a waiting staged send");
    if (!p)
        tess_fatal("out of memory queueing a device message");
    p->kind   = kind;
    p->dst_pe = dst_pe;
    p->staged = staged;
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
            if (!dc_path_of((unsigned)p->kind)->issue(p))
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
    for (int i = 0; i < dc_npaths; i++)
        if (dc_paths[i]->pump)
            dc_paths[i]->pump();
}

void dc_pending_drop(void)
{
    while (dc.pending) {
        dc_pending_t *p = dc.pending;
        dc.pending      = p->next;
        tess_warn("devcomm: a device message to PE %d never found a staging resource",
                  p->dst_pe);
        free(p->header);
        free(p);
    }
    dc.pending_tail = NULL;
}
