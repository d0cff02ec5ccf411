/*
 * objects.h — the objects component: chare arrays and their elements, the entry registry, the
 * location table, sends and broadcasts to elements, contributions to reductions, GPU
 * continuations of elements, PUP and migration.
 *
 * Threads: arrays are created and destroyed on the main thread outside phases (collective).
 * An element belongs to one PE: only that PE runs its entries and touches its per-PE tables.
 * The location table is read by every thread and written with relaxed atomics (a stale read
 * costs a forward, never a lost message). The entry registry is written on the main thread
 * before phases and read-only inside them.
 */
#ifndef TESS_OBJECTS_H
#define TESS_OBJECTS_H

#include "core/core.h"
#include "core/trace.h"
#include "devcomm/devcomm.h"

#include <tessera.h>
#include <tessera/gpu.h>

#define TESS_OBJ_MAX_ARRAYS  4096
#define TESS_OBJ_NAME_LEN    48
#define TESS_OBJ_LINEAR_BITS 40 /* elements per array < 2^40 */

typedef struct tess_array tess_array_t;
typedef struct obj_red_slot obj_red_slot_t;

/** An element: the runtime's header; the user state follows at tess_obj_state() (state_off
 *  bytes in). A tess_ctx_h is a pointer to it. Kept small (80 bytes): every element of every
 *  array has one. Its index and PE follow from `linear` and the per-PE table it is in. */
struct tess_ctx {
    tess_array_t     *array;       /* NULL: a vacant slot of a slab (below) */
    int64_t           linear;
    tess_gpu_stream_h stream;
    /* Reductions. */
    uint64_t          last_tag;
    /* Load balancing. */
    uint64_t          load_ticks;  /* host time in entries since the last LB step */
    double            gpu_ms;      /* GPU time since the last LB step */
    double            user_load;
    uint32_t          slot;        /* position in its PE's list (pe_elems) */
    int32_t           migrate_to;  /* requested destination PE, -1 none */
    int32_t           gpu_pending; /* continuations and device sends not yet done */
    uint8_t           contributed;
    uint8_t           at_sync;
    uint8_t           has_user_load;
    uint8_t           lb_moved;    /* arrived by a load-balancing step (cleared by lb) */
    /* Broadcasts: the sequence number of the last broadcast of its array it ran (travels with
     * it), so that each runs exactly once wherever it moves (bcast.c). */
    uint64_t          bcast_seq;
};

/* The elements a PE starts with, when their linear indices form a progression lo, lo + stride,
 * ... (the block and round-robin maps; a user map whose placement happens to be one): their
 * headers and states in one block of slots, so an element costs no allocation and no hash
 * entry, and its slot is found from its index. An element that leaves vacates its slot (array
 * NULL) and takes it again when it comes back; elements from elsewhere are allocated one by
 * one and found through the PE's hash map. Only the PE touches its slab (the main thread
 * outside phases). */
typedef struct obj_slab {
    void   *raw;  /* what was allocated (mem is raw aligned to 64) */
    char   *mem;
    int64_t lo, stride, count;
} obj_slab_t;

struct tess_array {
    uint32_t          id;
    char              name[TESS_OBJ_NAME_LEN];
    int               ndims;
    int32_t           ext[3];
    int64_t           size;
    size_t            elem_size;
    size_t            state_off;   /* header bytes before an element's state */
    size_t            slot_size;   /* header + state, rounded to the state's alignment */
    size_t            state_align;
    tess_elem_fn_t    ctor, dtor;
    void             *arg;
    tess_pup_fn_t     pup;
    tess_entry_t      resume;
    int               has_resume;
    _Atomic int32_t  *loc;     /* linear index -> global PE */
    _Atomic int64_t   nlocal;  /* elements on this process */
    int               destroyed;
    tess_vec_t       *pe_elems; /* [local PE] elements of this array on that PE */
    obj_slab_t       *slabs;    /* [local PE] its first elements (count 0: none) */
    void             *lb;       /* the lb layer's per-array data */
    /* Guards the per-PE element lists against concurrent readers (reductions) and the open
     * reductions of this process (tess_obj_array_lock). */
    pthread_mutex_t   lock;
    obj_red_slot_t   *red;
    MPI_Comm          comm;     /* for the array's collectives (load-balancing steps) */
    /* The fast path of broadcast-callback reductions (contribute.c; under lock). */
    int               fast;            /* TESS_REDUCE=auto and the array has elements */
    int               reduce_tree;     /* the array asked for the tree (params) */
    int               pe_streams;      /* streams a PE's elements take (params; 0: the share) */
    int64_t           fast_joined;     /* rounds this process joined */
    int64_t           fast_done;       /* rounds that came back here */
    int               fast_has_thr;
    uint64_t          fast_thr;        /* highest tag of any round back so far */
    obj_red_slot_t   *fast_ready;      /* local partials waiting for a round, by tag */
    obj_red_slot_t   *fast_mine;       /* this process's partial in the open round, or NULL */
    obj_red_slot_t   *red_spare;       /* a slot to reuse (one round's, kept for the next) */
    /* Broadcasts (bcast.c): numbered by the array's root process, delivered in that order. */
    uint64_t              bcast_last; /* root process, its PE 0: the last number given */
    struct obj_bcast_pe  *bcast;      /* [local PE] what that PE delivered, and its history */
};

typedef struct tess_entry_info {
    char             name[64];
    tess_entry_fn_t  fn;
    tess_dev_post_fn_t post;   /* device entries: fills destinations (NULL for host entries) */
    unsigned         flags;
} tess_entry_info_t;

/* The array lock. With one PE per process nothing else touches an array: its only thread is
 * PE 0, which is the main thread between phases (tess_run runs on the thread that called
 * tess_init), so the lock is left alone (a chained reduction round takes it five times). */
static inline void tess_obj_array_lock(tess_array_t *a)
{
    if (tess_rt.ppn > 1)
        pthread_mutex_lock(&a->lock);
}

static inline void tess_obj_array_unlock(tess_array_t *a)
{
    if (tess_rt.ppn > 1)
        pthread_mutex_unlock(&a->lock);
}

/* Per-PE state of this layer. */
typedef struct obj_pe {
    int          local;   /* the PE's index in its process */
    tess_hmap_t  elems;   /* (array id, linear) -> element, for elements outside its slabs */
    tess_ctx_h   current; /* element whose entry runs now, or NULL */
    tess_entry_t current_entry;
    tess_vec_t   parked;  /* messages for elements expected here but not arrived */
    /* TESS_CHECK: the checked device message whose entry runs, and its delivery stream. */
    struct promise   *promise_open;
    tess_gpu_stream_h promise_stream;
    /* Step graphs (graph.c): the PE's elements' graphs, and the stream they are recorded on. */
    tess_hmap_t       graphs; /* tess_obj_key -> the element's graphs */
    int               have_graphs;
    tess_gpu_stream_h graph_stream;
    uint64_t          graph_new, graph_updated, graph_replayed, graph_direct; /* TESS_VERBOSE */
    /* Batched launches (batch.c): the PE's pending items, made on first use; how many of its
     * elements are in a batch now; whether a batch filled in the entry that runs (launched
     * when it returns). */
    struct obj_batch_pe *batch;
    int                  batch_elems;
    int                  batch_due;
} obj_pe_t;

/* objects.c / array.c */
extern tess_array_t *tess_obj_arrays[TESS_OBJ_MAX_ARRAYS];
extern uint32_t      tess_obj_narrays;
tess_status_t tess_obj_init(void);
void          tess_obj_fini(void);
/* tess_finalize, first: wait for a background checkpoint and make it current, free the
 * snapshot memory (checkpoint.c); its status. */
tess_status_t tess_obj_ckpt_fini(void);
/* tess_cb_checkpoint (checkpoint.c). A PE: hold a completed reduction's result for `then` (kind
 * TESS_CB_ELEMENT or TESS_CB_BROADCAST) until the checkpoint. Main, after each phase,
 * collective: whether a result is held anywhere (then take the checkpoint, and run the phase on
 * with tess_obj_ckpt_cb_deliver as its start, which sends the result to `then`). */
void          tess_obj_ckpt_cb_hold(int kind, uint32_t aid, int64_t linear, tess_entry_t entry,
                                    uint64_t tag, const void *data, size_t size);
int           tess_obj_ckpt_cb_due(void);
tess_status_t tess_obj_ckpt_cb_checkpoint(void);
void          tess_obj_ckpt_cb_deliver(void *arg);
obj_pe_t     *tess_obj_pe(void);

static inline uint64_t tess_obj_key(uint32_t aid, int64_t linear)
{
    return ((uint64_t)aid << TESS_OBJ_LINEAR_BITS) | (uint64_t)linear;
}

/** Linear index of `index` in `a` (row-major, x slowest), or -1 if out of range. */
int64_t      tess_obj_linearize(const tess_array_t *a, tess_index_t index);
tess_index_t tess_obj_delinearize(const tess_array_t *a, int64_t linear);
/** Initial placement of element `linear` by the array's map. */
int          tess_obj_map(const tess_array_params_t *p, int64_t size, int64_t linear, int npes);

static inline void *tess_obj_state(tess_ctx_h e)
{
    return (char *)e + e->array->state_off;
}

static inline tess_index_t tess_obj_ctx_index(tess_ctx_h e)
{
    return tess_obj_delinearize(e->array, e->linear);
}

/* The slot of `linear` in slab s, or NULL if it has none there. */
static inline tess_ctx_h tess_obj_slab_slot(const tess_array_t *a, const obj_slab_t *s,
                                            int64_t linear)
{
    int64_t d = linear - s->lo;
    if (d < 0 || !s->count)
        return NULL;
    if (s->stride != 1) {
        if (d % s->stride)
            return NULL;
        d /= s->stride;
    }
    return d < s->count ? (tess_ctx_h)(s->mem + (size_t)d * a->slot_size) : NULL;
}

/** Element `linear` of `a` if it is on PE `op` (that PE's thread, or main outside phases). */
static inline tess_ctx_h tess_obj_elem_find(obj_pe_t *op, tess_array_t *a, int64_t linear)
{
    tess_ctx_h e = tess_obj_slab_slot(a, &a->slabs[op->local], linear);
    if (e)
        return e->array ? e : NULL;
    return tess_hmap_get(&op->elems, tess_obj_key(a->id, linear));
}

/** Whether e is an element of PE `op` (op may be NULL: not a PE). */
static inline int tess_obj_elem_is_on(obj_pe_t *op, tess_ctx_h e)
{
    return op && e->array && tess_obj_elem_find(op, e->array, e->linear) == e;
}

/** Memory for element `linear` arriving at (or created on) local PE `local`: its slab slot if
 *  it has one there, else a new allocation; the header set up, the state zeroed. */
tess_ctx_h    tess_obj_elem_alloc(tess_array_t *a, int local, int64_t linear);
/** Release what tess_obj_elem_alloc gave (after detach): vacate the slot or free. */
void          tess_obj_elem_free(tess_ctx_h e, int local);
/** Insert an element into the calling PE's tables (PE thread or main before phases). */
tess_status_t tess_obj_elem_attach(obj_pe_t *op, tess_ctx_h e);
void          tess_obj_elem_detach(obj_pe_t *op, tess_ctx_h e);

/* entry.c */
extern tess_entry_info_t *tess_obj_entries;
extern int                tess_obj_nentries;
void          tess_obj_entries_fini(void);
tess_status_t tess_obj_entry_add(const char *name, tess_entry_fn_t fn, tess_dev_post_fn_t post,
                                 unsigned flags, tess_entry_t *entry_p);
/* Main thread, collective: compare registration #id (`name` and a `detail` such as a flag or a
 * size, which `describe` writes for the message) with rank 0's. TESS_ERR_MISMATCH naming the
 * first rank that differs and what each registered; `call` names the API call, `thing` and
 * `things` what is registered ("entry", "entries"). */
tess_status_t tess_obj_registration_check(const char *call, const char *thing,
                                          const char *things, int id, const char *name,
                                          int64_t detail,
                                          void (*describe)(int64_t detail, char *buf,
                                                           size_t size));

/* send.c */
extern uint16_t tess_obj_h_entry, tess_obj_h_bcast_proc, tess_obj_h_bcast_pe;
tess_status_t tess_obj_send_init(void);
/** Run `entry` on element e (its PE) with the message bytes; then a pending migration. */
void          tess_obj_run_entry(obj_pe_t *op, tess_ctx_h e, tess_entry_t entry,
                                 const void *msg, size_t size);
/** Send a message already holding its payload to (array, linear); ownership passes. */
void          tess_obj_send_linear(tess_array_t *a, int64_t linear, tess_entry_t entry,
                                   tess_msg_t *m);
/** Broadcast bytes to every element of `a` (PE thread). */
void          tess_obj_broadcast(tess_array_t *a, tess_entry_t entry, const void *data,
                                 size_t size);
/** Deliver bytes to `entry` of every element of `a` on this process (any PE, outside entries):
 *  a reduction result every process got. A message to every other PE; this PE's elements run
 *  here and now when its queue is empty (by message otherwise, to keep the order). */
void          tess_obj_broadcast_local(tess_array_t *a, tess_entry_t entry, const void *data,
                                       size_t size);
/** Run broadcast `seq` (0: one without a number, tess_obj_broadcast_local) on every element of
 *  `a` on this PE that has not run it; each records `seq` before its entry runs. */
void          tess_obj_bcast_run(tess_array_t *a, uint64_t seq, tess_entry_t entry,
                                 const void *data, size_t size);
/** Messages parked for an element that just arrived on this PE: deliver them. Returns false
 *  when one of them moved e on (e is gone; the rest were forwarded after it). */
bool          tess_obj_unpark(obj_pe_t *op, tess_ctx_h e);

/** Abort with a misuse message naming the running element and entry and file:line. */
_Noreturn void tess_obj_misuse(const char *file, int line, const char *fmt, ...)
    TESS_PRINTF(3, 4);
/** TESS_OK when the calling thread may make a main-thread call (`what`) now: Tessera is
 *  initialised and no phase runs; else TESS_ERR_STATE saying what is wrong. */
tess_status_t tess_obj_check_main(const char *what);
/** Misuse unless Tessera is initialised (`what` names the call). */
void          tess_obj_check_init(const char *what, const char *file, int line);
/** The checks of a call that continues in an entry of the element (tess_gpu_then,
 *  tess_gpu_batch): initialised, not recording, in a phase, ctx an element of this PE, entry a
 *  host entry, data and size; misuse ends the job naming `what`. Returns this PE's state. */
obj_pe_t     *tess_obj_check_continuation(tess_ctx_h ctx, tess_entry_t entry, const void *data,
                                          size_t size, const char *what, const char *file,
                                          int line);
/** Misuse unless `size` bytes at `data` can be a message: at most TESS_MSG_SIZE_MAX, and data
 *  not NULL when size > 0. */
void          tess_obj_check_size(size_t size, const void *data, const char *what,
                                  const char *file, int line);
/** Checks shared by every entry-side call: a phase, a PE, a live array. */
void          tess_obj_check_send(tess_array_h a, const char *what, const char *file, int line);
const char   *tess_obj_index_text(const tess_array_t *a, tess_index_t i, char *buf, size_t len);

/* bcast.c — the order of an array's broadcasts. Every broadcast gets a sequence number at the
 * array's root process; each PE delivers them in that order, once per element: an element that
 * has run a broadcast (bcast_seq) skips it, one that arrives behind runs the ones it missed from
 * the PE's history of the phase. */
typedef struct obj_bcast_hdr {
    uint32_t aid;
    int32_t  entry;
    int32_t  root; /* the process that numbers the array's broadcasts: the root of their tree */
    int32_t  pad;
    uint64_t seq;  /* 0 until numbered at the root */
} obj_bcast_hdr_t;
/** The process that numbers `a`'s broadcasts. */
static inline int tess_obj_bcast_root(const tess_array_t *a)
{
    return (int)(a->id % (uint32_t)tess_rt.size);
}
tess_status_t tess_obj_bcast_array_init(tess_array_t *a);
void          tess_obj_bcast_array_fini(tess_array_t *a);
/** A numbered broadcast reached this PE (its message, whose payload is obj_bcast_hdr_t and the
 *  bytes; ownership passes): run it, and any it enabled, in order on this PE's elements. */
void          tess_obj_bcast_receive(obj_pe_t *op, tess_msg_t *m);
/** Element e just arrived on this PE: run the broadcasts this PE delivered that e had not.
 *  Returns false when one of them moved e on (e is gone). */
bool          tess_obj_bcast_catch_up(obj_pe_t *op, tess_ctx_h e);

/* contribute.c */
tess_status_t tess_obj_reduce_init(void);
/** The core layer's report_stuck: the open reductions and the elements they wait for. */
void          tess_obj_report_stuck(char *buf, size_t len);
/** An element arrives at / leaves this process: adjust the open reductions (array lock held;
 *  leave may drop and retake it to send partials on). */
void          tess_obj_red_arrive(tess_array_t *a, tess_ctx_h e);
void          tess_obj_red_leave(tess_array_t *a, tess_ctx_h e);
void          tess_obj_red_fini(tess_array_t *a);
/** A new array: its fast-path state, and its first round if this process has no elements
 *  (main thread, between phases, array lock not held). */
void          tess_obj_red_start(tess_array_t *a);

/* devmsg.c */
void          tess_obj_devmsg_init(void);
/** The entry word of a device message that carries a migrating element. */
#define TESS_OBJ_MIGRATE_ENTRY 0xffffffffu
void          tess_obj_migrate_post(const tess_dc_msg_t *m, void **dst, tess_gpu_stream_h *stream_p);
void          tess_obj_migrate_deliver(const tess_dc_msg_t *m, void *const *dst,
                                       tess_gpu_stream_h stream);

/* promise.c — TESS_CHECK (tess_cfg.check): checks of what device entries' flags and
 * TESS_STREAM_READY promise. A checked message carries TESS_OBJ_PROMISE_BIT in the entry word
 * of a0 and its record's address after the header (tess_obj_promise_of strips it). */
#define TESS_OBJ_PROMISE_BIT 0x80000000u
/** What a send passes to devcomm; the sender's hook may change all but bufs and stream
 *  (scratch: the header it made, freed by the caller after the send). */
typedef struct obj_promise_send {
    uint64_t              a0;
    const void           *header;
    size_t                header_len;
    const tess_dev_buf_t *bufs;
    int                   nbufs;
    tess_gpu_stream_h     stream;
    tess_dev_done_fn_t    done;
    void                 *done_arg;
    void                 *scratch;
} obj_promise_send_t;
void  tess_obj_promise_send(tess_array_t *a, int64_t linear, tess_entry_t entry, int dest,
                            int ready, obj_promise_send_t *s, const char *file, int line);
/** The record of a checked message; *header_len_p: the caller's header length. */
void *tess_obj_promise_of(const tess_dc_msg_t *m, size_t *header_len_p);
/** After the post function (offer: what devcomm offered in place, dst: what post named). */
void  tess_obj_promise_post(void *rec, tess_ctx_h e, void *const *offer, void *const *dst);
/** Before the entry runs, and after it: the work it enqueues on `stream` until it returns or
 *  makes a device send is the use of the message. */
void  tess_obj_promise_deliver(void *rec, tess_gpu_stream_h stream);
void  tess_obj_promise_consumed(void *rec);
/** The message is forwarded without its checks. */
void  tess_obj_promise_drop(void *rec);
void  tess_obj_promise_fini(void);

/* graph.c — step graphs. */
/** The element whose step graph's record function runs on this thread, or NULL. */
extern _Thread_local tess_ctx_h tess_obj_graph_rec;
_Noreturn void tess_obj_graph_misuse(const char *what, const char *file, int line);
/** Misuse when called from a record function: `what` cannot be recorded. */
static inline void tess_obj_check_not_recording(const char *what, const char *file, int line)
{
    if (tess_unlikely(tess_obj_graph_rec))
        tess_obj_graph_misuse(what, file, line);
}
/** Forget e's graphs on PE op (it leaves, or is destroyed); on every PE of the process (main
 *  thread outside phases: a restart); and everything of PE op (its fini). */
void tess_obj_graph_drop(obj_pe_t *op, tess_ctx_h e);
void tess_obj_graph_drop_any(tess_ctx_h e);
void tess_obj_graph_pe_fini(obj_pe_t *op);

/* batch.c — batched launches. */
/** The objects layer's progress hook: launch the pending batches of PE `pe`, run the entries of
 *  launched items; the work done. */
unsigned       tess_obj_batch_progress(tess_pe_t *pe);
/** The layer's busy hook: items added on this process whose entries have not run. */
int            tess_obj_batch_busy(void);
void           tess_obj_batch_pe_fini(obj_pe_t *op);
void           tess_obj_batch_fini(void);
/** After an entry that filled a batch (op->batch_due): launch the full batches. */
void           tess_obj_batch_launch_due(obj_pe_t *op);
/** Whether element e of PE op is in a batch (op->batch set). */
int            tess_obj_batch_holds(obj_pe_t *op, tess_ctx_h e);
_Noreturn void tess_obj_batch_misuse(obj_pe_t *op, tess_ctx_h e, const char *what,
                                     const char *file, int line);
/** Misuse when element e (may be NULL) of PE op (may be NULL) is in a batch: between
 *  tess_gpu_batch and its entry it may not enqueue stream work (`what`). */
static inline void tess_obj_check_batch(obj_pe_t *op, tess_ctx_h e, const char *what,
                                        const char *file, int line)
{
    if (tess_unlikely(op && op->batch_elems && e) && tess_obj_batch_holds(op, e))
        tess_obj_batch_misuse(op, e, what, file, line);
}

/* migrate.c */
/* A PUP pass: sizing, packing for a migration, copying out for a checkpoint (the element
 * stays), or unpacking (migration or restart). */
enum { PUP_SIZE = 0, PUP_PACK = 1, PUP_UNPACK = 2, PUP_CKPT = 3 };
struct tess_pup {
    int    mode;
    int    ckpt; /* sizing for tess_checkpoint */
    char  *buf;
    size_t pos, cap;
    int    ndev, next;
    void  *dev[TESS_DEV_MAX_BUFS]; /* packing: the sources; unpacking: the destinations */
    size_t dev_size[TESS_DEV_MAX_BUFS];
};

tess_status_t tess_obj_migrate_init(void);
/** Move element e (on the calling PE) to global PE `dest` now. */
void          tess_obj_migrate_now(obj_pe_t *op, tess_ctx_h e, int dest);
/** Hooks the lb layer sets: an element arrived at this PE by migration; around every entry
 *  method (for GPU timing). */
extern void (*tess_obj_on_arrival)(tess_ctx_h e);
extern void (*tess_obj_entry_pre)(tess_ctx_h e);
extern void (*tess_obj_entry_post)(tess_ctx_h e);
/* Set by the lb layer under TESS_LB_GPU_TIME (else NULL), called on a PE thread around a batch's
 * launch on `stream` (tess_gpu_batch): the post hook is given the launch's n elements, which
 * share its time. */
extern void (*tess_obj_batch_pre)(tess_gpu_stream_h stream);
extern void (*tess_obj_batch_post)(tess_gpu_stream_h stream, const tess_ctx_h *elems, int n);

/** The index of element e as text, for messages. */
static inline const char *tess_obj_elem_text(tess_ctx_h e, char *buf, size_t len)
{
    return tess_obj_index_text(e->array, tess_obj_ctx_index(e), buf, len);
}

#endif /* TESS_OBJECTS_H */
