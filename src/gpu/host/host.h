/*
 * host.h — private interface of the host GPU backend (tess_gpu_host_ops). One section per part,
 * each part one file that calls only the parts above it:
 *
 *   reaper.c  a process that removes this process's segments once it is gone
 *   shm.c     shared-memory segments: made, named, shared through the creator's descriptor,
 *             cleaned up however the process ends (with the reaper); the handle that names a
 *             place in a segment; the plain segments of the layers above (gpu.h)
 *   fault.c   the device failure of tests (TESS_HOST_FAULT_KERNEL)
 *   events.c  own events: slots in event segments; query and timing
 *   graph.c   graphs: recorded stream operations, their references and comparison
 *   exec.c    streams, the executor threads that run them, waiting for streams and events,
 *             recording a stream's operations into a graph
 *   enqueue.c the stream operations (copies, sets, host functions, event records and waits,
 *             signals, graph launches) built and handed to exec.c's queues
 *   arena.c   device memory: the allocator over memory segments (mem_free waits for exec)
 *   ipc.c     exporting own allocations and events, opening other processes'
 *   ops.c     the ops table: init and fini in that order, and what needs several parts (a
 *             pointer's place in device memory: own arena or opened through IPC)
 *
 * The model is asynchronous, not a mock: streams are in-order queues that `host_threads`
 * executor threads run while the caller goes on, so the ordering bugs a CUDA program could have
 * show up here too (and ThreadSanitizer sees them: completion is published with release stores
 * and observed with acquire loads, exactly where CUDA's runtime would synchronise).
 *
 * Threads: after init every op may be called from any thread concurrently (five mutexes: the
 * arena's, the event slots', the executors', the IPC cache's and the plain segments'; no op
 * holds two at once, and the notify function is called with none held). Host functions run on
 * executor threads and must not call the backend (as with cudaLaunchHostFunc). fini runs alone.
 * A forked child must not use its parent's backend; it may init its own after the parent's fini.
 */
#ifndef TESS_GPU_HOST_H
#define TESS_GPU_HOST_H

#include "gpu/gpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#define TESS_GPU_HOST_ALIGN         256           /* every allocation starts on this boundary */
#define TESS_GPU_HOST_NAME_MAX      80            /* shared-memory names, with the NUL */
#define TESS_GPU_HOST_ARENA_DEFAULT (256ul << 20) /* bytes per memory segment */
#define TESS_GPU_HOST_EVSEG_SIZE    (64ul << 10)  /* bytes per event segment */
#define TESS_GPU_HOST_MAX_THREADS   64

/* ---- the backend's state (ops.c) ------------------------------------------------------------ */

typedef struct tess_gpu_host_state {
    tess_gpu_init_params_t params; /* with the defaults filled in */
    uid_t                  uid;
    pid_t                  pid;
    size_t                 page_size;
    _Atomic int            device; /* set by every PE thread at start (the same value) */
    int                    initialised;
} tess_gpu_host_state_t;

extern tess_gpu_host_state_t tess_gpu_host;

/* ---- the reaper (reaper.c) ------------------------------------------------------------------ */

/** Start a process that removes this process's segments once it is gone, however it ended
 *  (kill -9 included); without one (spawn failed: warned) the next run's reclaim removes them. */
void          tess_gpu_host_reaper_start(void);
/** Tell it this process ends normally (segments already unlinked) and collect it. */
void          tess_gpu_host_reaper_stop(void);

/* ---- shared-memory segments (shm.c) --------------------------------------------------------- */

/** A segment this process created. Every one is on a lock-free registry from its creation to
 *  the service's stop, so the exit and abort cleanups can unlink names without taking a lock. */
typedef struct tess_gpu_host_shm {
    struct tess_gpu_host_shm *next;  /* registry link, written before publication only */
    _Atomic int               linked; /* the name exists and is ours to unlink */
    pid_t                     owner;  /* after fork only the creator may unlink */
    void                     *base;   /* NULL once destroyed */
    size_t                    size;
    int                       fd;     /* kept open: peers open it as /proc/<pid>/fd/<fd> */
    char                      name[TESS_GPU_HOST_NAME_MAX];
} tess_gpu_host_shm_t;

/** What segments need, with or without the rest of the backend: uid, pid and job id for their
 *  names, the reclaim of what crashed processes left, the exit and abort cleanups, the reaper
 *  (host_init, or the first plain segment under another backend). */
tess_status_t tess_gpu_host_shm_start(const tess_gpu_init_params_t *params);
/** Undo tess_gpu_host_shm_start (every segment destroyed): unlink what is left, free the
 *  registry, stop the reaper. */
void          tess_gpu_host_shm_stop(void);
/** Create, size and map `/tessera-u<uid>-j<job>-p<pid>-<kind><n>` (kind 'm' memory, 'e' events,
 *  's' plain shared segments of the layers above: tess_gpu_shm_create), mode 0600,
 *  then unlink the name at once: peers open the segment through this process's descriptor
 *  (tess_gpu_host_shm_open_fd), so that a process killed by a signal leaves nothing in
 *  /dev/shm. The name exists only during the call (the reaper covers that moment). */
tess_status_t tess_gpu_host_shm_create(char kind, size_t size, tess_gpu_host_shm_t **shm_p);
/** Unlink and unmap; the record stays on the registry until the service stops. */
void          tess_gpu_host_shm_destroy(tess_gpu_host_shm_t *shm);
/** Unlink every name this process still owns (exit and abort cleanup: any thread, no locks). */
void          tess_gpu_host_shm_unlink_all(void);

/** What a host-backend IPC handle holds (inside tess_gpu_ipc_handle_t.bytes): a place in a
 *  segment of its owner. */
typedef struct tess_gpu_host_ipc_handle {
    uint32_t magic;     /* TESS_GPU_HOST_IPC_MEM, _EVENT or _SHM */
    uint16_t version;
    uint16_t name_len;  /* strlen(name) */
    int32_t  owner_pid;
    int32_t  device;
    int32_t  fd;        /* the owner's descriptor of the segment: /proc/<owner_pid>/fd/<fd> */
    uint64_t offset;    /* of the allocation or event slot in the segment */
    uint64_t size;
    uint64_t id;        /* memory: alloc_id; event: the slot's generation */
    char     name[TESS_GPU_HOST_NAME_MAX];
} tess_gpu_host_ipc_handle_t;

#define TESS_GPU_HOST_IPC_MEM     0x4d485354u /* "TSHM" */
#define TESS_GPU_HOST_IPC_EVENT   0x45485354u /* "TSHE" */
#define TESS_GPU_HOST_IPC_SHM     0x53485354u /* "TSHS": a whole segment (tess_gpu_shm_open) */
#define TESS_GPU_HOST_IPC_VERSION 2

_Static_assert(sizeof(tess_gpu_host_ipc_handle_t) <= TESS_GPU_IPC_HANDLE_SIZE,
               "the host IPC handle must fit in tess_gpu_ipc_handle_t");

/** A handle to [offset, offset+size) of shm (own segment), id as the kind wants it. */
void          tess_gpu_host_handle_fill(tess_gpu_ipc_handle_t *h_p, uint32_t magic,
                                        const tess_gpu_host_shm_t *shm, uint64_t offset,
                                        uint64_t size, uint64_t id);
/** Copy out and check a handle from another process (untrusted): magic, version, a name of
 *  our form, an owner and descriptor, offset + size without overflow. Errors name `fn`. */
tess_status_t tess_gpu_host_handle_parse(const tess_gpu_ipc_handle_t *h_in, uint32_t magic,
                                         const char *fn, tess_gpu_host_ipc_handle_t *h);
/** Open the segment of a parsed handle through its owner's descriptor (the name is gone),
 *  checking that the descriptor's link names that segment: a descriptor, or -1 with *st_p. */
int           tess_gpu_host_shm_open_fd(const tess_gpu_host_ipc_handle_t *h, const char *fn,
                                        tess_status_t *st_p);

/* ---- device failure (fault.c) --------------------------------------------------------------- */

/* A device fault (TESS_HOST_FAULT_KERNEL). The executors ask before each operation: once the
 * chosen kernel has come, it and every operation after it are skipped (records still retire,
 * so that no wait hangs). Queries, syncs and enqueues then fail with the fault; like a CUDA
 * context after an illegal access, the device stays failed. Any thread. */
int           tess_gpu_host_fault_skip(int is_kernel, int is_record);
tess_status_t tess_gpu_host_fault_check(const char *fn);
/** A device without a fault (init). */
void          tess_gpu_host_fault_reset(void);

/* ---- events (events.c) ---------------------------------------------------------------------- */

/** An event's state, in a shared-memory event segment so other processes can map it. */
typedef struct tess_gpu_host_evslot {
    _Atomic uint64_t recorded;  /* seq of the last record issued (enqueued) */
    _Atomic uint64_t completed; /* highest seq whose record operation ran */
    _Atomic uint64_t t_ns;      /* CLOCK_MONOTONIC when it ran (one clock for a node) */
    _Atomic uint64_t gen;       /* bumped by each event_create on the slot; IPC handles carry it */
    uint64_t         reserved[4];
} tess_gpu_host_evslot_t;

/** Start of every event segment; the slots follow. */
typedef struct tess_gpu_host_evseg_hdr {
    uint64_t magic;
    uint64_t nslots;
    uint64_t slot_size;
    uint64_t reserved[5];
} tess_gpu_host_evseg_hdr_t;

#define TESS_GPU_HOST_EVSEG_MAGIC  0x7465737365726145ull /* "Earesset" */
#define TESS_GPU_HOST_EVENT_MAGIC  0x45564e54u
#define TESS_GPU_HOST_STREAM_MAGIC 0x5354524du
#define TESS_GPU_HOST_EVENT_OPENED (1u << 8) /* flags: opened through IPC */

struct tess_gpu_event {
    uint32_t                 magic; /* TESS_GPU_HOST_EVENT_MAGIC while live */
    unsigned                 flags; /* TESS_GPU_EVENT_* | TESS_GPU_HOST_EVENT_OPENED */
    tess_gpu_host_evslot_t  *slot;
    tess_gpu_host_shm_t     *shm;   /* own events: their segment */
    struct tess_gpu_host_map *map;  /* opened events: the mapping (ipc.c) */
    struct tess_gpu_event   *next, *prev; /* own: free list; opened: ipc.c's list */
};

/** Complete: every record issued so far has run (never-recorded events are complete). */
static inline int tess_gpu_host_slot_complete(tess_gpu_host_evslot_t *slot)
{
    uint64_t rec = atomic_load_explicit(&slot->recorded, memory_order_acquire);
    return atomic_load_explicit(&slot->completed, memory_order_acquire) >= rec;
}

/** TESS_OK if e is a live event of this backend (own or opened), else TESS_ERR_INVALID naming
 *  `fn`. */
tess_status_t tess_gpu_host_event_check(tess_gpu_event_h e, const char *fn);
/** Own events: slots come from a free list over the event segments. */
tess_status_t tess_gpu_host_event_create(unsigned flags, tess_gpu_event_h *e_p);
/** An own event back to the free list (an opened one is ipc.c's to close). */
tess_status_t tess_gpu_host_event_destroy(tess_gpu_event_h e);
tess_status_t tess_gpu_host_event_query(tess_gpu_event_h e);
tess_status_t tess_gpu_host_event_elapsed_ms(tess_gpu_event_h start, tess_gpu_event_h end,
                                             float *ms_p);
/** Free every own event and destroy the event segments (fini). */
void          tess_gpu_host_events_fini(void);

/* ---- stream operations (enqueue.c builds them, exec.c queues and runs them, graph.c records
 * them) */

enum { OP_COPY, OP_SET, OP_FN, OP_RECORD, OP_WAIT, OP_SIGNAL, OP_GRAPH };

typedef struct tess_gpu_host_op {
    struct tess_gpu_host_op *next;
    int                      kind;
    uint32_t                 args_size; /* OP_FN */
    union {
        struct { void *dst; const void *src; size_t size; } copy;
        struct { void *dst; int value; size_t size; } set;
        tess_gpu_host_fn_t fn;
        struct { tess_gpu_host_evslot_t *slot; uint64_t seq; int ipc; } ev;
        struct { _Atomic uint32_t *word; uint32_t value; } sig;
        struct tess_gpu_graph *graph;
    } u;
    _Alignas(max_align_t) unsigned char args[TESS_GPU_HOST_ARGS_MAX];
} tess_gpu_host_op_t;

/* ---- graphs (graph.c) ----------------------------------------------------------------------- */

/* A recording: copies, sets and host functions, run in order by one OP_GRAPH operation per
 * launch. Reference-counted: the owner's reference, and one per queued launch, so that
 * graph_destroy is safe while launches are still queued or running. */
#define TESS_GPU_HOST_GRAPH_MAGIC 0x47525048u
struct tess_gpu_graph {
    uint32_t            magic;
    _Atomic int         refs;
    int                 broken; /* an operation it cannot hold was enqueued while recording */
    size_t              n, cap;
    tess_gpu_host_op_t *ops;
};

tess_gpu_graph_h tess_gpu_host_graph_new(void);
/** Append a copy of *op (a copy, set or host function). */
tess_status_t    tess_gpu_host_graph_append(tess_gpu_graph_h g, const tess_gpu_host_op_t *op);
void             tess_gpu_host_graph_ref(tess_gpu_graph_h g);
void             tess_gpu_host_graph_unref(tess_gpu_graph_h g);
void             tess_gpu_host_graph_destroy(tess_gpu_graph_h g);
int              tess_gpu_host_graph_compare(tess_gpu_graph_h a, tess_gpu_graph_h b, char *why,
                                             size_t len);

/* ---- streams and executors (exec.c) --------------------------------------------------------- */

tess_status_t tess_gpu_host_exec_init(void);
void          tess_gpu_host_exec_fini(void);
/** Wait until every operation enqueued (on any stream) before the call has run; like the
 *  implicit device synchronisation of cudaFree. */
tess_status_t tess_gpu_host_exec_drain(void);

tess_status_t tess_gpu_host_stream_create(tess_gpu_stream_h *s_p);
tess_status_t tess_gpu_host_stream_destroy(tess_gpu_stream_h s);
tess_status_t tess_gpu_host_stream_sync(tess_gpu_stream_h s);
tess_status_t tess_gpu_host_stream_query(tess_gpu_stream_h s);
tess_status_t tess_gpu_host_event_sync(tess_gpu_event_h e);
void          tess_gpu_host_set_notify(tess_gpu_notify_fn_t fn);
tess_status_t tess_gpu_host_graph_begin(tess_gpu_stream_h s);
tess_status_t tess_gpu_host_graph_end(tess_gpu_stream_h s, tess_gpu_graph_h *g_p);
int           tess_gpu_host_busy(void);

/** What enqueue.c builds its operations with (any thread). stream_check: TESS_OK if s (NULL:
 *  the default stream) is a live stream, else TESS_ERR_INVALID naming `fn`. exec_begin: the
 *  device's fault, the stream check and, unless `recordable` (a copy, set or host function),
 *  the refusal of a stream that records a graph; then an operation into *op_p, with the
 *  executors' lock held (only on TESS_OK; *s is the stream, the default one for NULL).
 *  exec_submit: queue op on s, or append it to the graph s records; unlock. op is taken. */
tess_status_t tess_gpu_host_stream_check(tess_gpu_stream_h s, const char *fn);
tess_status_t tess_gpu_host_exec_begin(tess_gpu_stream_h *s, const char *fn, int recordable,
                                       tess_gpu_host_op_t **op_p);
tess_status_t tess_gpu_host_exec_submit(tess_gpu_stream_h s, tess_gpu_host_op_t *op);

/* ---- stream operations enqueued (enqueue.c) ------------------------------------------------- */

/** Enqueue a copy or a set of size > 0 bytes whose pointers the caller checked (ops.c). */
tess_status_t tess_gpu_host_stream_copy(void *dst, const void *src, size_t size,
                                        tess_gpu_stream_h s);
tess_status_t tess_gpu_host_stream_set(void *dst, int value, size_t size, tess_gpu_stream_h s);
tess_status_t tess_gpu_host_launch_host(tess_gpu_stream_h s, tess_gpu_host_fn_t fn,
                                        const void *args, size_t args_size);
tess_status_t tess_gpu_host_stream_wait_event(tess_gpu_stream_h s, tess_gpu_event_h e);
tess_status_t tess_gpu_host_event_record(tess_gpu_event_h e, tess_gpu_stream_h s);
tess_status_t tess_gpu_host_stream_signal(tess_gpu_stream_h s, _Atomic uint32_t *word,
                                          uint32_t value);
tess_status_t tess_gpu_host_graph_launch(tess_gpu_graph_h g, tess_gpu_stream_h s);

/* ---- device memory (arena.c) ---------------------------------------------------------------- */

/** Where a pointer lies in device memory (own arena or opened through IPC). */
typedef struct tess_gpu_host_alloc {
    void                      *base;     /* start of the allocation; NULL when in no allocation */
    size_t                     size;     /* as requested */
    uint64_t                   alloc_id; /* 0 for opened memory */
    int                        device;
    const tess_gpu_host_shm_t *shm;      /* own arena: its segment */
    size_t                     offset;   /* own arena: offset of base in the segment */
} tess_gpu_host_alloc_t;

enum {
    TESS_GPU_HOST_FIND_BAD     = -1, /* device memory, but [ptr, ptr+len) is not inside one
                                        live allocation (a_p->base says which, if any) */
    TESS_GPU_HOST_FIND_NONE    = 0,  /* not this kind of device memory */
    TESS_GPU_HOST_FIND_INSIDE  = 1   /* inside the allocation described by *a_p */
};

tess_status_t tess_gpu_host_arena_init(void);
void          tess_gpu_host_arena_fini(void);
tess_status_t tess_gpu_host_mem_alloc(size_t size, void **ptr_p);
/** Frees once the device has run everything enqueued before (tess_gpu_host_exec_drain). */
tess_status_t tess_gpu_host_mem_free(void *ptr);
/** Look up [ptr, ptr+len) in the own arena (len 0: the byte at ptr). Logs nothing. */
int           tess_gpu_host_arena_find(const void *ptr, size_t len, tess_gpu_host_alloc_t *a_p);

/* ---- IPC (ipc.c) ---------------------------------------------------------------------------- */

void          tess_gpu_host_ipc_fini(void);
/** Look up [ptr, ptr+len) in memory opened through IPC (same results as arena_find). */
int           tess_gpu_host_ipc_find(const void *ptr, size_t len, tess_gpu_host_alloc_t *a_p);
tess_status_t tess_gpu_host_ipc_mem_export(void *ptr, tess_gpu_ipc_handle_t *h_p);
tess_status_t tess_gpu_host_ipc_mem_open(const tess_gpu_ipc_handle_t *h, void **ptr_p);
tess_status_t tess_gpu_host_ipc_mem_close(void *ptr);
tess_status_t tess_gpu_host_ipc_event_export(tess_gpu_event_h e, tess_gpu_ipc_handle_t *h_p);
tess_status_t tess_gpu_host_ipc_event_open(const tess_gpu_ipc_handle_t *h, tess_gpu_event_h *e_p);
tess_status_t tess_gpu_host_ipc_event_close(tess_gpu_event_h e);

#endif /* TESS_GPU_HOST_H */
