/*
 * gpu.h — the gpu component: a device backend behind an ops table (host, CUDA, HIP), backend
 * selection, the per-process stream pool and event pools.
 *
 * Backends. `host` is always built: device memory is a per-process POSIX shared-memory arena,
 * streams are in-order queues run asynchronously by backend threads, events are counters and
 * kernels are host functions. `cuda` and `hip` call the vendor runtime from C. Exactly one
 * backend is active per process, chosen by tess_gpu_init().
 *
 * Semantics follow the CUDA runtime: operations on one stream run in order; different streams
 * run concurrently; an event completes when the work before its last record has completed;
 * stream_wait_event makes later work on a stream wait for the event's last record *at the time
 * of the call*.
 *
 * Threads: after tess_gpu_init() (one thread, before the others start) every operation may be
 * called from any thread concurrently, as with the CUDA runtime. A tess_gpu_evpool_t belongs to
 * one thread. tess_gpu_fini() runs alone, after every other thread stopped using the backend.
 */
#ifndef TESS_GPU_H
#define TESS_GPU_H

#include "util/util.h"

#include <tessera/gpu.h>

typedef struct tess_gpu_stream *tess_gpu_stream_h; /* cudaStream_t/hipStream_t for those */
typedef struct tess_gpu_event  *tess_gpu_event_h;  /* cudaEvent_t/hipEvent_t for those */
typedef struct tess_gpu_graph  *tess_gpu_graph_h;  /* a recorded graph, ready to launch */

#define TESS_GPU_IPC_HANDLE_SIZE 128

/** An exported allocation or event, meaningful to another process of the same node. */
typedef struct tess_gpu_ipc_handle {
    uint8_t bytes[TESS_GPU_IPC_HANDLE_SIZE];
} tess_gpu_ipc_handle_t;

enum tess_gpu_event_flags {
    TESS_GPU_EVENT_TIMING = 1u << 0, /* elapsed time can be measured (not with IPC) */
    TESS_GPU_EVENT_IPC    = 1u << 1  /* can be exported to other processes */
};

typedef struct tess_gpu_ptr_info {
    int      is_device; /* device memory of this backend (own or opened through IPC) */
    int      device;    /* device it lives on, -1 if unknown */
    void    *base;      /* start of the allocation, NULL if unknown (e.g. opened IPC memory) */
    size_t   size;      /* size of the allocation, 0 if unknown */
    uint64_t alloc_id;  /* unique per allocation in this process, never reused; 0 if unknown */
} tess_gpu_ptr_info_t;

typedef struct tess_gpu_props {
    char   name[128];
    size_t total_mem;
    int    multiprocessors;
    int    ipc;        /* memory and events can be shared between processes */
    int    wait_value; /* stream memory operations (cuStreamWaitValue32) work */
    int    mps;        /* 1: contexts on the device are shared through MPS (kernels and copies
                        * of several processes run at once); 0: each process has its own and
                        * they take turns; -1: unknown or not applicable (host backend, HIP) */
} tess_gpu_props_t;

typedef struct tess_gpu_init_params {
    uint64_t job_id;           /* same on every rank of the job: names shared memory */
    int      rank;             /* rank in the job */
    int      local_rank;       /* rank among the processes of this node */
    int      local_size;       /* processes on this node */
    size_t   host_arena_size;  /* host backend: bytes per arena segment */
    size_t   host_device_memory; /* host backend: device memory size (0: no limit) */
    size_t   host_pinned_memory; /* host backend: pinned host memory size (0: no limit) */
    int      host_threads;     /* host backend: executor threads per process */
    int      host_jitter_us;   /* host backend: random delay before each operation (tests) */
    int      host_devices;     /* host backend: number of devices it pretends to have */
    int      host_fault_kernel; /* host backend: the kernel of this number faults (0: none; tests) */
} tess_gpu_init_params_t;

/** A host-backend kernel: args points at a copy of the launch arguments. */
typedef void (*tess_gpu_host_fn_t)(void *args);
/** Called (on a backend thread) when an event recorded by this process completes, or a stream
 *  signal is written. */
typedef void (*tess_gpu_notify_fn_t)(void);

/** One copy of a batch (memcpy_batch_async). */
typedef struct tess_gpu_copy {
    void       *dst;
    const void *src;
    size_t      size;
} tess_gpu_copy_t;
#define TESS_GPU_COPY_BATCH_MAX 64

typedef struct tess_gpu_ops {
    const char          *name;
    tess_gpu_backend_t   kind;
    /** 1 when stream_wait_event waits for the record current at the call even if the event is
     *  recorded again before that record completed (CUDA, HIP); 0 when a later record may
     *  release it early (the host backend tracks the latest record only): then an event is
     *  reused only after its record completed. */
    int                  wait_captures_record;
    /** Set up the backend. TESS_ERR_UNSUPPORTED (quietly) when no device is usable. */
    tess_status_t (*init)(const tess_gpu_init_params_t *params);
    void (*fini)(void);
    int           (*device_count)(void);
    tess_status_t (*set_device)(int device);
    tess_status_t (*get_props)(int device, tess_gpu_props_t *props_p);

    tess_status_t (*mem_alloc)(size_t size, void **ptr_p);
    tess_status_t (*mem_free)(void *ptr);
    tess_status_t (*host_alloc)(size_t size, void **ptr_p); /* pinned host memory */
    tess_status_t (*host_free)(void *ptr);

    tess_status_t (*memcpy_async)(void *dst, const void *src, size_t size, tess_gpu_stream_h s);
    tess_status_t (*memset_async)(void *dst, int value, size_t size, tess_gpu_stream_h s);
    /** Enqueue fn(copy of args) on the stream; args_size <= TESS_GPU_HOST_ARGS_MAX. */
    tess_status_t (*launch_host)(tess_gpu_stream_h s, tess_gpu_host_fn_t fn, const void *args,
                                 size_t args_size);

    tess_status_t (*stream_create)(tess_gpu_stream_h *s_p); /* non-blocking stream */
    tess_status_t (*stream_destroy)(tess_gpu_stream_h s);
    tess_status_t (*stream_sync)(tess_gpu_stream_h s);
    tess_status_t (*stream_query)(tess_gpu_stream_h s); /* TESS_OK idle, TESS_INPROGRESS busy */
    tess_status_t (*stream_wait_event)(tess_gpu_stream_h s, tess_gpu_event_h e);

    tess_status_t (*event_create)(unsigned flags, tess_gpu_event_h *e_p);
    tess_status_t (*event_destroy)(tess_gpu_event_h e);
    tess_status_t (*event_record)(tess_gpu_event_h e, tess_gpu_stream_h s);
    tess_status_t (*event_query)(tess_gpu_event_h e); /* TESS_OK done, TESS_INPROGRESS */
    tess_status_t (*event_sync)(tess_gpu_event_h e);
    tess_status_t (*event_elapsed_ms)(tess_gpu_event_h start, tess_gpu_event_h end, float *ms_p);

    /** Stream signals (optional: all three NULL where the backend has none, and signal_alloc
     *  may answer TESS_ERR_UNSUPPORTED; the runtime then polls events). signal_alloc gives `n`
     *  zeroed 32-bit words of host memory the device can write (signal_free frees them);
     *  stream_signal enqueues on s a write of `value` to `word` that happens once everything
     *  enqueued on s before it has completed, after a fence that makes that work's writes
     *  visible to the host. The host reads a word with an acquire load: seeing GPU work
     *  complete then costs no call into the driver. A device error stops the writes, so a
     *  poller also asks stream_query now and then. */
    tess_status_t (*signal_alloc)(size_t n, _Atomic uint32_t **words_p);
    void (*signal_free)(_Atomic uint32_t *words);
    tess_status_t (*stream_signal)(tess_gpu_stream_h s, _Atomic uint32_t *word, uint32_t value);
    /** Optional (NULL: none): memcpy_async and stream_signal as one operation, for copies of
     *  up to memcpy_signal_max bytes, where the backend's copy writes the word itself. */
    tess_status_t (*memcpy_signal_async)(void *dst, const void *src, size_t size,
                                         tess_gpu_stream_h s, _Atomic uint32_t *word,
                                         uint32_t value);
    size_t memcpy_signal_max;
    /** Optional (NULL: memcpy_async of each): n (1..TESS_GPU_COPY_BATCH_MAX) copies whose
     *  destinations do not overlap, enqueued on s as one operation where the backend can (one
     *  kernel launch for the small device-to-device ones on CUDA). */
    tess_status_t (*memcpy_batch_async)(const tess_gpu_copy_t *copies, int n, tess_gpu_stream_h s);

    /** Export the allocation that starts at ptr (from mem_alloc). */
    tess_status_t (*ipc_mem_export)(void *ptr, tess_gpu_ipc_handle_t *h_p);
    /** Map another process's allocation; the returned pointer is its start. */
    tess_status_t (*ipc_mem_open)(const tess_gpu_ipc_handle_t *h, void **ptr_p);
    tess_status_t (*ipc_mem_close)(void *ptr);
    /** Export an event created with TESS_GPU_EVENT_IPC. */
    tess_status_t (*ipc_event_export)(tess_gpu_event_h e, tess_gpu_ipc_handle_t *h_p);
    /** Open another process's event: it can be waited on, queried and recorded. */
    tess_status_t (*ipc_event_open)(const tess_gpu_ipc_handle_t *h, tess_gpu_event_h *e_p);
    tess_status_t (*ipc_event_close)(tess_gpu_event_h e);

    tess_status_t (*ptr_query)(const void *ptr, tess_gpu_ptr_info_t *info_p);
    /** The vendor handle (cudaStream_t) behind a stream; the stream itself for host. */
    void *(*native_stream)(tess_gpu_stream_h s);
    /** Optional: ask to be told of event completions (NULL when the backend cannot). Returns
     *  once no call of the function set before is still running, so set_notify(NULL) ends
     *  the calls before what they touch is freed. */
    void (*set_notify)(tess_gpu_notify_fn_t fn);
    /** Nonzero while operations are queued or running on any stream (any thread). NULL where
     *  the device does not share the host's cores; the host backend's executors do, so a PE
     *  that would spin blocks at once while they have work. */
    int (*busy)(void);

    /** Graphs (optional: all NULL where the backend has none; the runtime then runs the work
     *  directly). graph_begin puts stream s, which nothing else uses, in recording mode: the
     *  copies, sets, kernels and host functions the calling thread then enqueues on s are
     *  recorded, not run (CUDA: cudaStreamCaptureModeThreadLocal). graph_end ends it and gives
     *  the recording, ready to launch (on an error, such as an operation the recording cannot
     *  hold, nothing: the stream is out of recording mode either way). graph_launch enqueues
     *  the recorded operations on s, in their order, as one operation; a graph may be launched
     *  any number of times, on any stream. graph_destroy may be called while launches of g are
     *  still queued or running: they complete, and g is freed after them. graph_compare:
     *  0 when a and b record the same operations, else nonzero with what differs in why.
     *  graph_end_update (optional, NULL where the backend has no cheaper way): graph_end that
     *  first tries to make `old` launch the new recording instead, keeping old's launchable
     *  form (CUDA, HIP: an update of the instantiated graph, far cheaper than instantiating
     *  and destroying one); *g_p = old then, and its launches already queued run the old
     *  operations. Where the recording does not fit old (another shape), a new graph as
     *  graph_end gives, and old stays as it was (the caller destroys it). old must not be
     *  launched by another thread meanwhile.
     *  Threads: begin, the recording and end on one thread; the rest from any thread. */
    tess_status_t (*graph_begin)(tess_gpu_stream_h s);
    tess_status_t (*graph_end)(tess_gpu_stream_h s, tess_gpu_graph_h *g_p);
    tess_status_t (*graph_end_update)(tess_gpu_stream_h s, tess_gpu_graph_h old,
                                      tess_gpu_graph_h *g_p);
    tess_status_t (*graph_launch)(tess_gpu_graph_h g, tess_gpu_stream_h s);
    void (*graph_destroy)(tess_gpu_graph_h g);
    int (*graph_compare)(tess_gpu_graph_h a, tess_gpu_graph_h b, char *why, size_t len);
} tess_gpu_ops_t;

#define TESS_GPU_HOST_ARGS_MAX 256

extern const tess_gpu_ops_t tess_gpu_host_ops;
#ifdef HAVE_CUDA
extern const tess_gpu_ops_t tess_gpu_cuda_ops;
#endif
#ifdef HAVE_HIP
extern const tess_gpu_ops_t tess_gpu_hip_ops;
#endif

/** The active backend (NULL before tess_gpu_init). */
extern const tess_gpu_ops_t *tess_gpu;

/* ---- plain shared segments (host memory shared by the processes of a node) ----------------
 * Made, named and cleaned up as the host backend's own segments are (host/shm.c: the name
 * /tessera-u<uid>-j<job>-p<pid>-s<n>, mode 0600, unlinked as soon as it is mapped, the reaper
 * and the next run's reclaim for a process that was killed), and opened by peers through the
 * creator's descriptor (host/shm.c), so the creator must outlive the peers' opens. They are
 * plain host memory, so every backend has them: under CUDA or HIP the host backend's segment
 * service (names, reaper, cleanups) starts with the first one. TESS_ERR_UNSUPPORTED before
 * tess_gpu_init. Any thread; a handle from another process is checked as untrusted input. */
typedef struct tess_gpu_host_shm *tess_gpu_shm_h;
/** Nonzero when shared segments can be made (a backend is initialised). Logs nothing. */
int           tess_gpu_shm_available(void);
/** Create and map size bytes (zeroed); *h_p is what peers pass to tess_gpu_shm_open. */
tess_status_t tess_gpu_shm_create(size_t size, tess_gpu_shm_h *shm_p, void **base_p,
                                  tess_gpu_ipc_handle_t *h_p);
/** Unmap and free a segment made here (peers' mappings stay valid until they close them). */
void          tess_gpu_shm_destroy(tess_gpu_shm_h shm);
/** Map another process's segment (a new mapping per call); *size_p: its size. */
tess_status_t tess_gpu_shm_open(const tess_gpu_ipc_handle_t *h, void **base_p, size_t *size_p);
/** Unmap what tess_gpu_shm_open mapped. */
void          tess_gpu_shm_close(void *base, size_t size);
/** tess_gpu_init and tess_gpu_fini: the job's parameters for the names, and the end of the
 *  segment service where another backend started it (every segment destroyed). */
void          tess_gpu_shm_setup(const tess_gpu_init_params_t *params);
void          tess_gpu_shm_fini(void);

/**
 * Choose and initialise a backend. `want` is "auto" (CUDA or HIP when built and a device is
 * visible, else host), "host", "cuda" or "hip"; asking for one that is not built or has no
 * device is an error. Selects device `local_rank * ndev / local_size`. Creates the stream pool
 * of `nstreams` streams.
 */
tess_status_t tess_gpu_init(const char *want, const tess_gpu_init_params_t *params, int nstreams);
void          tess_gpu_fini(void);
/* tess_gpu_device() and tess_gpu_num_devices() (public) give the device of this process. */
/** How many processes of this node use this process's device (itself included; 1 before
 *  tess_gpu_init). */
int tess_gpu_device_procs(void);

/** Called with an allocation's id just before tess_gpu_free or tess_gpu_mem_release frees it,
 * so that a layer above can drop what it keeps about that memory (devcomm: its RDMA
 * registration). One hook; NULL removes it. Set and called from any thread (atomic pointer). */
typedef void (*tess_gpu_free_hook_fn)(uint64_t alloc_id);
void tess_gpu_set_free_hook(tess_gpu_free_hook_fn fn);
/** Free device memory through the hook (runtime code that frees user-visible buffers, e.g. a
 * migrated element's old buffers, uses this rather than tess_gpu->mem_free). */
tess_status_t tess_gpu_mem_release(void *ptr);

/** The copies on s as one batch where the backend has memcpy_batch_async (n may exceed
 *  TESS_GPU_COPY_BATCH_MAX: then in several), else one memcpy_async each. Destinations must not
 *  overlap. Any thread. */
tess_status_t tess_gpu_memcpy_batch(const tess_gpu_copy_t *copies, int n, tess_gpu_stream_h s);

/** Set by the layer above on a thread while it records a graph (NULL otherwise):
 *  tess_gpu_stream_sync, which a recording cannot hold, calls it with its name first (it
 *  reports the misuse and does not return). */
extern _Thread_local void (*tess_gpu_record_guard)(const char *call);

/** Stream i of the per-process pool (i taken modulo the pool size). */
tess_gpu_stream_h tess_gpu_pool_stream(size_t i);
size_t            tess_gpu_pool_size(void);

/* ---- event pool: a free list of pre-created events of one kind, owned by one thread -------- */

typedef struct tess_gpu_evpool {
    unsigned          flags;
    tess_gpu_event_h *free;
    size_t            nfree, cap, created;
} tess_gpu_evpool_t;

tess_status_t tess_gpu_evpool_init(tess_gpu_evpool_t *p, unsigned flags, size_t initial);
void          tess_gpu_evpool_fini(tess_gpu_evpool_t *p);
/** An event from the pool; grows the pool (by creating events) only when it is empty. */
tess_status_t tess_gpu_evpool_get(tess_gpu_evpool_t *p, tess_gpu_event_h *e_p);
void          tess_gpu_evpool_put(tess_gpu_evpool_t *p, tess_gpu_event_h e);

#endif /* TESS_GPU_H */
