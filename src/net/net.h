/*
 * net.h — the net component: one UCX context, one worker ("lane") per process or one per PE,
 * endpoints to every process created on first use (worker addresses exchanged over MPI at init),
 * active messages delivered in order per source lane, memory registration with packed remote
 * keys, and RDMA get.
 *
 * Lanes: with one lane every thread sends through it; with several (one per PE), a thread sends
 * and gets on the lane set by tess_net_set_lane (lane l of one process talks to lane l of the
 * others), so messages are ordered per sending lane and destination process, not across the
 * lanes of a process.
 *
 * Threads: each worker runs in UCS_THREAD_MODE_SERIALIZED behind its lane's lock, so every
 * function may be called from any thread. Callbacks (AM delivery, send and get completion) run
 * inside tess_net_progress() on the thread that progresses their lane, with its lock held: they
 * must not call back into this layer except tess_net_am_recv_into().
 */
#ifndef TESS_NET_H
#define TESS_NET_H

#include "util/util.h"

#include <mpi.h>

/** Every AM header starts with this; the layer fills it in at send time. */
typedef struct tess_net_hdr {
    uint32_t seq; /* per (source, destination) sequence number: in-order delivery */
    uint32_t src; /* source process */
} tess_net_hdr_t;

/**
 * Delivery of one active message, in send order per source process. `hdr` (hdr_len bytes, the
 * header the sender passed, starting with tess_net_hdr_t) and `data` are valid during the call
 * only. When `data` is NULL and `len` > 0 the payload is still at the sender (rendezvous): the
 * callback must call tess_net_am_recv_into(desc, …) during this call, and no later message
 * from this source is delivered until that receive completes.
 */
typedef void (*tess_net_am_fn_t)(void *arg, const void *hdr, size_t hdr_len, const void *data,
                                 size_t len, void *desc);
/** A send or get finished (status TESS_OK, or an error). */
typedef void (*tess_net_done_fn_t)(void *arg, tess_status_t status);

typedef struct tess_net_params {
    MPI_Comm comm;      /* for the address exchange (collective over it) */
    int      wakeup;    /* request an event fd for blocking progress */
    int      peer_failure; /* UCX's peer-failure handling: a peer process that is gone ends
                            * the job with a message naming it (tess_fatal from progress) */
    int      lanes;     /* UCX workers in this process (the same on every process); 0 means 1 */
    size_t   eager_node; /* active-message payloads up to this size to a process of the same
                          * node are sent eagerly (UCX's shared-memory copy), larger ones by
                          * UCX's choice (a rendezvous get past its threshold); 0: all by UCX's */
    const int *node_of;  /* [process]: its physical node (equal ids share one), read at init */
} tess_net_params_t;

tess_status_t tess_net_init(const tess_net_params_t *params);
void          tess_net_fini(void);

/** The lane this thread sends and gets on from now on (0 ≤ lane < lanes; any thread; lane 0
 *  until set). */
void tess_net_set_lane(int lane);
/** Lanes in this process. */
int  tess_net_lanes(void);

/** Register the delivery function of AM id (0 ≤ id < TESS_NET_AM_MAX), before any traffic. */
#define TESS_NET_AM_MAX 8
tess_status_t tess_net_am_register(unsigned id, tess_net_am_fn_t fn, void *arg);

/**
 * Send an active message to process `dest`. `hdr` and `data` must stay valid and unchanged until
 * `done` is called (TESS_INPROGRESS), or until the call returns when it returns TESS_OK (then
 * `done` is not called). Never drops: when UCX is out of resources the send is queued inside
 * UCX. Errors are returned, or passed to `done`.
 */
tess_status_t tess_net_am_send(int dest, unsigned id, tess_net_hdr_t *hdr, size_t hdr_len,
                               const void *data, size_t len, tess_net_done_fn_t done, void *arg);

/** Receive a rendezvous payload (see tess_net_am_fn_t) into `buf`, which may be device memory
 *  of `mem_type` (0 host). `done` runs when the data is in place; delivery of the message then
 *  continues by the caller's own means. */
tess_status_t tess_net_am_recv_into(void *desc, void *buf, size_t len, tess_net_done_fn_t done,
                                    void *arg);

/** Progress this thread's lane if no other thread is doing so and, when it had nothing and
 *  `others` is nonzero, the other lanes that no thread is progressing; returns the number of
 *  events seen. */
unsigned tess_net_progress(int others);
/** Progress every lane, waiting for their locks. */
unsigned tess_net_progress_wait(void);
/** Sends to process `dest` on this thread's lane that UCX has queued and not yet completed: a
 *  hint, read without the lock, that the way to it is backed up (0 when every send so far went
 *  out at once). */
unsigned tess_net_backlog(int dest);
/** Operations started and not completed (sends, gets, rendezvous receives). */
size_t   tess_net_outstanding(void);
/** This process's active-message sends that went eagerly because their peer shares the node
 *  (tess_net_params_t.eager_node): their number and payload bytes so far, and the limit (any
 *  thread; the counts are exact once sends are done). */
void     tess_net_eager_stats(size_t *limit_p, uint64_t *sends_p, uint64_t *bytes_p);
/** Active messages this process has posted to UCX so far, every lane (any thread; exact once
 *  sends are done). */
uint64_t tess_net_am_sends(void);

/**
 * Blocking progress: arm every lane's worker for wake-up (one event fd covers them all); a lane
 * with unprocessed events is progressed here (any lane, as serving does) and armed again. Returns
 * TESS_OK when the caller may block on tess_net_event_fd() (nothing pending), TESS_ERR_BUSY when
 * that progress did work the caller should run first (or events remain, or another thread
 * holds a lane), TESS_ERR_UNSUPPORTED when no event fd exists (then poll with a timeout).
 */
tess_status_t tess_net_arm(void);
int           tess_net_event_fd(void);

/* ---- memory registration and RDMA get ---------------------------------------------------- */

typedef struct tess_net_mem *tess_net_mem_h;

enum tess_net_mem_type {
    TESS_NET_MEM_HOST = 0,
    TESS_NET_MEM_CUDA = 1,
    TESS_NET_MEM_ROCM = 2
};

/** Whether UCX can access memory of this type directly (for gets straight into device memory). */
int tess_net_mem_type_supported(int mem_type);

/** Register [addr, addr+len) for remote access; the packed key (*rkey_p, *rkey_len_p) describes it to peers
 *  (the buffer belongs to the registration). */
tess_status_t tess_net_mem_register(void *addr, size_t len, int mem_type, tess_net_mem_h *mem_p,
                                    const void **rkey_p, size_t *rkey_len_p);
void          tess_net_mem_deregister(tess_net_mem_h mem);

/** Get len bytes from process `src` at remote address `raddr` (rkey packed by the owner) into
 *  local `buf`. `done` runs from progress when the data is in place (then TESS_INPROGRESS is
 *  returned), or the get completed at once (TESS_OK, `done` is not called).
 *  `key_id`: 0, or a name the owner gives this packed key and no other (a registration's
 *  serial number): the key is then unpacked once per lane and kept for later gets with the
 *  same (src, key_id), up to a bound (least recently used ones are dropped). */
tess_status_t tess_net_get(int src, void *buf, size_t len, uint64_t raddr, const void *rkey,
                           size_t rkey_len, uint64_t key_id, tess_net_done_fn_t done,
                           void *arg);

/** Remote keys unpacked for gets so far, and gets that used a kept one (this process). */
void tess_net_rkey_stats(uint64_t *unpacks_p, uint64_t *hits_p);

/** Number of processes and this process's rank (as in the comm given to tess_net_init). */
int tess_net_rank(void);
int tess_net_size(void);

#endif /* TESS_NET_H */
