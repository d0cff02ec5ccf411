/*
 * util.h — the util component: status and error text, logging, fatal errors, time, the MPSC
 * message queue, the open-addressing hash map and small containers. Nothing here knows about
 * MPI, UCX or devices; every other layer builds on it.
 *
 * Threads: the logging, error and time functions may be called from any thread. A tess_mpsc_t
 * takes pushes from any thread and pops from its one owner. A tess_hmap_t and a tess_vec_t have
 * no locking: one thread at a time.
 */
#ifndef TESS_UTIL_H
#define TESS_UTIL_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <tessera/status.h>

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define TESS_CACHELINE 64
#define TESS_ALIGNED   _Alignas(TESS_CACHELINE)

#define tess_likely(x)   __builtin_expect(!!(x), 1)
#define tess_unlikely(x) __builtin_expect(!!(x), 0)
#define TESS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TESS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TESS_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TESS_ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define TESS_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* Thread-local variables of the library read on hot paths: the library is linked into the
 * program (not dlopen()ed late), so the initial-exec model avoids a __tls_get_addr call. */
#define TESS_TLS_FAST __attribute__((tls_model("initial-exec")))

/* ---- errors ------------------------------------------------------------------------------ */

/** Record `status` with a message for tess_error_detail(), log it once at error level, and
 *  return it: `return tess_error(TESS_ERR_INVALID, "ppn %d must be >= 1", ppn);` */
tess_status_t tess_error_at(tess_status_t status, const char *file, int line, const char *fmt, ...)
    TESS_PRINTF(4, 5);
#define tess_error(status, ...) tess_error_at((status), __FILE__, __LINE__, __VA_ARGS__)
/** Record `status` with a message for tess_error_detail() without logging it: an answer the
 *  caller asked for (tess_result finds no value), not a fault. Returns status. */
tess_status_t tess_error_quiet(tess_status_t status, const char *fmt, ...) TESS_PRINTF(2, 3);
/** Empty tess_error_detail() of the calling thread: every public call does this first, so the
 *  text always belongs to the last call, and is empty after one that succeeded. */
void tess_error_clear(void);

/** An optional field of a params struct with a field_mask: its bit, the bit's name, the field's
 *  name as the message gives it ("tess_params_t.ppn"), and whether the caller set it (nonzero). */
typedef struct tess_mask_field {
    uint64_t    bit;
    const char *bit_name, *field;
    int         set;
} tess_mask_field_t;
/** TESS_ERR_INVALID, naming `who` (the call), when a field is set without its bit in `mask`: it
 *  would be ignored without a word. TESS_OK otherwise. */
tess_status_t tess_check_field_mask(uint64_t mask, const tess_mask_field_t *f, size_t n,
                                    const char *who);

/** Abort the job: print the message (prefixed by rank and PE) and end every process.
 *  Used for misuse that cannot be returned and for broken invariants. */
_Noreturn void tess_fatal_at(const char *file, int line, const char *fmt, ...) TESS_PRINTF(3, 4);
#define tess_fatal(...) tess_fatal_at(__FILE__, __LINE__, __VA_ARGS__)

/** How tess_fatal() ends the job (set by core: MPI_Abort on the MPI thread). Must not return. */
typedef void (*tess_abort_fn_t)(int code);
void tess_set_abort_fn(tess_abort_fn_t fn);

/** Cleanups tess_fatal() runs before it ends the job (e.g. unlinking shared memory), most
 *  recent first. They must be safe to run from any thread at any point. At most 8. */
typedef void (*tess_cleanup_fn_t)(void);
void tess_add_abort_cleanup(tess_cleanup_fn_t fn);
void tess_remove_abort_cleanup(tess_cleanup_fn_t fn);

#ifdef TESS_DEBUG
#define tess_assert(cond) \
    do { if (tess_unlikely(!(cond))) tess_fatal("assertion failed: %s", #cond); } while (0)
#else
#define tess_assert(cond) ((void)0)
#endif

/* ---- logging ----------------------------------------------------------------------------- */

extern int tess_log_level;                  /* tess_log_level_t */
extern _Thread_local int tess_log_pe;       /* global PE of this thread, -1 when none */
void tess_log_set_rank(int rank);
void tess_log_at(int level, const char *file, int line, const char *fmt, ...) TESS_PRINTF(4, 5);
void tess_log_vat(int level, const char *file, int line, const char *fmt, va_list ap);
#define tess_log(level, ...) \
    do { if ((level) <= tess_log_level) tess_log_at((level), __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define tess_warn(...)  tess_log(TESS_LOG_WARN, __VA_ARGS__)
#define tess_info(...)  tess_log(TESS_LOG_INFO, __VA_ARGS__)
#define tess_debug(...) tess_log(TESS_LOG_DEBUG, __VA_ARGS__)
#define tess_trace(...) tess_log(TESS_LOG_TRACE, __VA_ARGS__)
/** Parse "error|warn|info|debug|trace" or a digit; -1 if invalid. */
int tess_log_level_parse(const char *s);

/* ---- time and spinning ------------------------------------------------------------------- */

static inline uint64_t tess_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/** A cheap timestamp for timing entry methods: the TSC on x86-64, else nanoseconds. Convert
 *  differences with tess_ticks_to_ns(). */
static inline uint64_t tess_ticks(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return tess_time_ns();
#endif
}
double tess_ticks_to_ns(uint64_t ticks);

static inline void tess_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* ---- memory ------------------------------------------------------------------------------ */

/** malloc/calloc that record TESS_ERR_NO_MEMORY with the size and purpose on failure. */
void *tess_malloc(size_t size, const char *what);
void *tess_calloc(size_t n, size_t size, const char *what);
void *tess_aligned_alloc(size_t align, size_t size, const char *what);
char *tess_strdup(const char *s, const char *what);

/* ---- MPSC queue (intrusive, lock-free; Vyukov) -------------------------------------------- */

typedef struct tess_qnode {
    _Atomic(struct tess_qnode *) next;
} tess_qnode_t;

typedef struct tess_mpsc {
    TESS_ALIGNED _Atomic(tess_qnode_t *) tail; /* producers */
    TESS_ALIGNED tess_qnode_t *head;           /* consumer */
    tess_qnode_t stub;
} tess_mpsc_t;

void tess_mpsc_init(tess_mpsc_t *q);

/** Push a node (any thread). FIFO per producer. */
static inline void tess_mpsc_push(tess_mpsc_t *q, tess_qnode_t *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    tess_qnode_t *prev = atomic_exchange_explicit(&q->tail, n, memory_order_seq_cst);
    atomic_store_explicit(&prev->next, n, memory_order_release);
}

/** Pop the oldest node, or NULL (owner thread). NULL may also mean a push is half done: the
 *  pusher finishes it without waiting and the node shows up on a later pop. */
tess_qnode_t *tess_mpsc_pop(tess_mpsc_t *q);

/** True when nothing was pushed that has not been popped, counting half-done pushes (owner
 *  thread; seq_cst so a sleeper and a pusher cannot miss each other). The head is the next node
 *  to pop unless it is the stub, so the queue can only be empty when the head is the stub. */
static inline bool tess_mpsc_empty(tess_mpsc_t *q)
{
    if (q->head != &q->stub)
        return false;
    return atomic_load_explicit(&q->tail, memory_order_seq_cst) == &q->stub &&
           atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL;
}

/* ---- single-thread FIFO (intrusive) ------------------------------------------------------- */

typedef struct tess_fifo {
    tess_qnode_t *head, *tail;
} tess_fifo_t;

static inline void tess_fifo_push(tess_fifo_t *f, tess_qnode_t *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    if (f->tail)
        atomic_store_explicit(&f->tail->next, n, memory_order_relaxed);
    else
        f->head = n;
    f->tail = n;
}

static inline tess_qnode_t *tess_fifo_pop(tess_fifo_t *f)
{
    tess_qnode_t *n = f->head;
    if (n) {
        f->head = atomic_load_explicit(&n->next, memory_order_relaxed);
        if (!f->head)
            f->tail = NULL;
    }
    return n;
}

/* ---- hash map: uint64 key -> pointer (open addressing, linear probing) --------------------- */

typedef struct tess_hmap {
    uint64_t *keys;
    void    **vals;
    size_t    cap;  /* power of two */
    size_t    count;
} tess_hmap_t;

#define TESS_HMAP_EMPTY UINT64_MAX /* the one key that cannot be stored */

tess_status_t tess_hmap_init(tess_hmap_t *m, size_t expected);
void          tess_hmap_fini(tess_hmap_t *m);
/** Insert or replace. */
tess_status_t tess_hmap_put(tess_hmap_t *m, uint64_t key, void *val);
/** Remove and return the value, or NULL. */
void         *tess_hmap_remove(tess_hmap_t *m, uint64_t key);

static inline uint64_t tess_hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline void *tess_hmap_get(const tess_hmap_t *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    for (size_t i = tess_hash64(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == key)
            return m->vals[i];
        if (m->keys[i] == TESS_HMAP_EMPTY)
            return NULL;
    }
}

/** Iterate: for (size_t it = 0; tess_hmap_next(m, &it, &k, &v);) … (no changes meanwhile). */
bool tess_hmap_next(const tess_hmap_t *m, size_t *it, uint64_t *key_p, void **val_p);

/* ---- growable array of pointers ---------------------------------------------------------- */

typedef struct tess_vec {
    void  **items;
    size_t  count, cap;
} tess_vec_t;

tess_status_t tess_vec_push(tess_vec_t *v, void *item);
/** Remove items[i] by moving the last item into its place (order not kept). */
void          tess_vec_swap_remove(tess_vec_t *v, size_t i);
void          tess_vec_fini(tess_vec_t *v);

/* ---- string helpers ---------------------------------------------------------------------- */

/** Parse a size with an optional k/m/g suffix (powers of 1024). TESS_ERR_INVALID if malformed. */
tess_status_t tess_parse_size(const char *s, size_t *size_p);
/** Parse a decimal int in [lo, hi]. */
tess_status_t tess_parse_int(const char *s, long lo, long hi, long *val_p);
/** Edit distance between a and b, ignoring case (for "did you mean" suggestions). */
int           tess_edit_distance(const char *a, const char *b);
/** Parse a boolean: 1/0, yes/no, true/false, on/off. */
tess_status_t tess_parse_bool(const char *s, int *val_p);
/** A 64-bit random number from the OS. */
uint64_t      tess_random64(void);

/* ---- hop trace (diagnostic builds only) -------------------------------------------------- */

#ifdef TESS_HOP_TRACE
/* A build with -DTESS_HOP_TRACE (CPPFLAGS; never in a release) splits the time of a device
 * message hop into stages: each mark, from any thread of the process, adds the time since the
 * process's previous mark to its stage, and tess_hop_print() writes the averages after each
 * phase. The split is only meaningful for traffic with one message in flight at a time (a
 * ping-pong); between processes (staged IPC), ctl-transit is the time from this process's send
 * to the next message it receives: the other side's whole turn. */
enum {
    TESS_HOP_SEND,     /* tess_dc_send entered: the entry's own time before it sends */
    TESS_HOP_QUERIED,  /* the sender's stream asked whether it is idle */
    TESS_HOP_CTL_SENT, /* the control message built and handed to the messaging layer */
    TESS_HOP_CTL_RECV, /* its handler starts on the receiving PE */
    TESS_HOP_POSTED,   /* the post function gave buffers and a stream */
    TESS_HOP_ISSUED,   /* the copies (and what waits for them) enqueued */
    TESS_HOP_DONE,     /* the runtime saw the copies complete */
    TESS_HOP_N
};
void tess_hop_mark(int stage);
void tess_hop_print(void);
#define TESS_HOP_MARK(stage) tess_hop_mark(stage)
#else
#define TESS_HOP_MARK(stage) ((void)0)
#endif

#endif /* TESS_UTIL_H */
