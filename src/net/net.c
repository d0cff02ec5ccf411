/*
 * net.c — UCX context, workers ("lanes") and endpoints; active messages delivered in send order
 * per source lane (a rendezvous payload holds back later messages of its source until it has
 * arrived); the lane locks and blocking progress.
 *
 * Lanes: one UCX worker per process (every PE sends through it, behind its lock), or one per PE
 * (TESS_NET_LANES=0): lane l of every process talks only to lane l of the others, a PE sends on
 * its own lane, progresses its own lane first and, when that had nothing and the caller asks
 * (a PE idle for TESS_NET_SERVE_US), the others (trylock), so that a PE busy in a long entry
 * does not hold up its lane's traffic. Every field of a lane
 * is guarded by its lock, except its send queue: a PE that finds its lane locked queues the send
 * (lock-free) and goes on, and whoever holds the lock posts the queue, in order, as it unlocks;
 * no PE sleeps on a lane's lock to send (they did, and the message rate fell 16 x past one PE per
 * process). The context's registrations by ctx_lock.
 */
#include "net_int.h"
#include "peer.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>
#include <unistd.h>

net_state_t tess_net_state_ = {.efd = -1, .epfd = -1};
_Thread_local int         tess_net_my_lane_;
_Thread_local net_lane_t *tess_net_delivering_;
#if defined(__SANITIZE_THREAD__)
_Atomic unsigned long tess_net_tsan_edge_;
#endif

void tess_net_set_lane(int lane)
{
    tess_net_my_lane_ = lane >= 0 ? lane : 0;
}

int tess_net_lanes(void)
{
    return net.nlanes;
}

void tess_net_eager_stats(size_t *limit_p, uint64_t *sends_p, uint64_t *bytes_p)
{
    uint64_t n = 0, bytes = 0;
    for (int i = 0; i < net.nlanes; i++) {
        n += atomic_load_explicit(&net.lanes[i].eager_sends, memory_order_relaxed);
        bytes += atomic_load_explicit(&net.lanes[i].eager_bytes, memory_order_relaxed);
    }
    *limit_p = net.eager_node;
    *sends_p = n;
    *bytes_p = bytes;
}

/* Add to a lane's counter: only its lock holder writes it, so no read-modify-write. */
static inline void net_count(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

uint64_t tess_net_am_sends(void)
{
    uint64_t n = 0;
    for (int i = 0; i < net.nlanes; i++)
        n += atomic_load_explicit(&net.lanes[i].am_sends, memory_order_relaxed);
    return n;
}

int tess_net_rank(void) { return net.rank; }
int tess_net_size(void) { return net.size; }

net_op_t *net_op_get(net_lane_t *l, tess_net_done_fn_t done, void *arg)
{
    net_op_t *op = l->free_ops;
    if (op)
        l->free_ops = op->next;
    else if (!(op = tess_malloc(sizeof(*op), "a network operation record")))
        return NULL;
    op->lane = l;
    op->done = done;
    op->arg  = arg;
    op->peer = -1;
    op->rkey = NULL;
    op->kept = NULL;
    return op;
}

void net_op_put(net_op_t *op)
{
    op->next           = op->lane->free_ops;
    op->lane->free_ops = op;
}

/* ---- in-order delivery ------------------------------------------------------------------- */

static void net_deliver(net_lane_t *l, int src, unsigned id, const void *hdr, size_t hdr_len,
                        const void *data, size_t len, void *desc)
{
    net_peer_t *p = &l->peers[src];
    p->recv_seq++;
    l->delivering_peer = src;
    l->delivery_recv   = 0;
    tess_net_delivering_ = l;
    net.am[id].fn(net.am[id].arg, hdr, hdr_len, data, len, desc);
    tess_net_delivering_ = NULL;
    l->delivering_peer = -1;
    if (desc && !l->delivery_recv)
        tess_fatal("active message %u from process %d: the rendezvous payload was not received",
                   id, src);
}

static void net_deliver_held(net_lane_t *l, int src)
{
    net_peer_t *p = &l->peers[src];
    while (!p->rndv_pending && p->held && p->held->seq == p->recv_seq) {
        net_held_t *h = p->held;
        p->held       = h->next;
        net_deliver(l, src, h->id, h->hdr, h->hdr_len, h->data, h->len, h->desc);
        free(h->hdr);
        free(h->data);
        free(h);
    }
}

static tess_status_t net_hold(net_lane_t *l, int src, unsigned id, const void *hdr, size_t hdr_len,
                              const void *data, size_t len, void *desc)
{
    net_held_t *h = tess_calloc(1, sizeof(*h), "a held active message");
    if (!h)
        return TESS_ERR_NO_MEMORY;
    h->id      = id;
    h->seq     = ((const tess_net_hdr_t *)hdr)->seq;
    h->hdr_len = hdr_len;
    h->len     = len;
    h->desc    = desc;
    h->hdr     = tess_malloc(hdr_len, "a held message header");
    if (!h->hdr)
        goto err_free_held;
    memcpy(h->hdr, hdr, hdr_len);
    if (!desc && len > 0) {
        h->data = tess_malloc(len, "a held message payload");
        if (!h->data)
            goto err_free_hdr;
        memcpy(h->data, data, len);
    }
    net_held_t **pp = &l->peers[src].held;
    while (*pp && (int32_t)((*pp)->seq - h->seq) < 0)
        pp = &(*pp)->next;
    h->next = *pp;
    *pp     = h;
    return TESS_OK;

err_free_hdr:
    free(h->hdr);
err_free_held:
    free(h);
    return TESS_ERR_NO_MEMORY;
}

ucs_status_t net_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    net_lane_t *l  = &net.lanes[(uintptr_t)arg / TESS_NET_AM_MAX];
    unsigned    id = (unsigned)((uintptr_t)arg % TESS_NET_AM_MAX);
    if (tess_unlikely(header_length < sizeof(tess_net_hdr_t)))
        tess_fatal("active message %u: header of %zu bytes is shorter than the net header", id,
                   header_length);
    const tess_net_hdr_t *h = header;
    if (tess_unlikely(h->src >= (uint32_t)net.size))
        tess_fatal("active message %u: source process %u out of range (%d processes)", id,
                   h->src, net.size);
    int   src  = (int)h->src;
    void *desc = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? data : NULL;
    net_peer_t *p = &l->peers[src];

    if (h->seq == p->recv_seq && !p->rndv_pending) {
        net_deliver(l, src, id, header, header_length, desc ? NULL : data, length, desc);
        net_deliver_held(l, src);
        return UCS_OK;
    }
    if (net_hold(l, src, id, header, header_length, desc ? NULL : data, length, desc) != TESS_OK)
        tess_fatal("out of memory holding an out-of-order message from process %d", src);
    return desc ? UCS_INPROGRESS : UCS_OK;
}

/* ---- init / fini ------------------------------------------------------------------------- */

/* Tessera's device path is a receiver-side get. UCX 1.20 turns off get over cuda_ipc where it
 * finds no NVLink (put is faster there), and UCX then emulates the get through host memory at
 * under 1 GB/s; for a get-based protocol cuda_ipc's get is still the fast path, so it is on
 * unless the user set UCX_CUDA_IPC_ENABLE_GET_ZCOPY (or the UCX has no cuda_ipc: it would warn
 * about the key). */
static int net_ucx_has_component(const char *name)
{
    uct_component_h *comps;
    unsigned         n;
    int              found = 0;
    if (uct_query_components(&comps, &n) != UCS_OK)
        return 0;
    for (unsigned c = 0; c < n && !found; c++) {
        uct_component_attr_t ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        found = uct_component_query(comps[c], &ca) == UCS_OK && strcmp(ca.name, name) == 0;
    }
    uct_release_component_list(comps);
    return found;
}

/* net.same_node from the caller's node of every process. */
static tess_status_t net_same_node_init(const int *node_of)
{
    net.same_node = tess_calloc((size_t)net.size, 1, "the node map of processes");
    if (!net.same_node)
        return TESS_ERR_NO_MEMORY;
    for (int r = 0; r < net.size; r++)
        net.same_node[r] = node_of && node_of[r] == node_of[net.rank];
    return TESS_OK;
}

static void net_device_get_config(ucp_config_t *config)
{
    if (getenv("UCX_CUDA_IPC_ENABLE_GET_ZCOPY") || !net_ucx_has_component("cuda_ipc"))
        return;
    (void)ucp_config_modify(config, "CUDA_IPC_ENABLE_GET_ZCOPY", "y");
}

tess_status_t tess_net_init(const tess_net_params_t *params)
{
    tess_status_t st;
    ucs_status_t  us;
    MPI_Comm_rank(params->comm, &net.rank);
    MPI_Comm_size(params->comm, &net.size);
    net.comm   = params->comm;
    net.nlanes = params->lanes > 0 ? params->lanes : 1;
    net.efd    = -1;
    net.epfd   = -1;
    net.eager_node = params->eager_node;
    pthread_mutex_init(&net.ctx_lock, NULL);

    ucp_config_t *config;
    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK)
        return net_ucx_error("ucp_config_read", us);
    tess_net_peer_config(params->peer_failure, config);
    net_device_get_config(config);
    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features   = UCP_FEATURE_AM | UCP_FEATURE_RMA | (params->wakeup ? UCP_FEATURE_WAKEUP : 0),
        .mt_workers_shared = net.nlanes > 1, /* workers of several threads share the context */
    };
    us = ucp_init(&up, config, &net.context);
    if (us != UCS_OK && params->wakeup) {
        up.features &= ~(uint64_t)UCP_FEATURE_WAKEUP;
        us = ucp_init(&up, config, &net.context);
    }
    ucp_config_release(config);
    if (us != UCS_OK)
        return net_ucx_error("ucp_init", us);

    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(net.context, &ca) == UCS_OK)
        net.mem_types = ca.memory_types;

    /* Aligned: a lane's send queue keeps its producers' and consumer's ends on their own lines. */
    net.lanes = tess_aligned_alloc(TESS_CACHELINE, (size_t)net.nlanes * sizeof(*net.lanes),
                                   "UCX lanes");
    if (net.lanes)
        memset(net.lanes, 0, (size_t)net.nlanes * sizeof(*net.lanes));
    if (!net.lanes) {
        st = TESS_ERR_NO_MEMORY;
        goto err_cleanup_context;
    }
    for (int l = 0; l < net.nlanes; l++) {
        st = net_lane_create(&net.lanes[l], l, (up.features & UCP_FEATURE_WAKEUP) != 0);
        if (st != TESS_OK)
            goto err_destroy_lanes;
    }
    char *all    = NULL;
    int  *displs = NULL;
    st = net_lanes_connect(params->comm, &all, &displs);
    if (st == TESS_OK)
        st = net_same_node_init(params->node_of);
    if (st != TESS_OK) {
        free(all);
        free(displs);
        goto err_destroy_lanes;
    }
    tess_net_peer_hosts_init(params->comm, net.size);
    net_event_fd_init();
    /* Endpoints are created on first use (net_ep): init does not grow with the processes
     * beyond MPI's exchange of addresses. */
    net.addrs       = all;
    net.addr_displs = displs;
    return TESS_OK;

err_destroy_lanes:
    for (int l = 0; l < net.nlanes; l++)
        net_lane_destroy(&net.lanes[l]);
    free(net.lanes);
    net.lanes = NULL;
err_cleanup_context:
    ucp_cleanup(net.context);
    net.context = NULL;
    pthread_mutex_destroy(&net.ctx_lock);
    free(net.same_node);
    net.same_node = NULL;
    return st;
}

/* The endpoint of lane l to process `i`, created on first use (l->lock held). NULL, with the
 * error set, if UCX cannot create it. */
ucp_ep_h net_ep(net_lane_t *l, int i)
{
    if (tess_likely(l->peers[i].ep != NULL))
        return l->peers[i].ep;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address    = (const ucp_address_t *)(net.addrs +
                                               net.addr_displs[i * net.nlanes + l->index]),
    };
    tess_net_peer_ep_params(&ep, i);
    ucs_status_t us = ucp_ep_create(l->worker, &ep, &l->peers[i].ep);
    if (us != UCS_OK) {
        l->peers[i].ep = NULL;
        tess_error(TESS_ERR_UCX, "cannot reach process %d: ucp_ep_create: %s", i,
                   ucs_status_string(us));
        return NULL;
    }
    return l->peers[i].ep;
}

void tess_net_fini(void)
{
    if (!net.lanes)
        return;
    tess_net_peer_closing();
    net_rkeys_release();
    /* Close every endpoint with a flush. A peer's close completes only while this process
     * keeps progressing, so everyone progresses until all closes everywhere are done (a
     * barrier entered once this process's own closes completed); past 5 s they are cancelled. */
    size_t nreq = (size_t)net.size * (size_t)net.nlanes;
    void **reqs = tess_calloc(nreq, sizeof(void *), "endpoint closes");
    for (size_t r = 0; reqs && r < nreq; r++) {
        net_lane_t *l = &net.lanes[r % (size_t)net.nlanes];
        int         i = (int)(r / (size_t)net.nlanes);
        if (!l->peers[i].ep)
            continue;
        ucp_request_param_t rp = {.op_attr_mask = 0};
        void *req = ucp_ep_close_nbx(l->peers[i].ep, &rp);
        reqs[r]   = UCS_PTR_IS_PTR(req) ? req : NULL;
    }
    uint64_t    deadline = tess_time_ns() + 5000000000ull;
    MPI_Request barrier  = MPI_REQUEST_NULL;
    for (;;) {
        for (int l = 0; l < net.nlanes; l++)
            ucp_worker_progress(net.lanes[l].worker);
        int pending = 0;
        for (size_t r = 0; reqs && r < nreq; r++) {
            if (!reqs[r])
                continue;
            if (ucp_request_check_status(reqs[r]) != UCS_INPROGRESS) {
                ucp_request_free(reqs[r]);
                reqs[r] = NULL;
            } else {
                pending = 1;
            }
        }
        if (!pending && barrier == MPI_REQUEST_NULL)
            MPI_Ibarrier(net.comm, &barrier);
        if (barrier != MPI_REQUEST_NULL) {
            int done = 0;
            MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
            if (done)
                break;
        }
        if (tess_time_ns() > deadline) {
            tess_warn("closing UCX endpoints: peers did not answer within 5 s");
            for (size_t r = 0; reqs && r < nreq; r++)
                if (reqs[r]) {
                    ucp_request_cancel(net.lanes[r % (size_t)net.nlanes].worker, reqs[r]);
                    ucp_request_free(reqs[r]);
                    reqs[r] = NULL;
                }
            if (barrier != MPI_REQUEST_NULL)
                MPI_Request_free(&barrier);
            break;
        }
    }
    free(reqs);
    if (net.epfd >= 0)
        close(net.epfd);
    net.epfd = -1;
    net.efd  = -1;
    for (int l = 0; l < net.nlanes; l++)
        net_lane_destroy(&net.lanes[l]);
    free(net.lanes);
    net.lanes = NULL;
    tess_net_peer_fini();
    free(net.addrs);
    free(net.addr_displs);
    net.addrs       = NULL;
    net.addr_displs = NULL;
    free(net.same_node);
    net.same_node = NULL;
    ucp_cleanup(net.context);
    net.context = NULL;
    pthread_mutex_destroy(&net.ctx_lock);
}

tess_status_t tess_net_am_register(unsigned id, tess_net_am_fn_t fn, void *arg)
{
    if (id >= TESS_NET_AM_MAX)
        return tess_error(TESS_ERR_INVALID, "active-message id %u out of range", id);
    net.am[id].fn  = fn;
    net.am[id].arg = arg;
    return TESS_OK;
}

/* ---- sends ------------------------------------------------------------------------------- */

/* Requests are freed by their completion callbacks, never when posted: ucp_request_free() on a
 * request still in flight clears its callback, which would then never run. */
static void net_send_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    net_op_t *op = user_data;
    atomic_fetch_sub_explicit(&net.outstanding, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&op->lane->peers[op->peer].queued, 1, memory_order_relaxed);
    tess_net_done_fn_t done = op->done;
    void              *arg  = op->arg;
    int                peer = op->peer;
    net_op_put(op);
    tess_net_peer_send_failed(peer, status);
    if (status != UCS_OK)
        tess_error(TESS_ERR_UCX, "active-message send to process %d failed: %s", peer,
                   ucs_status_string(status));
    if (done)
        done(arg, net_status(status));
}

/* Post one send (l->lock held). */
static tess_status_t net_post(net_lane_t *l, int dest, unsigned id, tess_net_hdr_t *hdr,
                              size_t hdr_len, const void *data, size_t len,
                              tess_net_done_fn_t done, void *arg)
{
    net_peer_t *p = &l->peers[dest];
    if (tess_unlikely(!net_ep(l, dest)))
        return TESS_ERR_UCX;
    hdr->seq     = p->send_seq;
    hdr->src     = (uint32_t)net.rank;
    net_op_t *op = net_op_get(l, done, arg);
    if (!op)
        return TESS_ERR_NO_MEMORY;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send      = net_send_cb,
        .user_data    = op,
    };
    /* Within a node, eager (two copies through shared memory, no handshake) beats UCX's
     * rendezvous (a CMA get) for data the sender just wrote: bench/msg, docs/scale.md §1. */
    if (len > 0 && len <= net.eager_node && net.same_node[dest]) {
        rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags = UCP_AM_SEND_FLAG_EAGER;
        net_count(&l->eager_sends, 1);
        net_count(&l->eager_bytes, len);
    }
    ucs_status_ptr_t req = ucp_am_send_nbx(p->ep, id, hdr, hdr_len, data, len, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        net_op_put(op);
        return net_ucx_error("ucp_am_send_nbx", UCS_PTR_STATUS(req));
    }
    p->send_seq++;
    net_count(&l->am_sends, 1);
    if (req == NULL) {
        net_op_put(op);
        return TESS_OK;
    }
    op->peer = dest;
    atomic_fetch_add_explicit(&p->queued, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed);
    return TESS_INPROGRESS; /* net_send_cb frees req */
}

/* A send queued behind the lane's lock. */
typedef struct net_qsend {
    tess_qnode_t       node;
    int                dest;
    unsigned           id;
    tess_net_hdr_t    *hdr;
    size_t             hdr_len, len;
    const void        *data;
    tess_net_done_fn_t done;
    void              *arg;
} net_qsend_t;

int net_sendq_drain(net_lane_t *l)
{
    int n = 0;
    for (tess_qnode_t *q; (q = tess_mpsc_pop(&l->sendq)); n++) {
        net_qsend_t  *s  = (net_qsend_t *)((char *)q - offsetof(net_qsend_t, node));
        tess_status_t st = net_post(l, s->dest, s->id, s->hdr, s->hdr_len, s->data, s->len,
                                    s->done, s->arg);
        atomic_fetch_sub_explicit(&l->sendq_len, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&net.outstanding, 1, memory_order_relaxed);
        tess_net_done_fn_t done = s->done;
        void              *arg  = s->arg;
        free(s);
        /* Its sender was told "in progress": the outcome reaches it through `done`. */
        if (st != TESS_INPROGRESS && done)
            done(arg, st);
    }
    return n;
}

void net_sendq_discard(net_lane_t *l)
{
    for (tess_qnode_t *q; (q = tess_mpsc_pop(&l->sendq));) {
        tess_warn("a send queued on UCX worker %d was never posted (closing)", l->index);
        free((char *)q - offsetof(net_qsend_t, node));
    }
}

/* Queue a send for the lane lock's holder (any thread; the header and data stay the caller's
 * until `done`). False when there is no memory for the record. */
static bool net_sendq_push(net_lane_t *l, int dest, unsigned id, tess_net_hdr_t *hdr,
                           size_t hdr_len, const void *data, size_t len, tess_net_done_fn_t done,
                           void *arg)
{
    net_qsend_t *s = done ? malloc(sizeof(*s)) : NULL;
    if (!s)
        return false;
    *s = (net_qsend_t){.dest = dest, .id = id, .hdr = hdr, .hdr_len = hdr_len, .len = len,
                       .data = data, .done = done, .arg = arg};
    atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed);
    tess_mpsc_push(&l->sendq, &s->node);
    atomic_fetch_add_explicit(&l->sendq_len, 1, memory_order_seq_cst);
    return true;
}

tess_status_t tess_net_am_send(int dest, unsigned id, tess_net_hdr_t *hdr, size_t hdr_len,
                               const void *data, size_t len, tess_net_done_fn_t done, void *arg)
{
    if (tess_unlikely(dest < 0 || dest >= net.size))
        return tess_error(TESS_ERR_INVALID, "send to process %d of %d", dest, net.size);
    net_lane_t *l = net_lane_self();
    if (!net_lane_trylock(l)) {
        /* Busy (another PE progresses or sends on it): queue the send for the lock's holder
         * rather than sleep on the lock. */
        if (!net_sendq_push(l, dest, id, hdr, hdr_len, data, len, done, arg)) {
            net_lane_lock(l);
            goto locked;
        }
        if (net_lane_trylock(l))
            net_lane_unlock(l); /* posts it (and any other queued) */
        return TESS_INPROGRESS;
    }
locked:
    /* This PE's earlier queued sends go first: order per source is kept. One of them may sit
     * behind a push that another PE has not finished (nothing pops past it until it has): this
     * send then joins the queue behind them instead of overtaking them, or, when it cannot be
     * queued, waits for that push. */
    if (!tess_mpsc_empty(&l->sendq)) {
        net_sendq_drain(l);
        if (!tess_mpsc_empty(&l->sendq)) {
            if (net_sendq_push(l, dest, id, hdr, hdr_len, data, len, done, arg)) {
                net_lane_unlock(l);
                return TESS_INPROGRESS;
            }
            while (!tess_mpsc_empty(&l->sendq))
                if (!net_sendq_drain(l))
                    sched_yield();
        }
    }
    tess_status_t st = net_post(l, dest, id, hdr, hdr_len, data, len, done, arg);
    net_lane_unlock(l);
    return st;
}

/* ---- rendezvous receives ------------------------------------------------------------------ */

static void net_recv_done(net_lane_t *l, int peer, tess_net_done_fn_t done, void *arg,
                          ucs_status_t status)
{
    if (status != UCS_OK)
        tess_error(TESS_ERR_UCX, "rendezvous receive from process %d failed: %s", peer,
                   ucs_status_string(status));
    if (done)
        done(arg, net_status(status));
    l->peers[peer].rndv_pending = 0;
    net_deliver_held(l, peer);
}

static void net_recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    ucp_request_free(request);
    net_op_t          *op   = user_data;
    net_lane_t        *l    = op->lane;
    int                peer = op->peer;
    tess_net_done_fn_t done = op->done;
    void              *arg  = op->arg;
    atomic_fetch_sub_explicit(&net.outstanding, 1, memory_order_relaxed);
    net_op_put(op);
    net_recv_done(l, peer, done, arg, status);
}

tess_status_t tess_net_am_recv_into(void *desc, void *buf, size_t len, tess_net_done_fn_t done,
                                    void *arg)
{
    net_lane_t *l    = tess_net_delivering_;
    int         peer = l ? l->delivering_peer : -1;
    if (peer < 0)
        tess_fatal("tess_net_am_recv_into called outside an active-message delivery");
    l->delivery_recv            = 1;
    l->peers[peer].rndv_pending = 1;
    net_op_t *op = net_op_get(l, done, arg);
    if (!op)
        tess_fatal("out of memory receiving a rendezvous message from process %d", peer);
    op->peer = peer;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am   = net_recv_cb,
        .user_data    = op,
    };
    ucs_status_ptr_t req = ucp_am_recv_data_nbx(l->worker, desc, buf, len, &rp);
    if (req == NULL) {
        net_op_put(op);
        /* Completed in place: the source unblocks once this delivery returns. */
        if (done)
            done(arg, TESS_OK);
        l->peers[peer].rndv_pending = 0;
        return TESS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        net_op_put(op);
        l->peers[peer].rndv_pending = 0;
        return net_ucx_error("ucp_am_recv_data_nbx", UCS_PTR_STATUS(req));
    }
    atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed);
    return TESS_INPROGRESS; /* net_recv_cb frees req */
}

/* ---- progress ---------------------------------------------------------------------------- */

static unsigned net_progress_locked(net_lane_t *l)
{
    unsigned total = 0, n;
    do {
        n = ucp_worker_progress(l->worker);
        total += n;
    } while (n > 0 && total < 64);
    return total;
}

static unsigned net_progress_try(net_lane_t *l)
{
    if (!net_lane_trylock(l))
        return 0;
    unsigned n = net_progress_locked(l);
    net_lane_unlock(l);
    return n;
}

unsigned tess_net_progress(int others)
{
    net_lane_t *own = net_lane_self();
    unsigned    n   = net_progress_try(own);
    /* Nothing on this PE's own lane: serve the others (their PEs may be busy in entries). */
    for (int i = 1; others && n == 0 && i < net.nlanes; i++)
        n += net_progress_try(&net.lanes[(own->index + i) % net.nlanes]);
    return n;
}

unsigned tess_net_progress_wait(void)
{
    unsigned n = 0;
    for (int i = 0; i < net.nlanes; i++) {
        net_lane_t *l = &net.lanes[i];
        net_lane_lock(l);
        n += net_progress_locked(l);
        net_lane_unlock(l);
    }
    return n;
}

unsigned tess_net_backlog(int dest)
{
    net_lane_t *l = net_lane_self();
    return atomic_load_explicit(&l->peers[dest].queued, memory_order_relaxed) +
           (atomic_load_explicit(&l->sendq_len, memory_order_relaxed) > 0);
}

size_t tess_net_outstanding(void)
{
    return atomic_load_explicit(&net.outstanding, memory_order_relaxed);
}

/* A lane UCX will not arm has events nobody has progressed: progress them here, under the lock
 * this thread already holds, and try again. Returning at once instead sent the idle PE round
 * its loop and back for every attempt (each one system calls in UCX) while the lane's own PE
 * slept without the watch, and its traffic waited for the 20 µs serve delay, which the PE's own
 * trickle of work kept putting off: two processes of two PEs on two cores lost seconds so. */
#define NET_ARM_TRIES 4

tess_status_t tess_net_arm(void)
{
    if (net.efd < 0)
        return TESS_ERR_UNSUPPORTED;
    for (int i = 0; i < net.nlanes; i++) {
        net_lane_t *l = &net.lanes[i];
        if (!net_lane_trylock(l))
            return TESS_ERR_BUSY;
        unsigned     did = 0;
        ucs_status_t us;
        for (int t = 0; (us = ucp_worker_arm(l->worker)) == UCS_ERR_BUSY && t < NET_ARM_TRIES; t++)
            did += net_progress_locked(l);
        net_lane_unlock(l);
        /* What the progress delivered or completed is the caller's to run before it sleeps. */
        if (us == UCS_ERR_BUSY || did)
            return TESS_ERR_BUSY;
        if (us != UCS_OK)
            return net_ucx_error("ucp_worker_arm", us);
    }
    return TESS_OK;
}

int tess_net_event_fd(void)
{
    return net.efd;
}

