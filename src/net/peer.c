/*
 * peer.c — UCX's peer-failure handling for the net component: a peer process that is gone
 * (killed, crashed, its node or network lost: a connection reset, a failed keepalive) is reported
 * on the endpoints to it, and ends the job at once with a message naming it and its host, instead
 * of leaving this process waiting for it for ever when the launcher does not end the job.
 */
#include "peer.h"

#include <stdio.h>
#include <stdlib.h>

#define NET_HOST_LEN 64

static struct {
    int   enabled;
    int   closing; /* tess_net_fini: peers going away are expected */
    int   size;
    char *hosts;   /* [rank * NET_HOST_LEN]: host names, for messages */
} peer;

/* The hosts of all processes, for the message (none: the message names the rank only). */
void tess_net_peer_hosts_init(MPI_Comm comm, int size)
{
    if (!peer.enabled)
        return;
    char me[NET_HOST_LEN] = "";
    int  len              = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS)
        snprintf(me, sizeof(me), "%.*s", len, name);
    peer.hosts = tess_malloc((size_t)size * NET_HOST_LEN, "host names");
    peer.size  = size;
    if (peer.hosts && MPI_Allgather(me, NET_HOST_LEN, MPI_CHAR, peer.hosts, NET_HOST_LEN,
                                    MPI_CHAR, comm) != MPI_SUCCESS) {
        free(peer.hosts);
        peer.hosts = NULL;
    }
}

static const char *net_host(int rank)
{
    const char *h = peer.hosts && rank >= 0 && rank < peer.size ?
                        peer.hosts + (size_t)rank * NET_HOST_LEN : NULL;
    return h && *h ? h : "an unknown host";
}

/* Shared memory reports a peer that is gone only with its error handling on (a keepalive that
 * checks the peer's process); without it UCX would move same-node peers to TCP. CMA's gets need
 * "memory invalidation" under peer-failure handling (so that a failed peer cannot still read
 * this process's memory); a failure ends the job here, so exposing it keeps CMA's zero-copy
 * gets. A user's own UCX_* setting wins. */
void tess_net_peer_config(int enabled, ucp_config_t *config)
{
    peer.enabled = enabled;
    peer.closing = 0;
    if (!enabled)
        return;
    if (!getenv("UCX_POSIX_ERROR_HANDLING") && !getenv("UCX_SYSV_ERROR_HANDLING") &&
        !getenv("UCX_MM_ERROR_HANDLING"))
        ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
    if (!getenv("UCX_CMA_MEMORY_INVALIDATE"))
        ucp_config_modify(config, "MEMORY_INVALIDATE", "y");
}

_Noreturn static void net_peer_gone(int rank, ucs_status_t status)
{
    tess_fatal("process %d (on %s) is gone: UCX reports '%s' on the connection to it (it was "
               "killed or crashed, or its node or the network failed); the job cannot go on "
               "without it", rank, net_host(rank), ucs_status_string(status));
}

/* UCX fails the sends queued to a peer that is gone before it calls the endpoint's error
 * handler: the same message either way. */
void tess_net_peer_send_failed(int rank, ucs_status_t status)
{
    if (peer.enabled && !peer.closing &&
        (status == UCS_ERR_CONNECTION_RESET || status == UCS_ERR_ENDPOINT_TIMEOUT ||
         status == UCS_ERR_UNREACHABLE || status == UCS_ERR_NOT_CONNECTED))
        net_peer_gone(rank, status);
}

static void net_ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    if (!peer.closing)
        net_peer_gone((int)(intptr_t)arg, status);
}

void tess_net_peer_ep_params(ucp_ep_params_t *ep, int rank)
{
    if (!peer.enabled)
        return;
    ep->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep->err_mode       = UCP_ERR_HANDLING_MODE_PEER;
    ep->err_handler.cb  = net_ep_error_cb;
    ep->err_handler.arg = (void *)(intptr_t)rank;
}

void tess_net_peer_closing(void)
{
    peer.closing = 1;
}

void tess_net_peer_fini(void)
{
    free(peer.hosts);
    peer.hosts = NULL;
    peer.size  = 0;
}
