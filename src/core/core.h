/*
 * core.h — the core component: configuration, init/finalize, PE threads and their scheduler,
 * message delivery within and across processes, phases and quiescence, process-level reductions
 * across MPI, GPU completion continuations, and the MPI agent (all MPI calls on PE 0).
 *
 * Threads:
 *   - tess_core_init/fini, tess_core_run: the main thread (which becomes PE 0 inside a phase).
 *   - tess_core_msg_alloc/free/send, tess_core_gpu_then (_same, copy_then),
 *     tess_core_reduce_contribute,
 *     tess_core_agent_post, tess_core_exit: PE threads inside a phase.
 *   - handlers registered with tess_core_handler_register run on the PE named by the message's
 *     dst_pe; agent functions run on PE 0.
 *   - tess_core_pe_self, the configuration and the identity functions: any thread.
 */
#ifndef TESS_CORE_H
#define TESS_CORE_H

#include "util/util.h"
#include "gpu/gpu.h"
#include "net/net.h"

#include <mpi.h>
#include <pthread.h>

/* ---- configuration ----------------------------------------------------------------------- */

typedef struct tess_config {
    int    ppn;
    int    log_level;
    int    spin_us;          /* idle spin before blocking */
    int    spin_yield_us;    /* from this far into the spin, yield the core on every pass */
    int    bind;
    int    verbose;
    char   gpu[16];          /* auto|host|cuda|hip */
    int    streams;
    int    host_threads;
    size_t host_arena;
    size_t host_device_memory;
    size_t host_pinned_memory;
    int    host_jitter_us;
    int    host_fault_kernel;
    int    host_devices;
    int    vnode_size;       /* 0: physical nodes */
    char   devcomm_path[8];  /* auto|d2d|ipc|rdma */
    char   ipc[8];           /* auto|staged|direct */
    char   batch_stream[8];  /* auto|on|off */
    size_t comm_buf;         /* staged IPC buffer per process */
    size_t ipc_part;         /* staged IPC part size (0: comm_buf / 4) */
    char   rdma[8];          /* auto|direct|staged */
    size_t bounce_chunk;     /* RDMA host-staged pipeline chunk */
    int    bounce_count;     /* RDMA host-staged bounce buffers per process */
    int    rdma_ack_max;     /* direct RDMA: sends one acknowledgement names at most */
    int    rdma_ack_hold_us; /* direct RDMA: longest an idle receiver holds one back */
    int    ipc_events;       /* staged IPC event pool per process */
    char   lb[32];           /* strategy */
    char   lb_target[8];     /* pe|process|gpu */
    int    lb_gpu_time;
    char   gpu_poll[8];      /* auto|signal|event: how PEs see GPU work complete */
    int    mpi_poll_us;      /* longest wait between MPI polls of an idle PE 0 */
    int    collective_timeout; /* s a collective call waits for every process; 0: for ever */
    int    peer_failure;     /* UCX's peer-failure handling on every endpoint */
    int    net_lanes;        /* 1: one UCX worker per process; 0: one per PE */
    int    net_serve_us;     /* idle this long before serving other PEs' UCX workers */
    size_t net_eager_node;   /* largest message sent eagerly to a process of the node; 0: UCX's */
    size_t msg_shm;          /* bytes of each process's node message arena; 0: none */
    size_t msg_shm_min;      /* smallest payload placed there */
    size_t coalesce;         /* bytes of a batch of small messages to one process; 0: off */
    int    coalesce_force;   /* coalesce whether or not the network is backed up (tests) */
    int    coalesce_burst;   /* coalesce a handler's later messages to a process it sent to */
    char   trace[256];       /* timeline trace file ("": off) */
    int    trace_events;     /* trace events buffered per thread */
    int    trace_copies;     /* trace: device-message copies timed on the device */
    int    tree_arity;       /* children per process in broadcast and reduction trees */
    char   reduce[8];        /* auto|mpi|tree: reductions with broadcast callbacks (reduce_fast.c) */
    int    reduce_times;     /* print the fast path's time split at the end (2: every round) */
    int    check;            /* check the promises of device entries' flags and TESS_STREAM_READY */
    int    graphs;           /* step graphs recorded and replayed (0: record runs every time) */
    int    gpu_batch;        /* batched launches (0: each tess_gpu_batch launches at once) */
    int    gpu_batch_max;    /* items a batch launches at most at once */
    int    ckpt_background;  /* tess_checkpoint takes a snapshot and writes it in the background */
    int    ckpt_write_delay_ms; /* a background checkpoint's writer waits this long first (tests) */
    int    ckpt_direct;      /* checkpoint data written with O_DIRECT where the file system can */
    char   ckpt_snapshot[8]; /* auto|host|none: where a background checkpoint's device bytes go */
} tess_config_t;

extern tess_config_t tess_cfg;

/** Fill tess_cfg: defaults, then params, then TESS_* variables, then +flags (removed from argv). */
tess_status_t tess_config_load(int *argc, char ***argv, const tess_params_t *params);

/** One row per option, for the documentation table and `tessera-info`. */
typedef struct tess_option_info {
    const char *name;    /* e.g. "ppn" */
    const char *env;     /* TESS_PPN */
    const char *flag;    /* "+ppn" or NULL */
    const char *deflt;   /* default as text */
    const char *help;
} tess_option_info_t;
const tess_option_info_t *tess_config_options(size_t *count_p);
/** Warn (once per process) about TESS_* environment variables that are not options, naming
 *  the closest option; returns how many there are. */
int tess_config_check_env(void);
/** Check every TESS_* variable of the environment (tessera-info): each invalid value is logged
 *  as an error and each variable that is not an option as a warning; returns their number. */
int tess_config_check_values(void);
/** Print the effective configuration (one line per option) to `f`. */
void tess_config_print(void *file);

/* ---- messages ---------------------------------------------------------------------------- */

/** Wire header of every core message (the UCX AM header across processes). */
typedef struct tess_msg_hdr {
    tess_net_hdr_t net;      /* filled in by the net layer */
    uint16_t       handler;  /* tess_core_handler_register id */
    uint16_t       flags;    /* handler-defined */
    int32_t        dst_pe;   /* global PE that runs the handler */
    int32_t        src_pe;   /* global PE that sent it */
    uint32_t       pad;      /* tracing: the sender's message number (flow id), else 0 */
    uint64_t       size;     /* payload bytes */
    uint64_t       a0, a1;   /* handler-defined */
} tess_msg_hdr_t;

/** A message: header plus payload, owned by one thread at a time. */
typedef struct tess_msg {
    tess_qnode_t   qnode;
    uint16_t       cls;      /* size class (pool), or TESS_MSG_CLS_MALLOC */
    uint16_t       home;     /* local PE whose pool it belongs to, or TESS_MSG_NO_HOME */
    uint32_t       cap;      /* payload capacity of a pooled class (0: sized exactly) */
    tess_msg_hdr_t hdr;
    /* payload follows, 16-byte aligned */
} __attribute__((aligned(16))) tess_msg_t;

#define TESS_MSG_CLS_MALLOC 0xffffu
#define TESS_MSG_CLS_SHM    0xfffeu  /* a slot of a node message arena (home: its owner) */
#define TESS_MSG_NO_HOME    0xffffu

static inline void *tess_msg_payload(tess_msg_t *m)
{
    return (void *)(m + 1);
}

static inline tess_msg_t *tess_msg_from_payload(void *payload)
{
    return (tess_msg_t *)payload - 1;
}

/** The largest payload of a message: more than any buffer a program can hold, so that a size
 *  computed wrong (SIZE_MAX, a negative number cast) is caught before arithmetic on it
 *  overflows. */
#define TESS_MSG_SIZE_MAX ((size_t)1 << 46)

/** A message with room for `size` payload bytes, hdr zeroed but for size. NULL when out of
 *  memory or when size exceeds TESS_MSG_SIZE_MAX (error recorded). */
tess_msg_t *tess_core_msg_alloc(size_t size);
void        tess_core_msg_free(tess_msg_t *m);

/**
 * Send `m` to hdr.dst_pe, to be handled by hdr.handler there; ownership passes to the runtime.
 * Counted for quiescence. FIFO per (sending thread, destination PE) for messages of one
 * process; across processes FIFO per (source process, destination process).
 */
tess_status_t tess_core_send(tess_msg_t *m);

/** A message handler. Returns true when the message is finished with (counted as processed);
 *  false when the handler kept it — whoever finishes it later calls tess_core_msg_done(). The
 *  handler owns `m` either way (free it, keep it, or send it on). */
typedef bool (*tess_core_handler_fn_t)(tess_msg_t *m);

/** Register a handler (main, before tess_core_init returns to the user: every rank must
 *  register the same handlers in the same order). Returns its id in *id_p. */
tess_status_t tess_core_handler_register(const char *name, tess_core_handler_fn_t fn,
                                         uint16_t *id_p);

/** A handler that holds work back across messages (a batch) gives a flush function (main,
 *  after registering it): a PE calls it before it takes a message of another handler and
 *  when it stops taking messages for the pass, so the held work never outlives the run of
 *  messages it came with. */
void tess_core_handler_set_flush(uint16_t id, void (*flush)(void));

/** Count a kept message as processed (PE thread). */
void tess_core_msg_done(void);

/* ---- PEs --------------------------------------------------------------------------------- */

typedef struct tess_pe tess_pe_t;

/** The PE of the calling thread, or NULL. */
extern _Thread_local tess_pe_t *tess_pe_self_ TESS_TLS_FAST;
static inline tess_pe_t *tess_core_pe_self(void) { return tess_pe_self_; }

int  tess_core_pe_global(const tess_pe_t *pe);
/** Global id of the calling thread's PE, -1 when the thread is not a PE (what tess_pe() of the
 *  API returns; the layers above core call this one). Any thread. */
static inline int tess_core_pe_id(void)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe ? tess_core_pe_global(pe) : -1;
}
int  tess_core_pe_local(const tess_pe_t *pe);
/** The PE's private slot for the layers above (objects uses it for its element tables). */
void **tess_core_pe_slot(tess_pe_t *pe, int layer);
enum { TESS_SLOT_OBJECTS = 0, TESS_SLOT_DEVCOMM = 1, TESS_SLOT_LB = 2, TESS_SLOT_MAX = 4 };
tess_pe_t *tess_core_pe_by_local(int local);
/** Nothing waits in the queue of `pe`, this thread's PE: a message handled now passes none
 *  sent to it earlier. */
int        tess_core_pe_queue_empty(tess_pe_t *pe);

/** This PE's work generation: it changes after every message handler, and after every stage
 *  of a scheduler pass (continuations, layers, agent) or sleep that did any work, so an
 *  unchanged value means the PE has run no code of the user and has enqueued no device work
 *  since it was read (apart from the code reading it and the layers' idle hooks). Network
 *  progress and the sending of batched messages do not move it: their callbacks only queue
 *  messages and note completed gets, and must stay so. PE thread only. */
uint64_t tess_core_work_gen(void);
/** Called from a layer's progress (or the agent's): n units of the work it is about to report
 *  ran no code of the user and enqueued no device work (messages sent, a quiescence wave that
 *  ended), so they do not move work_gen. PE thread only. */
void     tess_core_work_ran_nothing(unsigned n);
/** Between these (PE thread; they nest), the small messages the PE sends to other processes
 *  are coalesced from the first one on (as the rest of a burst is), one batch per process,
 *  sent at the outermost end: a handler that knows it is about to send several (to one
 *  process) pays one active message for them. Nothing without TESS_COALESCE. */
void     tess_core_coalesce_begin(void);
void     tess_core_coalesce_end(void);

/** Coalescing on this process since init: batches sent and the messages they carried (main,
 *  between phases). */
void tess_core_coalesce_stats(uint64_t *batches_p, uint64_t *records_p);
/** The node message arenas (msg_shm.c): whether this process has them, the payload sizes they
 *  take, references this process sent and received, and allocations that found the arena's
 *  class full (any thread). */
typedef struct tess_msg_shm_stats {
    int      on;
    size_t   min, max;
    uint64_t refs_sent, refs_recvd, full;
} tess_msg_shm_stats_t;
void tess_msg_shm_stats(tess_msg_shm_stats_t *stats);

/** Account time spent in user code on this PE (LB idle/busy statistics). */
typedef struct tess_pe_stats {
    uint64_t busy_ns, idle_ns, msgs;
} tess_pe_stats_t;
tess_pe_stats_t tess_core_pe_stats(tess_pe_t *pe);

/* ---- identity ---------------------------------------------------------------------------- */

typedef struct tess_runtime_info {
    MPI_Comm comm;           /* the runtime's duplicate of the user communicator */
    int      rank, size;     /* process */
    int      ppn;
    int      node, node_rank, node_size;     /* physical node (shared memory) */
    int      vnode, vnode_rank, vnode_size;  /* node as the device paths see it */
    int     *vnode_of;       /* vnode of every process */
    int     *node_of;        /* physical node of every process */
    uint64_t job_id;
} tess_runtime_info_t;

extern tess_runtime_info_t tess_rt;

static inline int tess_core_pe_process(int pe) { return pe / tess_rt.ppn; }
static inline int tess_core_num_pes(void) { return tess_rt.size * tess_rt.ppn; }

/* ---- init, phases ------------------------------------------------------------------------ */

tess_status_t tess_core_init(int *argc, char ***argv, MPI_Comm comm, const tess_params_t *params);

/** The collective calls of the API. */
typedef enum tess_coll {
    TESS_COLL_RUN = 0,
    TESS_COLL_ARRAY_CREATE,
    TESS_COLL_ARRAY_DESTROY,
    TESS_COLL_ENTRY_REGISTER,
    TESS_COLL_BATCH_REGISTER,
    TESS_COLL_FINALIZE
} tess_coll_t;
/** At the start of a collective call (main, after its local checks): returns once every
 *  process has entered a collective call; aborts the job, naming both, when another process
 *  entered a different one; warns every 10, 20, 40 … s while some process has not come, and
 *  after TESS_COLLECTIVE_TIMEOUT seconds (unless 0) aborts the job naming the processes that did
 *  not come. */
void tess_core_collective_enter(tess_coll_t kind);
tess_status_t tess_core_fini(void);
int           tess_core_initialized(void);
/** Nonzero on the thread that called tess_init (initialised). */
int           tess_core_on_main_thread(void);

/** Hooks of the layers above core: per-PE set-up, idle progress, and work in flight that is
 *  not counted as messages. Their own init/fini are called by the library glue, in order. */
typedef struct tess_core_layer {
    const char *name;
    void      (*pe_init)(tess_pe_t *pe); /* on each PE's thread before its first phase */
    void      (*pe_fini)(tess_pe_t *pe); /* on each PE's thread at finalize */
    /** Called every scheduler pass on every PE; returns the work done. */
    unsigned  (*progress)(tess_pe_t *pe);
    /** Called on a PE after a scheduler pass that found no work (before it spins or sleeps):
     *  for checks worth their time only while the PE is idle. Must not run user code. */
    void      (*idle)(tess_pe_t *pe);
    /** Nonzero while the layer has work in flight that is not counted as messages. */
    int       (*busy)(void);
    /** A phase can never end (quiescent, no tess_exit): called on PE 0 of every process at
     *  once, collective over tess_rt.comm; on process 0, append to buf (len bytes, NUL-
     *  terminated) what the layer still has open, e.g. reductions waiting for elements. */
    void      (*report_stuck)(char *buf, size_t len);
} tess_core_layer_t;
tess_status_t tess_core_layer_add(const tess_core_layer_t *layer);
/** Start the PE threads (main), once every layer has been added. */
tess_status_t tess_core_start(void);

tess_status_t tess_core_run(tess_run_mode_t mode, tess_start_fn_t start, void *arg);
int           tess_core_in_phase(void);
/** The number of phases started so far: inside a phase, the phase's own number. PE threads
 *  inside a phase, or the main thread. */
uint64_t      tess_core_phase_epoch(void);
/** End the phase (any PE), optionally with a result value for tess_result(). */
tess_status_t tess_core_exit(const void *data, size_t size);
tess_status_t tess_core_result(void *buf, size_t size, size_t *size_p);

/* ---- MPI agent --------------------------------------------------------------------------- */

/** Run fn(arg) on PE 0 of this process (any PE; counted as a message). */
typedef void (*tess_agent_fn_t)(void *arg);
tess_status_t tess_core_agent_post(tess_agent_fn_t fn, void *arg);

/** PE 0 only: watch an MPI request; done(arg, status) runs on PE 0 when it completes. The
 *  request counts as in-flight work for quiescence. */
typedef void (*tess_agent_req_fn_t)(void *arg, MPI_Status *status);
tess_status_t tess_core_agent_watch(MPI_Request req, tess_agent_req_fn_t done, void *arg);

/* ---- reductions across processes --------------------------------------------------------- */

/** A reduction result reached its root: deliver it (runs on PE 0 of process 0). */
typedef void (*tess_reduce_result_fn_t)(uint32_t key, uint64_t tag, const void *cb, size_t cb_len,
                                        const void *data, size_t size);
tess_status_t tess_core_reduce_set_result_fn(tess_reduce_result_fn_t fn);
/** Name of a reduction key for messages (the array's name), or NULL. */
typedef const char *(*tess_reduce_name_fn_t)(uint32_t key);
void          tess_core_reduce_set_name_fn(tess_reduce_name_fn_t fn);
/** The processes that start with elements of `key` (has[p] != 0; tess_rt.size entries): the
 *  tree waits for partials from those subtrees only. Main thread, between phases. */
void          tess_core_reduce_members(uint32_t key, const uint8_t *has);
/** Forget what the spanning tree learned about `key` (its array is gone; the id may be used
 *  again). Main thread, between phases. */
void          tess_core_reduce_forget(uint32_t key);
/** A reduction open at process 0: its partials so far add up to ncontrib of expected. */
typedef struct tess_reduce_open {
    uint32_t key;
    uint64_t tag;
    int64_t  ncontrib, expected;
} tess_reduce_open_t;
/** The reductions open at process 0 (PE 0 of process 0, between scheduler passes): fills up
 *  to max of them into out and returns how many there are. */
int           tess_core_reduce_open(tess_reduce_open_t *out, int max);

/**
 * Submit a partial result of reduction (key, tag) that combines `ncontrib` contributions (any
 * PE; data is copied). It goes to process 0, which completes the reduction once the partials
 * of all processes add up to `global_expected` contributions. `cb` (cb_len <= 64 bytes) is
 * carried to the result function. Every partial of one reduction must carry the same count,
 * type, op and cb; a mismatch found at process 0 aborts with a message.
 */
tess_status_t tess_core_reduce_submit(uint32_t key, uint64_t tag, int64_t ncontrib,
                                      int64_t global_expected, const void *data, int count,
                                      tess_dtype_t type, tess_op_t op, const void *cb,
                                      size_t cb_len);
/** Like tess_core_reduce_submit, but straight to process 0, past the tree (any PE): partials of
 *  reductions on the fast path that missed their round (late after a migration, or of a round
 *  that came back incomplete); process 0 completes the reduction by count as for the tree. */
tess_status_t tess_core_reduce_submit_direct(uint32_t key, uint64_t tag, int64_t ncontrib,
                                             int64_t global_expected, const void *data,
                                             int count, tess_dtype_t type, tess_op_t op,
                                             const void *cb, size_t cb_len);

/* ---- the fast path (reduce_fast.c, TESS_REDUCE=auto) ---------------------------------------
 * Rounds of one MPI_Iallreduce per key (array) on a communicator of its own, joined by every
 * process exactly once each, in order: with a partial (ncontrib > 0) or empty (ncontrib == 0,
 * data NULL). The caller joins round r + 1 only after round r's function ran here (one round
 * per key at a time). Every process gets the same round back; what to do with it (deliver, or
 * send its own partial to process 0 if the round is not complete) is the caller's. */

/** Nonzero when TESS_REDUCE=auto and `count` values of `type` with a cb_len-byte callback fit
 *  a round (at most 32 bytes of values and 16 of callback). Any thread. */
int           tess_core_reduce_fast_fits(int count, tess_dtype_t type, size_t cb_len);
/** Join the next round of `key` (any PE; the data is copied). A round with a partial counts as
 *  work in flight until it completes. */
tess_status_t tess_core_reduce_join(uint32_t key, uint64_t tag, int64_t ncontrib,
                                    int64_t global_expected, const void *data, int count,
                                    tess_dtype_t type, tess_op_t op, const void *cb,
                                    size_t cb_len);
/** A completed round, the same on every process. complete: the contributions of every element
 *  to one tag, all with the same count, type, op and callback (data is then the result). */
typedef struct tess_reduce_round {
    int64_t      ncontrib, expected;
    uint64_t     tag, tag_max; /* the lowest and highest tag of its partials (ncontrib > 0) */
    int          complete;
    int          count;
    tess_dtype_t type;
    tess_op_t    op;
    const void  *data, *cb;
    size_t       size, cb_len;
} tess_reduce_round_t;
/** Runs on PE 0 of every process when a round of `key` completes there. */
typedef void (*tess_reduce_round_fn_t)(uint32_t key, const tess_reduce_round_t *round);
void          tess_core_reduce_set_round_fn(tess_reduce_round_fn_t fn);
/** A partial waits for a round while this process's last join was empty: post that join now
 *  instead of after its wait (any PE). */
void          tess_core_reduce_hurry(void);
/** Work in flight that quiescence must wait for (any PE; +1, then -1 when done). */
void          tess_core_reduce_hold(int delta);

/** TESS_OK when count, type and op make a valid reduction (error detail otherwise). */
tess_status_t tess_reduce_check(int count, tess_dtype_t type, tess_op_t op);

/** Combine `count` values of `type` from src into dst with op (in place). */
tess_status_t tess_reduce_apply(tess_op_t op, tess_dtype_t type, void *dst, const void *src,
                                int count);
size_t        tess_dtype_size(tess_dtype_t type);
const char   *tess_op_name(tess_op_t op);
const char   *tess_dtype_name(tess_dtype_t type);

/* ---- GPU completion continuations -------------------------------------------------------- */

/** Run fn(arg) on the calling PE once everything enqueued on `stream` so far has completed.
 *  Uses a stream signal or a pooled event (TESS_GPU_POLL); counted as in-flight work for
 *  quiescence (PE thread). */
typedef void (*tess_gpu_cont_fn_t)(void *arg);
tess_status_t tess_core_gpu_then(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn, void *arg);
/** Like tess_core_gpu_then, always with an event: the runtime's own waits, which mostly
 *  follow its copies, where a stream signal would hold the stream up (gpuq.c). */
tess_status_t tess_core_gpu_then_event(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn,
                                        void *arg);
/** memcpy_async of size bytes on `stream`, then tess_core_gpu_then_event; with stream signals
 *  and a small copy the backend can signal from, the copy itself signals (one call into the
 *  driver, not two). */
tess_status_t tess_core_gpu_copy_then(void *dst, const void *src, size_t size,
                                      tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn,
                                      void *arg);
/** fn(arg) runs with the continuation this PE added last on `stream`, which the caller has
 *  enqueued nothing on since (no second signal; else as tess_core_gpu_then_event). */
tess_status_t tess_core_gpu_then_same(tess_gpu_stream_h stream, tess_gpu_cont_fn_t fn,
                                      void *arg);
/** Like tess_core_gpu_then, for an event the caller recorded itself (the caller keeps it). */
tess_status_t tess_core_gpu_when(tess_gpu_event_h event, tess_gpu_cont_fn_t fn, void *arg);
/** The calling PE's event pool (PE thread). */
tess_gpu_evpool_t *tess_core_evpool(void);

#endif /* TESS_CORE_H */
