/*
 * test_gpu_batch: batched launches (tess_gpu_batch). TEST_ELEMS elements per PE run TEST_STEPS
 * steps each; a step of element e: check what the previous step's output copy brought back,
 * copy this step's input (host staging -> `in`) on the element's stream, then add an item
 * {in, out, count, step, e} to the batch, whose kernel writes out[j] = 2 in[j] + step + 1. The
 * item's entry enqueues the copy of `out` back to the host on the element's stream and a
 * continuation that starts the next step. So every value checked, every step, on every
 * element, fails when the kernel ran before the input copy completed (the batch did not wait
 * for the element's stream) or the output copy ran before the kernel (the element's stream did
 * not wait for the launch). The input copy follows a delay on some elements' streams and the
 * kernel pauses before it writes, so that unordered work overtakes them; TESS_HOST_JITTER_US
 * adds random delays.
 *
 * Step 0 starts by a broadcast, so the elements of a PE add their items in one handler: with
 * TESS_GPU_BATCH=1 (and more than one element per PE) some launch covers several items, which
 * is checked, as is that every launch covers one item with TESS_GPU_BATCH=0 and that the
 * launches covered every item exactly once.
 *
 * The kernel is a host function (tess_gpu_launch_host): on the host backend it reads the items
 * from `items` (the device copy) and the buffers are device memory; elsewhere it reads
 * `items_host` and the buffers are pinned host memory, which a host function may touch.
 *
 * TEST_LOCKSTEP=1: every step starts by a broadcast (after a reduction over the elements), so
 * most launches cover all the items of a PE.
 *
 * TEST_LB_ITEM_US=N (with TESS_LB_GPU_TIME=1): the kernel also takes N us per item, the input
 * copies no delay, and every element ends with a load-balancing step: the measured loads must hold the batches' time,
 * an equal share for each item's element (at least 0.8 x items x N on each PE), which entries
 * timed on the elements' own streams do not see.
 *
 * With several processes, a batch registered with another item size on the last rank is refused
 * on every rank (TESS_ERR_MISMATCH), naming both.
 *
 * args="then", "twice": misuse, tess_gpu_then or a second tess_gpu_batch between tess_gpu_batch
 * and its entry (test/misuse).
 * Environment: TEST_ELEMS (per PE, default 12), TEST_STEPS (default 60), TEST_COUNT (doubles per
 * element, default 64).
 */
#include "tess_test.h"

#include <stdatomic.h>
#include <time.h>

typedef struct elem {
    double *in, *out; /* device (pinned host off the host backend) */
    double *stage;    /* pinned: this step's input */
    double *back;     /* pinned: the previous step's output */
    int     step, done, errors;
    int     pe0;       /* the PE of its first step, and its stream there */
    tess_stream_t s0;
} elem_t;

typedef struct item {
    double *in, *out;
    int64_t count, step, elem;
} item_t;

static tess_array_h     arr;
static tess_entry_t     E_STEP, E_ENQUEUED, E_NEXT, E_RESUME;
static tess_gpu_batch_t B;
static int              steps = 60, count = 64, on_host, lockstep, item_us;
static const char      *mode = "run";
static _Atomic int64_t  launches, items_launched, max_n;

static double input_of(int64_t e, int64_t s, int64_t j)
{
    return (double)(e * 1000003 + s * 131 + j);
}

typedef struct kernel_args {
    const item_t *items;
    int           n;
} kernel_args_t;

/* Host functions that take a while, so that work left unordered overtakes them: before the
 * input copy (us from the element and step), and in the kernel before it writes. */
static void pause_us(int us)
{
    struct timespec t = {0, (long)us * 1000};
    nanosleep(&t, NULL);
}

static void delay(void *p)
{
    pause_us(*(int *)p);
}

static void kernel(void *p)
{
    kernel_args_t *k = p;
    pause_us(50 + item_us * k->n);
    for (int i = 0; i < k->n; i++) {
        const item_t *it = &k->items[i];
        for (int64_t j = 0; j < it->count; j++)
            it->out[j] = 2 * it->in[j] + (double)it->step + 1;
    }
}

static void launch(tess_stream_t stream, const void *items, const void *items_host, int n,
                   void *arg)
{
    (void)arg;
    kernel_args_t k = {on_host ? items : items_host, n};
    CHECK_OK(tess_gpu_launch_host(stream, kernel, &k, sizeof(k)));
    atomic_fetch_add(&launches, 1);
    atomic_fetch_add(&items_launched, n);
    int64_t m = atomic_load(&max_n);
    while (n > m && !atomic_compare_exchange_weak(&max_n, &m, n))
        ;
}

static void *buffer(size_t size)
{
    void *p = NULL;
    if (on_host)
        CHECK_OK(tess_gpu_malloc(&p, size));
    else
        CHECK_OK(tess_gpu_malloc_host(&p, size));
    return p;
}

static void ctor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *e = p;
    size_t  b = (size_t)count * sizeof(double);
    e->in     = buffer(b);
    e->out    = buffer(b);
    CHECK_OK(tess_gpu_malloc_host((void **)&e->stage, b));
    CHECK_OK(tess_gpu_malloc_host((void **)&e->back, b));
}

static void dtor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t *e = p;
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    if (on_host) {
        tess_gpu_free(e->in);
        tess_gpu_free(e->out);
    } else {
        tess_gpu_free_host(e->in);
        tess_gpu_free_host(e->out);
    }
    tess_gpu_free_host(e->stage);
    tess_gpu_free_host(e->back);
}

static void misuse_then(tess_ctx_h ctx);
static void misuse_twice(tess_ctx_h ctx, const item_t *it);

/* This step: its input copied on the element's stream, its item added to the batch. */
static void go(tess_ctx_h ctx, elem_t *e)
{
    int64_t       me = tess_ctx_linear(ctx);
    tess_stream_t s  = tess_ctx_stream(ctx);
    if (e->step == 0) {
        e->pe0 = tess_pe();
        e->s0  = s;
    }
    if (e->step == steps) {
        if (item_us)
            CHECK_OK(tess_at_sync(ctx));
        else
            e->done = 1;
        return;
    }
    for (int64_t j = 0; j < count; j++)
        e->stage[j] = input_of(me, e->step, j);
    int us = item_us ? 0 : (int)((me * 7 + e->step * 13) % 4) * 60;
    if (us)
        CHECK_OK(tess_gpu_launch_host(s, delay, &us, sizeof(us)));
    CHECK_OK(tess_gpu_memcpy_async(e->in, e->stage, (size_t)count * sizeof(double), s));
    item_t it = {e->in, e->out, count, e->step, me};
    CHECK_OK(tess_gpu_batch(ctx, B, &it, E_ENQUEUED, &e->step, sizeof(e->step)));
    if (!strcmp(mode, "then"))
        misuse_then(ctx);
    if (!strcmp(mode, "twice"))
        misuse_twice(ctx, &it);
}

static void step(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    go(ctx, p);
}

/* The previous step's output is back (a continuation): check it, then the next step (at once,
 * or in lockstep: when every element got here, by a reduction's broadcast). */
static void next(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e  = p;
    int64_t me = tess_ctx_linear(ctx);
    for (int64_t j = 0; j < count; j++) {
        double want = 2 * input_of(me, e->step - 1, j) + (double)(e->step - 1) + 1;
        if (e->back[j] != want && e->errors++ < 5)
            fprintf(stderr, "element %lld step %d: out[%lld] = %.1f, expected %.1f\n",
                    (long long)me, e->step - 1, (long long)j, e->back[j], want);
    }
    if (lockstep) {
        int32_t one = 1;
        CHECK_OK(tess_contribute(ctx, (uint64_t)e->step, &one, 1, TESS_INT32, TESS_SUM,
                                 tess_cb_broadcast(arr, E_STEP)));
    } else {
        go(ctx, e);
    }
}

static void enqueued(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    elem_t *e = p;
    int     s;
    CHECK(size == sizeof(s));
    memcpy(&s, msg, sizeof(s));
    CHECK(s == e->step);
    CHECK_OK(tess_gpu_memcpy_async(e->back, e->out, (size_t)count * sizeof(double),
                                   tess_ctx_stream(ctx)));
    e->step++;
    CHECK_OK(tess_gpu_then(ctx, E_NEXT, NULL, 0));
}

/* The load-balancing step moves elements between the PEs of one process only (one process in
 * that mode): the state's pointers stay valid, the bytes are enough. */
static void pup_nothing(tess_pup_h pup, tess_ctx_h ctx, void *elem)
{
    (void)pup, (void)ctx, (void)elem;
}

static void resume(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)ctx, (void)msg, (void)size;
    ((elem_t *)p)->done = 1;
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_broadcast(arr, E_STEP, NULL, 0));
}

static long long errors, unfinished;
/* This process's elements: the PE and stream of their first step. */
static int            nseen;
static int            seen_pe[1024];
static tess_stream_t  seen_s[1024];

static void check_elem(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *e = p;
    errors += e->errors;
    unfinished += !e->done;
    if (nseen < 1024) {
        seen_pe[nseen]  = e->pe0;
        seen_s[nseen++] = e->s0;
    }
}

/* The elements of each PE take streams of their own share of the pool (TESS_STREAMS over the
 * PEs of a process, at least one): no stream of two PEs while the pool has one a PE, and as
 * many streams a PE as its share allows. */
static void check_streams(int per_pe, int pe_streams)
{
    int pool  = getenv("TESS_STREAMS") ? atoi(getenv("TESS_STREAMS")) : 64;
    int ppn   = tess_ppn();
    int share = pool / ppn > 1 ? pool / ppn : 1, want = per_pe < share ? per_pe : share;
    if (pe_streams && pe_streams < want)
        want = pe_streams;
    for (int i = 0; i < nseen; i++)
        for (int j = 0; j < i; j++)
            if (pool >= ppn && seen_pe[i] != seen_pe[j])
                CHECK_MSG(seen_s[i] != seen_s[j], "elements of PEs %d and %d share a stream "
                          "(TESS_STREAMS=%d, %d PEs)", seen_pe[i], seen_pe[j], pool, ppn);
    for (int pe = 0; pe < tess_num_pes(); pe++) {
        int distinct = 0, elems = 0;
        for (int j = 0; j < nseen; j++) {
            if (seen_pe[j] != pe)
                continue;
            elems++;
            int k = 0; /* the first element of this PE with j's stream */
            while (k < j && !(seen_pe[k] == pe && seen_s[k] == seen_s[j]))
                k++;
            distinct += k == j;
        }
        if (elems)
            CHECK_MSG(distinct == want, "PE %d's %d elements use %d streams, %d expected "
                      "(TESS_STREAMS=%d, %d PEs, pe_streams %d)", pe, elems, distinct, want, pool,
                      ppn, pe_streams);
    }
    if (tess_process() == 0)
        printf("test_gpu_batch: each PE's elements on %d stream(s) of their own\n", want);
}

#line 9001
static void misuse_then(tess_ctx_h ctx)
{
    tess_gpu_then(ctx, E_NEXT, NULL, 0);
}
#line 9101
static void misuse_twice(tess_ctx_h ctx, const item_t *it)
{
    tess_gpu_batch(ctx, B, it, E_ENQUEUED, NULL, 0);
}
#line 200

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    test_skip_if_other_backend();
    if (argc > 1)
        mode = argv[1];
    if (getenv("TEST_STEPS"))
        steps = atoi(getenv("TEST_STEPS"));
    else
        steps = (int)test_scaled(steps, 10);
    if (getenv("TEST_COUNT"))
        count = atoi(getenv("TEST_COUNT"));
    lockstep   = getenv("TEST_LOCKSTEP") && atoi(getenv("TEST_LOCKSTEP"));
    item_us    = getenv("TEST_LB_ITEM_US") ? atoi(getenv("TEST_LB_ITEM_US")) : 0;
    int per_pe = getenv("TEST_ELEMS") ? atoi(getenv("TEST_ELEMS")) : 12;
    CHECK(steps > 0 && count > 0 && per_pe > 0);
    on_host         = tess_gpu_backend() == TESS_GPU_HOST;
    const char *env = getenv("TESS_GPU_BATCH");
    int batching    = !env || atoi(env) != 0;

    CHECK_OK(tess_entry_register("step", step, &E_STEP));
    CHECK_OK(tess_entry_register("enqueued", enqueued, &E_ENQUEUED));
    CHECK_OK(tess_entry_register("next", next, &E_NEXT));
    CHECK_OK(tess_entry_register("resume", resume, &E_RESUME));
    tess_gpu_batch_t bad;
    CHECK_ST(tess_gpu_batch_register("bad", 0, launch, NULL, &bad), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu_batch_register("bad", TESS_GPU_BATCH_ITEM_MAX + 1, launch, NULL, &bad),
             TESS_ERR_INVALID);
    CHECK_ST(tess_gpu_batch_register("bad", 8, NULL, NULL, &bad), TESS_ERR_INVALID);
    char long_name[64];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = 0;
    CHECK_ST(tess_gpu_batch_register(long_name, 8, launch, NULL, &bad), TESS_ERR_INVALID);
    if (tess_num_processes() > 1) {
        /* Registration is collective: another item size on the last rank is refused on all. */
        int last = tess_process() == tess_num_processes() - 1;
        CHECK_ST(tess_gpu_batch_register("sized", last ? 16 : 8, launch, NULL, &bad),
                 TESS_ERR_MISMATCH);
        char want[128];
        snprintf(want, sizeof(want), "'sized' (8-byte items) on rank 0 but 'sized' (16-byte "
                 "items) on rank %d", tess_num_processes() - 1);
        CHECK_MSG(strstr(tess_error_detail(), want), "'%s' lacks '%s'", tess_error_detail(),
                  want);
    }
    CHECK_OK(tess_gpu_batch_register("double", sizeof(item_t), launch, NULL, &B));
    int32_t             n = per_pe * tess_num_pes();
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR |
                                           TESS_ARRAY_FIELD_RESUME,
                             .name = "batched", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor,
                             .resume = E_RESUME};
    /* pe_streams: negative, or set without its bit, is refused */
    p.pe_streams = -1;
    p.field_mask |= TESS_ARRAY_FIELD_STREAMS;
    CHECK_ST(tess_array_create(&p, &arr), TESS_ERR_INVALID);
    CHECK_MSG(strstr(tess_error_detail(), "pe_streams = -1"), "%s", tess_error_detail());
    p.pe_streams = 1;
    p.field_mask &= ~(uint64_t)TESS_ARRAY_FIELD_STREAMS;
    CHECK_ST(tess_array_create(&p, &arr), TESS_ERR_INVALID);
    CHECK_MSG(strstr(tess_error_detail(), "TESS_ARRAY_FIELD_STREAMS"), "%s", tess_error_detail());
    int pe_streams = getenv("TEST_PE_STREAMS") ? atoi(getenv("TEST_PE_STREAMS")) : 0;
    p.pe_streams   = pe_streams;
    if (pe_streams)
        p.field_mask |= TESS_ARRAY_FIELD_STREAMS;
    if (item_us) {
        CHECK(tess_num_processes() == 1);
        p.field_mask |= TESS_ARRAY_FIELD_PUP;
        p.pup = pup_nothing;
    }
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, check_elem, NULL));
    if (!item_us) /* (elements that moved to another PE keep their stream) */
        check_streams(per_pe, pe_streams);

    long long mine[4] = {errors, unfinished, atomic_load(&launches), atomic_load(&items_launched)};
    long long sum[4], most, m = atomic_load(&max_n);
    MPI_Allreduce(mine, sum, 4, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&m, &most, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (tess_process() == 0)
        printf("test_gpu_batch: %d elements x %d steps, batching %s: %lld launches for %lld "
               "items (at most %lld in one), %lld wrong values, %lld unfinished\n", n, steps,
               batching ? "on" : "off", sum[2], sum[3], most, sum[0], sum[1]);
    CHECK(sum[0] == 0);
    CHECK(sum[1] == 0);
    CHECK(sum[3] == (long long)n * steps);
    if (batching && per_pe > 1)
        CHECK(most > 1);
    if (!batching)
        CHECK(most == 1 && sum[2] == sum[3]);
    if (item_us) {
        tess_lb_stats_t st;
        CHECK_OK(tess_lb_get_stats(arr, &st));
        double want = 0.8 * per_pe * steps * item_us * 1e-6;
        if (tess_process() == 0)
            printf("test_gpu_batch: load per PE %.4f s (max %.4f), at least %.4f wanted\n",
                   st.avg_load, st.max_load, want);
        CHECK_MSG(st.avg_load >= want, "the measured loads (%.4f s a PE) miss the batches' "
                  "kernel time (%.4f s)", st.avg_load, want / 0.8);
    }
    CHECK_OK(tess_array_destroy(arr));
    test_fini();
    return 0;
}
