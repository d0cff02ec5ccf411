/* dc_ipc_staged.c — the ipc staged path (same node, other process; the paper's): each process
 * exports, once at start, a device comm buffer and a pool of interprocess events (dc_ipc.c).
 * The sender copies into a slot of its own buffer and records one of its events; the receiver
 * waits on that event, copies out, and acknowledges once its copy completed, which frees the
 * slot and the event.
 *
 * A message larger than a part (TESS_IPC_PART, by default half the comm buffer) moves in parts,
 * each through its own slot and event of the sender's comm buffer: the receiver copies one part
 * out while the sender copies the next in, and a message may be larger than the whole buffer. A
 * header announces it; each part's notice names its slot, event and place and is acknowledged
 * on its own. Parts are staged in order on dc.stream (after the send's ready event) by
 * whichever PE finds the resources, so a notice may overtake its header: it then waits for it.
 * On the H200 with the 64 MiB buffer, 64 MiB messages moved at 0.36, 0.45, 0.47 and 0.38 of a
 * raw IPC copy with parts of 8, 16, 32 and 64 MiB in one run, and at 0.446-0.457 (16 MiB, six
 * runs) against 0.463-0.466 (32 MiB, four runs) in others.
 *
 * Threads: a message's sender state is touched by one thread at a time (the sending PE, then
 * the pump); its receiver state by its receiving PE only, in a map the process's PEs share
 * under dc.lock. */
#include "dc_int.h"

#include <stdlib.h>

/* Sender state of a message staged in parts. */
typedef struct dc_psend {
    int              dst_pe;
    uint64_t         msg_id, sent_id;
    tess_dev_buf_t   bufs[TESS_DEV_MAX_BUFS];
    uint32_t         nparts, next;
    int              buf;     /* where the next part starts */
    size_t           off;
    tess_gpu_event_h ready;   /* recorded on the sender's stream at send time */
    int              waited;  /* dc.stream waits on ready */
} dc_psend_t;

/* A part notice that came before its message's header. */
typedef struct dc_pwait {
    struct dc_pwait *next;
    dc_part_msg_t    part;
    int              src_pe;
} dc_pwait_t;

/* Receiver state of a message staged in parts (touched by its receiving PE only; the map that
 * holds it is shared by the process's PEs, under dc.lock). */
typedef struct dc_precv {
    dc_recv_t  *r;          /* NULL until the header is in */
    dc_pwait_t *early, **early_tail;
    uint32_t    nparts, got;
} dc_precv_t;

static tess_hmap_t precvs; /* (process, msg_id) -> dc_precv_t */

static tess_status_t staged_init(void)
{
    return tess_hmap_init(&precvs, 16);
}

static void staged_fini(void)
{
    size_t   it = 0;
    uint64_t key;
    void    *val;
    while (tess_hmap_next(&precvs, &it, &key, &val)) {
        dc_precv_t *pr = val;
        for (dc_pwait_t *w = pr->early, *next; w; w = next) {
            next = w->next;
            free(w);
        }
        free(pr);
    }
    tess_hmap_fini(&precvs);
}

/* ---- sending a whole message ------------------------------------------------------------- */

/* s->stream: the sender's (or, for a waiting send, dc.stream after its ready event). */
static void issue_staged(const dc_send_t *s, uint64_t sent_id, size_t off, int ev)
{
    const tess_dev_buf_t *bufs   = s->bufs;
    int                   nbufs  = s->nbufs;
    tess_gpu_stream_h     stream = s->stream;
    dc_ctl_t             *c;
    tess_msg_t           *m = dc_ctl_alloc(DC_K_STAGED, nbufs, s->header_len, 0, &c);
    dc_ctl_fill(c, s, DC_K_STAGED);
    c->event             = ev;
    dc_rec_staged_t *rec = dc_recs(c);
    for (int i = 0; i < nbufs; i++) {
        rec[i].offset = off;
        if (bufs[i].size && tess_gpu->memcpy_async((char *)dc.comm + off, bufs[i].ptr,
                                                   bufs[i].size, stream) != TESS_OK)
            tess_fatal("devcomm: staging copy failed: %s", tess_error_detail());
        off += dc_align_up(bufs[i].size);
    }
    if (tess_gpu->event_record(dc.ipc_events[ev], stream) != TESS_OK)
        tess_fatal("devcomm: recording an IPC event failed: %s", tess_error_detail());
    /* The source may be reused once it has been copied into the slot. */
    dc_done_after(stream, sent_id);
    TESS_HOP_MARK(TESS_HOP_QUERIED); /* staged: the copy into the slot enqueued */
    dc_send_ctl(m, DC_K_STAGED, s->dst_pe);
    TESS_HOP_MARK(TESS_HOP_CTL_SENT);
}

/* ---- sending in parts -------------------------------------------------------------------- */

static uint32_t count_parts(const tess_dev_buf_t *bufs, int nbufs)
{
    uint32_t n = 0;
    for (int i = 0; i < nbufs; i++)
        n += (uint32_t)((bufs[i].size + dc.part - 1) / dc.part);
    return n;
}

/* Stage parts while slots and events last; 1 when every part is on its way (ps is freed). */
static int parts_issue(dc_psend_t *ps)
{
    while (ps->next < ps->nparts) {
        while (ps->off == ps->bufs[ps->buf].size) { /* zero-length buffers have no part */
            ps->buf++;
            ps->off = 0;
        }
        size_t len  = TESS_MIN(dc.part, ps->bufs[ps->buf].size - ps->off);
        size_t slot = 0;
        int    ev   = -1;
        pthread_mutex_lock(&dc.lock);
        int ok = dc_ipc_take(1, dc_align_up(len), &slot, &ev, 0);
        pthread_mutex_unlock(&dc.lock);
        if (!ok)
            return 0;
        if (!ps->waited) {
            if (tess_gpu->stream_wait_event(dc.stream, ps->ready) != TESS_OK)
                tess_fatal("devcomm: stream wait failed: %s", tess_error_detail());
            ps->waited = 1;
        }
        if (tess_gpu->memcpy_async((char *)dc.comm + slot,
                                   (const char *)ps->bufs[ps->buf].ptr + ps->off, len,
                                   dc.stream) != TESS_OK ||
            tess_gpu->event_record(dc.ipc_events[ev], dc.stream) != TESS_OK)
            tess_fatal("devcomm: staging a part failed: %s", tess_error_detail());
        tess_msg_t *m = tess_core_msg_alloc(sizeof(dc_part_msg_t));
        if (!m)
            tess_fatal("out of memory announcing a part of a device message");
        *(dc_part_msg_t *)tess_msg_payload(m) =
            (dc_part_msg_t){.msg_id = ps->msg_id, .offset = ps->off, .len = len, .slot = slot,
                            .event = ev, .buf = (uint32_t)ps->buf, .nparts = ps->nparts};
        dc_send_ctl(m, DC_K_PPART, ps->dst_pe);
        ps->off += len;
        ps->next++;
    }
    /* Every part is out of the source once dc.stream is past the last copy-in. */
    dc_done_after(dc.stream, ps->sent_id);
    dc_event_put_when_done(ps->ready, dc.stream);
    free(ps);
    return 1;
}

static tess_status_t parts_send(const dc_send_t *s)
{
    int                   dst_pe = s->dst_pe, nbufs = s->nbufs;
    const tess_dev_buf_t *bufs   = s->bufs;
    dc_psend_t *ps = tess_calloc(1, sizeof(*ps), "a device message staged in parts");
    if (!ps)
        tess_fatal("out of memory staging a device message");
    ps->dst_pe = dst_pe;
    ps->nparts = count_parts(bufs, nbufs);
    memcpy(ps->bufs, bufs, (size_t)nbufs * sizeof(*bufs));
    pthread_mutex_lock(&dc.lock);
    ps->msg_id = ++dc.next_msg_id;
    dc.stats.staged++;
    dc.stats.staged_parted++;
    int queued = dc.pending != NULL;
    pthread_mutex_unlock(&dc.lock);
    ps->sent_id = s->done ? dc_sent_add(s->done, s->done_arg, NULL, NULL) : 0;

    dc_ctl_t   *c;
    tess_msg_t *m = dc_ctl_alloc(DC_K_PHEAD, nbufs, s->header_len, 0, &c);
    dc_ctl_fill(c, s, DC_K_PHEAD);
    c->msg_id = ps->msg_id;
    dc_send_ctl(m, DC_K_PHEAD, dst_pe);

    if (dc_event_get(&ps->ready) != TESS_OK || tess_gpu->event_record(ps->ready, s->stream) != TESS_OK)
        tess_fatal("devcomm: cannot record a ready event: %s", tess_error_detail());
    if (!queued && parts_issue(ps))
        return TESS_OK;
    dc_pending_push_staged(DC_K_PPART, dst_pe, ps);
    return TESS_OK;
}

/* ---- receiving in parts ------------------------------------------------------------------ */

/* The receive state of (src, msg_id), made on first sight (header or part). */
static dc_precv_t *precv_get(int src, uint64_t msg_id)
{
    uint64_t key = dc_proc_key(src, msg_id);
    pthread_mutex_lock(&dc.lock);
    dc_precv_t *pr = tess_hmap_get(&precvs, key);
    if (!pr) {
        pr = tess_calloc(1, sizeof(*pr), "a device message arriving in parts");
        if (!pr || tess_hmap_put(&precvs, key, pr) != TESS_OK)
            tess_fatal("out of memory receiving a device message in parts");
        pr->early_tail = &pr->early;
    }
    pthread_mutex_unlock(&dc.lock);
    return pr;
}

/* Copy one part out of the sender's slot (the header is in); the last one delivers. */
static void part_copy(dc_precv_t *pr, const dc_part_msg_t *p, int src_pe)
{
    int        src = tess_core_pe_process(src_pe);
    dc_recv_t *r   = pr->r;
    if (pr->nparts == 0)
        pr->nparts = p->nparts;
    if (p->nparts != pr->nparts || pr->got >= pr->nparts || (int)p->buf >= r->m.nbufs ||
        p->offset > r->sizes[p->buf] || p->len > r->sizes[p->buf] - p->offset)
        tess_fatal("device-message control message from PE %d: part %u of %u (%llu bytes at "
                   "%llu of buffer %u) does not fit its message", src_pe, pr->got, p->nparts,
                   (unsigned long long)p->len, (unsigned long long)p->offset, p->buf);
    pthread_mutex_lock(&dc.lock);
    tess_gpu_event_h ev  = dc_ipc_peer_event(src, p->event);
    char            *buf = dc_ipc_peer_comm(src);
    pthread_mutex_unlock(&dc.lock);
    if (tess_gpu->stream_wait_event(r->stream, ev) != TESS_OK)
        tess_fatal("devcomm: copying a part out failed: %s", tess_error_detail());
    int tr = dc_trace_copy_begin(r->stream);
    if (tess_gpu->memcpy_async((char *)r->dst[p->buf] + p->offset, buf + p->slot, p->len,
                               r->stream) != TESS_OK)
        tess_fatal("devcomm: copying a part out failed: %s", tess_error_detail());
    dc_trace_copy_end(tr, r->stream, r->trace_path, p->len);
    /* The slot and the event go back once the copy is done. */
    dc_ack_msg_t ack = {.kind = DC_K_STAGED, .event = p->event, .offset = p->slot,
                        .size = dc_align_up(p->len)};
    dc_ack_after(r->stream, src_pe, &ack);
    if (++pr->got < pr->nparts)
        return;
    pthread_mutex_lock(&dc.lock);
    tess_hmap_remove(&precvs, dc_proc_key(src, p->msg_id));
    pthread_mutex_unlock(&dc.lock);
    dc_recv_finish(r);
    free(pr);
}

static void recv_parts_header(tess_msg_t *m)
{
    const dc_ctl_t *c  = tess_msg_payload(m);
    int             src_pe = m->hdr.src_pe;
    uint64_t        msg_id = c->msg_id;
    dc_precv_t     *pr = precv_get(tess_core_pe_process(src_pe), msg_id);
    if (pr->r)
        tess_fatal("device-message control message from PE %d: a second header for message "
                   "%llu", src_pe, (unsigned long long)msg_id);
    pr->r         = dc_recv_begin(m, DC_K_PHEAD);
    dc_pwait_t *w = pr->early;
    pr->early     = NULL;
    /* Notices that overtook the header; the last part frees pr. */
    for (dc_pwait_t *next; w; w = next) {
        next = w->next;
        part_copy(pr, &w->part, w->src_pe);
        free(w);
    }
}

static void recv_part(tess_msg_t *m)
{
    dc_part_msg_t p;
    int           src_pe = m->hdr.src_pe;
    memcpy(&p, tess_msg_payload(m), sizeof(p));
    tess_core_msg_free(m);
    dc_precv_t *pr = precv_get(tess_core_pe_process(src_pe), p.msg_id);
    if (pr->r) {
        part_copy(pr, &p, src_pe);
        return;
    }
    dc_pwait_t *w = tess_malloc(sizeof(*w), "an early part notice");
    if (!w)
        tess_fatal("out of memory keeping an early part notice");
    *w             = (dc_pwait_t){NULL, p, src_pe};
    *pr->early_tail = w;
    pr->early_tail  = &w->next;
}

/* ---- the path's entry points ------------------------------------------------------------- */

static tess_status_t staged_send(const dc_send_t *s)
{
    size_t total = dc_ipc_staged_total(s->bufs, s->nbufs);
    if (total > dc.part)
        return parts_send(s);
    size_t off = 0;
    int    ev  = -1;
    pthread_mutex_lock(&dc.lock);
    int ok = dc_ipc_take(1, total, &off, &ev, 1);
    if (ok)
        dc.stats.staged++;
    pthread_mutex_unlock(&dc.lock);
    uint64_t sent_id = s->done ? dc_sent_add(s->done, s->done_arg, NULL, NULL) : 0;
    if (!ok) {
        dc_defer(DC_K_STAGED, s, sent_id);
        return TESS_OK;
    }
    issue_staged(s, sent_id, off, ev);
    return TESS_OK;
}

static int staged_issue(dc_pending_t *p)
{
    if (p->kind == DC_K_PPART)
        return parts_issue(p->staged);
    size_t off = 0;
    int    ev  = -1;
    pthread_mutex_lock(&dc.lock);
    int ok = dc_ipc_take(1, dc_ipc_staged_total(p->bufs, p->nbufs), &off, &ev, 0);
    if (ok)
        dc.stats.staged++;
    pthread_mutex_unlock(&dc.lock);
    if (!ok)
        return 0;
    dc_send_t s = dc_deferred_send(p);
    issue_staged(&s, p->sent_id, off, ev);
    return 1;
}

/* A whole message: copy it out of the sender's slot; the acknowledgement frees slot and event. */
static void recv_whole(tess_msg_t *m, unsigned kind)
{
    TESS_HOP_MARK(TESS_HOP_CTL_RECV);
    const dc_ctl_t *c   = tess_msg_payload(m);
    int             src = tess_core_pe_process(m->hdr.src_pe);
    dc_ack_msg_t    ack = {.kind = kind, .event = c->event};
    const void     *srcs[TESS_DEV_MAX_BUFS] = {0};

    pthread_mutex_lock(&dc.lock);
    tess_gpu_event_h       ev   = dc_ipc_peer_event(src, c->event);
    const dc_rec_staged_t *rec  = dc_recs((dc_ctl_t *)c);
    char                  *base = dc_ipc_peer_comm(src);
    for (uint32_t i = 0; i < c->nbufs; i++) {
        srcs[i] = base + rec[i].offset;
        ack.size += dc_align_up(c->sizes[i]);
    }
    ack.offset = c->nbufs ? rec[0].offset : 0;
    pthread_mutex_unlock(&dc.lock);
    void *a = dc_ack_cont_arg(m->hdr.src_pe, &ack);

    dc_recv_t *r = dc_recv_begin(m, kind);
    TESS_HOP_MARK(TESS_HOP_POSTED);
    dc_ipc_copy_out(r, ev, srcs, dc_ack_cont, a);
    TESS_HOP_MARK(TESS_HOP_ISSUED);
}

static bool staged_recv(tess_msg_t *m, unsigned kind)
{
    if (kind == DC_K_PHEAD)
        recv_parts_header(m);
    else if (kind == DC_K_PPART)
        recv_part(m);
    else
        recv_whole(m, kind);
    return true;
}

const dc_path_ops_t dc_ipc_staged_path = {
    .name    = "ipc staged",
    .kinds   = DC_KIND(DC_K_STAGED) | DC_KIND(DC_K_PHEAD) | DC_KIND(DC_K_PPART),
    .init    = staged_init,
    .fini    = staged_fini,
    .send    = staged_send,
    .recv    = staged_recv,
    .issue   = staged_issue,
    .release = dc_ipc_release,
};
