/*
 * net.c — UCX context, workers ("lanes") and endpoints; active messages delivered in send order
 * per source lane (a rendezvous payload holds back later messages of its source until it has
 * arrived); the lane locks and blocking progress.
 *
 * Lanes: one UCX worker per process (every PE sends through it, behind its lock), or one per PE
 * (TESS_NET_LANES=0): lane l of every process talks only to lane l of the others, a PE sends on
 * its own lane, progresses its own lane first and, when that had nothing, the others (trylock),
 * so that a PE busy in a long entry does not hold up its lane's traffic. Every field of a lane
 * is guarded by its lock; the context's registrations by ctx_lock.
 */
#include "net.h"
#include "peer.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

/* A message that arrived ahead of its turn. */
typedef struct net_held {
    struct net_held *next;
    unsigned         id;
    uint32_t         seq;
    void            *hdr;
    size_t           hdr_len;
    void            *data;     /* copy of an eager payload, or NULL */
    size_t           len;
    void            *desc;     /* rendezvous descriptor, or NULL */
} net_held_t;

typedef struct net_peer {
    ucp_ep_h    ep;
    uint32_t    send_seq;     /* next sequence number to this peer */
    uint32_t    recv_seq;     /* next sequence number to deliver from this peer */
    int         rndv_pending; /* a rendezvous receive from this peer is in flight */
    net_held_t *held;         /* sorted by seq */
    _Atomic unsigned queued;  /* sends to this peer not yet completed (UCX queued them) */
} net_peer_t;

struct net_lane;

/* Completion record of an operation in flight. */
typedef struct net_op {
    struct net_op     *next;
    struct net_lane   *lane;
    tess_net_done_fn_t done;
    void              *arg;
    int                peer;   /* rendezvous receive: source to unblock; queued send: dest; or -1 */
    ucp_rkey_h         rkey;   /* for gets: destroyed at completion */
} net_op_t;

typedef struct net_am {
    tess_net_am_fn_t fn;
    void            *arg;
} net_am_t;

struct tess_net_mem {
    ucp_mem_h mem;
    void     *rkey;
    size_t    rkey_len;
};

typedef struct net_lane {
    pthread_mutex_t lock;
    ucp_worker_h    worker;
    net_peer_t     *peers;
    net_op_t       *free_ops;
    int             index;
    int             efd;
    int             delivering_peer; /* source of the message being delivered, -1 if none */
    int             delivery_recv;   /* the delivery callback called tess_net_am_recv_into */
} net_lane_t;

static struct {
    ucp_context_h   context;
    MPI_Comm        comm;   /* the runtime's, for the closing barrier */
    pthread_mutex_t ctx_lock; /* registrations */
    int             rank, size, nlanes;
    net_lane_t     *lanes;
    char           *addrs;  /* the workers' addresses (endpoints are created on first use) */
    int            *addr_displs; /* [process * nlanes + lane] */
    net_am_t        am[TESS_NET_AM_MAX];
    _Atomic size_t  outstanding;
    int             efd;    /* lane 0's event fd, or an epoll set of every lane's */
    int             epfd;
    uint64_t        mem_types;
} net = {.efd = -1, .epfd = -1};

/* The lane this thread sends on (tess_net_set_lane), and the lane whose delivery callback runs
 * on it (for tess_net_am_recv_into). */
static _Thread_local int         net_my_lane;
static _Thread_local net_lane_t *net_delivering;

static inline net_lane_t *net_lane_self(void)
{
    return &net.lanes[net_my_lane < net.nlanes ? net_my_lane : 0];
}

void tess_net_set_lane(int lane)
{
    net_my_lane = lane >= 0 ? lane : 0;
}

int tess_net_lanes(void)
{
    return net.nlanes;
}

static tess_status_t net_ucx_error(const char *what, ucs_status_t st)
{
    return tess_error(TESS_ERR_UCX, "%s: %s", what, ucs_status_string(st));
}

int tess_net_rank(void) { return net.rank; }
int tess_net_size(void) { return net.size; }

static net_op_t *net_op_get(net_lane_t *l, tess_net_done_fn_t done, void *arg)
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
    return op;
}

static void net_op_put(net_op_t *op)
{
    op->next           = op->lane->free_ops;
    op->lane->free_ops = op;
}

static tess_status_t net_status(ucs_status_t st)
{
    return st == UCS_OK ? TESS_OK : TESS_ERR_UCX;
}

/* ---- in-order delivery ------------------------------------------------------------------- */

static void net_deliver(net_lane_t *l, int src, unsigned id, const void *hdr, size_t hdr_len,
                        const void *data, size_t len, void *desc)
{
    net_peer_t *p = &l->peers[src];
    p->recv_seq++;
    l->delivering_peer = src;
    l->delivery_recv   = 0;
    net_delivering     = l;
    net.am[id].fn(net.am[id].arg, hdr, hdr_len, data, len, desc);
    net_delivering     = NULL;
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

static ucs_status_t net_am_cb(void *arg, const void *header, size_t header_length, void *data,
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

/* Every process's blob: for each lane a 4-byte length, then that worker's address. On return
 * (*displs_p)[p * nlanes + l] is the offset in *all_p of process p's lane-l address. */
static tess_status_t net_exchange_addresses(MPI_Comm comm, const char *blob, int len,
                                            char **all_p, int **displs_p)
{
    int   n      = net.size;
    int  *lens   = tess_calloc((size_t)n, sizeof(int), "address lengths");
    int  *displs = tess_calloc((size_t)n + 1, sizeof(int), "address offsets");
    int  *addr   = tess_calloc((size_t)n * (size_t)net.nlanes, sizeof(int), "address offsets");
    char *all    = NULL;
    tess_status_t st = TESS_ERR_NO_MEMORY;
    if (!lens || !displs || !addr)
        goto out;
    if (MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, comm) != MPI_SUCCESS) {
        st = tess_error(TESS_ERR_MPI, "MPI_Allgather of UCX address lengths failed");
        goto out;
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        displs[i] = (int)total;
        total += (size_t)lens[i];
    }
    if (total > INT32_MAX) {
        st = tess_error(TESS_ERR_UNSUPPORTED, "%zu bytes of UCX addresses (at most 2^31)", total);
        goto out;
    }
    all = tess_malloc(total, "UCX worker addresses");
    if (!all)
        goto out;
    if (MPI_Allgatherv(blob, len, MPI_BYTE, all, lens, displs, MPI_BYTE, comm) != MPI_SUCCESS) {
        st = tess_error(TESS_ERR_MPI, "MPI_Allgatherv of UCX addresses failed");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        size_t off = (size_t)displs[i], end = off + (size_t)lens[i];
        for (int l = 0; l < net.nlanes; l++) {
            uint32_t alen;
            if (end - off < sizeof(alen))
                goto corrupt;
            memcpy(&alen, all + off, sizeof(alen));
            off += sizeof(alen);
            if (end - off < alen)
                goto corrupt;
            addr[i * net.nlanes + l] = (int)off;
            off += alen;
        }
        continue;
corrupt:
        st = tess_error(TESS_ERR_UCX, "the UCX addresses of process %d do not hold %d lanes "
                        "(every process must run the same TESS_NET_LANES and PEs)", i, net.nlanes);
        goto out;
    }
    *all_p    = all;
    *displs_p = addr;
    all       = NULL;
    addr      = NULL;
    st        = TESS_OK;
out:
    free(all);
    free(lens);
    free(displs);
    free(addr);
    return st;
}

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

static void net_device_get_config(ucp_config_t *config)
{
    if (getenv("UCX_CUDA_IPC_ENABLE_GET_ZCOPY") || !net_ucx_has_component("cuda_ipc"))
        return;
    (void)ucp_config_modify(config, "CUDA_IPC_ENABLE_GET_ZCOPY", "y");
}

static void net_lane_destroy(net_lane_t *l)
{
    if (!l->worker)
        return;
    for (int i = 0; l->peers && i < net.size; i++) {
        while (l->peers[i].held) {
            net_held_t *h     = l->peers[i].held;
            l->peers[i].held  = h->next;
            if (h->desc)
                ucp_am_data_release(l->worker, h->desc);
            free(h->hdr);
            free(h->data);
            free(h);
        }
    }
    free(l->peers);
    l->peers = NULL;
    while (l->free_ops) {
        net_op_t *op = l->free_ops;
        l->free_ops  = op->next;
        free(op);
    }
    ucp_worker_destroy(l->worker);
    l->worker = NULL;
    pthread_mutex_destroy(&l->lock);
}

static tess_status_t net_lane_create(net_lane_t *l, int index, int wakeup)
{
    ucs_status_t us;
    pthread_mutex_init(&l->lock, NULL);
    l->index           = index;
    l->efd             = -1;
    l->delivering_peer = -1;
    ucp_worker_params_t wp = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,
    };
    us = ucp_worker_create(net.context, &wp, &l->worker);
    if (us != UCS_OK) {
        l->worker = NULL;
        pthread_mutex_destroy(&l->lock);
        return net_ucx_error("ucp_worker_create", us);
    }
    if (wakeup && ucp_worker_get_efd(l->worker, &l->efd) != UCS_OK)
        l->efd = -1;
    for (unsigned id = 0; id < TESS_NET_AM_MAX; id++) {
        ucp_am_handler_param_t hp = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                          UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
            .id    = id,
            .cb    = net_am_cb,
            .arg   = (void *)(uintptr_t)((unsigned)index * TESS_NET_AM_MAX + id),
            .flags = UCP_AM_FLAG_WHOLE_MSG,
        };
        us = ucp_worker_set_am_recv_handler(l->worker, &hp);
        if (us != UCS_OK) {
            net_lane_destroy(l);
            return net_ucx_error("ucp_worker_set_am_recv_handler", us);
        }
    }
    l->peers = tess_calloc((size_t)net.size, sizeof(*l->peers), "UCX peers");
    if (!l->peers) {
        net_lane_destroy(l);
        return TESS_ERR_NO_MEMORY;
    }
    return TESS_OK;
}

/* The lanes' addresses, each after its 4-byte length. */
static tess_status_t net_lane_addresses(char **blob_p, int *len_p)
{
    char  *blob = NULL;
    size_t len  = 0;
    for (int l = 0; l < net.nlanes; l++) {
        ucp_address_t *addr;
        size_t         alen;
        ucs_status_t   us = ucp_worker_get_address(net.lanes[l].worker, &addr, &alen);
        if (us != UCS_OK) {
            free(blob);
            return net_ucx_error("ucp_worker_get_address", us);
        }
        char *nb = realloc(blob, len + sizeof(uint32_t) + alen);
        if (!nb) {
            ucp_worker_release_address(net.lanes[l].worker, addr);
            free(blob);
            return tess_error(TESS_ERR_NO_MEMORY, "out of memory for UCX worker addresses");
        }
        blob       = nb;
        uint32_t a = (uint32_t)alen;
        memcpy(blob + len, &a, sizeof(a));
        memcpy(blob + len + sizeof(a), addr, alen);
        len += sizeof(a) + alen;
        ucp_worker_release_address(net.lanes[l].worker, addr);
    }
    if (len > INT32_MAX) {
        free(blob);
        return tess_error(TESS_ERR_UNSUPPORTED, "UCX worker addresses of %zu bytes", len);
    }
    *blob_p = blob;
    *len_p  = (int)len;
    return TESS_OK;
}

/* One fd for blocking progress: lane 0's, or an epoll set of every lane's. */
static void net_event_fd_init(void)
{
    net.efd = net.lanes[0].efd;
    if (net.nlanes == 1)
        return;
    net.epfd = epoll_create1(EPOLL_CLOEXEC);
    for (int l = 0; net.epfd >= 0 && l < net.nlanes; l++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)l};
        if (net.lanes[l].efd < 0 || epoll_ctl(net.epfd, EPOLL_CTL_ADD, net.lanes[l].efd, &ev)) {
            close(net.epfd);
            net.epfd = -1;
        }
    }
    net.efd = net.epfd;
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

    net.lanes = tess_calloc((size_t)net.nlanes, sizeof(*net.lanes), "UCX lanes");
    if (!net.lanes) {
        st = TESS_ERR_NO_MEMORY;
        goto err_cleanup_context;
    }
    for (int l = 0; l < net.nlanes; l++) {
        st = net_lane_create(&net.lanes[l], l, (up.features & UCP_FEATURE_WAKEUP) != 0);
        if (st != TESS_OK)
            goto err_destroy_lanes;
    }
    char *blob = NULL, *all = NULL;
    int   blob_len = 0, *displs = NULL;
    st = net_lane_addresses(&blob, &blob_len);
    if (st != TESS_OK)
        goto err_destroy_lanes;
    st = net_exchange_addresses(params->comm, blob, blob_len, &all, &displs);
    free(blob);
    if (st != TESS_OK)
        goto err_destroy_lanes;
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
    return st;
}

/* The endpoint of lane l to process `i`, created on first use (l->lock held). NULL, with the
 * error set, if UCX cannot create it. */
static ucp_ep_h net_ep(net_lane_t *l, int i)
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

tess_status_t tess_net_am_send(int dest, unsigned id, tess_net_hdr_t *hdr, size_t hdr_len,
                               const void *data, size_t len, tess_net_done_fn_t done, void *arg)
{
    if (tess_unlikely(dest < 0 || dest >= net.size))
        return tess_error(TESS_ERR_INVALID, "send to process %d of %d", dest, net.size);
    tess_status_t st = TESS_OK;
    net_lane_t   *l  = net_lane_self();
    pthread_mutex_lock(&l->lock);
    net_peer_t *p = &l->peers[dest];
    if (tess_unlikely(!net_ep(l, dest))) {
        st = TESS_ERR_UCX;
        goto out;
    }
    hdr->seq      = p->send_seq;
    hdr->src      = (uint32_t)net.rank;
    net_op_t *op  = net_op_get(l, done, arg);
    if (!op) {
        st = TESS_ERR_NO_MEMORY;
        goto out;
    }
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send      = net_send_cb,
        .user_data    = op,
    };
    ucs_status_ptr_t req = ucp_am_send_nbx(p->ep, id, hdr, hdr_len, data, len, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        net_op_put(op);
        st = net_ucx_error("ucp_am_send_nbx", UCS_PTR_STATUS(req));
        goto out;
    }
    p->send_seq++;
    if (req == NULL) {
        net_op_put(op);
    } else {
        op->peer = dest;
        atomic_fetch_add_explicit(&p->queued, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed);
        st = TESS_INPROGRESS; /* net_send_cb frees req */
    }
out:
    pthread_mutex_unlock(&l->lock);
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
    net_lane_t *l    = net_delivering;
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
    if (pthread_mutex_trylock(&l->lock) != 0)
        return 0;
    unsigned n = net_progress_locked(l);
    pthread_mutex_unlock(&l->lock);
    return n;
}

unsigned tess_net_progress(void)
{
    net_lane_t *own = net_lane_self();
    unsigned    n   = net_progress_try(own);
    /* Nothing on this PE's own lane: serve the others (their PEs may be busy in entries). */
    for (int i = 1; n == 0 && i < net.nlanes; i++)
        n += net_progress_try(&net.lanes[(own->index + i) % net.nlanes]);
    return n;
}

unsigned tess_net_progress_wait(void)
{
    unsigned n = 0;
    for (int i = 0; i < net.nlanes; i++) {
        net_lane_t *l = &net.lanes[i];
        pthread_mutex_lock(&l->lock);
        n += net_progress_locked(l);
        pthread_mutex_unlock(&l->lock);
    }
    return n;
}

unsigned tess_net_backlog(int dest)
{
    return atomic_load_explicit(&net_lane_self()->peers[dest].queued, memory_order_relaxed);
}

size_t tess_net_outstanding(void)
{
    return atomic_load_explicit(&net.outstanding, memory_order_relaxed);
}

tess_status_t tess_net_arm(void)
{
    if (net.efd < 0)
        return TESS_ERR_UNSUPPORTED;
    for (int i = 0; i < net.nlanes; i++) {
        net_lane_t *l = &net.lanes[i];
        if (pthread_mutex_trylock(&l->lock) != 0)
            return TESS_ERR_BUSY;
        ucs_status_t us = ucp_worker_arm(l->worker);
        pthread_mutex_unlock(&l->lock);
        if (us == UCS_ERR_BUSY)
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

/* ---- registration and get ---------------------------------------------------------------- */

/* Registrations: with one lane, behind its lock (the context is not shared between threads);
 * with several, the context is thread-safe (mt_workers_shared) and ctx_lock orders ours. */
static void net_ctx_lock(void)
{
    pthread_mutex_lock(net.nlanes == 1 ? &net.lanes[0].lock : &net.ctx_lock);
}

static void net_ctx_unlock(void)
{
    pthread_mutex_unlock(net.nlanes == 1 ? &net.lanes[0].lock : &net.ctx_lock);
}

static ucs_memory_type_t net_ucs_mem_type(int mem_type)
{
    switch (mem_type) {
    case TESS_NET_MEM_CUDA: return UCS_MEMORY_TYPE_CUDA;
    case TESS_NET_MEM_ROCM: return UCS_MEMORY_TYPE_ROCM;
    default:                return UCS_MEMORY_TYPE_HOST;
    }
}

int tess_net_mem_type_supported(int mem_type)
{
    return (net.mem_types >> net_ucs_mem_type(mem_type)) & 1;
}

tess_status_t tess_net_mem_register(void *addr, size_t len, int mem_type, tess_net_mem_h *mem_p,
                                    const void **rkey_p, size_t *rkey_len_p)
{
    struct tess_net_mem *m = tess_calloc(1, sizeof(*m), "a memory registration");
    if (!m)
        return TESS_ERR_NO_MEMORY;
    ucp_mem_map_params_t mp = {
        .field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                       UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .address     = addr,
        .length      = len,
        .memory_type = net_ucs_mem_type(mem_type),
    };
    tess_status_t st;
    net_ctx_lock();
    ucs_status_t us = ucp_mem_map(net.context, &mp, &m->mem);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_mem_map", us);
        goto err_unlock;
    }
    us = ucp_rkey_pack(net.context, m->mem, &m->rkey, &m->rkey_len);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_rkey_pack", us);
        goto err_unmap;
    }
    net_ctx_unlock();
    *mem_p      = m;
    *rkey_p     = m->rkey;
    *rkey_len_p = m->rkey_len;
    return TESS_OK;

err_unmap:
    ucp_mem_unmap(net.context, m->mem);
err_unlock:
    net_ctx_unlock();
    free(m);
    return st;
}

void tess_net_mem_deregister(tess_net_mem_h m)
{
    if (!m)
        return;
    net_ctx_lock();
    ucp_rkey_buffer_release(m->rkey);
    ucp_mem_unmap(net.context, m->mem);
    net_ctx_unlock();
    free(m);
}

static void net_get_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    net_op_t *op = user_data;
    atomic_fetch_sub_explicit(&net.outstanding, 1, memory_order_relaxed);
    tess_net_done_fn_t done = op->done;
    void              *arg  = op->arg;
    ucp_rkey_destroy(op->rkey);
    net_op_put(op);
    if (status != UCS_OK)
        tess_error(TESS_ERR_UCX, "RDMA get failed: %s", ucs_status_string(status));
    if (done)
        done(arg, net_status(status));
}

tess_status_t tess_net_get(int src, void *buf, size_t len, uint64_t raddr, const void *rkey,
                           size_t rkey_len, tess_net_done_fn_t done, void *arg)
{
    (void)rkey_len;
    if (src < 0 || src >= net.size)
        return tess_error(TESS_ERR_INVALID, "get from process %d of %d", src, net.size);
    tess_status_t st = TESS_INPROGRESS;
    net_lane_t   *l  = net_lane_self();
    pthread_mutex_lock(&l->lock);
    ucp_rkey_h   rk;
    if (!net_ep(l, src)) {
        st = TESS_ERR_UCX;
        goto out;
    }
    ucs_status_t us = ucp_ep_rkey_unpack(l->peers[src].ep, rkey, &rk);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_ep_rkey_unpack", us);
        goto out;
    }
    net_op_t *op = net_op_get(l, done, arg);
    if (!op) {
        ucp_rkey_destroy(rk);
        st = TESS_ERR_NO_MEMORY;
        goto out;
    }
    op->rkey = rk;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send      = net_get_cb,
        .user_data    = op,
    };
    ucs_status_ptr_t req = ucp_get_nbx(l->peers[src].ep, buf, len, raddr, rk, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        ucp_rkey_destroy(rk);
        net_op_put(op);
        st = net_ucx_error("ucp_get_nbx", UCS_PTR_STATUS(req));
    } else if (req == NULL) {
        ucp_rkey_destroy(rk);
        net_op_put(op);
        st = TESS_OK;
    } else {
        atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed); /* net_get_cb frees req */
    }
out:
    pthread_mutex_unlock(&l->lock);
    return st;
}
