/*
 * net_int.h — the net component's own types and state, shared by net.c (init, active
 * messages, progress), lane.c (workers, addresses, event fd) and rma.c (registration, get).
 * Locking as net.c's header comment says.
 */
#ifndef TESS_NET_INT_H
#define TESS_NET_INT_H

#include "net.h"

#include <pthread.h>
#include <sched.h>
#include <ucp/api/ucp.h>

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
    ucp_rkey_h         rkey;   /* for gets: destroyed at completion, unless kept in... */
    struct net_rkey   *kept;   /* ...the lane's cache of unpacked keys (released there) */
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
    tess_hmap_t     rkeys;           /* (process, key id) -> net_rkey (rma.c), made on first use */
    uint64_t        rkey_clock;
    /* Sends by PEs that found the lane locked: posted, in order, by whoever holds the lock
     * when it releases it (net_lane_unlock), so that a sender never sleeps on the lock. */
    tess_mpsc_t     sendq;
    _Atomic int     sendq_len;       /* pushed and counted, not yet posted */
    /* Sends made eager by eager_node and their bytes: written by the lock holder, read by
     * anyone (tess_net_eager_stats). */
    _Atomic uint64_t eager_sends, eager_bytes;
    _Atomic uint64_t am_sends;       /* active messages posted (the same rule) */
} net_lane_t;

typedef struct net_state {
    ucp_context_h   context;
    MPI_Comm        comm;   /* the runtime's, for the closing barrier */
    pthread_mutex_t ctx_lock; /* registrations */
    int             rank, size, nlanes;
    net_lane_t     *lanes;
    char           *addrs;  /* the workers' addresses (endpoints are created on first use) */
    int            *addr_displs; /* [process * nlanes + lane] */
    net_am_t        am[TESS_NET_AM_MAX];
    _Atomic size_t  outstanding;
    _Atomic uint64_t rkey_unpacks, rkey_hits; /* remote keys unpacked for gets, kept ones used */
    int             efd;    /* lane 0's event fd, or an epoll set of every lane's */
    int             epfd;
    uint64_t        mem_types;
    size_t          eager_node; /* payloads up to this to a process of this node go eagerly */
    uint8_t        *same_node;  /* [process]: 1 if it runs on this node (its UCX: shared memory) */
} net_state_t;

extern net_state_t tess_net_state_;
#define net tess_net_state_

/* The lane this thread sends on (tess_net_set_lane), and the lane whose delivery callback runs
 * on it (for tess_net_am_recv_into). */
extern _Thread_local int         tess_net_my_lane_;
extern _Thread_local net_lane_t *tess_net_delivering_;

static inline net_lane_t *net_lane_self(void)
{
    return &net.lanes[tess_net_my_lane_ < net.nlanes ? tess_net_my_lane_ : 0];
}

static inline tess_status_t net_ucx_error(const char *what, ucs_status_t st)
{
    return tess_error(TESS_ERR_UCX, "%s: %s", what, ucs_status_string(st));
}

static inline tess_status_t net_status(ucs_status_t st)
{
    return st == UCS_OK ? TESS_OK : TESS_ERR_UCX;
}

/* ThreadSanitizer cannot see an order made through another process: a PE sends on its lane,
 * the peer answers (or gets this process's memory) on another lane, and a second PE progresses
 * that lane. Every lane's critical sections also go through one acq_rel counter in TSan
 * builds, which gives it the order that one process-wide lock gave it with one lane; other
 * builds have nothing here. */
#if defined(__SANITIZE_THREAD__)
extern _Atomic unsigned long tess_net_tsan_edge_;
#define NET_TSAN_SYNC() \
    ((void)atomic_fetch_add_explicit(&tess_net_tsan_edge_, 1, memory_order_acq_rel))
#else
#define NET_TSAN_SYNC() ((void)0)
#endif

/* Lock and unlock a lane (with the TSan edge above). */
static inline void net_lane_lock(net_lane_t *l)
{
    pthread_mutex_lock(&l->lock);
    NET_TSAN_SYNC();
}

static inline int net_lane_trylock(net_lane_t *l)
{
    if (pthread_mutex_trylock(&l->lock) != 0)
        return 0;
    NET_TSAN_SYNC();
    return 1;
}

int  net_sendq_drain(net_lane_t *l);   /* net.c: post the queued sends (lock held) */
void net_sendq_discard(net_lane_t *l); /* net.c: drop what is left at close, with a warning */

/* Unlock, having posted the sends that others queued meanwhile. A sender that queues a send
 * counts it once its push is done, then tries the lock; whoever holds the lock looks at the
 * count after releasing it (both through read-modify-writes of the count), so one of the two
 * posts it. A count above zero means a pushed send is not posted yet; when a drain pops nothing
 * it sits behind a push another PE has not finished, and the holder tries again after giving
 * up the core (returning then could strand it: that pusher may have tried the lock, and
 * failed, while the holder still had it). */
static inline void net_lane_unlock(net_lane_t *l)
{
    for (;;) {
        int drained = 1;
        if (atomic_load_explicit(&l->sendq_len, memory_order_relaxed) > 0)
            drained = net_sendq_drain(l);
        NET_TSAN_SYNC();
        pthread_mutex_unlock(&l->lock);
        /* A read-modify-write, not a load: it reads the last count (a queued send counted after
         * our unlock reads, through its own read-modify-write, that we unlocked). */
        if (atomic_fetch_add_explicit(&l->sendq_len, 0, memory_order_seq_cst) <= 0)
            return;
        if (!drained)
            sched_yield();
        if (!net_lane_trylock(l))
            return;
    }
}

/* net.c */
net_op_t *net_op_get(net_lane_t *l, tess_net_done_fn_t done, void *arg);
void      net_op_put(net_op_t *op);
ucp_ep_h  net_ep(net_lane_t *l, int i);
ucs_status_t net_am_cb(void *arg, const void *header, size_t header_length, void *data,
                       size_t length, const ucp_am_recv_param_t *param);
/* lane.c: the lanes' workers, their addresses and the event fd over them */
/* rma.c: destroy every lane's kept remote keys (before the endpoints close). */
void          net_rkeys_release(void);
tess_status_t net_lane_create(net_lane_t *l, int index, int wakeup);
void          net_lane_destroy(net_lane_t *l);
tess_status_t net_lanes_connect(MPI_Comm comm, char **all_p, int **displs_p);
void          net_event_fd_init(void);


#endif /* TESS_NET_INT_H */
