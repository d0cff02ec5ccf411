/*
 * core_int.h — private to src/core: the runtime state, the PE structure, and the functions the
 * core's files share.
 */
#ifndef TESS_CORE_INT_H
#define TESS_CORE_INT_H

#include "core.h"

#define TESS_MSG_NCLS      9     /* pooled payload classes: 64 B … 4 MiB (msg.c) */
#define TESS_MSG_POOL_MAX  1024  /* cached buffers per class per PE, up to 64 KiB */
#define TESS_HANDLER_MAX   32
#define TESS_LAYER_MAX     8
#define TESS_AM_CORE       0     /* net AM id of core messages */
#define TESS_AM_BATCH      1     /* net AM id of a batch of coalesced core messages */
#define TESS_AM_SHM        2     /* net AM id of a core message whose payload is in a node arena */
#define TESS_COALESCE_MAX  1024  /* largest payload that is coalesced */

typedef struct msg_chain {
    tess_msg_t *head, *tail;
    unsigned    len;
} msg_chain_t;

typedef struct gpuq_item {
    tess_gpu_event_h   event;  /* NULL: done once the fifo's signal word reaches seq */
    tess_gpu_cont_fn_t fn;
    void              *arg;
    uint32_t           seq;
    int                pooled; /* the event came from the PE's pool */
    uint32_t           trace_track; /* tracing: the stream's track */
    uint64_t           trace_t0;    /* tracing: when the wait began (0: not traced) */
} gpuq_item_t;

/* The continuations waiting on one stream, in the order their events or signals were enqueued
 * there (a ring); or, for `stream` NULL, those whose events' streams are unknown, in request
 * order. With stream signals, the device writes 1, 2, 3 ... to the slot's word as the stream
 * gets there; the word stays with the slot (an empty slot has seen all its writes, so another
 * stream may go on counting from `issued`). */
typedef struct gpuq_fifo {
    tess_gpu_stream_h stream;
    gpuq_item_t      *items;
    size_t            head, count, cap;
    _Atomic uint32_t *word;   /* NULL until the slot first signals */
    uint32_t          issued; /* the last value asked of the device */
} gpuq_fifo_t;

#ifdef TESS_LOOP_PROFILE
/* A build with -DTESS_LOOP_PROFILE (CPPFLAGS; never in a release) times the parts of every
 * scheduler pass and prints them per PE at tess_finalize: where a PE's time goes when a
 * benchmark shows an overhead. LP_CONT is the part of LP_GPUQ spent in continuations. */
enum { LP_DISPATCH, LP_GPUQ, LP_CONT, LP_FLUSH, LP_NET, LP_LAYERS, LP_AGENT, LP_IDLE, LP_N };
#endif

struct tess_pe {
    int       local, global;
    pthread_t thread;
    int       started;
    int       layers_ready; /* pe_init hooks ran */

    /* Incoming messages, from any thread (this one included). */
    tess_mpsc_t queue;

    /* Sleeping: the PE sets `sleeping` before it blocks on wake_fd; pushers wake it. */
    TESS_ALIGNED _Atomic int sleeping;
    _Atomic int              gpu_waiting; /* sleeping with GPU continuations pending */
    int                      wake_fd;

    /* Quiescence counters, written by this PE only. */
    TESS_ALIGNED _Atomic uint64_t sent;
    _Atomic uint64_t              processed;
    /* Of those, the fast path's reduction partials held for or in a round (reduce_fast.c). */
    _Atomic uint64_t              red_held, red_released;

    /* Buffers of this PE's pools freed by other PEs come back here (a Treiber stack of
     * chains: pushed by any PE, taken whole by this one). */
    TESS_ALIGNED _Atomic(tess_msg_t *) returned;

    /* Everything below is touched by this PE only. */
    /* Counts the work this PE did: bumped after every message handler and after every pass,
     * sleep or stage that did some (tess_core_work_gen). */
    TESS_ALIGNED uint64_t    work_gen;
    unsigned                 work_quiet; /* this pass's tess_core_work_ran_nothing, summed */
    tess_msg_t              *pool[TESS_MSG_NCLS];
    unsigned                 npool[TESS_MSG_NCLS];
    struct msg_chain        *ret;  /* [ppn] buffers of other PEs waiting to go home */

    /* Coalescing (msg.c): per process the batch being filled (or NULL), and the processes
     * that have had one since the last flush, each listed once. */
    tess_msg_t **batch;        /* [size] */
    int         *batch_list;   /* [size] */
    uint8_t     *batch_listed; /* [size] */
    int          nbatch;
    /* Bursts: the process of this PE's last message sent alone, and the work_gen it was sent
     * under; a later message to it under the same work_gen (the same handler) is coalesced,
     * and burst_flush has the handler's batches sent when it returns. */
    int          burst_proc;
    uint64_t     burst_gen;
    int          burst_flush;
    int          burst_hold;   /* tess_core_coalesce_begin: everything small is coalesced */
    uint64_t     batches_sent, records_batched; /* tess_core_coalesce_stats */

    /* GPU continuations (gpuq.c): fifos[0] holds those of unknown streams, fifos[1..nfifos)
     * one stream each that has some waiting; slots up to fifos_cap keep their buffers. */
    gpuq_fifo_t      *gq_fifos;
    size_t            gq_nfifos, gq_fifos_cap;
    size_t            gq_count; /* continuations waiting, in all fifos */
    tess_gpu_evpool_t evpool;
    _Atomic uint32_t **gq_chunks; /* signal words, GPUQ_CHUNK at a time */
    size_t             gq_nchunks, gq_chunk_used;
    unsigned           gq_dry;          /* polls that found nothing complete */
    tess_gpu_stream_h  gq_suspect;      /* idle at the last check, its signal not seen */
    uint32_t           gq_suspect_seq;

    void *slot[TESS_SLOT_MAX];

    uint64_t busy_ns, idle_ns, nmsgs;
    uint32_t trace_seq;   /* messages this PE sent while tracing (flow ids) */
    uint64_t trace_waits; /* GPU continuations traced (async ids) */
#ifdef TESS_LOOP_PROFILE
    uint64_t lp_ticks[LP_N], lp_passes, lp_work_passes; /* pe.c */
#endif
};

typedef struct tess_handler {
    const char            *name;
    tess_core_handler_fn_t fn;
    void                 (*flush)(void); /* tess_core_handler_set_flush, or NULL */
} tess_handler_t;

enum { PHASE_IDLE = 0, PHASE_RUNNING = 1, PHASE_STOPPING = 2, PHASE_SHUTDOWN = 3 };

typedef struct tess_runtime {
    int       initialized;
    int       finalizing; /* tess_finalize has begun (MPI_COMM_SELF's watch is off) */
    pthread_t main_thread;
    int       mpi_thread_level;

    tess_pe_t **pes;
    int         npes; /* local */

    tess_handler_t handlers[TESS_HANDLER_MAX];
    unsigned       nhandlers;
    uint16_t       h_agent, h_exit;

    tess_core_layer_t layers[TESS_LAYER_MAX];
    unsigned          nlayers;

    /* Phases. */
    _Atomic int     phase;       /* PHASE_* */
    uint64_t        epoch;       /* incremented by each tess_run; guarded by park_lock */
    pthread_mutex_t park_lock;
    pthread_cond_t  park_cond;
    int             running;     /* PEs inside the phase loop; guarded by park_lock */
    int             ready;       /* PE threads past their set-up; guarded by park_lock */
    tess_run_mode_t mode;

    /* Network progress while every PE sleeps: the local index of the PE watching the UCX
     * event fd, or -1. */
    _Atomic int net_watcher;

    MPI_Comm agent_comm; /* reductions */
    MPI_Comm wave_comm;  /* quiescence waves */
    MPI_Comm coll_comm;  /* the agreement at the start of each collective call */
} tess_runtime_t;

extern tess_runtime_t tess_core;

/* pe.c */
tess_status_t tess_pe_create_all(void);
tess_status_t tess_pe_start_all(void);
void          tess_pe_destroy_all(void);
void          tess_pe_loop(tess_pe_t *pe);
void          tess_pe_wake(tess_pe_t *pe);
void          tess_pe_wake_all(void);
void          tess_pe_notify_gpu(void);

/* msg_shm.c: node message arenas (see there). Init and fini on the main thread, collective
 * over the runtime's communicator (fini after the PEs and the network are gone); the rest on
 * any thread. */
typedef struct tess_msg_shm_ref {
    uint32_t owner; /* node index of the arena's process */
    uint32_t slot;  /* among all of its slots */
} tess_msg_shm_ref_t;
tess_status_t tess_msg_shm_init(void);
void          tess_msg_shm_fini(void);
/** A buffer of the arena for `size` payload bytes; NULL when sizes like it do not go there or
 *  its class is full. */
tess_msg_t   *tess_msg_shm_alloc(size_t size);
/** Back to its owner (m->cls == TESS_MSG_CLS_SHM). */
void          tess_msg_shm_free(tess_msg_t *m);
/** Whether a message in an arena can go to process `proc` as a reference. */
int           tess_msg_shm_reaches(int proc);
/** The reference that hands `m` over (the caller then never touches it again). */
void          tess_msg_shm_ref(const tess_msg_t *m, tess_msg_shm_ref_t *ref);
/** The message a reference from another process names, NULL if it names none of `size`
 *  payload bytes (untrusted input). */
tess_msg_t   *tess_msg_shm_resolve(const tess_msg_shm_ref_t *ref, uint64_t size);

/* msg.c */
void          tess_msg_deliver_local(tess_msg_t *m);
tess_status_t tess_msg_net_init(void);
tess_status_t tess_msg_pool_init(tess_pe_t *pe);
void          tess_msg_pool_fini(tess_pe_t *pe);
unsigned      tess_msg_dispatch(tess_pe_t *pe, unsigned max);
unsigned      tess_msg_flush_batches(tess_pe_t *pe);
/** Send this PE's coalesced messages: at the end of every scheduler pass, so that none waits
 *  longer than it would have in UCX's queue. */
static inline unsigned tess_msg_flush(tess_pe_t *pe)
{
    return tess_unlikely(pe->nbatch) ? tess_msg_flush_batches(pe) : 0;
}

static inline void tess_count_sent(tess_pe_t *pe, uint64_t n)
{
    atomic_store_explicit(&pe->sent, atomic_load_explicit(&pe->sent, memory_order_relaxed) + n,
                          memory_order_release);
}

/* A counter only its PE writes (others read): no read-modify-write. */
static inline void tess_count_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_release);
}

static inline void tess_count_processed(tess_pe_t *pe, uint64_t n)
{
    atomic_store_explicit(&pe->processed,
                          atomic_load_explicit(&pe->processed, memory_order_relaxed) + n,
                          memory_order_release);
}

/* phase.c */
tess_status_t tess_phase_init(void);
void          tess_phase_fini(void);
unsigned      tess_phase_progress(tess_pe_t *pe0, int idle);
int           tess_phase_wants_poll(void);
/** How long idle PE 0 may sleep before the phase wants a wave (-1: no limit from the phase;
 *  when tess_phase_wants_poll() it polls at the MPI rate anyway). */
int64_t       tess_phase_wake_ns(void);

/* init.c */
/** Abort naming a process of this node that is gone (PE 0 or main; at most once a second). */
void          tess_core_peers_check(void);

/* coll.c: the notices of processes entering collective calls, on coll_comm */
tess_status_t tess_coll_init(void);
void          tess_coll_fini(void);

/* agent.c */
tess_status_t tess_agent_init(void);
void          tess_agent_fini(void);
unsigned      tess_agent_progress(tess_pe_t *pe0, int idle);
int           tess_agent_pending(void);

/* reduce.c */
tess_status_t tess_reduce_init(void);
void          tess_reduce_fini(void);
unsigned      tess_reduce_progress(tess_pe_t *pe0);

/** More PEs on the node than cores, or on this process than the cores it may run on (pe.c). */
int           tess_pe_oversubscribed(void);

/* reduce_fast.c */
tess_status_t tess_reduce_fast_init(void);
void          tess_reduce_fast_fini(void);
/** Rounds that came back (their round functions run here); without mpi, no MPI call (every
 *  pass of PE 0), with it (when PE 0 polls MPI) the rest. */
unsigned      tess_reduce_fast_progress(tess_pe_t *pe0, int mpi);
/** Partials this process holds for a round or has in one (what the fast path adds to sent -
 *  processed; PE 0, a snapshot of every PE's counters). */
uint64_t      tess_reduce_fast_pending(void);
/** Nonzero when a round with a partial is in flight and every round in flight waits on shared
 *  memory only (PE 0 then polls MPI as when busy: the rounds need no MPI call). */
int           tess_reduce_fast_shm_only(void);
/** How long idle PE 0 may sleep for the rounds in flight (-1: none in flight). */
int64_t       tess_reduce_fast_poll_ns(void);
/** Main thread, between phases, collectively: the key's communicator (members), or the end of
 *  its rounds (forget: every process joins up to the same round, then the communicator goes). */
void          tess_reduce_fast_members(uint32_t key);
void          tess_reduce_fast_forget(uint32_t key);

/* reduce_shm.c: one allreduce per round through shared memory among the processes of a node
 * (and one MPI_Iallreduce among node leaders), for reduce_fast.c. */
#define TESS_REDUCE_SHM_MAX 256 /* bytes of a round's value */
typedef struct tess_reduce_shm_params {
    size_t       val_size;
    void       (*combine)(const void *in, void *inout); /* commutative and associative */
    MPI_Datatype type;                                  /* the same for the leaders' MPI */
    MPI_Op       op;
} tess_reduce_shm_params_t;
typedef struct tess_reduce_shm tess_reduce_shm_t;
/** Collective over comm. *s_p NULL (and TESS_OK) when shared memory is not to be had here. */
tess_status_t tess_reduce_shm_create(MPI_Comm comm, const tess_reduce_shm_params_t *p,
                                     tess_reduce_shm_t **s_p);
/** Node groups of the key's communicator. */
int           tess_reduce_shm_groups(const tess_reduce_shm_t *s);
/** Whether the round in flight (if any) waits on shared memory only, not on MPI. */
int           tess_reduce_shm_local(const tess_reduce_shm_t *s);
/** Whether another process of this one's node group has posted `round` (a hint: no order). */
int           tess_reduce_shm_peek(const tess_reduce_shm_t *s, int64_t round);
/** Post this process's value for `round` (rounds 1, 2, ... in order, one at a time): its first
 *  len bytes, the only ones combine may read (the rest of out is then undefined too). */
void          tess_reduce_shm_post(tess_reduce_shm_t *s, int64_t round, const void *val,
                                   size_t len);
/** 1 when the posted round is complete (the result, the same bits everywhere, is in out).
 *  Without mpi it makes no MPI call: a node leader of several groups then stops at the
 *  leaders' MPI_Iallreduce, to go on at a later call with mpi. */
int           tess_reduce_shm_test(tess_reduce_shm_t *s, void *out, int mpi);
/** Until the posted round (if any) completes. */
void          tess_reduce_shm_wait(tess_reduce_shm_t *s, void *out);
/** With no round in flight (the others may still be reading: their mappings stay valid). */
void          tess_reduce_shm_destroy(tess_reduce_shm_t *s);

/* gpuq.c */
/* Decide (once, before the PEs exist) whether continuations wait on stream signals or events. */
tess_status_t tess_gpuq_setup(void);
tess_status_t tess_gpuq_pe_init(tess_pe_t *pe); /* at PE creation; tess_gpuq_fini undoes it */
int           tess_gpuq_signals(void);
unsigned tess_gpuq_poll(tess_pe_t *pe);
/** Whether some continuation's event has completed (no callbacks run). */
int      tess_gpuq_any_done(tess_pe_t *pe);
void     tess_gpuq_fini(tess_pe_t *pe);

/* Abort the job when a required MPI call fails on a path that cannot return an error. */
#define TESS_MPI_CHECK(call)                                                                 \
    do {                                                                                     \
        int tess_mpi_rc_ = (call);                                                           \
        if (tess_unlikely(tess_mpi_rc_ != MPI_SUCCESS))                                      \
            tess_fatal("%s failed (MPI error %d)", #call, tess_mpi_rc_);                     \
    } while (0)

#endif /* TESS_CORE_INT_H */
