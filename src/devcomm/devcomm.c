/* devcomm.c — the device-message layer: its set-up, the path a message takes (dc_path_choose),
 * the send entry point, validation and dispatch of control messages to the paths' tables, and
 * the counters. What the paths share is in dc_common.c and dc_ipc.c; each path is a file of its
 * own (dc_int.h lists them). */
#include "dc_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

dc_state_t dc;

/* Every path, in set-up order (taken down in the reverse order). */
const dc_path_ops_t *const dc_paths[] = {&dc_d2d_path, &dc_ipc_staged_path, &dc_ipc_direct_path,
                                         &dc_rdma_direct_path, &dc_rdma_staged_path};
const int dc_npaths = (int)(sizeof(dc_paths) / sizeof(dc_paths[0]));

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
    stats_p->d2d_same_stream  = n[DC_C_D2D_SAME_STREAM];
    stats_p->d2d_in_place     = n[DC_C_IN_PLACE];
    stats_p->rdma_idle_sends  = n[DC_C_RDMA_IDLE_SENDS];
    stats_p->rdma_idle_recvs  = n[DC_C_RDMA_IDLE_RECVS];
    stats_p->rdma_quiet_recvs = n[DC_C_RDMA_QUIET_RECVS];
    stats_p->rdma_fast_recvs  = n[DC_C_RDMA_FAST_RECVS];
    stats_p->rdma_recv_queries = n[DC_C_RDMA_RECV_QUERIES];
    stats_p->rdma_spec_idle    = n[DC_C_RDMA_SPEC_IDLE];
    stats_p->rdma_spec_busy    = n[DC_C_RDMA_SPEC_BUSY];
    stats_p->rdma_spec_spent   = n[DC_C_RDMA_SPEC_SPENT];
    stats_p->rdma_acks        = n[DC_C_RDMA_ACKS];
    stats_p->rdma_acked       = n[DC_C_RDMA_ACKED];
    stats_p->am_sends         = tess_net_am_sends();
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
    case DC_K_RACK: {
        if (size < sizeof(dc_rack_msg_t))
            return dc_corrupt(m, "acknowledgement of RDMA sends shorter than its count");
        const dc_rack_msg_t *a = tess_msg_payload((tess_msg_t *)m);
        if (a->n == 0 || a->n > DC_RACK_MAX ||
            size != sizeof(*a) + (size_t)a->n * sizeof(uint64_t))
            return dc_corrupt(m, "acknowledgement of RDMA sends: count and size disagree");
        return TESS_OK;
    }
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

/* ---- sending ----------------------------------------------------------------------------- */

/* The path that carries a message on route `path` (tess_dc_path_to): ipc direct when every
 * buffer has an allocation the receiver can open (TESS_IPC=auto|direct; info[] is filled),
 * else ipc staged; ipc goes by RDMA where the node has no IPC; rdma staged where this UCX (or a
 * peer's) cannot reach device memory. */
static const dc_path_ops_t *dc_path_choose(int path, const tess_dev_buf_t *bufs, int nbufs,
                                           tess_gpu_ptr_info_t *info, bool *direct_p)
{
    *direct_p = false;
    if (path == TESS_DC_D2D)
        return &dc_d2d_path;
    if (path == TESS_DC_IPC && dc.comm) {
        *direct_p = dc.ipc_mode != 1 && dc_ipc_direct_ok(bufs, nbufs, info);
        if (dc.ipc_mode == 2 && !*direct_p)
            tess_debug("devcomm: TESS_IPC=direct, but a buffer has no allocation id: staged");
        return *direct_p ? &dc_ipc_direct_path : &dc_ipc_staged_path;
    }
    return dc.rdma_staged ? &dc_rdma_staged_path : &dc_rdma_direct_path;
}

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
    tess_gpu_ptr_info_t  info[TESS_DEV_MAX_BUFS];
    bool                 direct;
    const dc_path_ops_t *ops = dc_path_choose(path, bufs, nbufs, info, &direct);
    dc_send_t s = {.dst_pe = dst_pe, .a0 = a0, .a1 = a1, .header = header,
                   .header_len = header_len, .bufs = bufs, .nbufs = nbufs, .stream = stream,
                   .done = done, .done_arg = done_arg, .info = direct ? info : NULL};
    return ops->send(&s);
}

/* ---- the control-message handler --------------------------------------------------------- */

/* Before a message of another kind (or handler), the paths that hold messages back run them. */
static void dc_flush_except(unsigned kind)
{
    for (int i = 0; i < dc_npaths; i++)
        if (dc_paths[i]->flush && !(dc_paths[i]->kinds & DC_KIND(kind)))
            dc_paths[i]->flush();
}

static void dc_flush(void)
{
    dc_flush_except(DC_K_MAX);
}

/* The acknowledgements a path takes back: of the kinds that hold staging resources (direct
 * RDMA sends have their own, DC_K_RACK). */
#define DC_ACK_KINDS (DC_KIND(DC_K_STAGED) | DC_KIND(DC_K_DIRECT) | DC_KIND(DC_K_CHUNK))

static bool dc_ctl_handler(tess_msg_t *m)
{
    tess_status_t st = tess_dc_validate(m);
    if (st != TESS_OK)
        tess_fatal("%s", tess_error_detail());
    unsigned kind = m->hdr.flags;
    dc_flush_except(kind);
    switch (kind) {
    case DC_K_GOT:
        dc_notice_run(m);
        break;
    case DC_K_ACK: {
        dc_ack_msg_t ack;
        int          src_pe = m->hdr.src_pe;
        memcpy(&ack, tess_msg_payload(m), sizeof(ack));
        tess_core_msg_free(m);
        const dc_path_ops_t *ops = dc_path_of(ack.kind);
        if (ack.kind >= DC_K_MAX || !(DC_ACK_KINDS & DC_KIND(ack.kind)) || !ops ||
            !ops->release)
            tess_fatal("devcomm: an acknowledgement of unknown kind %u from PE %d", ack.kind,
                       src_pe);
        ops->release(&ack);
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
    default:
        return dc_path_of(kind)->recv(m, kind);
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
    unsigned n = 0;
    for (int i = 0; i < dc_npaths; i++)
        if (dc_paths[i]->progress)
            n += dc_paths[i]->progress();
    return n;
}

static void dc_idle(tess_pe_t *pe)
{
    for (int i = 0; i < dc_npaths; i++)
        if (dc_paths[i]->idle)
            dc_paths[i]->idle(pe);
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

/* RDMA direct or staged (dc.rdma_staged): both ends of a transfer must agree, so every process
 * stages if any must. */
static tess_status_t dc_rdma_choose(void)
{
    int want_staged = !strcmp(tess_cfg.rdma, "staged") ||
                      (!strcmp(tess_cfg.rdma, "auto") && !tess_net_mem_type_supported(dc_mem_type()));
    int cannot = !tess_net_mem_type_supported(dc_mem_type());
    if (!strcmp(tess_cfg.rdma, "direct") && cannot)
        return tess_error(TESS_ERR_UNSUPPORTED, "TESS_RDMA=direct, but this UCX cannot access "
                          "%s memory (UCX built without that transport; tessera-info lists "
                          "them, tools/build-ucx.sh builds one with CUDA)",
                          tess_gpu_backend_name());
    MPI_Allreduce(&want_staged, &dc.rdma_staged, 1, MPI_INT, MPI_MAX, tess_rt.comm);
    if (dc.rdma_staged && !strcmp(tess_cfg.rdma, "auto") && tess_rt.rank == 0)
        tess_warn("devcomm: TESS_RDMA=auto: %s; RDMA between nodes goes through pinned host "
                  "buffers (staged)", cannot ? "this UCX cannot access device memory directly"
                                             : "another process's UCX cannot access device memory");
    long chunk[2] = {-(long)tess_cfg.bounce_chunk, (long)tess_cfg.bounce_chunk};
    MPI_Allreduce(MPI_IN_PLACE, chunk, 2, MPI_LONG, MPI_MAX, tess_rt.comm);
    if (-chunk[0] != chunk[1] || tess_cfg.bounce_chunk < 4096)
        return tess_error(TESS_ERR_INVALID, "TESS_BOUNCE_CHUNK must be the same everywhere and "
                          ">= 4096 (it is %zu here)", tess_cfg.bounce_chunk);
    return TESS_OK;
}

/* Take down paths [0, n) in the reverse order. */
static void dc_paths_fini(int n)
{
    while (n-- > 0)
        if (dc_paths[n]->fini)
            dc_paths[n]->fini();
}

tess_status_t tess_devcomm_init(void)
{
    tess_status_t st;
    int           npaths = 0;
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
    for (int i = 0; i < dc_npaths; i++)
        for (unsigned k = 0; k < DC_K_MAX; k++)
            if (dc_paths[i]->kinds & DC_KIND(k))
                dc.by_kind[k] = dc_paths[i];
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
    if ((st = tess_hmap_init(&dc.sent, 64)) != TESS_OK)
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
    if ((st = dc_rdma_choose()) != TESS_OK)
        goto err_ipc_fini;
    for (; npaths < dc_npaths; npaths++)
        if (dc_paths[npaths]->init && (st = dc_paths[npaths]->init()) != TESS_OK)
            goto err_paths_fini;
    st = tess_core_handler_register("devcomm", dc_ctl_handler, &dc.h_ctl);
    if (st == TESS_OK)
        tess_core_handler_set_flush(dc.h_ctl, dc_flush);
    if (st != TESS_OK)
        goto err_paths_fini;
    static const tess_core_layer_t layer = {.name = "devcomm", .progress = dc_progress,
                                             .idle = dc_idle, .busy = dc_busy};
    st = tess_core_layer_add(&layer);
    if (st != TESS_OK)
        goto err_paths_fini;
    return TESS_OK;

err_paths_fini:
    dc_paths_fini(npaths);
err_ipc_fini:
    dc_ipc_fini();
err_destroy_stream:
    free(dc.rb_streams);
    free(dc.ready_streams);
    free(dc.pes);
    tess_hmap_fini(&dc.sent);
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
    dc_pending_drop();
    dc_paths_fini(dc_npaths);
    dc_ipc_fini();
    dc_caches_fini();
    free(dc.pes);
    dc.pes = NULL;
    if (dc.sent.count)
        tess_warn("devcomm: %zu device messages were never acknowledged", dc.sent.count);
    size_t   it = 0;
    uint64_t key;
    void    *val;
    while (tess_hmap_next(&dc.sent, &it, &key, &val))
        free(val);
    tess_hmap_fini(&dc.sent);
    dc_pe_streams_destroy(dc.rb_streams);
    dc_pe_streams_destroy(dc.ready_streams);
    tess_gpu->stream_destroy(dc.stream);
    pthread_mutex_destroy(&dc.pump_lock);
    pthread_mutex_destroy(&dc.lock);
    memset(&dc, 0, sizeof(dc));
}
