/*
 * tessera.h — the public API of Tessera.
 *
 * Tessera brings overdecomposition to an existing MPI (+ GPU) program. The program calls
 * tess_init() on a communicator, creates chare arrays (many migratable objects per GPU), runs one
 * phase of its work as entry methods of those chares with tess_run(), and gets control back in
 * plain MPI. GPU interop (streams, continuations, device messages) is in <tessera/gpu.h>.
 *
 * Threads. A process runs `ppn` PEs (worker threads). The thread that calls tess_init() and
 * tess_run() is PE 0 of its process and is the only thread that calls MPI; it must be the thread
 * MPI calls "main" when the thread level is MPI_THREAD_FUNNELED. Entry methods of one chare never
 * run concurrently; entry methods of different chares run concurrently on different PEs.
 * Each function below says from which threads it may be called:
 *   - "main":   the thread that called tess_init(), outside tess_run();
 *   - "entry":  an entry method, constructor-free start function or continuation (a PE thread
 *               inside tess_run());
 *   - "any":    any thread.
 * Calls from the wrong thread, or with arguments that cannot be right (an index out of range, an
 * unknown entry, a destroyed array, a send outside a phase, a second contribution to one
 * reduction), abort the job with a message naming the array, index, entry and the caller's
 * file:line: such errors cannot be returned from an entry method and must never be silent.
 *
 * Collective calls (tess_entry_register, tess_array_create, tess_array_destroy, tess_run,
 * tess_finalize) must be made by every process in the same order. The processes meet at the
 * start of each: when they entered different ones (one skipped a tess_run), the job aborts naming
 * both calls; while some process has not come, the others warn every 10, 20, 40 ... s.
 *
 * Errors. Functions return tess_status_t (<tessera/status.h>): TESS_OK (0), TESS_INPROGRESS (> 0)
 * or a negative error. The error is logged once where it was found; tess_error_detail() returns
 * that text for the calling thread.
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <tessera/status.h>

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESS_VERSION_MAJOR 0
#define TESS_VERSION_MINOR 1
#define TESS_VERSION_PATCH 0

/* ------------------------------------------------------------------------------------------ */
/* Initialisation                                                                             */
/* ------------------------------------------------------------------------------------------ */

/** Fields of tess_params_t; set the bit of every field you fill in. */
enum tess_params_field {
    TESS_PARAM_FIELD_PPN       = 1u << 0,
    TESS_PARAM_FIELD_LOG_LEVEL = 1u << 1,
    TESS_PARAM_FIELD_SPIN_US   = 1u << 2,
    TESS_PARAM_FIELD_BIND      = 1u << 3,
    TESS_PARAM_FIELD_VERBOSE   = 1u << 4,
    TESS_PARAM_FIELD_GPU       = 1u << 5,
    TESS_PARAM_FIELD_STREAMS   = 1u << 6
};

/**
 * Program defaults for runtime options. Every option also has a TESS_* environment variable and
 * most a +tess-* command-line flag (docs/options.md): the command line overrides the environment,
 * which overrides these fields, which override the built-in defaults.
 */
typedef struct tess_params {
    /** TESS_PARAM_FIELD_* bits of the fields set. tess_init refuses (TESS_ERR_INVALID) a
     *  nonzero field without its bit (it would be ignored) and a bit that names no field. */
    uint64_t         field_mask;
    int              ppn;        /**< PEs (worker threads) per process, >= 1 (default 1) */
    tess_log_level_t log_level;  /**< default TESS_LOG_WARN */
    int              spin_us;    /**< how long an idle PE spins before it blocks (default 100) */
    int              bind;       /**< bind PEs to cores with hwloc (default 0) */
    int              verbose;    /**< print the process/PE/GPU mapping at init (default 0) */
    const char      *gpu;        /**< "auto" (default), "host", "cuda" or "hip" */
    int              streams;    /**< size of the per-process stream pool (default 64); a PE's
                                      elements share its part (the pool over the PEs, at
                                      least one stream) round-robin */
} tess_params_t;

/**
 * Initialise Tessera on `comm` (main; collective over comm). MPI must be initialised with at least
 * MPI_THREAD_FUNNELED; the communicator is duplicated, so the caller keeps using `comm`.
 * Runtime flags (+ppn N, +tess-log LEVEL, +tess-bind, +tess-verbose, +tess-spin US, …) are read
 * from and removed from argc/argv when they are given (both may be NULL). `params` may be NULL.
 * Errors: TESS_ERR_MPI (MPI not initialised, thread level too low, not the main thread),
 * TESS_ERR_STATE (already initialised), TESS_ERR_INVALID (a bad option value), TESS_ERR_UCX,
 * TESS_ERR_GPU.
 */
TESS_API tess_status_t tess_init(int *argc, char ***argv, MPI_Comm comm,
                                 const tess_params_t *params);

/** Destroy every array, stop the PEs and release all resources (main; collective). MPI stays
 *  initialised: the caller finalizes it. A background checkpoint still being written is first
 *  waited for and made current (tess_checkpoint_wait); its error, if any, is returned after
 *  everything else is released. */
TESS_API tess_status_t tess_finalize(void);

/** Nonzero between tess_init() and tess_finalize(). Any thread. */
TESS_API int tess_initialized(void);

/** This process's rank in the communicator given to tess_init(), and their number. Any thread. */
TESS_API int tess_process(void);
TESS_API int tess_num_processes(void);
/** PEs per process, the global number of PEs, and the global PE id of the calling thread
 *  (-1 when the thread is not a PE, e.g. outside tess_run()). Global PE ids number the PEs of
 *  process 0 first, then process 1, … Any thread. */
TESS_API int tess_ppn(void);
TESS_API int tess_num_pes(void);
TESS_API int tess_pe(void);
/** Process owning global PE `pe`. Any thread. */
TESS_API int tess_pe_process(int pe);
/** Seconds since an arbitrary point, monotonic. Any thread. */
TESS_API double tess_wtime(void);

/* ------------------------------------------------------------------------------------------ */
/* Chare arrays and entry methods                                                             */
/* ------------------------------------------------------------------------------------------ */

/** An element index; dimensions beyond the array's are 0. */
typedef struct tess_index {
    int32_t x, y, z;
} tess_index_t;

static inline tess_index_t tess_idx1(int32_t x) { tess_index_t i = {x, 0, 0}; return i; }
static inline tess_index_t tess_idx2(int32_t x, int32_t y) { tess_index_t i = {x, y, 0}; return i; }
static inline tess_index_t tess_idx3(int32_t x, int32_t y, int32_t z)
{
    tess_index_t i = {x, y, z};
    return i;
}

typedef struct tess_array *tess_array_h;  /**< a chare array */
typedef struct tess_ctx   *tess_ctx_h;    /**< the element an entry method runs on */
typedef int                tess_entry_t;  /**< an entry-method id from tess_entry_register() */

/**
 * An entry method: runs on the PE that owns the element, never concurrently with another entry
 * of the same element. `msg` (size bytes) is valid until the entry returns.
 */
typedef void (*tess_entry_fn_t)(tess_ctx_h ctx, void *elem, const void *msg, size_t size);

/** Element constructor/destructor: run on the calling (main) thread during tess_array_create()/
 *  tess_array_destroy(); `elem` is zeroed before the constructor. They may not send messages. */
typedef void (*tess_elem_fn_t)(tess_ctx_h ctx, void *elem, void *arg);

/** A user mapping: the global PE (0 ≤ pe < num_pes) of element `index`. Must give the same answer
 *  on every rank: tess_array_create compares the placements of all processes and fails with
 *  TESS_ERR_MISMATCH, naming the first element placed differently, if they differ. */
typedef int (*tess_map_fn_t)(tess_index_t index, const int32_t extents[3], int num_pes, void *arg);

typedef enum tess_map {
    TESS_MAP_BLOCK       = 0, /**< contiguous blocks of the row-major linear index (default) */
    TESS_MAP_ROUND_ROBIN = 1, /**< linear index modulo the number of PEs */
    TESS_MAP_USER        = 2  /**< map_fn */
} tess_map_t;

typedef struct tess_pup *tess_pup_h;
/** One function sizes, packs and unpacks an element's state (see tess_pup_*). */
typedef void (*tess_pup_fn_t)(tess_pup_h pup, tess_ctx_h ctx, void *elem);

enum tess_array_field {
    TESS_ARRAY_FIELD_NAME      = 1u << 0,
    TESS_ARRAY_FIELD_DTOR      = 1u << 1,
    TESS_ARRAY_FIELD_MAP       = 1u << 2,
    TESS_ARRAY_FIELD_PUP       = 1u << 3,
    TESS_ARRAY_FIELD_RESUME    = 1u << 4,
    TESS_ARRAY_FIELD_REDUCE    = 1u << 5,
    TESS_ARRAY_FIELD_STREAMS   = 1u << 6
};

typedef struct tess_array_params {
    /** TESS_ARRAY_FIELD_* of the optional fields set. An optional field that is not zero
     *  without its bit is refused (TESS_ERR_INVALID), never ignored. */
    uint64_t       field_mask;
    const char    *name;       /**< for messages (default "array<N>") */
    int            ndims;      /**< 1, 2 or 3 (required) */
    int32_t        extents[3]; /**< elements per dimension, each >= 1 (required) */
    size_t         elem_size;  /**< bytes of user state per element (required, may be 0) */
    tess_elem_fn_t ctor;       /**< constructor (required, may be NULL) */
    void          *ctor_arg;   /**< passed to ctor and dtor */
    tess_elem_fn_t dtor;       /**< destructor */
    tess_map_t     map;        /**< initial placement */
    tess_map_fn_t  map_fn;     /**< with TESS_MAP_USER */
    void          *map_arg;
    /** How elements migrate (tess_migrate, load balancing): without it an element moves as its
     *  elem_size state bytes alone, which is right for state that owns no memory (the runtime
     *  warns once per array at its first migration: pointers in the state would be copied as
     *  they are); with it the function also moves what the state points to (see tess_pup_*).
     *  A function that moves nothing states that the bytes are enough. */
    tess_pup_fn_t  pup;
    tess_entry_t   resume;     /**< entry run on every element after a load-balancing step */
    /** How reductions of this array whose callback is a broadcast cross processes (the same
     *  on every process): 0 = as TESS_REDUCE says (auto: one allreduce per round when the
     *  result fits 32 bytes, through shared memory among the processes of a node and
     *  MPI_Iallreduce among nodes, every process delivering it to its own elements; tree: up
     *  the spanning tree to process 0 and back down), 1 = always by the tree. */
    int            reduce_tree;
    /** Streams a PE's elements of this array take (>= 0): each PE has its own part of the
     *  process's stream pool (TESS_STREAMS over the PEs, at least one) and its elements take
     *  that part's streams round robin; 0 (default) uses all of the part, k at most its first
     *  k. 1 puts all of a PE's elements on one stream: what batched launches want
     *  (tess_gpu_batch: a batch waits for each distinct stream of its elements, and each of
     *  those waits for the launch; a device message between two elements of one stream needs
     *  no wait either), at the price of ordering each element's own launches after those the
     *  PE's other elements made before (their kernels no longer overlap). An element that
     *  migrates within its process keeps its stream. */
    int            pe_streams;
} tess_array_params_t;

/**
 * Register an entry method (main; collective: every rank registers the same entries in the same
 * order, checked here — a mismatch is TESS_ERR_MISMATCH naming the entry). `name` is copied.
 */
TESS_API tess_status_t tess_entry_register(const char *name, tess_entry_fn_t fn,
                                           tess_entry_t *entry_p);

/** Name of a registered entry ("?" if unknown). Any thread. */
TESS_API const char *tess_entry_name(tess_entry_t entry);

/**
 * Create a chare array (main; collective). Every rank computes the same placement, so the
 * location table is identical everywhere; each rank constructs its own elements. The element
 * state lives in runtime memory of elem_size bytes, zeroed before the constructor runs and
 * aligned to the largest power of two that divides elem_size, at least 8 and at most 64 (so
 * any C type of that size is aligned as it needs, and a multiple of 64 bytes starts on a
 * cache line).
 * Errors: TESS_ERR_INVALID (bad parameters, an optional field set without its field_mask bit),
 * TESS_ERR_MISMATCH (the processes create different arrays, or a TESS_MAP_USER map places the
 * elements differently on different processes), TESS_ERR_STATE, TESS_ERR_NO_MEMORY.
 */
TESS_API tess_status_t tess_array_create(const tess_array_params_t *params, tess_array_h *array_p);

/** Run the destructors of the local elements and free the array (main; collective). */
TESS_API tess_status_t tess_array_destroy(tess_array_h array);

/** Total elements, dimensions and extents. Any thread. */
TESS_API int64_t tess_array_size(tess_array_h array);
TESS_API int     tess_array_ndims(tess_array_h array);
TESS_API const char *tess_array_name(tess_array_h array);

/** Global PE that owns `index` now. Any thread (exact outside phases; may lag a migration in
 *  flight inside one). Errors: TESS_ERR_INVALID for an index out of range. */
TESS_API tess_status_t tess_array_location(tess_array_h array, tess_index_t index, int *pe_p);

/** State of local element `index`, or NULL if it is not on this process (main). */
TESS_API void *tess_array_local(tess_array_h array, tess_index_t index);

/** Number of elements on this process (main). */
TESS_API int64_t tess_array_num_local(tess_array_h array);

/** Call fn on every local element, in no particular order, on the calling thread (main). */
typedef void (*tess_foreach_fn_t)(tess_ctx_h ctx, void *elem, void *arg);
TESS_API tess_status_t tess_array_foreach(tess_array_h array, tess_foreach_fn_t fn, void *arg);

/** About the element an entry runs on. Any thread that holds ctx. */
TESS_API tess_index_t tess_ctx_index(tess_ctx_h ctx);
TESS_API tess_array_h tess_ctx_array(tess_ctx_h ctx);
TESS_API void        *tess_ctx_elem(tess_ctx_h ctx);
TESS_API int64_t      tess_ctx_linear(tess_ctx_h ctx);

/* ------------------------------------------------------------------------------------------ */
/* Messages                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/*
 * Ordering: messages from one sender element (or start function) to one receiver element are
 * delivered in the order sent, while neither migrates. Nothing else is ordered; in particular a
 * broadcast is not ordered against point-to-point messages. Messages of any size a program can
 * hold are accepted; a size above 2^46 bytes (SIZE_MAX, a negative size cast) or data NULL with
 * a size above 0 aborts with a message naming the call. Every send is counted for quiescence;
 * no message is ever dropped.
 */

/** Send `size` bytes (copied before the call returns) to entry `entry` of element `index`
 *  (entry). */
#define tess_send(array, index, entry, data, size) \
    tess_send_loc((array), (index), (entry), (data), (size), __FILE__, __LINE__)

/** Zero-copy send: `msg` from tess_msg_alloc() is handed to the runtime (do not touch or free
 *  it afterwards); within a process the receiver reads the same buffer (entry). */
#define tess_send_msg(array, index, entry, msg) \
    tess_send_msg_loc((array), (index), (entry), (msg), __FILE__, __LINE__)

/** Send a copy of `size` bytes to entry `entry` of every element of `array` (entry). Every
 *  element runs it exactly once, also one that migrates meanwhile; all elements run an array's
 *  broadcasts in one order (the order in which its root process numbered them). */
#define tess_broadcast(array, entry, data, size) \
    tess_broadcast_loc((array), (entry), (data), (size), __FILE__, __LINE__)

/** A message buffer of `size` payload bytes for tess_send_msg() (entry; NULL if memory is
 *  exhausted or size is more than 2^46, which no buffer can be). Free an unsent one with
 *  tess_msg_free(). */
TESS_API void *tess_msg_alloc(size_t size);
TESS_API void  tess_msg_free(void *msg);

TESS_API tess_status_t tess_send_loc(tess_array_h array, tess_index_t index, tess_entry_t entry,
                                     const void *data, size_t size, const char *file, int line);
TESS_API tess_status_t tess_send_msg_loc(tess_array_h array, tess_index_t index, tess_entry_t entry,
                                         void *msg, const char *file, int line);
TESS_API tess_status_t tess_broadcast_loc(tess_array_h array, tess_entry_t entry, const void *data,
                                          size_t size, const char *file, int line);

/* ------------------------------------------------------------------------------------------ */
/* Reductions                                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef enum tess_dtype {
    TESS_INT32  = 0,
    TESS_INT64  = 1,
    TESS_FLOAT  = 2,
    TESS_DOUBLE = 3
} tess_dtype_t;

/** Logical ops work on every type (nonzero is true; the result is 1 or 0). Bitwise ops work on
 *  the integer types only. */
typedef enum tess_op {
    TESS_SUM  = 0,
    TESS_PROD = 1,
    TESS_MIN  = 2,
    TESS_MAX  = 3,
    TESS_LAND = 4,
    TESS_LOR  = 5,
    TESS_BAND = 6,
    TESS_BOR  = 7
} tess_op_t;

typedef enum tess_cb_kind {
    TESS_CB_ELEMENT   = 0, /**< send the result to one element's entry */
    TESS_CB_BROADCAST = 1, /**< broadcast the result to an entry of every element of an array */
    TESS_CB_RETURN    = 2, /**< end the phase; tess_result() returns the value on every rank */
    TESS_CB_CHECKPOINT_ELEMENT   = 3, /**< tess_cb_checkpoint(), then as TESS_CB_ELEMENT */
    TESS_CB_CHECKPOINT_BROADCAST = 4  /**< tess_cb_checkpoint(), then as TESS_CB_BROADCAST */
} tess_cb_kind_t;

typedef struct tess_callback {
    tess_cb_kind_t kind;
    tess_array_h   array;
    tess_index_t   index;
    tess_entry_t   entry;
} tess_callback_t;

static inline tess_callback_t tess_cb_element(tess_array_h a, tess_index_t i, tess_entry_t e)
{
    tess_callback_t cb = {TESS_CB_ELEMENT, a, i, e};
    return cb;
}
static inline tess_callback_t tess_cb_broadcast(tess_array_h a, tess_entry_t e)
{
    tess_callback_t cb = {TESS_CB_BROADCAST, a, {0, 0, 0}, e};
    return cb;
}
static inline tess_callback_t tess_cb_return(void)
{
    tess_callback_t cb = {TESS_CB_RETURN, NULL, {0, 0, 0}, -1};
    return cb;
}
/**
 * A checkpoint inside a phase, then `then` (tess_cb_element or tess_cb_broadcast; any other is
 * refused by tess_contribute). When the reduction completes its result is held; the phase goes
 * on until it is quiet (nothing in flight: typically every element waits for that result); then
 * every process takes a checkpoint with the parameters of tess_checkpoint_callback_params() and
 * step N = the reduction's tag, as tess_checkpoint() between phases would (in the background
 * by default), and the result goes to `then`: the phase continues in the same tess_run() call
 * (its start function does not run again). A phase that uses it must not end with tess_exit()
 * before the result is delivered.
 */
static inline tess_callback_t tess_cb_checkpoint(tess_callback_t then)
{
    then.kind = then.kind == TESS_CB_ELEMENT     ? TESS_CB_CHECKPOINT_ELEMENT
              : then.kind == TESS_CB_BROADCAST ? TESS_CB_CHECKPOINT_BROADCAST
                                               : (tess_cb_kind_t)-1;
    return then;
}

/**
 * Contribute `count` values of `type` to reduction `tag` of the element's array (entry).
 * Every element of the array contributes exactly once per tag, with the same count, type, op and
 * callback; an element's tags must increase (an iteration number works). Reductions with
 * different tags may be in flight at the same time. The values are combined within the process,
 * then across processes (see tess_array_params_t.reduce_tree); the result (count values) goes
 * to the callback. With tess_cb_broadcast, the result's entry may run on a PE as soon as the
 * result reaches it, before messages other PEs or processes sent earlier, never before a
 * message already waiting for that PE.
 * A second contribution to one tag, or a mismatch, aborts with a message.
 */
#define tess_contribute(ctx, tag, data, count, type, op, cb) \
    tess_contribute_loc((ctx), (tag), (data), (count), (type), (op), (cb), __FILE__, __LINE__)
TESS_API tess_status_t tess_contribute_loc(tess_ctx_h ctx, uint64_t tag, const void *data,
                                           int count, tess_dtype_t type, tess_op_t op,
                                           tess_callback_t cb, const char *file, int line);

/* ------------------------------------------------------------------------------------------ */
/* Phases                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum tess_run_mode {
    TESS_RUN_UNTIL_EXIT       = 0, /**< until a chare calls tess_exit() (or a TESS_CB_RETURN
                                        reduction completes), then until quiescence */
    TESS_RUN_UNTIL_QUIESCENCE = 1  /**< until no message is in flight anywhere */
} tess_run_mode_t;

/** Runs on PE 0 of every process at the start of a phase, inside it: it may send messages. */
typedef void (*tess_start_fn_t)(void *arg);

/**
 * Run a chare phase (main; collective). The calling thread becomes PE 0; the other PEs wake up.
 * `start` (may be NULL) runs first on every process. Returns when the mode's condition holds on
 * every process and nothing is in flight: no message, no device transfer, no GPU continuation.
 * The caller may then use MPI and read or change local element state; a later tess_run()
 * continues with the same chares.
 * A TESS_RUN_UNTIL_EXIT phase that becomes quiescent before any tess_exit() can never end: the
 * quiescence waves (one whenever PE 0 has been idle for 0.2 s while the phase waits for an
 * exit) find it, and the job aborts with a message naming the phase and the reductions still
 * open (tag, array, contributions arrived and missing, some of the elements that have not
 * contributed).
 */
TESS_API tess_status_t tess_run(tess_run_mode_t mode, tess_start_fn_t start, void *arg);

/** End the current phase (entry). Messages already sent are still delivered before tess_run()
 *  returns. */
#define tess_exit() tess_exit_loc(NULL, 0, __FILE__, __LINE__)
/** End the phase and hand `size` bytes to tess_result() on every rank (entry). */
#define tess_exit_with(data, size) tess_exit_loc((data), (size), __FILE__, __LINE__)
TESS_API tess_status_t tess_exit_loc(const void *data, size_t size, const char *file, int line);

/**
 * The value the last phase ended with (tess_exit_with() or a TESS_CB_RETURN reduction), copied
 * into buf (main). *size_p (may be NULL) gets its size. TESS_ERR_NOT_FOUND if the last phase
 * ended without a value; TESS_ERR_TRUNCATED if buf is smaller (the first `size` bytes are copied).
 */
TESS_API tess_status_t tess_result(void *buf, size_t size, size_t *size_p);

/* ------------------------------------------------------------------------------------------ */
/* Migration and load balancing                                                               */
/* ------------------------------------------------------------------------------------------ */

/**
 * PUP: the runtime moves the element's elem_size state bytes itself; the array's PUP function
 * (tess_array_params_t.pup) moves what the state points to. An array without one migrates the
 * state bytes alone (with a warning, once per array). The same function runs to size, to
 * pack (on the source, after which the source element is gone — free host memory it owns when
 * packing) and to unpack (on the destination, where the state bytes are already in place:
 * allocate, then pup into the new memory). The destructor does not run on migration.
 */
TESS_API int  tess_pup_is_sizing(tess_pup_h pup);
TESS_API int  tess_pup_is_packing(tess_pup_h pup);
TESS_API int  tess_pup_is_unpacking(tess_pup_h pup);
/** Host bytes at ptr (state of the element or memory it owns). */
TESS_API void tess_pup_bytes(tess_pup_h pup, void *ptr, size_t size);
/** A device buffer owned by the element: its data moves over the device-message paths; when
 *  unpacking, *dptr_p is set to new device memory of `size` bytes at the destination, and the
 *  source buffer is freed by the runtime after the move. */
TESS_API void tess_pup_device(tess_pup_h pup, void **dptr_p, size_t size);

/** Nonzero while the PUP function runs for tess_checkpoint() (sizing, then copying; a function
 *  may save less than a migration moves, e.g. no scratch buffers): it copies the element out like
 *  packing (tess_pup_bytes copies from ptr, tess_pup_device names the buffer to save) but the
 *  element stays, so it must not free anything; tess_pup_is_packing() is 0 then. */
TESS_API int tess_pup_is_checkpointing(tess_pup_h pup);

/** Move this element to global PE `dest_pe` once the current entry returns (entry). Messages sent
 *  to it meanwhile are forwarded, never lost. The state bytes move before the PUP function runs
 *  and the old ones are freed: work still queued on the element's stream (in a process its
 *  device buffers stay and it keeps the stream) must not hold pointers into the state itself,
 *  e.g. a host-backend kernel writing a counter there; synchronise the stream first if it does.
 *  The same holds for tess_at_sync. */
#define tess_migrate(ctx, dest_pe) tess_migrate_loc((ctx), (dest_pe), __FILE__, __LINE__)
TESS_API tess_status_t tess_migrate_loc(tess_ctx_h ctx, int dest_pe, const char *file, int line);

/** Set the element's load for the next load-balancing step, replacing the measured time
 *  (entry). */
TESS_API tess_status_t tess_set_load(tess_ctx_h ctx, double load);

/**
 * Enter a load-balancing step (entry). When every element of the array has called it, loads are
 * collected, the strategy (+tess-lb NAME) runs, elements migrate with their state, the location
 * table is updated on every rank by one collective, and the array's resume entry
 * (tess_array_params_t.resume) runs on every element. An element calls it with no GPU
 * continuation or device message pending, and sends nothing to the array's elements until its
 * resume entry runs. Elements resume process by process: an element may receive messages from
 * elements that resumed before its own resume entry runs.
 */
#define tess_at_sync(ctx) tess_at_sync_loc((ctx), __FILE__, __LINE__)
TESS_API tess_status_t tess_at_sync_loc(tess_ctx_h ctx, const char *file, int line);

/** What the last load-balancing step of an array did (main, after tess_run; the same on every
 *  rank). Imbalance is max / average load over the bins (1.0 = balanced) before the step and as
 *  the strategy predicted after it. TESS_ERR_NOT_FOUND before the first step. */
typedef struct tess_lb_stats {
    uint64_t steps;           /**< steps so far */
    int64_t  migrations;      /**< elements moved by the last step */
    double   imbalance_before, imbalance_after;
    double   max_load, avg_load; /**< of the bins, before the step (seconds or user units) */
} tess_lb_stats_t;
TESS_API tess_status_t tess_lb_get_stats(tess_array_h array, tess_lb_stats_t *stats_p);

/** Statistics of this process in the spanning tree of processes that carries reduction partials
 *  and broadcasts (k = TESS_TREE_ARITY children per process, rooted at process 0). max_fanin
 *  is the most partials this process received from its children for one reduction; late counts
 *  partials that went on alone after their reduction's combined partial (after migrations).
 *  Any thread, between phases. */
typedef struct tess_tree_stats {
    int     arity;     /**< k */
    int     parent;    /**< process, -1 at the root */
    int     children;  /**< processes */
    int64_t combined;  /**< reductions this process combined and forwarded (or completed) */
    int64_t max_fanin; /**< most partials from children in one reduction */
    int64_t late;      /**< partials forwarded alone */
} tess_tree_stats_t;
TESS_API tess_status_t tess_tree_get_stats(tess_tree_stats_t *stats_p);

/* ---- checkpoint and restart -------------------------------------------------------------- */

/**
 * A checkpoint is every element of the chosen arrays — its state bytes, and through the array's
 * PUP function the host bytes and device buffers it owns — plus each array's metadata (name,
 * extents, element size), the set of registered entries, a program name and the program's own
 * global state (a byte string: its options, its cycle). It is written under a directory D:
 *
 *     D/ckpt.N/data.R   records of the elements process R held (header, state, PUP bytes,
 *                       device bytes), each with a CRC-32C
 *     D/ckpt.N/manifest the arrays, the entries' hash, the user bytes, and an index
 *                       (array, element) -> (file, offset, length, CRC); written last, with a
 *                       CRC of its own
 *     D/current         "ckpt.N": the newest complete checkpoint
 *
 * Checkpoint N is written as D/ckpt.N.tmp and renamed to D/ckpt.N once every process has
 * written and synced its file and process 0 the manifest; then D/current moves to it by a
 * rename. So a job killed at any point of a checkpoint leaves the previous one current and
 * whole. The previous checkpoint is kept, older ones are removed.
 *
 * A restart reads a checkpoint on any number of processes and PEs: the arrays are created
 * again (same names, dimensions, extents and element sizes, in the same order; the map places
 * the elements on the new shape) and tess_restart() fills every local element. Device buffers
 * go from each element's stream into pinned staging memory and to the file; on restart into
 * new device memory on the element's stream.
 *
 * Not saved: messages in flight (there are none between phases), reduction and load-balancing
 * state (tags start afresh: an element's first contribution after a restart may use any tag),
 * the location of elements (the map places them again), timeline traces, and anything the
 * PUP function does not name. tess_result() of the last phase is not saved either.
 */
enum tess_ckpt_field {
    TESS_CKPT_FIELD_PROGRAM = 1u << 0,
    TESS_CKPT_FIELD_USER    = 1u << 1,
    TESS_CKPT_FIELD_ARRAYS  = 1u << 2,
    TESS_CKPT_FIELD_STEP    = 1u << 3,
    TESS_CKPT_FIELD_BACKGROUND = 1u << 4
};

typedef struct tess_ckpt_params {
    uint64_t            field_mask; /**< TESS_CKPT_FIELD_* of the optional fields set */
    const char         *dir;        /**< the directory (required; created if missing) */
    const char         *program;    /**< the program's name (< 64 bytes, default ""): a restart
                                         with another name is refused */
    const void         *user;       /**< tess_checkpoint: the program's global state, saved */
    size_t              user_size;  /**<   with the checkpoint (<= 1 GiB, may be 0) */
    int                 narrays;    /**< the arrays (default: every live array, in creation */
    const tess_array_h *arrays;     /**<   order); a restart names the same set */
    uint64_t            step;       /**< tess_checkpoint: N of ckpt.N (default: the current N
                                         + 1, or 1); a cycle number works */
    int                 background; /**< tess_checkpoint: 1 write in the background, 0 before
                                         returning (default: TESS_CKPT_BACKGROUND, 1) */
} tess_ckpt_params_t;

/**
 * Write a checkpoint (main, between phases; collective over every process, which pass the same
 * dir, program, step, arrays and background; the user bytes of process 0 are saved). Streams of
 * the elements are not synchronised as a whole: each element's device buffers are copied on its
 * own stream after the work already enqueued there.
 *
 * In the background (the default; TESS_CKPT_BACKGROUND=0 or params->background = 0 turn it
 * off) tess_checkpoint takes a snapshot and returns: every element's state and PUP bytes are
 * copied to host memory, and its device buffers into a snapshot area of device memory by copies
 * on the element's stream (kept and grown between checkpoints; where it cannot be allocated, in
 * pinned host memory, and where that fails too, the checkpoint is written before returning, with
 * a warning saying why; TESS_CKPT_SNAPSHOT=host: pinned host memory only). It returns once those copies are done, so host bytes and device buffers
 * may be changed or freed at once, from any stream: nothing of them is read after the return
 * (the copies wait for the work already enqueued on each element's stream, as the checkpoint
 * written before returning does). A writer thread then writes the files while the chares
 * run on; the checkpoint becomes current (the rename, once every process has written and synced
 * its file) at the next tess_checkpoint_wait, tess_checkpoint, tess_restart or tess_finalize,
 * which return the write's error if it had one (TESS_ERR_SYSTEM naming the file and the errno
 * text); tess_checkpoint then takes no new checkpoint. Memory: the snapshot area holds the
 * device bytes of the largest checkpoint so far until tess_finalize. Cores: the writer threads
 * run on the cores the process may use; where its PEs take all of them (a process of one PE
 * bound to one core, as mpirun binds up to two processes by default), they slow the PEs while
 * they write, and the first background checkpoint warns: give the process a core more.
 *
 * Without it tess_checkpoint returns when the checkpoint is complete and current on every
 * process.
 * Errors (the same on every process, naming the process and what failed; D/current is then
 * unchanged): TESS_ERR_INVALID (params), TESS_ERR_STATE (inside a phase, not initialised),
 * TESS_ERR_SYSTEM (a file or directory operation, with its errno text), TESS_ERR_GPU,
 * TESS_ERR_NO_MEMORY, TESS_ERR_MISMATCH (processes passed different arguments).
 */
TESS_API tess_status_t tess_checkpoint(const tess_ckpt_params_t *params);

/**
 * Wait until the background checkpoint still being written (if any) is written and synced by
 * every process, and make it current (main, between phases; collective: every process calls it,
 * as the current pointer moves only once all have written). TESS_OK when there was none.
 * Errors (the same on every process; D/current is then unchanged): TESS_ERR_SYSTEM (a data file
 * could not be written or synced: the message names the process, the file and the errno text),
 * TESS_ERR_GPU (a snapshot copy failed), TESS_ERR_STATE (inside a phase).
 */
TESS_API tess_status_t tess_checkpoint_wait(void);

/**
 * The parameters of the checkpoints that tess_cb_checkpoint() reductions take (main, between
 * phases; collective, the same on every process): dir, program, arrays, background and user
 * bytes are copied (user: at most 1 GiB; without TESS_CKPT_FIELD_USER the checkpoint's user
 * bytes are the reduction's result, so that a restart can hand it to `then` itself); the step is
 * the reduction's tag. NULL forgets them (a tess_cb_checkpoint reduction then aborts the job).
 * Errors: TESS_ERR_INVALID (params), TESS_ERR_NO_MEMORY, TESS_ERR_STATE (inside a phase).
 */
TESS_API tess_status_t tess_checkpoint_callback_params(const tess_ckpt_params_t *params);

/** What a checkpoint holds (from its manifest). */
typedef struct tess_ckpt_info {
    uint64_t step;       /**< N */
    int      processes;  /**< processes and PEs per process that wrote it */
    int      ppn;
    int      narrays;
    size_t   user_size;  /**< bytes of the program's global state */
    char     path[1024]; /**< the checkpoint's directory (D/ckpt.N) */
    uint64_t pending;    /**< N of a newer checkpoint of this directory still being written in
                              the background (not complete, not yet current), or 0 */
} tess_ckpt_info_t;

/**
 * Read and check the manifest of the current checkpoint of `dir` (or of `dir` itself when it is
 * one checkpoint's directory, D/ckpt.N) and copy up to user_cap bytes of the program's global
 * state into `user` (NULL: only info_p->user_size is wanted): what a program needs to rebuild
 * its arrays before tess_restart() (main, between phases; collective). `program` (may be NULL:
 * not checked) must be the name it was written with. When a background checkpoint of `dir` is
 * still being written, one whose files every process has finished is made current first (and
 * its write error, if any, returned); otherwise info_p->pending names it and the info is the
 * current (complete) checkpoint's.
 * Errors: TESS_ERR_NOT_FOUND (no checkpoint there), TESS_ERR_CORRUPT (a manifest that is
 * truncated or fails its CRC, or not a Tessera checkpoint), TESS_ERR_MISMATCH (another program,
 * an unknown format version), TESS_ERR_TRUNCATED (user is not NULL and user_cap is smaller
 * than the saved bytes: the first user_cap are copied), TESS_ERR_SYSTEM.
 */
TESS_API tess_status_t tess_checkpoint_info(const char *dir, const char *program, void *user,
                                            size_t user_cap, tess_ckpt_info_t *info_p);

/**
 * Fill the local elements of freshly created arrays from the current checkpoint of
 * params->dir (main, between phases, before the arrays' first phase; collective). A background
 * checkpoint still being written is waited for and made current first, as tess_checkpoint_wait
 * does (its error returned, nothing restarted). The arrays
 * (params->arrays, or every live array) must match the checkpoint's in order, name,
 * dimensions, extents, element size and whether they have a PUP function, and the program
 * name and the registered entries (names, in order) must be those that wrote it. Every process
 * first reads and checks everything it needs (manifest, file sizes, each record's CRC and
 * header); only when all processes found everything right does any element change: then, for
 * each local element, the destructor runs (freeing what the constructor made), the saved state
 * bytes replace the state, device buffers are allocated and filled on the element's stream,
 * and the PUP function unpacks (as after a migration). So a refused checkpoint leaves every
 * element as its constructor made it. Memory: while the records are checked, the process holds
 * their host parts, and their device bytes in new device memory (filled on each element's
 * stream through pinned staging) beside what the constructors allocated.
 * Errors (the same on every process, naming the file and what is wrong): those of
 * tess_checkpoint_info, TESS_ERR_CORRUPT (a record fails its CRC or header check, a data file
 * is shorter or longer than written), TESS_ERR_MISMATCH (arrays or entries differ: the text
 * says which and how), TESS_ERR_GPU, TESS_ERR_NO_MEMORY.
 */
TESS_API tess_status_t tess_restart(const tess_ckpt_params_t *params);

/* ---- timeline trace ---------------------------------------------------------------------- */

/**
 * Named spans of an element's GPU work in the timeline trace (TESS_TRACE=PATH or
 * +tess-trace PATH; see docs/tracing.md). tess_trace_begin records a timing event on
 * the element's stream (tess_ctx_stream); tess_trace_end records another, and the work the
 * device ran between the two appears as a span named `name` on that stream's track, timed by
 * the device, not the host. Put them around the kernels an entry launches:
 *
 *     tess_trace_begin(ctx, "stencil");
 *     launch_stencil(..., (cudaStream_t)tess_ctx_stream(ctx));
 *     tess_trace_end(ctx, "stencil");
 *
 * Threads: the PE running an entry method of `ctx` (pass the ctx the entry received); a span may
 * end in a later entry of the same element on the same PE (it must end before the phase does).
 * Spans nest: tess_trace_end closes the latest open span of this PE, whose name and element
 * must match. Names longer than 23 bytes are cut. Without tracing both return TESS_OK at once
 * and cost one branch. Errors: TESS_ERR_INVALID (ctx or name NULL, outside an entry, or an end
 * that matches no open span; the trace is unchanged).
 */
TESS_API tess_status_t tess_trace_begin(tess_ctx_h ctx, const char *name);
TESS_API tess_status_t tess_trace_end(tess_ctx_h ctx, const char *name);
/** Nonzero when this job writes a timeline trace (any thread, after tess_init). */
TESS_API int           tess_trace_enabled(void);

/* ---- pluggable strategies ---- */

/** One migratable element as a strategy sees it. */
typedef struct tess_lb_obj {
    int64_t id;   /**< linear index in its array */
    double  load; /**< measured seconds (or the element's own units) since the last step */
    int     bin;  /**< current bin (PE, process or GPU: +tess-lb-target) */
} tess_lb_obj_t;

typedef struct tess_lb_input {
    int            nbins;
    const double  *bin_bg;    /**< [nbins] load that cannot move, or NULL */
    int            nobjs;
    tess_lb_obj_t *objs;
    double         tolerance; /**< a bin may exceed the average by this fraction */
} tess_lb_input_t;

/** A strategy: fill new_bin[i] (0 <= new_bin[i] < nbins) for every object. Runs on process 0
 *  during a step; must be a pure function of its input. */
typedef void (*tess_lb_strategy_fn_t)(const tess_lb_input_t *in, int *new_bin, void *arg);

/** Add a strategy usable as +tess-lb NAME (main, on every rank, before or after tess_init but
 *  before the first step; it is looked up then). Names of built-ins: greedy, refine,
 *  greedyrefine, hybrid, evencount, rotate, none (they cannot be replaced). hybrid moves nothing
 *  while the most loaded bin is within the tolerance of the average; above it, it reaches
 *  greedy's balance (within a quarter of the tolerance) with as few moves as refine or a greedy
 *  that keeps objects in their bins can. evencount balances the load while every bin keeps an
 *  even share of the objects (within one), for objects of about one size (docs/design.md,
 *  "Load balancing and migration"). */
TESS_API tess_status_t tess_lb_register(const char *name, tess_lb_strategy_fn_t fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
