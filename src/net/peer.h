/*
 * peer.h — inside the net component (net.c and peer.c only): UCX's peer-failure handling. With
 * it every endpoint reports a peer process that is gone (killed, crashed, its node or network
 * lost), and that ends the job with a message naming the peer and its host.
 *
 * Threads: tess_net_peer_config, _hosts_init, _closing and _fini on the thread that calls
 * tess_net_init/fini; _ep_params where endpoints are created; _send_failed and the endpoints'
 * error handler inside progress (the net lock held).
 */
#ifndef TESS_NET_PEER_H
#define TESS_NET_PEER_H

#include "util/util.h"

#include <mpi.h>
#include <ucp/api/ucp.h>

/** Turn the handling on (enabled != 0) or off, and adjust the UCX configuration for it. */
void tess_net_peer_config(int enabled, ucp_config_t *config);
/** Gather the host names of the `size` processes of comm, for the message (collective). */
void tess_net_peer_hosts_init(MPI_Comm comm, int size);
/** Add the error handling to the parameters of the endpoint to process `peer`. */
void tess_net_peer_ep_params(ucp_ep_params_t *ep, int peer);
/** A send to `peer` completed with `status`: ends the job if it says the peer is gone. */
void tess_net_peer_send_failed(int peer, ucs_status_t status);
/** From now on peers going away are expected (tess_net_fini). */
void tess_net_peer_closing(void);
void tess_net_peer_fini(void);

#endif /* TESS_NET_PEER_H */
