/* dc_ipc_direct.c — the ipc direct path (same node, other process, beyond the paper): the
 * receiver opens the sender's allocation itself, once per allocation id (a freed and re-made
 * allocation at the same address has a new id, so a stale mapping is never used), and copies
 * straight out of it; the acknowledgement frees the event and runs the sender's done callback.
 * TESS_IPC=auto uses it whenever every buffer has an allocation id (dc_path_choose). A send
 * from a stream with nothing left to run goes without an event. */
#include "dc_int.h"

#include <stdlib.h>

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

static tess_status_t direct_init(void)
{
    tess_status_t st = tess_hmap_init(&dc.exports, 64);
    if (st == TESS_OK)
        st = tess_hmap_init(&dc.maps, 64);
    return st;
}

static void direct_fini(void)
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
    tess_hmap_fini(&dc.maps);
    tess_hmap_fini(&dc.exports);
}

/* ---- the mapping cache (lock held) ------------------------------------------------------- */

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

/* s->stream: the sender's (or, for a waiting send, dc.stream after its ready event). */
static void issue_direct(const dc_send_t *s, const tess_gpu_ptr_info_t *info, uint64_t sent_id,
                         int ev)
{
    const tess_dev_buf_t *bufs  = s->bufs;
    int                   nbufs = s->nbufs;
    tess_gpu_stream_h     stream = s->stream;
    dc_ctl_t             *c;
    tess_msg_t           *m = dc_ctl_alloc(DC_K_DIRECT, nbufs, s->header_len, 0, &c);
    dc_ctl_fill(c, s, DC_K_DIRECT);
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
    dc_send_ctl(m, DC_K_DIRECT, s->dst_pe);
}

static tess_status_t direct_send(const dc_send_t *s)
{
    /* Direct from a stream with nothing left to run: the data is there already, so no event
     * orders the receiver's copy (one wait on an interprocess event less on its stream). */
    tess_status_t q = tess_gpu->stream_query(s->stream);
    if (q != TESS_OK && q != TESS_INPROGRESS)
        return q;
    int idle = q == TESS_OK;
    int ev   = -1;
    pthread_mutex_lock(&dc.lock);
    int ok = dc_ipc_take(0, 0, NULL, idle ? NULL : &ev, 1);
    if (ok) {
        dc.stats.direct++;
        if (idle)
            dc.stats.direct_idle++;
    }
    pthread_mutex_unlock(&dc.lock);
    uint64_t sent_id = s->done ? dc_sent_add(s->done, s->done_arg, NULL, NULL) : 0;
    if (!ok) {
        dc_defer(DC_K_DIRECT, s, sent_id);
        return TESS_OK;
    }
    issue_direct(s, s->info, sent_id, ev);
    return TESS_OK;
}

static int direct_issue(dc_pending_t *p)
{
    int                 ev = -1;
    tess_gpu_ptr_info_t info[TESS_DEV_MAX_BUFS];
    if (!dc_ipc_direct_ok(p->bufs, p->nbufs, info))
        tess_fatal("devcomm: a waiting direct IPC send lost its allocation");
    pthread_mutex_lock(&dc.lock);
    int ok = dc_ipc_take(0, 0, NULL, &ev, 0);
    if (ok)
        dc.stats.direct++;
    pthread_mutex_unlock(&dc.lock);
    if (!ok)
        return 0;
    dc_send_t s = dc_deferred_send(p);
    issue_direct(&s, info, p->sent_id, ev);
    return 1;
}

/* ---- receiving --------------------------------------------------------------------------- */

typedef struct direct_ack {
    int          src_pe;
    dc_ack_msg_t ack;
    dc_map_t    *maps[TESS_DEV_MAX_BUFS];
    int          nmaps;
} direct_ack_t;

/* The copies completed: the mappings are free to go, the sender is acknowledged. */
static void direct_ack_after_copy(void *arg)
{
    direct_ack_t *a = arg;
    if (a->nmaps) {
        pthread_mutex_lock(&dc.lock);
        for (int i = 0; i < a->nmaps; i++)
            a->maps[i]->refs--;
        pthread_mutex_unlock(&dc.lock);
    }
    dc_send_ack(a->src_pe, &a->ack);
    free(a);
}

static bool direct_recv(tess_msg_t *m, unsigned kind)
{
    TESS_HOP_MARK(TESS_HOP_CTL_RECV);
    const dc_ctl_t *c   = tess_msg_payload(m);
    int             src = tess_core_pe_process(m->hdr.src_pe);
    direct_ack_t   *a   = tess_calloc(1, sizeof(*a), "an IPC acknowledgement");
    if (!a)
        tess_fatal("out of memory receiving an IPC message");
    a->src_pe          = m->hdr.src_pe;
    a->ack.kind        = kind;
    a->ack.event       = c->event;
    a->ack.msg_id      = c->msg_id;
    const void *srcs[TESS_DEV_MAX_BUFS] = {0};

    pthread_mutex_lock(&dc.lock);
    tess_gpu_event_h ev = c->event >= 0 ? dc_ipc_peer_event(src, c->event) : NULL; /* NULL: idle */
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
    pthread_mutex_unlock(&dc.lock);

    dc_recv_t *r = dc_recv_begin(m, kind);
    TESS_HOP_MARK(TESS_HOP_POSTED);
    dc_ipc_copy_out(r, ev, srcs, direct_ack_after_copy, a);
    TESS_HOP_MARK(TESS_HOP_ISSUED);
    return true;
}

const dc_path_ops_t dc_ipc_direct_path = {
    .name    = "ipc direct",
    .kinds   = DC_KIND(DC_K_DIRECT),
    .init    = direct_init,
    .fini    = direct_fini,
    .send    = direct_send,
    .recv    = direct_recv,
    .issue   = direct_issue,
    .release = dc_ipc_release,
};
