/*
 * devcomm.h — the devcomm component: device messages over three paths.
 *
 *   d2d   same process: the receiver's stream waits on an event recorded on the sender's
 *         stream, then one device-to-device copy per buffer on the receiver's stream.
 *   ipc   same node, other process. staged: the sender copies into a slot of its exported comm
 *         buffer and records an interprocess event; the receiver waits on it and copies out; an
 *         acknowledgement frees the slot. direct: the receiver opens the sender's allocation once
 *         (mapping cache keyed by allocation id) and copies straight out of it.
 *   rdma  other node: the sender registers its buffers (registration cache keyed by allocation
 *         id) and sends address and key; the receiver gets into its buffer with UCX when UCX
 *         can reach that memory type, else through a pipeline of pinned bounce buffers
 *         (device-to-host, get, host-to-device, in chunks so the stages overlap).
 *
 * Same-process messages for targets the layer above calls batchable that a PE receives one
 * after another are batched: one copy operation a stream (tess_gpu_memcpy_batch), then their
 * deliveries in order; any other message the PE takes first ends the batch.
 *
 * Control messages are core messages; they are validated on arrival (offsets, sizes, event
 * indices, handles) and a corrupt one ends the job with an error instead of being followed.
 * When a staging resource is exhausted the send waits in a FIFO and goes on when an
 * acknowledgement frees one: nothing aborts, nothing is dropped.
 *
 * Threads: tess_dc_send and everything it calls back run on PE threads. A process's staging
 * resources (comm buffer, event pools, bounce buffers, caches) are shared by its PEs under
 * this layer's lock; each PE also keeps free receive records, ordering points and events and
 * its own counters to itself (dc_pe_t), so the same-process path takes that lock only when a
 * PE's free lists run empty or full. tess_dc_get_stats: any thread.
 */
#ifndef TESS_DEVCOMM_H
#define TESS_DEVCOMM_H

#include "core/core.h"

#include <tessera/gpu.h>

enum tess_dc_path {
    TESS_DC_D2D    = 0,
    TESS_DC_IPC    = 1, /* staged or direct, see tess_dc_ipc_mode */
    TESS_DC_RDMA   = 2
};

/** What the layer above sees of an arriving device message. */
typedef struct tess_dc_msg {
    uint64_t      a0, a1;     /* the sender's routing words (objects: array/entry, index) */
    int           src_pe;
    const void   *header;
    size_t        header_len;
    int           nbufs;
    const size_t *sizes;
    void         *target;     /* the layer above's: set by post, read by deliver (NULL before) */
} tess_dc_msg_t;

/** Flags the post function may set. SENDER_ORDERED: the destinations are free once the
 *  sender's data is ready (a batch's copies need not wait for the receiving stream). */
enum { TESS_DC_WAIT_COMPLETE = 1u << 0, TESS_DC_SENDER_ORDERED = 1u << 1 };

typedef struct tess_dc_ops {
    /**
     * On the PE the message was sent to, before any data moves: set dst[i] (device memory of at
     * least sizes[i] bytes) and *stream_p, and *flags_p. Return TESS_ERR_NOT_FOUND when the
     * target is not on this PE any more: the data is then received into temporary buffers and
     * handed to forward(). A same-process (d2d) message comes with dst[i] set to the sender's
     * buffer i, else NULL: a dst[i] left equal to the source is delivered in place (no copy;
     * *stream_p waits for the sender's data), so post must clear the offer unless the target
     * reads the sender's memory itself.
     */
    tess_status_t (*post)(tess_dc_msg_t *m, void **dst, tess_gpu_stream_h *stream_p,
                          unsigned *flags_p);
    /** The data is in place at dst[] (as post chose them): on `stream` in stream order, or
     *  completed with WAIT_COMPLETE. */
    void (*deliver)(const tess_dc_msg_t *m, void *const *dst, tess_gpu_stream_h stream);
    /** The target moved: `bufs` (device memory, `stream` ordered) hold the data; the layer
     *  above sends it on and calls tess_dc_free_temp(bufs[i]) when the new send is done. */
    void (*forward)(const tess_dc_msg_t *m, void **bufs, tess_gpu_stream_h stream);
    /** Optional: nonzero when same-process messages for the target named by a0/a1 may be
     *  batched: their posts run as they arrive, their copies are enqueued together, then their
     *  deliveries run in arrival order (never reordered with messages of other targets or
     *  kinds). */
    int (*batchable)(uint64_t a0, uint64_t a1);
} tess_dc_ops_t;

/** Element streams may now hold work that no sender orders (an element was constructed or
 *  arrived by migration, a phase starts): PEs' batch streams wait for each receiving stream
 *  once more before trusting TESS_DC_SENDER_ORDERED for it. Any thread. */
void          tess_dc_streams_dirty(void);

tess_status_t tess_devcomm_init(void);
void          tess_devcomm_fini(void);
void          tess_dc_set_ops(const tess_dc_ops_t *ops);

/**
 * Send a device message to global PE `dst_pe` (PE thread). a0/a1 travel to the receiver's
 * post/deliver. The header is copied; the buffers are read after the work already enqueued on
 * `stream`; `done` (may be NULL) runs on this PE when they may be reused.
 */
tess_status_t tess_dc_send(int dst_pe, uint64_t a0, uint64_t a1, const void *header,
                           size_t header_len, const tess_dev_buf_t *bufs, int nbufs,
                           tess_gpu_stream_h stream, tess_dev_done_fn_t done, void *done_arg);

/**
 * Batches (PE thread): the D2D sends made between tess_dc_batch_begin(stream) and
 * tess_dc_batch_end() from `stream` share one event, recorded at the first of them: every one
 * of them is ordered after the work enqueued on the stream before the batch began, so the
 * caller enqueues nothing on it in between. Sends on other paths or streams go as usual.
 */
void tess_dc_batch_begin(tess_gpu_stream_h stream);
void tess_dc_batch_end(void);

/**
 * The calling PE's ready stream (PE thread; NULL elsewhere or when it cannot be made): a
 * stream on which nothing but the sends from it is enqueued, for sends whose buffers are
 * complete at the call (TESS_STREAM_READY). The direct RDMA path announces those at once,
 * without asking the device whether the stream has reached the send.
 */
tess_gpu_stream_h tess_dc_ready_stream(void);

/** The path a message from this process to process `dst` takes now. */
int         tess_dc_path_to(int dst);
const char *tess_dc_path_name(int path);
/** Free a temporary buffer handed to forward(). */
void        tess_dc_free_temp(void *buf);

/** Counters for tests and benchmarks. */
typedef struct tess_dc_stats {
    uint64_t sent[3];        /* messages per path */
    uint64_t staged, direct; /* IPC messages by mode */
    uint64_t staged_parted;  /* staged IPC messages that moved in parts */
    uint64_t direct_idle;    /* direct IPC sends from an idle stream: no event */
    uint64_t rdma_direct, rdma_staged;
    uint64_t deferred;       /* sends that waited for a staging resource */
    uint64_t map_opens, map_hits; /* direct IPC mapping cache */
    uint64_t reg_creates, reg_hits, reg_releases; /* RDMA registration cache */
    uint64_t reg_forgets;    /* cached registrations dropped because their memory was freed */
    uint64_t forwarded;
    uint64_t d2d_events;     /* events recorded for d2d sends (one per batch) */
    uint64_t d2d_batched;    /* d2d receives whose copies went in a batch of two or more */
    uint64_t d2d_rb_launches; /* copy operations (launches) of batched d2d receives */
    uint64_t d2d_rb_shared;   /* those on a PE's batch stream, serving several streams */
    uint64_t d2d_rb_flips;    /* TESS_BATCH_STREAM=adapt: changes of a PE's choice */
    uint64_t d2d_rb_unjoined; /* receiving streams a batch stream did not wait for */
    uint64_t d2d_in_place;    /* d2d buffers the receiver took in place (not copied) */
    uint64_t d2d_same_stream; /* d2d sender events not waited for: the waiting stream is the
                               * one the sender recorded on (elements sharing a stream) */
    uint64_t rdma_idle_sends; /* direct RDMA announced at once: the sender's stream was idle */
    uint64_t rdma_idle_recvs; /* direct RDMA gets started at once: the receiver's stream was idle */
    uint64_t rdma_quiet_recvs; /* of those, without asking the device: the PE had found the
                                * stream idle and had run nothing since (one PE per process) */
    uint64_t rkey_unpacks;    /* remote keys unpacked for RDMA gets (net) */
    uint64_t rkey_hits;       /* RDMA gets that used a key kept unpacked (net) */
    uint64_t rdma_fast_recvs; /* direct RDMA receives whose entry ran on the PE that saw the gets
                               * complete, without a notice through its queue */
    uint64_t rdma_recv_queries; /* questions to the device about receiving streams by the
                                 * direct RDMA path (at a receive, or in an idle pass) */
    uint64_t rdma_spec_idle;    /* of those, in idle passes: answers "idle" */
    uint64_t rdma_spec_busy;    /* and answers "busy" */
    uint64_t rdma_spec_spent;   /* receives whose stream an idle pass had found idle, but the
                                 * PE ran work before they came (so they asked again) */
    uint64_t rdma_acks;       /* acknowledgements of direct RDMA sends (messages) sent */
    uint64_t rdma_acked;      /* direct RDMA sends they acknowledged */
    uint64_t am_sends;        /* active messages this process posted to UCX (net, every kind) */
} tess_dc_stats_t;
void tess_dc_get_stats(tess_dc_stats_t *stats_p);

/** Validate a control message as it arrived (exposed for tests). */
tess_status_t tess_dc_validate(const tess_msg_t *m);

#endif /* TESS_DEVCOMM_H */
