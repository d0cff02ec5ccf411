/*
 * dc_int.h — private to src/devcomm: control-message layouts, the process's staging state, the
 * interface every message path implements (dc_path_ops_t) and the common part the paths call.
 *
 * The layer is a common part and five paths:
 *
 *   devcomm.c         the layer: set-up, path choice, the send entry point, validation and
 *                     dispatch of control messages, counters
 *   dc_common.c       what the paths share: plain events, control messages, send records and
 *                     their completion, receive records (post, deliver, forward),
 *                     acknowledgements, local notices, the FIFO of sends waiting for resources
 *   dc_ipc.c          what the IPC paths share: the node's export table (comm buffers,
 *                     interprocess events), slots and events, the copy out of a peer's memory
 *   dc_d2d.c          path d2d (same process), with its ordering points and batched receives
 *   dc_ipc_staged.c   path ipc staged (through the sender's comm buffer, whole or in parts)
 *   dc_ipc_direct.c   path ipc direct (from the sender's allocation, mapping cache)
 *   dc_rdma_direct.c  path rdma direct (UCX get into the destination, registration cache)
 *   dc_rdma_staged.c  path rdma staged (pinned bounce buffers in a pipeline)
 *
 * A path file calls the common part and nothing of another path; the common part reaches a path
 * only through its table (dc_paths, dc_path_of).
 */
#ifndef TESS_DC_INT_H
#define TESS_DC_INT_H

#include "devcomm.h"
#include "core/trace.h"

#define DC_ALIGN        256
#define DC_RKEY_MAX     1024 /* bytes of one packed UCX key */
#define DC_MAP_CACHE    512  /* direct-IPC mappings kept open */
#define DC_REG_CACHE    256  /* RDMA registrations kept */

/* Control-message kinds (core message hdr.flags). */
enum dc_kind {
    DC_K_D2D = 1,
    DC_K_STAGED,      /* IPC through the sender's comm buffer */
    DC_K_DIRECT,      /* IPC from the sender's allocation */
    DC_K_RDMA,        /* receiver gets from the sender's registered buffers */
    DC_K_RSTAGED,     /* RDMA through bounce buffers: the message's header */
    DC_K_CHUNK,       /* RDMA through bounce buffers: one staged chunk */
    DC_K_GOT,         /* (local) a get of a chunk or of RDMA buffers completed */
    DC_K_ACK,         /* to the sender: release staging resources, maybe run done */
    DC_K_DONE,        /* to the sender's PE: run the done callback */
    DC_K_PHEAD,       /* IPC staged in parts: the message's header */
    DC_K_PPART,       /* IPC staged in parts: one part, in a slot of the sender's buffer */
    DC_K_RACK,        /* to the sender: direct RDMA sends completed at the receiver (several) */
    DC_K_MAX
};

/* The fixed part of every data-carrying control message. Per-buffer records of the kind
 * follow, then the header bytes, then (RDMA) the packed keys. */
typedef struct dc_ctl {
    uint64_t a0, a1;
    uint64_t msg_id;            /* the sender's record of this send (0: none) */
    uint64_t sizes[TESS_DEV_MAX_BUFS];
    uint32_t nbufs, header_len;
    int32_t  event;             /* IPC event index, -1 none */
    uint32_t extra_len;         /* bytes after the header (RDMA keys) */
    uint64_t event_ptr;         /* D2D: the dc_sev_t in this process, 0 if none */
} dc_ctl_t;

typedef struct dc_rec_d2d    { uint64_t src; } dc_rec_d2d_t;
typedef struct dc_rec_staged { uint64_t offset; } dc_rec_staged_t;
typedef struct dc_rec_direct {
    tess_gpu_ipc_handle_t handle;
    uint64_t              alloc_id, offset;
    uint64_t              sbase, ssize; /* the allocation as the sender sees it */
} dc_rec_direct_t;
typedef struct dc_rec_rdma {
    uint64_t raddr;
    uint32_t rkey_off, rkey_len;
    uint64_t key_id;  /* the registration's serial number (0: a registration for this send
                       * only): the receiver keeps the unpacked key under it */
} dc_rec_rdma_t;

/* The key id of every process's bounce buffers (registration serials stay far below). */
#define DC_BOUNCE_KEY_ID (UINT64_C(1) << 62)

/* RDMA staged: one chunk. */
typedef struct dc_chunk_msg {
    uint64_t msg_id;
    uint32_t buf, slot;     /* buffer index at the receiver, sender bounce slot */
    uint64_t offset, len;
    uint32_t nchunks, pad;
} dc_chunk_msg_t;

/* IPC staged in parts: one part. */
typedef struct dc_part_msg {
    uint64_t msg_id;
    uint64_t offset, len;   /* where in the receiver's buffer `buf` */
    uint64_t slot;          /* offset of the part in the sender's comm buffer */
    int32_t  event;         /* the sender's IPC event recorded after the part's copy-in */
    uint32_t buf, nparts, pad;
} dc_part_msg_t;

/* Acknowledgement to the sender. */
typedef struct dc_ack_msg {
    uint32_t kind;          /* what it releases: DC_K_STAGED/DIRECT/RDMA/CHUNK */
    int32_t  event;
    uint64_t offset, size;  /* staged slot, or bounce slot in offset */
    uint64_t msg_id;        /* the sender's record to complete (0: none) */
} dc_ack_msg_t;

/* Acknowledgement of direct RDMA sends (DC_K_RACK): `n` send ids follow, sends of the PE the
 * message goes to that one receiving PE completed (dc_rdma_direct.c says when it leaves). */
typedef struct dc_rack_msg {
    uint32_t n, pad;
    /* uint64_t ids[n] */
} dc_rack_msg_t;
#define DC_RACK_MAX 64 /* ids one acknowledgement carries at most (TESS_RDMA_ACK_MAX's bound) */

/* What the sender keeps of a send until its acknowledgement or copy completion: control
 * messages name it by id, so nothing that arrives is followed as a pointer. `pe` is the PE that
 * called the send: its callback runs there, whichever PE of the process learns of the
 * completion (a waiting send may be issued, and so acknowledged, on another PE). */
typedef struct dc_sent {
    tess_dev_done_fn_t done;
    void              *done_arg;
    int                pe;
    const struct dc_path_ops *holder; /* the path whose resources regs are (NULL: none) */
    struct dc_reg     *regs[TESS_DEV_MAX_BUFS];
} dc_sent_t;

static inline size_t dc_align_up(size_t n) { return TESS_ALIGN_UP(n, DC_ALIGN); }

/* A map key for something of process `proc` named by a 48-bit id of that process. */
static inline uint64_t dc_proc_key(int proc, uint64_t id) { return ((uint64_t)proc << 48) ^ id; }

static inline size_t dc_rec_size(unsigned kind)
{
    switch (kind) {
    case DC_K_D2D:    return sizeof(dc_rec_d2d_t);
    case DC_K_STAGED: return sizeof(dc_rec_staged_t);
    case DC_K_DIRECT: return sizeof(dc_rec_direct_t);
    case DC_K_RDMA:   return sizeof(dc_rec_rdma_t);
    default:          return 0;
    }
}

static inline void *dc_recs(dc_ctl_t *c) { return c + 1; }
static inline const void *dc_header(const dc_ctl_t *c, unsigned kind)
{
    return (const char *)(c + 1) + c->nbufs * dc_rec_size(kind);
}
static inline const void *dc_extra(const dc_ctl_t *c, unsigned kind)
{
    return (const char *)dc_header(c, kind) + c->header_len;
}

/* A send waiting for a staging resource. */
typedef struct dc_pending {
    struct dc_pending *next;
    int                kind;    /* DC_K_STAGED, DC_K_DIRECT, DC_K_CHUNK, DC_K_PPART: names the
                                 * path that issues it (dc_path_of) */
    int                dst_pe;
    uint64_t           a0, a1;
    tess_dev_buf_t     bufs[TESS_DEV_MAX_BUFS];
    int                nbufs;
    tess_gpu_event_h   ready;   /* recorded on the sender's stream at send time */
    uint64_t           sent_id; /* the send's record, 0 none */
    void              *header;
    size_t             header_len;
    void              *staged;  /* DC_K_CHUNK, DC_K_PPART: the path's state of the message */
} dc_pending_t;

/* A peer process of the node as this one sees it. */
typedef struct dc_peer {
    int                    node_index;  /* position in the node's export table, -1 elsewhere */
    tess_gpu_ipc_handle_t  comm_handle;
    size_t                 comm_size;
    void                  *comm;        /* opened comm buffer, NULL until first use */
    tess_gpu_ipc_handle_t *ev_handles;  /* [nipc] */
    tess_gpu_event_h      *events;      /* [nipc] opened, NULL until first use */
    int                    nipc;
    uint64_t               bounce_raddr;
    void                  *bounce_rkey;
    size_t                 bounce_rkey_len;
} dc_peer_t;

/* A D2D ordering point: an event recorded once on the sender's stream and waited on by every
 * receiver of the sends made from that point (one, or a batch). Back to the pool after the
 * last reference: the batch's own and one per receiver, dropped once its wait was issued (or,
 * where a wait does not capture the record, once the waiting stream passed it). */
typedef struct dc_sev {
    struct dc_sev    *next;   /* in the pool */
    tess_gpu_event_h  ev;
    tess_gpu_stream_h stream; /* where ev was recorded: a receive on it needs no wait */
    _Atomic int       refs;
} dc_sev_t;

/* The counters of the message paths (tess_dc_stats_t) that PEs move without the layer's lock:
 * each PE counts in its own dc_pe_t, other threads in dc.off_pe; tess_dc_get_stats sums. */
enum dc_count {
    DC_C_SENT,                  /* + path: messages per path */
    DC_C_D2D_EVENTS = DC_C_SENT + 3,
    DC_C_D2D_BATCHED,
    DC_C_RB_LAUNCHES,
    DC_C_RB_SHARED,
    DC_C_RB_FLIPS,
    DC_C_RB_UNJOINED,
    DC_C_IN_PLACE,
    DC_C_D2D_SAME_STREAM,
    DC_C_RDMA_IDLE_SENDS,
    DC_C_RDMA_IDLE_RECVS,
    DC_C_RDMA_QUIET_RECVS,
    DC_C_RDMA_FAST_RECVS,
    DC_C_RDMA_RECV_QUERIES,
    DC_C_RDMA_SPEC_IDLE,
    DC_C_RDMA_SPEC_BUSY,
    DC_C_RDMA_SPEC_SPENT,
    DC_C_RDMA_ACKS,
    DC_C_RDMA_ACKED,
    DC_C_N
};

typedef struct dc_state {
    pthread_mutex_t   lock;
    tess_gpu_stream_h stream; /* for deferred staging copies */

    /* Plain events for deferred sends, and D2D ordering points (any PE takes, any PE
     * returns). */
    tess_gpu_event_h *ev_free;
    size_t            ev_nfree, ev_cap;
    dc_sev_t         *sev_free;

    /* IPC, staged: this process's comm buffer and its interprocess events. */
    void             *comm;
    size_t            comm_size;
    struct dc_range  *comm_free;   /* free ranges, sorted by offset */
    size_t            part;        /* larger staged messages move in parts of this size */
    tess_gpu_event_h *ipc_events;
    int               nipc;
    int              *ipc_free;
    int               ipc_nfree;
    dc_peer_t        *peers;       /* [processes] */

    tess_hmap_t       exports;     /* alloc_id -> exported handle (direct IPC, sender) */
    tess_hmap_t       maps;        /* (process, alloc_id) -> mapping (direct IPC, receiver) */
    uint64_t          map_clock;

    /* RDMA. */
    tess_hmap_t       regs;        /* alloc_id -> registration */
    tess_hmap_t       sent;        /* id -> dc_sent_t */
    uint64_t          next_sent;
    uint64_t          reg_clock;
    uint64_t          reg_serial;  /* the last registration's serial number */
    int               rdma_staged; /* bounce buffers instead of gets into device memory */
    void             *bounce;      /* pinned: [send slots][recv slots] */
    size_t            chunk;
    int               nbounce;     /* slots per direction */
    tess_net_mem_h    bounce_mem;
    int              *bsend_free, bsend_nfree;
    int              *brecv_free, brecv_nfree;
    uint64_t          next_msg_id;

    dc_pending_t     *pending, *pending_tail; /* sends waiting for resources (FIFO) */
    pthread_mutex_t   pump_lock;   /* one thread issues waiting sends at a time */
    _Atomic int       pump_again;
    struct dc_rchunk *chunk_wait, *chunk_wait_tail; /* chunks waiting for a receive slot */
    _Atomic int       busy;        /* work in flight that is not a message */

    tess_dc_stats_t   stats;       /* under the lock: the counters of the staging paths */
    _Atomic uint64_t  off_pe[DC_C_N]; /* counted by threads that are not PEs (dc_count) */
    const tess_dc_ops_t *ops;
    uint16_t          h_ctl;
    int               ipc_mode;    /* 0 auto, 1 staged, 2 direct */
    int               rb_comm;     /* batched receives of several streams: DC_RB_* (dc_d2d.c) */
    tess_gpu_stream_h *rb_streams; /* [ppn] each PE's stream for those, made on first use */
    tess_gpu_stream_h *ready_streams; /* [ppn] each PE's ready stream, made on first use */
    struct dc_pe     *pes;         /* [ppn] what each PE keeps to itself (dc_pe_t) */
    _Atomic uint64_t   rb_epoch;   /* bumped by tess_dc_streams_dirty */
    int               forced_path; /* -1 auto */
    const struct dc_path_ops *by_kind[DC_K_MAX]; /* the path of each kind (dc_path_of) */
} dc_state_t;

extern dc_state_t dc;

/* dc.rb_comm: how batched d2d receives for several streams are copied (TESS_BATCH_STREAM). */
enum { DC_RB_OFF, DC_RB_ON, DC_RB_AUTO };

/* A mask of control-message kinds. */
#define DC_KIND(k) (1u << (k))

/* ---- the path interface ------------------------------------------------------------------ */

/* A send as the layer's entry point took it (tess_dc_send's arguments). */
typedef struct dc_send {
    int                        dst_pe;
    uint64_t                   a0, a1;
    const void                *header;
    size_t                     header_len;
    const tess_dev_buf_t      *bufs;
    int                        nbufs;
    tess_gpu_stream_h          stream;
    tess_dev_done_fn_t         done;
    void                      *done_arg;
    const tess_gpu_ptr_info_t *info; /* ipc direct: the buffers' allocations, as the path
                                      * choice found them (NULL on other paths) */
} dc_send_t;

/* What every message path implements. The common part calls a path through this table only:
 * sends through the one dc_path_choose picks, control messages, waiting sends and
 * acknowledgements through the path of their kind (dc_path_of), the hooks through dc_paths.
 * Optional entries are NULL. */
typedef struct dc_path_ops {
    const char   *name;
    unsigned      kinds;   /* the control-message kinds it sends and receives (DC_KIND) */
    /* Set up and take down the path's own state (optional; init runs after the IPC resources
     * and the RDMA mode are settled, fini before the IPC resources go). */
    tess_status_t (*init)(void);
    void          (*fini)(void);
    /** Send (PE thread). */
    tess_status_t (*send)(const dc_send_t *s);
    /** A control message of one of its kinds arrived (validated); false when it is held back
     *  (d2d batches: counted processed at the flush). */
    bool          (*recv)(tess_msg_t *m, unsigned kind);
    /** Issue a waiting send of one of its kinds: 1 issued (p is then freed by the caller), 0
     *  still no resource (optional). */
    int           (*issue)(dc_pending_t *p);
    /** An acknowledgement of one of its kinds: release the staging resources it names
     *  (optional; the common part completes the send record and pumps). */
    void          (*release)(const dc_ack_msg_t *ack);
    /** Release what a completed send record of this path holds (rec->holder is the path). */
    void          (*release_sent)(dc_sent_t *rec);
    /** Staging resources were freed: go on with receive-side work waiting for them
     *  (optional; after the waiting sends). */
    void          (*pump)(void);
    /** Run what the calling PE holds back, before it takes a message of another kind or
     *  handler (optional; PE thread). */
    void          (*flush)(void);
    /** Per scheduler pass (optional; PE thread): work finished, how many. */
    unsigned      (*progress)(void);
    /** The PE found no work in a pass (optional; PE thread). */
    void          (*idle)(tess_pe_t *pe);
} dc_path_ops_t;

extern const dc_path_ops_t dc_d2d_path, dc_ipc_staged_path, dc_ipc_direct_path,
                           dc_rdma_direct_path, dc_rdma_staged_path;

/* The path a control message, waiting send or acknowledgement of `kind` belongs to (NULL for
 * the common kinds and out of range). */
static inline const dc_path_ops_t *dc_path_of(unsigned kind)
{
    return kind < DC_K_MAX ? dc.by_kind[kind] : NULL;
}

/* ---- the common part (dc_common.c) ------------------------------------------------------- */

tess_status_t dc_event_get(tess_gpu_event_h *e_p);
void          dc_event_put(tess_gpu_event_h e);
void          dc_event_put_when_done(tess_gpu_event_h e, tess_gpu_stream_h waiter);
/** fn(arg) once `waiter` is past the event waits enqueued on it so far. */
void          dc_after_wait(tess_gpu_stream_h waiter, tess_gpu_cont_fn_t fn, void *arg);

tess_msg_t   *dc_ctl_alloc(unsigned kind, int nbufs, size_t header_len, size_t extra_len,
                           dc_ctl_t **ctl_p);
/** Fill the fixed part and the header of a send's control message. */
void          dc_ctl_fill(dc_ctl_t *c, const dc_send_t *s, unsigned kind);
void          dc_send_ctl(tess_msg_t *m, unsigned kind, int dst_pe);
void          dc_send_ack(int src_pe, const dc_ack_msg_t *ack);
/** Send `ack` to src_pe once the work enqueued on `stream` so far has completed. */
void          dc_ack_after(tess_gpu_stream_h stream, int src_pe, const dc_ack_msg_t *ack);
/** The same as a continuation: dc_ack_cont(dc_ack_cont_arg(src_pe, ack)) sends it. */
void         *dc_ack_cont_arg(int src_pe, const dc_ack_msg_t *ack);
void          dc_ack_cont(void *arg);
/** fn(arg) on PE `pe` of this process, through its queue (a DC_K_GOT notice). */
void          dc_notify(int pe, tess_gpu_cont_fn_t fn, void *arg);
/** A local notice arrived (validated: from this process): run it. */
void          dc_notice_run(tess_msg_t *m);

/** Keep a record of a send (any PE); returns its id, never 0. regs (may be NULL) are resources
 *  of path `holder` that its release_sent gives back when the record completes. */
uint64_t      dc_sent_add(tess_dev_done_fn_t done, void *done_arg,
                          const dc_path_ops_t *holder, struct dc_reg **regs);
/** Complete send record `id` of this process: its done callback runs on the record's PE (here,
 *  or after a source-done notice to it); 0 does nothing. */
void          dc_run_done(uint64_t id);
/** Complete send record `id` (an acknowledgement or a source-done notice named it). */
void          dc_complete(uint64_t id, const char *from);
/** dc_run_done once the work enqueued on `stream` so far has completed. */
void          dc_done_after(tess_gpu_stream_h stream, uint64_t id);
/** The same as a continuation: dc_done_cont(dc_done_cont_arg(id)) runs it. */
void         *dc_done_cont_arg(uint64_t id);
void          dc_done_cont(void *arg);

/** Queue a send that waits for a staging resource: kind names its path, which issues it. */
void          dc_pending_push(dc_pending_t *p);
/** Queue a send of kind whose path issues it again from s (the header and buffers are copied,
 *  a ready event is recorded on the sender's stream). */
void          dc_defer(int kind, const dc_send_t *s, uint64_t sent_id);
/** A deferred send, now that its path has the resources: as a send on the layer's stream,
 *  ordered after the work that preceded it on the sender's stream. */
dc_send_t     dc_deferred_send(const dc_pending_t *p);
/** Queue a message staged in chunks or parts (DC_K_CHUNK, DC_K_PPART) that is still waiting for
 *  resources; the pump goes on with it. */
void          dc_pending_push_staged(int kind, int dst_pe, void *staged);
/** Issue waiting sends in order while resources last, then the paths' pumps. */
void          dc_pump(void);
/** Drop the waiting sends (fini). */
void          dc_pending_drop(void);

/* Receiver side: post (or temporaries when the target moved) and the final delivery. */
typedef struct dc_recv {
    tess_dc_msg_t     m;
    size_t            sizes[TESS_DEV_MAX_BUFS];
    void             *dst[TESS_DEV_MAX_BUFS];
    tess_gpu_stream_h stream;
    unsigned          flags;
    int               forward;  /* dst are temporaries */
    int               marked;   /* the last copy carries a continuation (then_same applies) */
    tess_msg_t       *keep;     /* the control message, kept while the header is needed */
    uint64_t          trace_flow; /* tracing: the device message's flow id (0: none) */
    int               trace_path; /* tracing: index in tess_core_trace_path_names */
    struct dc_recv   *next;       /* in a PE's free records (dc_pe_t) */
} dc_recv_t;

/* What a PE keeps to itself, a cache line apart from the next PE's: free receive records
 * (a receive takes one and gives it back at delivery), free ordering points and plain events
 * (taken by sends and batches, given back by whichever PE drops the last reference), and its
 * share of the counters. So a PE that sends and receives steadily allocates nothing and takes
 * no lock that other PEs take (a calloc and a free a message, and the layer's lock three times a
 * batch, before). Only the PE's own thread writes it; tess_dc_get_stats reads the counters from
 * any thread. Threads that are not PEs use the process's pools and dc.off_pe. */
#define DC_RECV_CACHE 64
#define DC_SEV_CACHE  64
#define DC_EV_CACHE   16
typedef struct dc_pe {
    TESS_ALIGNED dc_recv_t *recv_free;
    int                     nrecv;
    struct dc_sev          *sev_free;  /* the d2d path's */
    int                     nsev;
    tess_gpu_event_h        ev[DC_EV_CACHE];
    int                     nev;
    _Atomic uint64_t        count[DC_C_N];
} dc_pe_t;

/* The calling PE's own part (NULL on other threads). */
static inline dc_pe_t *dc_pe_mine(void)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe && dc.pes ? &dc.pes[tess_core_pe_local(pe)] : NULL;
}

/* Add n to counter k: the PE's own (no other thread writes it: a load and a store), else the
 * process's shared one. */
static inline void dc_count(enum dc_count k, uint64_t n)
{
    dc_pe_t *p = dc_pe_mine();
    if (p)
        atomic_store_explicit(&p->count[k],
                              atomic_load_explicit(&p->count[k], memory_order_relaxed) + n,
                              memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&dc.off_pe[k], n, memory_order_relaxed);
}
dc_recv_t    *dc_recv_begin(tess_msg_t *m, unsigned kind);
/* The copies are enqueued on r->stream: deliver now or after completion; frees r. */
void          dc_recv_finish(dc_recv_t *r);
void          dc_recv_free(dc_recv_t *r);
/** Free the calling PE's cached receive records and events, and the process's events (fini). */
void          dc_caches_fini(void);

/** The calling PE's stream in table ([ppn]), made on first use and destroyed with the layer;
 *  NULL off a PE or when it cannot be made (PE thread). */
tess_gpu_stream_h dc_pe_stream(tess_gpu_stream_h *table);
/** Whether s is the calling PE's ready stream (tess_dc_ready_stream). */
bool              dc_is_ready_stream(tess_gpu_stream_h s);

/* Tracing: the copies of a receive on its stream, timed by the device, and its delivery. */
static inline int dc_trace_copy_begin(tess_gpu_stream_h s)
{
    return tess_unlikely(tess_core_trace_copies) ? tess_core_trace_dev_begin(s) : -1;
}
static inline void dc_trace_copy_end(int h, tess_gpu_stream_h s, int path, uint64_t bytes)
{
    if (tess_unlikely(h >= 0))
        tess_core_trace_dev_end(h, s, TESS_TEV_COPY, "copy", tess_core_trace_path_names[path],
                                bytes);
}
static inline uint64_t dc_recv_bytes(const dc_recv_t *r)
{
    uint64_t n = 0;
    for (int i = 0; i < r->m.nbufs; i++)
        n += r->sizes[i];
    return n;
}
static inline void dc_deliver(dc_recv_t *r)
{
    uint64_t t0 = TESS_TRACE_NOW();
    dc.ops->deliver(&r->m, r->dst, r->stream);
    if (tess_unlikely(t0))
        tess_trace_record(tess_trace_self_track(), TESS_TEV_DEVMSG, NULL, "deliver",
                          tess_core_trace_path_names[r->trace_path], t0, tess_time_ns() - t0,
                          r->trace_flow, dc_recv_bytes(r));
}

/* The network's memory type of this process's device memory. */
static inline int dc_mem_type(void)
{
    switch (tess_gpu_backend()) {
    case TESS_GPU_CUDA: return TESS_NET_MEM_CUDA;
    case TESS_GPU_HIP:  return TESS_NET_MEM_ROCM;
    default:            return TESS_NET_MEM_HOST;
    }
}

/* ThreadSanitizer cannot see an order made through another process. A send slot is filled by
 * the host backend's executor, announced by the PE that saw the copy complete, and read by UCX
 * serving the peer's get, on whichever PE progresses the lane the get came in on; it is filled
 * again only after the peer acknowledged the chunk, which it does once its get completed. With
 * one UCX worker per PE the reading PE and the announcing one share no lock and the order goes
 * through the peer (the lanes' TSan edge does not cover a progress call that was already
 * running when the announcement left), so TSan builds mark the bounce buffers as memory whose
 * accesses are ordered elsewhere. A direct send's registered buffer is the same case (written
 * by the executor, read by UCX serving the peer's get) and is marked when registered; TSan
 * keeps such marks after the memory is freed, which only the host backend's device arena can
 * reuse. Every byte is still checked by the device-message and migration tests. Other builds
 * have nothing here. */
#if defined(__SANITIZE_THREAD__)
void AnnotateBenignRaceSized(const char *file, int line, const volatile void *mem, long size,
                             const char *description);
#define dc_tsan_cross_process(mem, size)                                                         \
    AnnotateBenignRaceSized(__FILE__, __LINE__, (mem), (long)(size),                           \
                            "RDMA bounce buffers: ordered through the peer process")
#else
#define dc_tsan_cross_process(mem, size) ((void)(mem), (void)(size))
#endif

/* ---- what the IPC paths share (dc_ipc.c) ------------------------------------------------- */

tess_status_t dc_ipc_init(MPI_Comm node_comm);
void          dc_ipc_fini(void);
/* Lock held: an event (none if ev_p is NULL) and, staged, a comm-buffer slot; 0 if none (or,
 * fifo, if sends wait before this one). */
int           dc_ipc_take(int staged, size_t total, size_t *off_p, int *ev_p, int fifo);
/** An acknowledgement of ipc staged or direct: the slot (staged) and the event go back. */
void          dc_ipc_release(const dc_ack_msg_t *ack);
/* Lock held: process src's comm buffer and IPC event idx, opened on first use. */
void         *dc_ipc_peer_comm(int src);
tess_gpu_event_h dc_ipc_peer_event(int src, int idx);
/** Whether ipc direct can read every non-empty buffer (device memory with an allocation id);
 *  fills info[] with their allocations. */
int           dc_ipc_direct_ok(const tess_dev_buf_t *bufs, int nbufs, tess_gpu_ptr_info_t *info);
/** The comm-buffer bytes a staged message of these buffers takes. */
size_t        dc_ipc_staged_total(const tess_dev_buf_t *bufs, int nbufs);
/** The receive's copies out of a peer's memory: r->stream waits for `ev` (NULL: none), then one
 *  copy per buffer from srcs[]; the last copy carries fn(arg), which runs once they completed;
 *  then r finishes (dc_recv_finish). */
void          dc_ipc_copy_out(dc_recv_t *r, tess_gpu_event_h ev, const void *const *srcs,
                              tess_gpu_cont_fn_t fn, void *arg);

/* ---- devcomm.c --------------------------------------------------------------------------- */

/** The table of every path, in set-up order. */
extern const dc_path_ops_t *const dc_paths[];
extern const int                  dc_npaths;

#endif /* TESS_DC_INT_H */
