/* dc_ipc.c — what the IPC paths (dc_ipc_staged.c, dc_ipc_direct.c) share: the node's export
 * table (each process's comm buffer and interprocess events, exported once at start), the
 * comm buffer's slots and the event pool, the peers' buffers and events opened on first use,
 * and the receiver's copies out of a peer's memory. */
#include "dc_int.h"

#include <stdlib.h>

typedef struct dc_range {
    struct dc_range *next;
    size_t           off, len;
} dc_range_t;

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

/* ---- sending ----------------------------------------------------------------------------- */

/* Every non-empty buffer is device memory with an allocation id: direct IPC can read it. */
int dc_ipc_direct_ok(const tess_dev_buf_t *bufs, int nbufs, tess_gpu_ptr_info_t *info)
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

size_t dc_ipc_staged_total(const tess_dev_buf_t *bufs, int nbufs)
{
    size_t total = 0;
    for (int i = 0; i < nbufs; i++)
        total += dc_align_up(bufs[i].size);
    return total;
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

/* ---- receiving --------------------------------------------------------------------------- */

void dc_ipc_copy_out(dc_recv_t *r, tess_gpu_event_h ev, const void *const *srcs,
                     tess_gpu_cont_fn_t fn, void *arg)
{
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
            st = tess_core_gpu_copy_then(r->dst[i], srcs[i], r->sizes[i], r->stream, fn, arg);
        else if (r->sizes[i])
            st = tess_gpu->memcpy_async(r->dst[i], srcs[i], r->sizes[i], r->stream);
        if (st != TESS_OK)
            tess_fatal("devcomm: IPC copy failed: %s", tess_error_detail());
    }
    dc_trace_copy_end(tr, r->stream, r->trace_path, dc_recv_bytes(r));
    if (last < 0 && tess_core_gpu_then_event(r->stream, fn, arg) != TESS_OK)
        tess_fatal("cannot wait for an IPC copy: %s", tess_error_detail());
    dc_recv_finish(r);
}

/* ---- acknowledgements -------------------------------------------------------------------- */

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
