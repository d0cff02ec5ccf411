/*
 * lane.c — the net component's lanes: a UCX worker each (serialized mode, behind the lane's
 * lock, with this layer's active-message handlers), the exchange of every lane's address with
 * every process at init, and the one event fd over them all.
 */
#include "net_int.h"
#include "peer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

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

void net_lane_destroy(net_lane_t *l)
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
    net_sendq_discard(l);
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

tess_status_t net_lane_create(net_lane_t *l, int index, int wakeup)
{
    ucs_status_t us;
    pthread_mutex_init(&l->lock, NULL);
    tess_mpsc_init(&l->sendq);
    atomic_store(&l->sendq_len, 0);
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
void net_event_fd_init(void)
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

/* Every lane's address to every process: on return (*displs_p)[p * nlanes + l] is the offset
 * in *all_p of process p's lane-l worker address. Collective over comm. */
tess_status_t net_lanes_connect(MPI_Comm comm, char **all_p, int **displs_p)
{
    char *blob = NULL;
    int   len  = 0;
    tess_status_t st = net_lane_addresses(&blob, &len);
    if (st != TESS_OK)
        return st;
    st = net_exchange_addresses(comm, blob, len, all_p, displs_p);
    free(blob);
    return st;
}
