/*
 * net.c — UCX context, worker and endpoints; active messages delivered in send order per
 * source process (a rendezvous payload holds back later messages of its source until it has
 * arrived); the worker lock and blocking progress.
 */
#include "net.h"
#include "peer.h"

#include <pthread.h>
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

/* Completion record of an operation in flight. */
typedef struct net_op {
    struct net_op     *next;
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

static struct {
    ucp_context_h   context;
    ucp_worker_h    worker;
    MPI_Comm        comm;   /* the runtime's, for the closing barrier */
    pthread_mutex_t lock;
    int             rank, size;
    net_peer_t     *peers;
    char           *addrs;  /* the workers' addresses (endpoints are created on first use) */
    int            *addr_displs;
    net_am_t        am[TESS_NET_AM_MAX];
    net_op_t       *free_ops;
    _Atomic size_t  outstanding;
    int             efd;
    uint64_t        mem_types;
    int             delivering_peer; /* source of the message being delivered, -1 if none */
    int             delivery_recv;   /* the delivery callback called tess_net_am_recv_into */
} net = {.efd = -1, .delivering_peer = -1};

static tess_status_t net_ucx_error(const char *what, ucs_status_t st)
{
    return tess_error(TESS_ERR_UCX, "%s: %s", what, ucs_status_string(st));
}

int tess_net_rank(void) { return net.rank; }
int tess_net_size(void) { return net.size; }

static net_op_t *net_op_get(tess_net_done_fn_t done, void *arg)
{
    net_op_t *op = net.free_ops;
    if (op)
        net.free_ops = op->next;
    else if (!(op = tess_malloc(sizeof(*op), "a network operation record")))
        return NULL;
    op->done = done;
    op->arg  = arg;
    op->peer = -1;
    op->rkey = NULL;
    return op;
}

static void net_op_put(net_op_t *op)
{
    op->next     = net.free_ops;
    net.free_ops = op;
}

static tess_status_t net_status(ucs_status_t st)
{
    return st == UCS_OK ? TESS_OK : TESS_ERR_UCX;
}

/* ---- in-order delivery ------------------------------------------------------------------- */

static void net_deliver_held(int src);

static void net_deliver(int src, unsigned id, const void *hdr, size_t hdr_len, const void *data,
                        size_t len, void *desc)
{
    net_peer_t *p = &net.peers[src];
    p->recv_seq++;
    net.delivering_peer = src;
    net.delivery_recv   = 0;
    net.am[id].fn(net.am[id].arg, hdr, hdr_len, data, len, desc);
    net.delivering_peer = -1;
    if (desc && !net.delivery_recv)
        tess_fatal("active message %u from process %d: the rendezvous payload was not received",
                   id, src);
}

static void net_deliver_held(int src)
{
    net_peer_t *p = &net.peers[src];
    while (!p->rndv_pending && p->held && p->held->seq == p->recv_seq) {
        net_held_t *h = p->held;
        p->held       = h->next;
        net_deliver(src, h->id, h->hdr, h->hdr_len, h->data, h->len, h->desc);
        free(h->hdr);
        free(h->data);
        free(h);
    }
}

static tess_status_t net_hold(int src, unsigned id, const void *hdr, size_t hdr_len,
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
    net_held_t **pp = &net.peers[src].held;
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
    unsigned id = (unsigned)(uintptr_t)arg;
    if (tess_unlikely(header_length < sizeof(tess_net_hdr_t)))
        tess_fatal("active message %u: header of %zu bytes is shorter than the net header", id,
                   header_length);
    const tess_net_hdr_t *h = header;
    if (tess_unlikely(h->src >= (uint32_t)net.size))
        tess_fatal("active message %u: source process %u out of range (%d processes)", id,
                   h->src, net.size);
    int   src  = (int)h->src;
    void *desc = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? data : NULL;
    net_peer_t *p = &net.peers[src];

    if (h->seq == p->recv_seq && !p->rndv_pending) {
        net_deliver(src, id, header, header_length, desc ? NULL : data, length, desc);
        net_deliver_held(src);
        return UCS_OK;
    }
    if (net_hold(src, id, header, header_length, desc ? NULL : data, length, desc) != TESS_OK)
        tess_fatal("out of memory holding an out-of-order message from process %d", src);
    return desc ? UCS_INPROGRESS : UCS_OK;
}

/* ---- init / fini ------------------------------------------------------------------------- */

static tess_status_t net_exchange_addresses(MPI_Comm comm, ucp_address_t *addr, size_t addr_len,
                                            char **all_p, int **displs_p)
{
    int len = (int)addr_len;
    int *lens   = tess_calloc((size_t)net.size, sizeof(int), "address lengths");
    int *displs = tess_calloc((size_t)net.size, sizeof(int), "address offsets");
    char *all   = NULL;
    tess_status_t st = TESS_ERR_NO_MEMORY;
    if (!lens || !displs)
        goto out;
    if (MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, comm) != MPI_SUCCESS) {
        st = tess_error(TESS_ERR_MPI, "MPI_Allgather of UCX address lengths failed");
        goto out;
    }
    size_t total = 0;
    for (int i = 0; i < net.size; i++) {
        displs[i] = (int)total;
        total += (size_t)lens[i];
    }
    all = tess_malloc(total, "UCX worker addresses");
    if (!all)
        goto out;
    if (MPI_Allgatherv(addr, len, MPI_BYTE, all, lens, displs, MPI_BYTE, comm) != MPI_SUCCESS) {
        st = tess_error(TESS_ERR_MPI, "MPI_Allgatherv of UCX addresses failed");
        goto out;
    }
    *all_p    = all;
    *displs_p = displs;
    all       = NULL;
    displs    = NULL;
    st        = TESS_OK;
out:
    free(all);
    free(lens);
    free(displs);
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

tess_status_t tess_net_init(const tess_net_params_t *params)
{
    tess_status_t st;
    ucs_status_t  us;
    MPI_Comm_rank(params->comm, &net.rank);
    MPI_Comm_size(params->comm, &net.size);
    net.comm = params->comm;
    pthread_mutex_init(&net.lock, NULL);
    net.delivering_peer = -1;

    ucp_config_t *config;
    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK)
        return net_ucx_error("ucp_config_read", us);
    tess_net_peer_config(params->peer_failure, config);
    net_device_get_config(config);
    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features   = UCP_FEATURE_AM | UCP_FEATURE_RMA | (params->wakeup ? UCP_FEATURE_WAKEUP : 0),
        .mt_workers_shared = 0,
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

    ucp_worker_params_t wp = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,
    };
    us = ucp_worker_create(net.context, &wp, &net.worker);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_worker_create", us);
        goto err_cleanup_context;
    }
    if ((up.features & UCP_FEATURE_WAKEUP) && ucp_worker_get_efd(net.worker, &net.efd) != UCS_OK)
        net.efd = -1;

    for (unsigned id = 0; id < TESS_NET_AM_MAX; id++) {
        ucp_am_handler_param_t hp = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                          UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
            .id    = id,
            .cb    = net_am_cb,
            .arg   = (void *)(uintptr_t)id,
            .flags = UCP_AM_FLAG_WHOLE_MSG,
        };
        us = ucp_worker_set_am_recv_handler(net.worker, &hp);
        if (us != UCS_OK) {
            st = net_ucx_error("ucp_worker_set_am_recv_handler", us);
            goto err_destroy_worker;
        }
    }

    ucp_address_t *addr;
    size_t         addr_len;
    us = ucp_worker_get_address(net.worker, &addr, &addr_len);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_worker_get_address", us);
        goto err_destroy_worker;
    }
    char *all    = NULL;
    int  *displs = NULL;
    st = net_exchange_addresses(params->comm, addr, addr_len, &all, &displs);
    ucp_worker_release_address(net.worker, addr);
    if (st != TESS_OK)
        goto err_destroy_worker;
    tess_net_peer_hosts_init(params->comm, net.size);

    net.peers = tess_calloc((size_t)net.size, sizeof(*net.peers), "UCX peers");
    if (!net.peers) {
        st = TESS_ERR_NO_MEMORY;
        goto err_free_addresses;
    }
    /* Endpoints are created on first use (net_ep): init does not grow with the processes
     * beyond MPI's exchange of addresses. */
    net.addrs       = all;
    net.addr_displs = displs;
    return TESS_OK;

err_free_addresses:
    tess_net_peer_fini();
    free(all);
    free(displs);
err_destroy_worker:
    ucp_worker_destroy(net.worker);
err_cleanup_context:
    ucp_cleanup(net.context);
    return st;
}

/* The endpoint to process `i`, created on first use (net.lock held). NULL, with the error
 * set, if UCX cannot create it. */
static ucp_ep_h net_ep(int i)
{
    if (tess_likely(net.peers[i].ep != NULL))
        return net.peers[i].ep;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address    = (const ucp_address_t *)(net.addrs + net.addr_displs[i]),
    };
    tess_net_peer_ep_params(&ep, i);
    ucs_status_t us = ucp_ep_create(net.worker, &ep, &net.peers[i].ep);
    if (us != UCS_OK) {
        net.peers[i].ep = NULL;
        tess_error(TESS_ERR_UCX, "cannot reach process %d: ucp_ep_create: %s", i,
                   ucs_status_string(us));
        return NULL;
    }
    return net.peers[i].ep;
}

void tess_net_fini(void)
{
    if (!net.worker)
        return;
    tess_net_peer_closing();
    /* Close every endpoint with a flush. A peer's close completes only while this process
     * keeps progressing, so everyone progresses until all closes everywhere are done (a
     * barrier entered once this process's own closes completed); past 5 s they are cancelled. */
    void **reqs = tess_calloc((size_t)net.size, sizeof(void *), "endpoint closes");
    for (int i = 0; reqs && i < net.size; i++) {
        if (!net.peers[i].ep)
            continue;
        ucp_request_param_t rp = {.op_attr_mask = 0};
        void *req = ucp_ep_close_nbx(net.peers[i].ep, &rp);
        reqs[i]   = UCS_PTR_IS_PTR(req) ? req : NULL;
    }
    uint64_t    deadline = tess_time_ns() + 5000000000ull;
    MPI_Request barrier  = MPI_REQUEST_NULL;
    for (;;) {
        ucp_worker_progress(net.worker);
        int pending = 0;
        for (int i = 0; reqs && i < net.size; i++) {
            if (!reqs[i])
                continue;
            if (ucp_request_check_status(reqs[i]) != UCS_INPROGRESS) {
                ucp_request_free(reqs[i]);
                reqs[i] = NULL;
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
            for (int i = 0; reqs && i < net.size; i++)
                if (reqs[i]) {
                    ucp_request_cancel(net.worker, reqs[i]);
                    ucp_request_free(reqs[i]);
                    reqs[i] = NULL;
                }
            if (barrier != MPI_REQUEST_NULL)
                MPI_Request_free(&barrier);
            break;
        }
    }
    free(reqs);
    for (int i = 0; i < net.size; i++) {
        while (net.peers[i].held) {
            net_held_t *h      = net.peers[i].held;
            net.peers[i].held  = h->next;
            if (h->desc)
                ucp_am_data_release(net.worker, h->desc);
            free(h->hdr);
            free(h->data);
            free(h);
        }
    }
    free(net.peers);
    net.peers = NULL;
    tess_net_peer_fini();
    free(net.addrs);
    free(net.addr_displs);
    net.addrs       = NULL;
    net.addr_displs = NULL;
    while (net.free_ops) {
        net_op_t *op = net.free_ops;
        net.free_ops = op->next;
        free(op);
    }
    ucp_worker_destroy(net.worker);
    net.worker = NULL;
    ucp_cleanup(net.context);
    net.context = NULL;
    net.efd     = -1;
    pthread_mutex_destroy(&net.lock);
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
    atomic_fetch_sub_explicit(&net.peers[op->peer].queued, 1, memory_order_relaxed);
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
    pthread_mutex_lock(&net.lock);
    net_peer_t *p = &net.peers[dest];
    if (tess_unlikely(!net_ep(dest))) {
        st = TESS_ERR_UCX;
        goto out;
    }
    hdr->seq      = p->send_seq;
    hdr->src      = (uint32_t)net.rank;
    net_op_t *op  = net_op_get(done, arg);
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
    pthread_mutex_unlock(&net.lock);
    return st;
}

/* ---- rendezvous receives ------------------------------------------------------------------ */

static void net_recv_done(int peer, tess_net_done_fn_t done, void *arg, ucs_status_t status)
{
    if (status != UCS_OK)
        tess_error(TESS_ERR_UCX, "rendezvous receive from process %d failed: %s", peer,
                   ucs_status_string(status));
    if (done)
        done(arg, net_status(status));
    net.peers[peer].rndv_pending = 0;
    net_deliver_held(peer);
}

static void net_recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    ucp_request_free(request);
    net_op_t          *op   = user_data;
    int                peer = op->peer;
    tess_net_done_fn_t done = op->done;
    void              *arg  = op->arg;
    atomic_fetch_sub_explicit(&net.outstanding, 1, memory_order_relaxed);
    net_op_put(op);
    net_recv_done(peer, done, arg, status);
}

tess_status_t tess_net_am_recv_into(void *desc, void *buf, size_t len, tess_net_done_fn_t done,
                                    void *arg)
{
    int peer = net.delivering_peer;
    if (peer < 0)
        tess_fatal("tess_net_am_recv_into called outside an active-message delivery");
    net.delivery_recv            = 1;
    net.peers[peer].rndv_pending = 1;
    net_op_t *op = net_op_get(done, arg);
    if (!op)
        tess_fatal("out of memory receiving a rendezvous message from process %d", peer);
    op->peer = peer;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am   = net_recv_cb,
        .user_data    = op,
    };
    ucs_status_ptr_t req = ucp_am_recv_data_nbx(net.worker, desc, buf, len, &rp);
    if (req == NULL) {
        net_op_put(op);
        /* Completed in place: the source unblocks once this delivery returns. */
        if (done)
            done(arg, TESS_OK);
        net.peers[peer].rndv_pending = 0;
        return TESS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        net_op_put(op);
        net.peers[peer].rndv_pending = 0;
        return net_ucx_error("ucp_am_recv_data_nbx", UCS_PTR_STATUS(req));
    }
    atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed);
    return TESS_INPROGRESS; /* net_recv_cb frees req */
}

/* ---- progress ---------------------------------------------------------------------------- */

static unsigned net_progress_locked(void)
{
    unsigned total = 0, n;
    do {
        n = ucp_worker_progress(net.worker);
        total += n;
    } while (n > 0 && total < 64);
    return total;
}

unsigned tess_net_progress(void)
{
    if (pthread_mutex_trylock(&net.lock) != 0)
        return 0;
    unsigned n = net_progress_locked();
    pthread_mutex_unlock(&net.lock);
    return n;
}

unsigned tess_net_progress_wait(void)
{
    pthread_mutex_lock(&net.lock);
    unsigned n = net_progress_locked();
    pthread_mutex_unlock(&net.lock);
    return n;
}

unsigned tess_net_backlog(int dest)
{
    return atomic_load_explicit(&net.peers[dest].queued, memory_order_relaxed);
}

size_t tess_net_outstanding(void)
{
    return atomic_load_explicit(&net.outstanding, memory_order_relaxed);
}

tess_status_t tess_net_arm(void)
{
    if (net.efd < 0)
        return TESS_ERR_UNSUPPORTED;
    if (pthread_mutex_trylock(&net.lock) != 0)
        return TESS_ERR_BUSY;
    ucs_status_t us = ucp_worker_arm(net.worker);
    pthread_mutex_unlock(&net.lock);
    if (us == UCS_OK)
        return TESS_OK;
    if (us == UCS_ERR_BUSY)
        return TESS_ERR_BUSY;
    return net_ucx_error("ucp_worker_arm", us);
}

int tess_net_event_fd(void)
{
    return net.efd;
}

/* ---- registration and get ---------------------------------------------------------------- */

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
    pthread_mutex_lock(&net.lock);
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
    pthread_mutex_unlock(&net.lock);
    *mem_p      = m;
    *rkey_p     = m->rkey;
    *rkey_len_p = m->rkey_len;
    return TESS_OK;

err_unmap:
    ucp_mem_unmap(net.context, m->mem);
err_unlock:
    pthread_mutex_unlock(&net.lock);
    free(m);
    return st;
}

void tess_net_mem_deregister(tess_net_mem_h m)
{
    if (!m)
        return;
    pthread_mutex_lock(&net.lock);
    ucp_rkey_buffer_release(m->rkey);
    ucp_mem_unmap(net.context, m->mem);
    pthread_mutex_unlock(&net.lock);
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
    pthread_mutex_lock(&net.lock);
    ucp_rkey_h   rk;
    if (!net_ep(src)) {
        st = TESS_ERR_UCX;
        goto out;
    }
    ucs_status_t us = ucp_ep_rkey_unpack(net.peers[src].ep, rkey, &rk);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_ep_rkey_unpack", us);
        goto out;
    }
    net_op_t *op = net_op_get(done, arg);
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
    ucs_status_ptr_t req = ucp_get_nbx(net.peers[src].ep, buf, len, raddr, rk, &rp);
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
    pthread_mutex_unlock(&net.lock);
    return st;
}
