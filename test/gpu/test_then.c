/*
 * test_then: GPU continuations (tess_gpu_then) per element stream. On every PE two elements:
 * the "held" one puts a gate on its stream (a host function that waits until a flag opens),
 * then ROUNDS of (a host function that logs its round, a continuation for that round); the
 * "free" one does the same without a gate. Checked: the free element's continuations all run
 * while the held one's stream is still blocked (one stream never holds back another on the
 * same PE), each continuation runs after its own round's work and in request order, and the
 * held element's continuations all run once the free one opens the gate.
 *
 * The gate blocks the thread that runs it, so it needs a device that runs host functions of
 * different streams at once: the host backend with more executor threads (TESS_HOST_THREADS)
 * than PEs, one gate per PE being closed at a time (CUDA runs host functions one at a time).
 * Elsewhere only the order is checked.
 *
 * Environment: TEST_ROUNDS (default 200), TESS_HOST_THREADS.
 */
#include "tess_test.h"

#include <stdatomic.h>
#include <time.h>
#include <tessera/gpu.h>

typedef struct elem {
    struct elem *held;   /* the free element's partner (same PE) */
    _Atomic int open;    /* the gate of the held element */
    _Atomic int logged;  /* rounds whose host function ran */
    int         conts;   /* continuations run */
    int         errors;
} elem_t;

static tess_array_h arr;
static tess_entry_t E_GO, E_CONT;
static int          rounds = 200;
static _Atomic int  gate_timeouts;
static int          gated; /* held elements put up their gate */

/* Element 2p and 2p+1 on global PE p: held and free. */
static int pair_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext;
    (void)arg;
    return (i.x / 2) % npes;
}

typedef struct fn_args {
    elem_t *e;
    int     round;
} fn_args_t;

static void gate_fn(void *args)
{
    elem_t         *e = ((fn_args_t *)args)->e;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!atomic_load_explicit(&e->open, memory_order_acquire)) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 30) { /* never opened: fail instead of hanging */
            atomic_fetch_add(&gate_timeouts, 1);
            return;
        }
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
}

static void log_fn(void *args)
{
    fn_args_t *a = args;
    /* Stream order: round r runs after rounds 0..r-1. */
    int        want = a->round;
    if (!atomic_compare_exchange_strong(&a->e->logged, &want, a->round + 1))
        a->e->errors++; /* only this stream's thread of execution writes here */
}

/* The held element (even) starts first, then starts its free partner with its address (the
 * two share a PE, so the free one may look at it). */
static void go(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    elem_t       *e    = p;
    int64_t       me   = tess_ctx_linear(ctx);
    tess_stream_t s    = tess_ctx_stream(ctx);
    fn_args_t     args = {e, 0};
    if (me % 2 == 0 && gated)
        CHECK_OK(tess_gpu_launch_host(s, gate_fn, &args, sizeof(args)));
    else if (me % 2) {
        CHECK(size == sizeof(e->held));
        memcpy(&e->held, msg, sizeof(e->held));
    }
    for (int r = 0; r < rounds; r++) {
        args.round = r;
        CHECK_OK(tess_gpu_launch_host(s, log_fn, &args, sizeof(args)));
        CHECK_OK(tess_gpu_then(ctx, E_CONT, &r, sizeof(r)));
    }
    if (me % 2 == 0)
        CHECK_OK(tess_send(arr, tess_idx1((int32_t)(me + 1)), E_GO, &e, sizeof(e)));
}

static void cont(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    elem_t *e  = p;
    int64_t me = tess_ctx_linear(ctx);
    int     r;
    CHECK(size == sizeof(r));
    memcpy(&r, msg, sizeof(r));
    if (r != e->conts) {
        fprintf(stderr, "element %lld: continuation of round %d ran as number %d\n",
                (long long)me, r, e->conts);
        e->errors++;
    }
    if (atomic_load(&e->logged) < r + 1) {
        fprintf(stderr, "element %lld: continuation of round %d ran before its work (%d)\n",
                (long long)me, r, atomic_load(&e->logged));
        e->errors++;
    }
    e->conts++;
    if (me % 2 == 1 && e->conts == rounds) {
        /* The free element is done: its held neighbour must not have moved yet. */
        elem_t *held = e->held;
        CHECK(held);
        if (gated && (held->conts != 0 || atomic_load(&held->logged) != 0)) {
            fprintf(stderr, "element %lld: the held element ran %d continuations behind its "
                    "closed gate\n", (long long)me, held->conts);
            e->errors++;
        }
        atomic_store_explicit(&held->open, 1, memory_order_release);
    }
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        for (int32_t i = 0; i < 2 * tess_num_pes(); i += 2)
            CHECK_OK(tess_send(arr, tess_idx1(i), E_GO, NULL, 0));
}

static long long errors, nlocal;

static void check_elem(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t *e = p;
    nlocal++;
    if (e->conts != rounds || atomic_load(&e->logged) != rounds) {
        fprintf(stderr, "element %lld: %d continuations, %d rounds logged, %d expected\n",
                (long long)tess_ctx_linear(ctx), e->conts, atomic_load(&e->logged), rounds);
        errors++;
    }
    errors += e->errors;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (getenv("TEST_ROUNDS"))
        rounds = atoi(getenv("TEST_ROUNDS"));
    CHECK(rounds > 0);
    const char *threads = getenv("TESS_HOST_THREADS");
    /* One gate per PE is closed at a time: one executor more than that runs the free streams. */
    gated = !strcmp(tess_gpu_backend_name(), "host") && threads && atoi(threads) > tess_ppn();
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register("cont", cont, &E_CONT));
    int32_t             n = 2 * tess_num_pes();
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_MAP,
                             .name = "then", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .map = TESS_MAP_USER,
                             .map_fn = pair_map};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    errors = atomic_load(&gate_timeouts);
    CHECK_OK(tess_array_foreach(arr, check_elem, NULL));
    CHECK(nlocal == 2 * tess_ppn());
    long long total;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (tess_process() == 0)
        printf("test_then: %d elements x %d rounds%s, %lld errors\n", n, rounds,
               gated ? ", held elements gated" : " (order only)", total);
    CHECK(total == 0);
    test_fini();
    return 0;
}
