/* dc_ipc.c — the IPC path between processes of a node.
 *
 * staged (the paper): each process exports, once at start, a device comm buffer and a pool of
 * interprocess events. The sender copies into a slot of its own buffer and records one of its
 * events; the receiver waits on that event, copies out, and acknowledges once its copy
 * completed, which frees the slot and the event.
 *
 * A staged message larger than a part (TESS_IPC_PART; by default half the comm buffer) moves
 * in parts: dc_parts.c. On the H200 with the 64 MiB buffer, 64 MiB messages moved at 0.36,
 * 0.45, 0.47 and 0.38 of a raw IPC copy with parts of 8, 16, 32 and 64 MiB in one run, and at
 * 0.446-0.457 (16 MiB, six runs) against 0.463-0.466 (32 MiB, four runs) in others.
 *
 * direct: the receiver opens the sender's allocation itself, once per allocation id (a freed
 * and re-made allocation at the same address has a new id, so a stale mapping is never used),
 * and copies straight out of it; the acknowledgement frees the event and runs the sender's
 * done callback. TESS_IPC=auto uses direct whenever every buffer has an allocation id. */
#include "dc_int.h"

#include <stdlib.h>

typedef struct dc_range {
    struct dc_range *next;
    size_t           off, len;
} dc_range_t;

typedef struct dc_map {
    void    *base;
    size_t   size;
    int      refs;
    int      proc;
    uint64_t sbase, ssize; /* the allocation at the sender */
    uint64_t last_use;
} dc_map_t;

typedef struct dc_export {
    tess_gpu_ipc_handle_t handle;
} dc_export_t;

/* The export record every process contributes to its node's table. */
typedef struct dc_export_rec {
    int32_t               rank, nipc;
    uint64_t              comm_size;
    tess_gpu_ipc_handle_t comm;
    /* nipc event handles follow */
} dc_export_rec_t;

/* ---- the comm buffer's free ranges (lock held) ------------------------------------------- */

static int range_alloc(size_t len, size_t *off_p)
{
    for (dc_range_t **pp = &dc.comm_free; *pp; pp = &(*pp)->next) {
        dc_range_t *r = *pp;
        if (r->len < len)
            continue;
        *off_p = r->off;
        r->off += len;
        r->len -= len;
        if (r->len == 0) {
            *pp = r->next;
            free(r);
        }
        return 1;
    }
    return 0;
}

static void range_free(size_t off, size_t len)
{
    dc_range_t **pp = &dc.comm_free;
    while (*pp && (*pp)->off < off)
        pp = &(*pp)->next;
    dc_range_t *next = *pp;
    dc_range_t *prev = pp == &dc.comm_free ? NULL
                                            : (dc_range_t *)((char *)pp - offsetof(dc_range_t, next));
    if (prev && prev->off + prev->len == off) {
        prev->len += len;
        if (next && prev->off + prev->len == next->off) {
            prev->len += next->len;
            prev->next = next->next;
            free(next);
        }
        return;
    }
    if (next && off + len == next->off) {
        next->off = off;
        next->len += len;
        return;
    }
    dc_range_t *r = tess_malloc(sizeof(*r), "a comm-buffer range");
    if (!r)
        tess_fatal("out of memory freeing a comm-buffer slot");
    r->off  = off;
    r->len  = len;
    r->next = next;
    *pp     = r;
}

/* ---- init / fini ------------------------------------------------------------------------- */

tess_status_t dc_ipc_init(MPI_Comm node_comm)
{
    tess_status_t    st;
    tess_gpu_props_t props;
    dc.peers = tess_calloc((size_t)tess_rt.size, sizeof(*dc.peers), "device-message peers");
    if (!dc.peers)
        return TESS_ERR_NO_MEMORY;
    for (int i = 0; i < tess_rt.size; i++)
        dc.peers[i].node_index = -1;
    st = tess_gpu->get_props(tess_gpu_device(), &props);
    if (st != TESS_OK)
        return st;
    int can_ipc = props.ipc && tess_cfg.comm_buf > 0;
    int all_can = 0;
    MPI_Allreduce(&can_ipc, &all_can, 1, MPI_INT, MPI_MIN, node_comm);
    if (!all_can) {
        tess_info("devcomm: no IPC on this node: same-node device messages use RDMA");
        return TESS_OK;
    }

    dc.comm_size = dc_align_up(tess_cfg.comm_buf);
    size_t part  = tess_cfg.ipc_part ? tess_cfg.ipc_part : dc.comm_size / 2;
    dc.part      = TESS_MAX((size_t)DC_ALIGN, TESS_MIN(part, dc.comm_size) / DC_ALIGN * DC_ALIGN);
    if ((st = dc_parts_init()) != TESS_OK)
        return st;
    if ((st = tess_gpu->mem_alloc(dc.comm_size, &dc.comm)) != TESS_OK)
        return st;
    dc.comm_free = tess_malloc(sizeof(dc_range_t), "the comm-buffer free list");
    if (!dc.comm_free)
        return TESS_ERR_NO_MEMORY;
    *dc.comm_free = (dc_range_t){NULL, 0, dc.comm_size};
    dc.nipc       = tess_cfg.ipc_events;
    dc.ipc_events = tess_calloc((size_t)dc.nipc, sizeof(*dc.ipc_events), "IPC events");
    dc.ipc_free   = tess_calloc((size_t)dc.nipc, sizeof(int), "the IPC event free list");
    if (!dc.ipc_events || !dc.ipc_free)
        return TESS_ERR_NO_MEMORY;
    for (int i = 0; i < dc.nipc; i++) {
        if ((st = tess_gpu->event_create(TESS_GPU_EVENT_IPC, &dc.ipc_events[i])) != TESS_OK)
            return st;
        dc.ipc_free[dc.ipc_nfree++] = dc.nipc - 1 - i;
    }

    /* Export once: the comm buffer and every event, gathered by the node. */
    size_t rec_size = sizeof(dc_export_rec_t) + (size_t)dc.nipc * sizeof(tess_gpu_ipc_handle_t);
    int    nnode;
    MPI_Comm_size(node_comm, &nnode);
    char *mine = tess_calloc(1, rec_size, "the IPC export record");
    char *all  = tess_malloc(rec_size * (size_t)nnode, "the node's IPC export table");
    if (!mine || !all) {
        free(mine);
        free(all);
        return TESS_ERR_NO_MEMORY;
    }
    dc_export_rec_t *me = (dc_export_rec_t *)mine;
    me->rank      = tess_rt.rank;
    me->nipc      = dc.nipc;
    me->comm_size = dc.comm_size;
    st = tess_gpu->ipc_mem_export(dc.comm, &me->comm);
    for (int i = 0; i < dc.nipc && st == TESS_OK; i++)
        st = tess_gpu->ipc_event_export(dc.ipc_events[i],
                                        (tess_gpu_ipc_handle_t *)(me + 1) + i);
    int ok = st == TESS_OK, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node_comm);
    if (all_ok)
        MPI_Allgather(mine, (int)rec_size, MPI_BYTE, all, (int)rec_size, MPI_BYTE, node_comm);
    free(mine);
    if (!all_ok) {
        free(all);
        return st != TESS_OK ? st : tess_error(TESS_ERR_GPU, "devcomm: IPC export failed on "
                                                "another process of this node");
    }
    for (int n = 0; n < nnode; n++) {
        dc_export_rec_t *r = (dc_export_rec_t *)(all + rec_size * (size_t)n);
        if (r->rank < 0 || r->rank >= tess_rt.size || r->nipc != dc.nipc) {
            free(all);
            return tess_error(TESS_ERR_MISMATCH, "devcomm: processes of a node disagree on "
                              "TESS_IPC_EVENTS");
        }
        dc_peer_t *p   = &dc.peers[r->rank];
        p->node_index  = n;
        p->comm_handle = r->comm;
        p->comm_size   = r->comm_size;
        p->nipc        = r->nipc;
        p->ev_handles  = tess_malloc((size_t)r->nipc * sizeof(*p->ev_handles), "IPC handles");
        p->events      = tess_calloc((size_t)r->nipc, sizeof(*p->events), "opened IPC events");
        if (!p->ev_handles || !p->events) {
            free(all);
            return TESS_ERR_NO_MEMORY;
        }
        memcpy(p->ev_handles, r + 1, (size_t)r->nipc * sizeof(*p->ev_handles));
    }
    free(all);
    return TESS_OK;
}

void dc_ipc_fini(void)
{
    size_t   it = 0;
    uint64_t key;
    void    *val;
    while (tess_hmap_next(&dc.maps, &it, &key, &val)) {
        dc_map_t *mp = val;
        tess_gpu->ipc_mem_close(mp->base);
        free(mp);
    }
    it = 0;
    while (tess_hmap_next(&dc.exports, &it, &key, &val))
        free(val);
    dc_parts_fini();
    for (int i = 0; dc.peers && i < tess_rt.size; i++) {
        dc_peer_t *p = &dc.peers[i];
        if (p->comm && i != tess_rt.rank)
            tess_gpu->ipc_mem_close(p->comm);
        for (int e = 0; p->events && e < p->nipc; e++)
            if (p->events[e])
                tess_gpu->ipc_event_close(p->events[e]);
        free(p->events);
        free(p->ev_handles);
        free(p->bounce_rkey);
    }
    free(dc.peers);
    for (int i = 0; i < dc.nipc; i++)
        if (dc.ipc_events[i])
            tess_gpu->event_destroy(dc.ipc_events[i]);
    free(dc.ipc_events);
    free(dc.ipc_free);
    while (dc.comm_free) {
        dc_range_t *r = dc.comm_free;
        dc.comm_free  = r->next;
        free(r);
    }
    if (dc.comm)
        tess_gpu->mem_free(dc.comm);
}

/* ---- peers (lock held) ------------------------------------------------------------------- */

void *dc_ipc_peer_comm(int src)
{
    dc_peer_t *p = &dc.peers[src];
    if (!p->comm && tess_gpu->ipc_mem_open(&p->comm_handle, &p->comm) != TESS_OK)
        tess_fatal("devcomm: cannot open the comm buffer of process %d: %s", src,
                   tess_error_detail());
    return p->comm;
}

tess_gpu_event_h dc_ipc_peer_event(int src, int idx)
{
    dc_peer_t *p = &dc.peers[src];
    if (!p->events[idx] && tess_gpu->ipc_event_open(&p->ev_handles[idx], &p->events[idx]) != TESS_OK)
        tess_fatal("devcomm: cannot open IPC event %d of process %d: %s", idx, src,
                   tess_error_detail());
    return p->events[idx];
}

/* The mapping of (src, alloc_id), opened on first use; its reference count goes up. */
static dc_map_t *map_get(int src, const dc_rec_direct_t *rec)
{
    uint64_t  key = dc_proc_key(src, rec->alloc_id);
    dc_map_t *mp  = tess_hmap_get(&dc.maps, key);
    if (mp) {
        dc.stats.map_hits++;
    } else {
        /* A new allocation of src where an old one was: the old one was freed, so its mapping
         * goes (the host backend would map the same addresses again; CUDA keeps freed memory
         * alive while it is mapped). Past the cache's size, any idle mapping goes. */
        size_t   it = 0;
        uint64_t k;
        void    *v;
        while (tess_hmap_next(&dc.maps, &it, &k, &v)) {
            dc_map_t *c       = v;
            int       overlap = c->proc == src && c->sbase < rec->sbase + rec->ssize &&
                                rec->sbase < c->sbase + c->ssize;
            if (c->refs || (!overlap && dc.maps.count < DC_MAP_CACHE))
                continue;
            tess_hmap_remove(&dc.maps, k);
            tess_gpu->ipc_mem_close(c->base);
            free(c);
            it = 0; /* removal moves entries: scan again */
        }
        mp = tess_calloc(1, sizeof(*mp), "an IPC mapping");
        if (!mp || tess_gpu->ipc_mem_open(&rec->handle, &mp->base) != TESS_OK)
            tess_fatal("devcomm: cannot open an allocation of process %d: %s", src,
                       tess_error_detail());
        mp->proc  = src;
        mp->sbase = rec->sbase;
        mp->ssize = rec->ssize;
        tess_gpu_ptr_info_t info;
        if (tess_gpu->ptr_query(mp->base, &info) == TESS_OK)
            mp->size = info.size;
        if (tess_hmap_put(&dc.maps, key, mp) != TESS_OK)
            tess_fatal("out of memory caching an IPC mapping");
        dc.stats.map_opens++;
    }
    mp->refs++;
    mp->last_use = ++dc.map_clock;
    return mp;
}

/* ---- sending ----------------------------------------------------------------------------- */

/* Every non-empty buffer is device memory with an allocation id: direct IPC can read it. */
static int ipc_direct_ok(const tess_dev_buf_t *bufs, int nbufs, tess_gpu_ptr_info_t *info)
{
    for (int i = 0; i < nbufs; i++) {
        info[i] = (tess_gpu_ptr_info_t){0};
        if (!bufs[i].size)
            continue;
        if (tess_gpu->ptr_query(bufs[i].ptr, &info[i]) != TESS_OK || !info[i].is_device ||
            !info[i].alloc_id || !info[i].base)
            return 0;
    }
    return 1;
}

static size_t staged_total(const tess_dev_buf_t *bufs, int nbufs)
{
    size_t total = 0;
    for (int i = 0; i < nbufs; i++)
        total += dc_align_up(bufs[i].size);
    return total;
}

static void issue_staged(int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                         size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                         tess_gpu_stream_h stream, uint64_t sent_id, size_t off, int ev)
{
    dc_ctl_t   *c;
    tess_msg_t *m = dc_ctl_alloc(DC_K_STAGED, nbufs, header_len, 0, &c);
    dc_ctl_fill(c, a0, a1, bufs, nbufs, header, header_len, DC_K_STAGED);
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
    dc_send_ctl(m, DC_K_STAGED, dst_pe);
    TESS_HOP_MARK(TESS_HOP_CTL_SENT);
}

static const tess_gpu_ipc_handle_t *export_handle(const tess_gpu_ptr_info_t *info)
{
    dc_export_t *x = tess_hmap_get(&dc.exports, info->alloc_id);
    if (x)
        return &x->handle;
    if (dc.exports.count > 4096) {
        size_t   it = 0;
        uint64_t k;
        void    *v;
        while (tess_hmap_next(&dc.exports, &it, &k, &v))
            free(v);
        tess_hmap_fini(&dc.exports);
        tess_hmap_init(&dc.exports, 64);
    }
    x = tess_malloc(sizeof(*x), "an exported handle");
    if (!x || tess_gpu->ipc_mem_export(info->base, &x->handle) != TESS_OK ||
        tess_hmap_put(&dc.exports, info->alloc_id, x) != TESS_OK)
        tess_fatal("devcomm: cannot export an allocation for IPC: %s", tess_error_detail());
    return &x->handle;
}

static void issue_direct(int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                         size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                         const tess_gpu_ptr_info_t *info, tess_gpu_stream_h stream,
                         uint64_t sent_id, int ev)
{
    dc_ctl_t   *c;
    tess_msg_t *m = dc_ctl_alloc(DC_K_DIRECT, nbufs, header_len, 0, &c);
    dc_ctl_fill(c, a0, a1, bufs, nbufs, header, header_len, DC_K_DIRECT);
    c->msg_id            = sent_id;
    c->event             = ev;
    dc_rec_direct_t *rec = dc_recs(c);
    pthread_mutex_lock(&dc.lock);
    for (int i = 0; i < nbufs; i++) {
        if (!bufs[i].size)
            continue;
        rec[i].handle   = *export_handle(&info[i]);
        rec[i].alloc_id = info[i].alloc_id;
        rec[i].offset   = (uint64_t)((char *)bufs[i].ptr - (char *)info[i].base);
        rec[i].sbase    = (uint64_t)(uintptr_t)info[i].base;
        rec[i].ssize    = info[i].size;
    }
    pthread_mutex_unlock(&dc.lock);
    if (ev >= 0 && tess_gpu->event_record(dc.ipc_events[ev], stream) != TESS_OK)
        tess_fatal("devcomm: recording an IPC event failed: %s", tess_error_detail());
    dc_send_ctl(m, DC_K_DIRECT, dst_pe);
}

/* Take an event (unless ev_p is NULL: none needed), and for staged a slot, if nothing waits
 * before us. Lock held. */
int dc_ipc_take(int staged, size_t total, size_t *off_p, int *ev_p, int fifo)
{
    if ((fifo && dc.pending) || (ev_p && dc.ipc_nfree == 0))
        return 0;
    if (staged && !range_alloc(total, off_p))
        return 0;
    if (ev_p)
        *ev_p = dc.ipc_free[--dc.ipc_nfree];
    return 1;
}

static void defer(int kind, int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                  size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                  tess_gpu_stream_h stream, uint64_t sent_id)
{
    dc_pending_t *p = tess_calloc(1, sizeof(*p), "a waiting device message");
    if (!p || (header_len && !(p->header = tess_malloc(header_len, "a waiting header"))))
        tess_fatal("out of memory queueing a device message");
    *p = (dc_pending_t){.kind = kind, .dst_pe = dst_pe, .a0 = a0, .a1 = a1, .nbufs = nbufs,
                        .sent_id = sent_id, .header = p->header, .header_len = header_len};
    memcpy(p->bufs, bufs, (size_t)nbufs * sizeof(*bufs));
    if (header_len)
        memcpy(p->header, header, header_len);
    if (dc_event_get(&p->ready) != TESS_OK ||
        tess_gpu->event_record(p->ready, stream) != TESS_OK)
        tess_fatal("devcomm: cannot record a ready event: %s", tess_error_detail());
    dc_pending_push(p);
}

tess_status_t dc_ipc_send(int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                          size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                          tess_gpu_stream_h stream, tess_dev_done_fn_t done, void *done_arg)
{
    if (!dc.comm)
        return dc_rdma_send(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream, done,
                            done_arg);
    tess_gpu_ptr_info_t info[TESS_DEV_MAX_BUFS];
    size_t              total  = staged_total(bufs, nbufs);
    int                 direct = dc.ipc_mode != 1 && ipc_direct_ok(bufs, nbufs, info);
    if (dc.ipc_mode == 2 && !direct)
        tess_debug("devcomm: TESS_IPC=direct, but a buffer has no allocation id: staged");
    if (!direct && total > dc.part)
        return dc_parts_send(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream, done,
                             done_arg);
    /* Direct from a stream with nothing left to run: the data is there already, so no event
     * orders the receiver's copy (one wait on an interprocess event less on its stream). */
    int idle = 0;
    if (direct) {
        tess_status_t q = tess_gpu->stream_query(stream);
        if (q != TESS_OK && q != TESS_INPROGRESS)
            return q;
        idle = q == TESS_OK;
    }
    size_t off = 0;
    int    ev  = -1;
    pthread_mutex_lock(&dc.lock);
    int ok = dc_ipc_take(!direct, total, &off, idle ? NULL : &ev, 1);
    if (ok) {
        if (direct)
            dc.stats.direct++;
        else
            dc.stats.staged++;
        if (idle)
            dc.stats.direct_idle++;
    }
    pthread_mutex_unlock(&dc.lock);
    uint64_t sent_id = done ? dc_sent_add(done, done_arg, NULL) : 0;
    if (!ok) {
        defer(direct ? DC_K_DIRECT : DC_K_STAGED, dst_pe, a0, a1, header, header_len, bufs,
              nbufs, stream, sent_id);
        return TESS_OK;
    }
    if (direct)
        issue_direct(dst_pe, a0, a1, header, header_len, bufs, nbufs, info, stream, sent_id, ev);
    else
        issue_staged(dst_pe, a0, a1, header, header_len, bufs, nbufs, stream,
                     sent_id, off, ev);
    return TESS_OK;
}

int dc_ipc_issue_pending(dc_pending_t *p)
{
    if (p->kind == DC_K_PPART)
        return dc_parts_issue(p->ps);
    size_t off = 0;
    int    ev  = -1;
    int    staged = p->kind == DC_K_STAGED;
    tess_gpu_ptr_info_t info[TESS_DEV_MAX_BUFS];
    if (!staged && !ipc_direct_ok(p->bufs, p->nbufs, info))
        tess_fatal("devcomm: a waiting direct IPC send lost its allocation");
    pthread_mutex_lock(&dc.lock);
    int ok = dc_ipc_take(staged, staged_total(p->bufs, p->nbufs), &off, &ev, 0);
    if (ok) {
        if (staged)
            dc.stats.staged++;
        else
            dc.stats.direct++;
    }
    pthread_mutex_unlock(&dc.lock);
    if (!ok)
        return 0;
    /* Ordered after the work that preceded the send on the sender's stream. */
    if (tess_gpu->stream_wait_event(dc.stream, p->ready) != TESS_OK)
        tess_fatal("devcomm: stream wait failed: %s", tess_error_detail());
    if (staged)
        issue_staged(p->dst_pe, p->a0, p->a1, p->header, p->header_len, p->bufs,
                     p->nbufs, dc.stream, p->sent_id, off, ev);
    else
        issue_direct(p->dst_pe, p->a0, p->a1, p->header, p->header_len, p->bufs, p->nbufs,
                     info, dc.stream, p->sent_id, ev);
    return 1;
}

/* ---- receiving --------------------------------------------------------------------------- */

typedef struct ipc_ack_cont {
    int          src_pe;
    dc_ack_msg_t ack;
    dc_map_t    *maps[TESS_DEV_MAX_BUFS];
    int          nmaps;
} ipc_ack_cont_t;

static void ipc_ack_after_copy(void *arg)
{
    ipc_ack_cont_t *a = arg;
    if (a->nmaps) {
        pthread_mutex_lock(&dc.lock);
        for (int i = 0; i < a->nmaps; i++)
            a->maps[i]->refs--;
        pthread_mutex_unlock(&dc.lock);
    }
    dc_send_ack(a->src_pe, &a->ack);
    free(a);
}

void dc_ipc_ack_after(tess_gpu_stream_h stream, int src_pe, const dc_ack_msg_t *ack)
{
    ipc_ack_cont_t *a = tess_calloc(1, sizeof(*a), "an IPC acknowledgement");
    if (!a)
        tess_fatal("out of memory receiving an IPC message");
    a->src_pe = src_pe;
    a->ack    = *ack;
    if (tess_core_gpu_then_event(stream, ipc_ack_after_copy, a) != TESS_OK)
        tess_fatal("cannot wait for an IPC copy: %s", tess_error_detail());
}

void dc_ipc_recv(tess_msg_t *m, unsigned kind)
{
    if (kind == DC_K_PHEAD || kind == DC_K_PPART) {
        dc_parts_recv(m, kind);
        return;
    }
    TESS_HOP_MARK(TESS_HOP_CTL_RECV);
    const dc_ctl_t *c   = tess_msg_payload(m);
    int             src = tess_core_pe_process(m->hdr.src_pe);
    ipc_ack_cont_t *a   = tess_calloc(1, sizeof(*a), "an IPC acknowledgement");
    if (!a)
        tess_fatal("out of memory receiving an IPC message");
    a->src_pe          = m->hdr.src_pe;
    a->ack.kind        = kind;
    a->ack.event       = c->event;
    a->ack.msg_id      = kind == DC_K_DIRECT ? c->msg_id : 0;
    const void *srcs[TESS_DEV_MAX_BUFS] = {0};

    pthread_mutex_lock(&dc.lock);
    tess_gpu_event_h ev = c->event >= 0 ? dc_ipc_peer_event(src, c->event) : NULL; /* NULL: idle */
    if (kind == DC_K_STAGED) {
        const dc_rec_staged_t *rec  = dc_recs((dc_ctl_t *)c);
        char                  *base = dc_ipc_peer_comm(src);
        for (uint32_t i = 0; i < c->nbufs; i++) {
            srcs[i] = base + rec[i].offset;
            a->ack.size += dc_align_up(c->sizes[i]);
        }
        a->ack.offset = c->nbufs ? rec[0].offset : 0;
    } else {
        const dc_rec_direct_t *rec = dc_recs((dc_ctl_t *)c);
        for (uint32_t i = 0; i < c->nbufs; i++) {
            if (!c->sizes[i])
                continue;
            dc_map_t *mp = map_get(src, &rec[i]);
            if (mp->size && (rec[i].offset > mp->size || c->sizes[i] > mp->size - rec[i].offset)) {
                pthread_mutex_unlock(&dc.lock);
                tess_fatal("device-message control message from PE %d: buffer %u (%llu bytes at "
                           "offset %llu) lies outside its allocation of %zu bytes", m->hdr.src_pe,
                           i, (unsigned long long)c->sizes[i],
                           (unsigned long long)rec[i].offset, mp->size);
            }
            srcs[i]               = (char *)mp->base + rec[i].offset;
            a->maps[a->nmaps++]   = mp;
        }
    }
    pthread_mutex_unlock(&dc.lock);

    dc_recv_t *r = dc_recv_begin(m, kind);
    TESS_HOP_MARK(TESS_HOP_POSTED);
    if (ev && tess_gpu->stream_wait_event(r->stream, ev) != TESS_OK)
        tess_fatal("devcomm: stream wait failed: %s", tess_error_detail());
    /* The last copy carries the acknowledgement (a small one signals it from the copy itself)
     * and a delivery after completion joins it. */
    int last = -1;
    for (int i = 0; i < r->m.nbufs; i++)
        if (r->sizes[i])
            last = i;
    r->marked = last >= 0;
    int tr    = dc_trace_copy_begin(r->stream);
    for (int i = 0; i < r->m.nbufs; i++) {
        tess_status_t st = TESS_OK;
        if (i == last)
            st = tess_core_gpu_copy_then(r->dst[i], srcs[i], r->sizes[i], r->stream,
                                         ipc_ack_after_copy, a);
        else if (r->sizes[i])
            st = tess_gpu->memcpy_async(r->dst[i], srcs[i], r->sizes[i], r->stream);
        if (st != TESS_OK)
            tess_fatal("devcomm: IPC copy failed: %s", tess_error_detail());
    }
    dc_trace_copy_end(tr, r->stream, r->trace_path, dc_recv_bytes(r));
    if (last < 0 && tess_core_gpu_then_event(r->stream, ipc_ack_after_copy, a) != TESS_OK)
        tess_fatal("cannot wait for an IPC copy: %s", tess_error_detail());
    dc_recv_finish(r);
    TESS_HOP_MARK(TESS_HOP_ISSUED);
}

void dc_ipc_release(const dc_ack_msg_t *ack)
{
    pthread_mutex_lock(&dc.lock);
    if (ack->kind == DC_K_STAGED && ack->size)
        range_free(ack->offset, ack->size);
    int idle = ack->kind == DC_K_DIRECT && ack->event == -1; /* sent without an event */
    if (!idle && (ack->event < 0 || ack->event >= dc.nipc || dc.ipc_nfree >= dc.nipc)) {
        pthread_mutex_unlock(&dc.lock);
        tess_fatal("devcomm: an acknowledgement for IPC event %d, which is not in use",
                   ack->event);
    }
    if (!idle)
        dc.ipc_free[dc.ipc_nfree++] = ack->event;
    pthread_mutex_unlock(&dc.lock);
}
