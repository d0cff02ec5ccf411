/*
 * tessera/gpu.h — GPU interop: the device backend, each chare's stream, device memory, GPU
 * completion continuations and device messages.
 *
 * Each element owns a non-blocking stream from a per-process pool (+tess-streams N): the
 * elements of a PE take the streams of the PE's part of the pool (N over the PEs of the
 * process, at least one) round-robin, and share them when they are more. Elements whose work
 * goes in batches (tess_gpu_batch, below) run best with one stream a PE (N = PEs a process).
 * Launch your kernels on it:
 *
 *     cudaStream_t s = (cudaStream_t)tess_ctx_stream(ctx);
 *     my_kernel<<<grid, block, 0, s>>>(...);
 *     tess_gpu_then(ctx, E_DONE, NULL, 0);   // E_DONE runs on this element once s drains
 *
 * On the host backend (no GPU), a "kernel" is a host function enqueued on the stream with
 * tess_gpu_launch_host(); it runs asynchronously on a backend thread, in stream order.
 *
 * Threads: every function may be called from any thread once tess_init() returned, except
 * those taking a ctx, which are for entry methods of that element (entry).
 */
#ifndef TESSERA_GPU_H
#define TESSERA_GPU_H

#include <tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tess_gpu_backend {
    TESS_GPU_HOST = 0,
    TESS_GPU_CUDA = 1,
    TESS_GPU_HIP  = 2
} tess_gpu_backend_t;

/** A stream: cudaStream_t with CUDA, hipStream_t with HIP, an opaque queue with host. */
typedef void *tess_stream_t;

/** Backend in use and its name ("host", "cuda", "hip"). */
TESS_API tess_gpu_backend_t tess_gpu_backend(void);
TESS_API const char        *tess_gpu_backend_name(void);
/** Device index this process uses (processes of a node are spread over its devices in blocks:
 *  local rank × devices / local processes), and the number of devices of the node. */
TESS_API int tess_gpu_device(void);
TESS_API int tess_gpu_num_devices(void);

/** The element's stream (entry, or main for local elements outside a phase). */
TESS_API tess_stream_t tess_ctx_stream(tess_ctx_h ctx);

/** Device memory (exportable to other processes of the node) and pinned host memory. */
TESS_API tess_status_t tess_gpu_malloc(void **ptr_p, size_t size);
TESS_API tess_status_t tess_gpu_free(void *ptr);
TESS_API tess_status_t tess_gpu_malloc_host(void **ptr_p, size_t size);
TESS_API tess_status_t tess_gpu_free_host(void *ptr);

/** Asynchronous copy and set, ordered on `stream` (any direction: the backend infers it). */
TESS_API tess_status_t tess_gpu_memcpy_async(void *dst, const void *src, size_t size,
                                             tess_stream_t stream);
TESS_API tess_status_t tess_gpu_memset_async(void *dst, int value, size_t size,
                                             tess_stream_t stream);
/** Block until all work on the stream has completed. */
TESS_API tess_status_t tess_gpu_stream_sync(tess_stream_t stream);

/** A host function run in stream order with a copy of args (at most 256 bytes). On the host
 *  backend this is how kernels are launched; on CUDA/HIP it is cudaLaunchHostFunc. */
typedef void (*tess_host_kernel_fn_t)(void *args);
TESS_API tess_status_t tess_gpu_launch_host(tess_stream_t stream, tess_host_kernel_fn_t fn,
                                            const void *args, size_t args_size);

/**
 * Continuation (entry): when all work enqueued on the element's stream so far has completed,
 * `entry` runs on this element (on its PE) with a copy of `size` bytes of data. The runtime polls
 * completions of all pending continuations every scheduler pass, so one slow stream never holds
 * back another element's continuation. Pending continuations count as work for quiescence.
 */
#define tess_gpu_then(ctx, entry, data, size) \
    tess_gpu_then_loc((ctx), (entry), (data), (size), __FILE__, __LINE__)
TESS_API tess_status_t tess_gpu_then_loc(tess_ctx_h ctx, tess_entry_t entry, const void *data,
                                         size_t size, const char *file, int line);

/* ------------------------------------------------------------------------------------------ */
/* Device messages                                                                            */
/* ------------------------------------------------------------------------------------------ */

/*
 * A device message carries host header bytes and up to TESS_DEV_MAX_BUFS device buffers from
 * one element to an entry of another. The runtime picks the path from the location table: one
 * device-to-device copy within a process, CUDA/HIP IPC between processes of a node (staged
 * through a comm buffer, or direct through a cached mapping: TESS_IPC), UCX RDMA get between
 * nodes. The sender never synchronises with the host: the transfer is ordered after the work
 * already enqueued on its stream.
 *
 * The receiving entry is registered with a post function. It runs on the receiver's PE when
 * the header arrives and names the destination of every buffer (device memory of at least
 * sizes[i] bytes, or NULL when sizes[i] is 0) and the stream to deliver on (default: the
 * element's own). Then the entry runs with the header as its message: by default as soon as
 * the copies are enqueued on that stream (work the entry enqueues there is ordered after the
 * data), or with TESS_ENTRY_WAIT_COMPLETE only after the copies have completed.
 *
 * Checking mode. TESS_ENTRY_BATCH, TESS_ENTRY_SENDER_ORDERED, TESS_ENTRY_IN_PLACE and
 * TESS_STREAM_READY each rest on an ordering that the program promises and the runtime cannot
 * see; broken, data is corrupt without any error. With TESS_CHECK=1 (or +tess-check; off by
 * default, where it costs one branch a send and a delivery) the runtime verifies each at run
 * time, as each flag below says, on messages within a process (where the first three change
 * the delivery) and on every send marked TESS_STREAM_READY. It is slow: it copies the buffers
 * concerned, adds host work and event waits on the streams, and holds a ready send's `done`
 * until the sender's stream has passed the send. A broken promise ends the job with a message
 * "TESS_CHECK: the promise of FLAG is broken: message N from SENDER (sent at FILE:LINE) to
 * entry 'E' of element I of array 'A': ..." naming the buffer and what was seen (N counts the
 * device messages the sending element sent, from 1). The receiver's use of a message is the
 * work its entry enqueues on the delivery stream until the entry returns or makes a device
 * send (after which a protocol lets the sender go on). A check finds a broken promise when the
 * run gives it the chance to do harm (a sender that overwrites a buffer, a receiver still at
 * work); a run that passes with it is no proof of the promise.
 */
#define TESS_DEV_MAX_BUFS 8

typedef struct tess_dev_buf {
    void  *ptr;  /**< device memory (tess_gpu_malloc, cudaMalloc, …) */
    size_t size; /**< bytes; 0 is allowed */
} tess_dev_buf_t;

typedef void (*tess_dev_post_fn_t)(tess_ctx_h ctx, void *elem, const void *header,
                                   size_t header_len, int nbufs, const size_t *sizes,
                                   void **dst, tess_stream_t *stream_p);

enum tess_entry_flags {
    TESS_ENTRY_WAIT_COMPLETE = 1u << 0, /**< run the entry after the copies completed */
    /**
     * Deliveries may be batched (not with WAIT_COMPLETE): when a PE receives several messages
     * for this entry from its own process at once, it runs their post functions, enqueues all
     * their copies (one copy-kernel launch a stream on CUDA, instead of one a buffer), then
     * runs their entries in the order the messages arrived. So a post function may run before
     * the entries of earlier messages to the same element: set this flag only when the post
     * functions' choices do not depend on what those entries change (buffers chosen by
     * iteration parity, as halos are). Messages of other kinds are never reordered with them.
     * TESS_CHECK: a post function that names a destination overlapping one that an earlier
     * message to the same element, posted and not yet delivered, receives into is reported (its
     * choice did not see what that message's entry changes: a count or step the entry advances,
     * say); buffers taken in place are not destinations.
     */
    TESS_ENTRY_BATCH = 1u << 1,
    /**
     * With TESS_ENTRY_BATCH: the receiver's earlier use of the destinations its post function
     * names is already ordered before the sender's data is ready, so the copies need not wait
     * for the receiver's stream, only for the sender. True of a symmetric exchange whose
     * buffers are chosen by iteration parity (double-buffered halos): the sender's step that
     * produced this message waited for the receiver's previous message, sent after the
     * receiver's last use of this parity. Saves, per element of a batch, an event record and a
     * wait. Work that no message orders (constructors, a migration's unpacking, what the main
     * thread enqueued before tess_run) is waited for once by the runtime. Set it only when this
     * holds for the work enqueued within a phase: otherwise a copy may overwrite data that a
     * kernel still reads. TESS_CHECK: a message posted into a destination while the receiver's
     * use of the message received there before still runs is reported if its sender's stream
     * reached the send before that use completed (the copy, which waits only for the sender,
     * could have overwritten what the use read).
     */
    TESS_ENTRY_SENDER_ORDERED = 1u << 2,
    /**
     * Within a process, offer the sender's buffers instead of a copy: the post function is
     * called with dst[i] set to the sender's buffer i (NULL on paths between processes, as
     * without the flag). Leaving dst[i] as it is takes buffer i in place: nothing is copied,
     * the stream the post names waits for the sender's data, and the entry (and the work it
     * enqueues on that stream, e.g. a kernel given the pointer) reads the sender's memory
     * directly. Naming another destination copies as usual. So the post function records
     * where each buffer's data is (dst[i] when it came non-NULL, else the destination it
     * names) and the entry's work reads it from there.
     *
     * The sender's memory is read later than a copy would read it, by work the runtime does not
     * track: the sender must not change or free it until its protocol orders that after the
     * receiver's reads. True of a symmetric exchange double-buffered by iteration parity, as
     * halos are: the sender writes this parity again only in the step after next, which waits
     * for the receiver's next message, sent after the receiver's step that read this one. A
     * send's `done` runs once the runtime is finished with the buffers, which says nothing of
     * the receiver's later reads. Freeing device memory waits for the device (cudaFree does,
     * and the host backend models it), so a migration between processes is safe.
     * TESS_CHECK: each buffer is copied in the sender's stream order at the send, and again, if
     * it was taken in place, on the delivery stream where the receiver's use ends; the two
     * copies must be equal (else the sender changed it before the receiver's reads ended).
     */
    TESS_ENTRY_IN_PLACE = 1u << 3
};

/** Register an entry that receives device messages (main; collective, as tess_entry_register). */
TESS_API tess_status_t tess_entry_register_device(const char *name, tess_dev_post_fn_t post,
                                                  tess_entry_fn_t fn, unsigned flags,
                                                  tess_entry_t *entry_p);

/** Runs on the sender's PE once the source buffers may be reused. */
typedef void (*tess_dev_done_fn_t)(void *arg);

/**
 * The stream argument of a device send whose buffers are complete at the call: nothing still
 * enqueued on any stream writes them (the caller synchronised, the data came with a message
 * whose entry runs after completion, TESS_ENTRY_WAIT_COMPLETE, or was copied from the host
 * synchronously). The transfer then waits for no stream: on the RDMA path the sender announces
 * the message without asking the device whether a stream reached the send (1.5-2 us on an
 * H200). Like a send from a stream, the buffers must stay unchanged until `done`. Passing it
 * while a kernel still writes a buffer sends whatever the buffer holds when it is read.
 * TESS_CHECK: the buffers are read back at the send, and again once the work enqueued on the
 * sending element's stream before the send has completed and the runtime is done with them
 * (`done` runs after that); a difference is reported, with whether that stream was busy at the
 * send.
 */
#define TESS_STREAM_READY ((tess_stream_t)(uintptr_t)1)

/**
 * Send header bytes (copied) and device buffers to a device entry of element `index` (entry).
 * The transfer starts after the work already enqueued on `stream` (NULL: the sender's own
 * stream; TESS_STREAM_READY: the buffers are complete now). Do not change the buffers until
 * `done` runs (may be NULL: then double-buffer by iteration parity). A message to oneself is
 * allowed. Never dropped: when staging resources run out, the send waits in a queue.
 */
#define tess_send_device(array, index, entry, header, header_len, bufs, nbufs, stream, done, arg) \
    tess_send_device_loc((array), (index), (entry), (header), (header_len), (bufs), (nbufs),      \
                         (stream), (done), (arg), __FILE__, __LINE__)
TESS_API tess_status_t tess_send_device_loc(tess_array_h array, tess_index_t index,
                                            tess_entry_t entry, const void *header,
                                            size_t header_len, const tess_dev_buf_t *bufs,
                                            int nbufs, tess_stream_t stream,
                                            tess_dev_done_fn_t done, void *done_arg,
                                            const char *file, int line);

/** One send of tess_send_device_many: the arguments of tess_send_device but the stream. */
typedef struct tess_dev_send {
    tess_array_h          array;
    tess_index_t          index;
    tess_entry_t          entry;
    const void           *header;
    size_t                header_len;
    const tess_dev_buf_t *bufs;
    int                   nbufs;
    tess_dev_done_fn_t    done;     /**< may be NULL */
    void                 *done_arg;
} tess_dev_send_t;

/**
 * Several device sends (entry), all ordered after the work already enqueued on `stream` (NULL:
 * the sender's own stream; TESS_STREAM_READY: none), as n calls of tess_send_device would be with nothing enqueued on
 * the stream between them. Cheaper: the sends within this process share one event on the
 * stream (a chare's halos, say, after its update).
 */
#define tess_send_device_many(sends, n, stream) \
    tess_send_device_many_loc((sends), (n), (stream), __FILE__, __LINE__)
TESS_API tess_status_t tess_send_device_many_loc(const tess_dev_send_t *sends, int n,
                                                 tess_stream_t stream, const char *file, int line);

/* ------------------------------------------------------------------------------------------ */
/* Step graphs                                                                                */
/* ------------------------------------------------------------------------------------------ */

/*
 * At fine grain a step is bound by host time: each kernel launch or copy costs the host a few
 * microseconds. A step graph records the stream work of an element's step once (CUDA/HIP: a
 * graph captured from a stream) and replays it later as one launch.
 *
 *     static void record_step(tess_ctx_h ctx, void *elem, void *arg)
 *     {
 *         block_t     *b = elem;
 *         cudaStream_t s = (cudaStream_t)tess_ctx_stream(ctx); // the recording stream
 *         unpack<<<g, t, 0, s>>>(b->halo[b->parity], b->u);
 *         update<<<g, t, 0, s>>>(b->u, b->unew, b->d_step);    // d_step: device memory
 *         pack<<<g, t, 0, s>>>(b->unew, b->out[b->parity]);
 *     }
 *     ...in the entry method of each step:
 *     step_kernel<<<1, 1, 0, s>>>(b->d_step);                   // or advance it in `update`
 *     tess_gpu_graph_run(ctx, 0, b->parity, record_step, NULL);
 *     tess_send_device(...);                                    // after the replay, in order
 *
 * The key. `key` summarises everything the recorded work depends on that may change: buffer
 * pointers chosen by parity, sizes, a number of kernels... A slot keeps the graphs of its four
 * most recently used keys (a parity as the key: both replay). A key's first call runs record
 * directly on the element's stream, its second records it and later calls replay: a key used
 * once (a step that differs from its neighbours) is never recorded. Recording into a full slot
 * replaces its least recently used graph, updated in place where the operations are the same
 * with other arguments (CUDA/HIP: an update of the instantiated graph, cheaper than a new one).
 * What
 * changes every step (the step number, a time) must NOT be a kernel argument: the graph holds
 * the arguments of its recording, and every replay would pass the first step's value. Kernels
 * read such values from device memory instead (a counter the graph itself advances, or one the
 * step updates with a copy enqueued before the replay), as `d_step` above. TESS_CHECK=1 records
 * again at each replay and compares (kernels, launch dimensions, copy and set parameters and,
 * where the backend can compare them, kernel argument bytes): a difference ends the job with
 * "TESS_CHECK: step graph in slot S of element I of array 'A' replayed stale: ..." naming what
 * differs. The bytes compared include a struct argument's padding: build such arguments with
 * their padding zeroed (explicit padding members, or memset before filling the members), or
 * the check reports the garbage in it.
 *
 * The record function may enqueue kernels, tess_gpu_memcpy_async, tess_gpu_memset_async and
 * tess_gpu_launch_host on tess_ctx_stream(ctx) (which, while it runs, is a per-PE stream that
 * records; elements share streams, so the element's own stream is never recorded; at a key's
 * first call it is the element's own stream). It should do nothing else: it runs twice per key
 * (once directly, once recorded), but at every step with TESS_CHECK=1 or +tess-graphs 0.
 * Sends (tess_send, tess_send_device, ...), tess_contribute, tess_gpu_then, tess_gpu_stream_sync
 * and a nested tess_gpu_graph_run inside it are misuse: the job ends with a message naming the
 * call "... inside a step graph's record function". Events on the recording stream are refused
 * by the host backend, and host functions (tess_gpu_launch_host) by HIP's stream capture: the
 * call or the recording fails, and tess_gpu_graph_run returns the error.
 *
 * Graphs are dropped when the element migrates (its device pointers change), is destroyed or
 * restarted from a checkpoint, and on tess_gpu_graph_reset (call it after changing a pointer or
 * a size the graphs captured but the keys do not cover). They are never packed. With
 * +tess-graphs 0 (TESS_GRAPHS=0) nothing is recorded: tess_gpu_graph_run calls record with
 * tess_ctx_stream(ctx) being the element's own stream every time (for comparisons).
 */

/** The work a step graph records: enqueue kernels/copies/memsets on tess_ctx_stream(ctx).
 *  `elem` is the element's state, `arg` what tess_gpu_graph_run was given. */
typedef void (*tess_gpu_record_fn_t)(tess_ctx_h ctx, void *elem, void *arg);

/** Graphs an element may keep at once (slots 0 to TESS_GPU_GRAPH_SLOTS - 1). */
#define TESS_GPU_GRAPH_SLOTS 16

/**
 * Run the element's graph in `slot` on its stream (entry): if that slot holds a graph
 * recorded with the same `key`, launch it (record is not called); otherwise call
 * record(ctx, elem, arg) with the stream work it enqueues recorded into a graph, keep that in
 * the slot under `key` (replacing what was there) and launch it. The launch is ordered after the
 * work enqueued on the element's stream before the call and before what is enqueued after it
 * (tess_gpu_then, device sends), as the recorded work itself would be.
 * Errors: what the backend says of a recording or launch (TESS_ERR_GPU; TESS_ERR_UNSUPPORTED
 * for an operation a graph cannot hold), TESS_ERR_NO_MEMORY. Misuse (a ctx that is not an
 * element of this PE, a slot out of range, a NULL record, a call inside a record function)
 * ends the job with a message.
 */
#define tess_gpu_graph_run(ctx, slot, key, record, arg) \
    tess_gpu_graph_run_loc((ctx), (slot), (key), (record), (arg), __FILE__, __LINE__)
TESS_API tess_status_t tess_gpu_graph_run_loc(tess_ctx_h ctx, int slot, uint64_t key,
                                              tess_gpu_record_fn_t record, void *arg,
                                              const char *file, int line);

/** Forget the element's graphs (entry): after it changed a pointer or a size they captured.
 *  Launches already made still run. Misuse as tess_gpu_graph_run. */
#define tess_gpu_graph_reset(ctx) tess_gpu_graph_reset_loc((ctx), __FILE__, __LINE__)
TESS_API tess_status_t tess_gpu_graph_reset_loc(tess_ctx_h ctx, const char *file, int line);

/* ------------------------------------------------------------------------------------------ */
/* Batched launches                                                                           */
/* ------------------------------------------------------------------------------------------ */

/*
 * At fine grain a GPU program is bound by host time: every element launches its own small
 * kernel every step, and each launch costs the host microseconds. A batch lets the elements of
 * a PE share one launch. The program registers a batch with a launch function that covers n
 * items (one kernel: blockIdx.z, or a block-to-item map, selects the item); an element adds
 * its item (the arguments its own kernel would have taken) with tess_gpu_batch and names an
 * entry to continue in. The PE collects the items of each batch while it takes messages, and
 * when it stops for a scheduler pass with no message left in its queue (or after four passes
 * that left some), or when a batch holds +tess-gpu-batch-max items (as soon as the entry that
 * filled it returns), it flushes:
 *
 *   - a per-PE batch stream waits for each distinct stream of the elements in the batch (one
 *     event recorded on it at the flush, after all that is enqueued on it then: elements that
 *     share a stream cost one event);
 *   - the items go host to device through a pinned staging ring (one asynchronous copy);
 *   - launch(batch stream, device items, host items, n, arg) is called once;
 *   - each distinct element stream waits for an event recorded after the launch;
 *   - each item's entry runs on its element, in the order the items were added.
 *
 * A batch that holds one item at the flush launches on the element's own stream, with no
 * event between streams. With +tess-gpu-batch 0 (TESS_GPU_BATCH=0) every item launches alone
 * (n = 1, on the element's own stream) when the entry that added it returns, and its entry
 * runs when the PE next stops taking messages (for comparisons).
 */

/**
 * Launch one kernel covering n items, enqueued on `stream` only (do not synchronise with it).
 * `items` is device memory (host memory on the host backend, where the kernel is a host
 * function: tess_gpu_launch_host) holding n items of the batch's item size in the order they
 * were added; `items_host` the same bytes in host memory (to size the grid: the largest item,
 * say). Both stay valid until the work enqueued on `stream` now has completed. `arg` is what
 * tess_gpu_batch_register was given. Runs on the PE's thread, in its scheduler (after an
 * entry, or between passes): it must not call the API but for enqueuing work on `stream`
 * (tess_gpu_launch_host, copies, kernels).
 */
typedef void (*tess_gpu_batch_launch_fn_t)(tess_stream_t stream, const void *items,
                                           const void *items_host, int n, void *arg);

/** A registered batch (0, 1, ... in the order of registration). */
typedef int tess_gpu_batch_t;

/** Most batches a process may register. */
#define TESS_GPU_BATCH_MAX_BATCHES 64
/** Largest item of a batch, in bytes. */
#define TESS_GPU_BATCH_ITEM_MAX 4096

/**
 * Register a batch (main thread, after tess_init, outside phases; collective): items of
 * `item_size` bytes (1 to TESS_GPU_BATCH_ITEM_MAX) launched by `launch` with `arg`. Every
 * process registers the same batches (name and item size) in the same order, before the phase
 * that uses them; this is checked against rank 0. `name` (copied, at most 47 characters) names
 * the batch in messages. Errors: TESS_ERR_INVALID (NULL name, launch or batch_p, a name too
 * long, a bad item size, more than TESS_GPU_BATCH_MAX_BATCHES batches), TESS_ERR_MISMATCH
 * (another process registered another batch under this number: every process gets it, with
 * the first such rank and what it registered), TESS_ERR_STATE (not initialised, inside a
 * phase, not the main thread).
 */
TESS_API tess_status_t tess_gpu_batch_register(const char *name, size_t item_size,
                                               tess_gpu_batch_launch_fn_t launch, void *arg,
                                               tess_gpu_batch_t *batch_p);

/**
 * Add this element's `item` (item_size bytes, copied) to its PE's pending launch of `batch`
 * (entry). Once the launch that holds it is enqueued and the element's stream is ordered after
 * it, `entry` (a host entry) runs on the element with a copy of `size` bytes of `data` — as
 * tess_gpu_then, but when the work is enqueued, not when it completed.
 *
 * Ordering: the item's kernel work is ordered after all the work enqueued on the element's
 * stream before the call, and the work enqueued on that stream in `entry` (or later) is
 * ordered after it. Between the call and `entry` the element is in a batch: it must not
 * enqueue stream work (the runtime may: device messages delivered to it are, and a post
 * function must not name a destination the item's kernel still reads or writes). The element
 * counts as having GPU work pending: the phase does not end, and the element does not migrate,
 * until its entry ran. Items wait for at most four scheduler passes of their PE.
 * The batch's kernel runs on a stream of the PE, not the element's: TESS_LB_GPU_TIME times
 * each launch (its items' copy and the kernel) and gives each of its elements an equal share
 * of it (tess_set_load, where the items' work differs, declares it instead).
 *
 * Errors: TESS_ERR_NO_MEMORY, and what the backend says (TESS_ERR_GPU) of the event, copy or
 * allocation of the staging ring. A flush that fails on the device later ends the job with a
 * message naming the batch. Misuse ends the job with a message naming the call: outside a
 * phase, a ctx that is not an element of this PE, a batch not registered, a NULL item, an
 * entry that is not a registered host entry, a call inside a step graph's record function,
 * and, while the element is in a batch, tess_gpu_batch, tess_gpu_then, a device send
 * (tess_send_device, tess_send_device_many) or tess_gpu_graph_run on it ("... while element I
 * of array 'A' is in batch 'B' (tess_gpu_batch at FILE:LINE) ...").
 */
#define tess_gpu_batch(ctx, batch, item, entry, data, size) \
    tess_gpu_batch_loc((ctx), (batch), (item), (entry), (data), (size), __FILE__, __LINE__)
TESS_API tess_status_t tess_gpu_batch_loc(tess_ctx_h ctx, tess_gpu_batch_t batch,
                                          const void *item, tess_entry_t entry, const void *data,
                                          size_t size, const char *file, int line);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_GPU_H */
