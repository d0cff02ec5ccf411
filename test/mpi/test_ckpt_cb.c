/* test_ckpt_cb — checkpoints from a reduction callback inside a phase (tess_cb_checkpoint). One
 * phase runs I iterations: each element changes its state (host value, device words), then
 * contributes to reduction i, whose sum starts iteration i + 1 on every element (a broadcast);
 * every E iterations the callback is tess_cb_checkpoint(that broadcast), and the last one is
 * tess_cb_return. The state of every element and every sum come from a serial model.
 *
 *   test_ckpt_cb run DIR iters=I every=E        the phase; RESULT with the last sum and digest
 *   test_ckpt_cb restart DIR iters=I every=E    from DIR's current checkpoint (taken at
 *                                               iteration k, whose sum is its user bytes): the
 *                                               elements as the model has them after k, then
 *                                               the phase from k + 1 on, the same RESULT
 * Driven by test/mpi/check-ckpt-cb. */
#include "tess_test.h"

#define NCELLS 12
#define NDEV   4

typedef struct cell {
    uint64_t  value;
    int32_t   iter, pad;
    uint64_t *dev;
} cell_t;

static tess_array_h cells;
static tess_entry_t E_STEP;
static int          iters = 10, every = 3, tess_runs = 0;

static uint64_t contribution(uint64_t v, const uint64_t *d) { return (v + d[0]) & 0xffffffffu; }

static void model_step(uint64_t *v, uint64_t *d, uint64_t sum, int i)
{
    *v = test_mix(*v ^ sum ^ (uint64_t)i);
    for (int k = 0; k < NDEV; k++)
        d[k] = test_mix(d[k] + *v);
}

static uint64_t cell_digest_words(uint64_t v, const uint64_t *d)
{
    uint64_t h = test_mix(v ^ 0x33);
    for (int k = 0; k < NDEV; k++)
        h = test_mix(h ^ d[k]);
    return h;
}

/* The model after n iterations: each cell's digest, and the sum of iteration n. */
static uint64_t model(int n, uint64_t *digest)
{
    uint64_t v[NCELLS], d[NCELLS][NDEV], sum = 0;
    for (int l = 0; l < NCELLS; l++) {
        v[l] = test_mix((uint64_t)l + 1);
        for (int k = 0; k < NDEV; k++)
            d[l][k] = test_mix((uint64_t)l * 10 + (uint64_t)k);
    }
    for (int i = 1; i <= n; i++) {
        uint64_t next = 0;
        for (int l = 0; l < NCELLS; l++) {
            model_step(&v[l], d[l], sum, i);
            next += contribution(v[l], d[l]);
        }
        sum = next;
    }
    for (int l = 0; l < NCELLS; l++)
        digest[l] = cell_digest_words(v[l], d[l]);
    return sum;
}

static void cell_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    cell_t  *c = e;
    int64_t  l = tess_ctx_linear(ctx);
    uint64_t w[NDEV];
    c->value   = test_mix((uint64_t)l + 1);
    c->iter    = 0;
    for (int k = 0; k < NDEV; k++)
        w[k] = test_mix((uint64_t)l * 10 + (uint64_t)k);
    CHECK_OK(tess_gpu_malloc((void **)&c->dev, sizeof(w)));
    CHECK_OK(tess_gpu_memcpy_async(c->dev, w, sizeof(w), tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
}

static void cell_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    cell_t *c = e;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    tess_gpu_free(c->dev);
}

static void cell_pup(tess_pup_h p, tess_ctx_h ctx, void *e)
{
    (void)ctx;
    cell_t *c = e;
    tess_pup_device(p, (void **)&c->dev, NDEV * sizeof(uint64_t));
}

static void on_step(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(int64_t));
    cell_t  *c = e;
    int64_t  sum;
    uint64_t w[NDEV];
    memcpy(&sum, msg, sizeof(sum));
    int i = ++c->iter;
    CHECK_OK(tess_gpu_memcpy_async(w, c->dev, sizeof(w), tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    model_step(&c->value, w, (uint64_t)sum, i);
    CHECK_OK(tess_gpu_memcpy_async(c->dev, w, sizeof(w), tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    int64_t         mine = (int64_t)contribution(c->value, w);
    tess_callback_t cb   = i == iters        ? tess_cb_return()
                         : i % every == 0    ? tess_cb_checkpoint(tess_cb_broadcast(cells, E_STEP))
                                             : tess_cb_broadcast(cells, E_STEP);
    CHECK_OK(tess_contribute(ctx, (uint64_t)i, &mine, 1, TESS_INT64, TESS_SUM, cb));
}

static int64_t start_sum;
static void    start(void *arg)
{
    (void)arg;
    tess_runs++;
    if (tess_process() == 0)
        CHECK_OK(tess_broadcast(cells, E_STEP, &start_sum, sizeof(start_sum)));
}

typedef struct digests {
    uint64_t got[NCELLS];
    int      iter_min, iter_max;
} digests_t;

static void digest_fn(tess_ctx_h ctx, void *e, void *arg)
{
    digests_t *d = arg;
    cell_t    *c = e;
    uint64_t   w[NDEV];
    CHECK_OK(tess_gpu_memcpy_async(w, c->dev, sizeof(w), tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    d->got[tess_ctx_linear(ctx)] = cell_digest_words(c->value, w);
    d->iter_min = c->iter < d->iter_min ? c->iter : d->iter_min;
    d->iter_max = c->iter > d->iter_max ? c->iter : d->iter_max;
}

/* Every element against the model after n iterations; the XOR of the digests. */
static uint64_t check_cells(int n, const char *when)
{
    uint64_t  want[NCELLS];
    digests_t d;
    memset(&d, 0, sizeof(d));
    d.iter_min = 1 << 30;
    d.iter_max = -1;
    model(n, want);
    CHECK_OK(tess_array_foreach(cells, digest_fn, &d));
    int bad = 0;
    for (int l = 0; l < NCELLS; l++)
        if (d.got[l] && d.got[l] != want[l])
            bad++;
    if (d.iter_max >= 0 && (d.iter_min != n || d.iter_max != n))
        bad++;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK_MSG(bad == 0, "%s: %d elements differ from the model after %d iterations", when, bad,
              n);
    uint64_t x = 0;
    for (int l = 0; l < NCELLS; l++)
        x ^= want[l];
    return x;
}

static void arm(const char *dir)
{
    tess_ckpt_params_t cp = {.field_mask = TESS_CKPT_FIELD_PROGRAM, .dir = dir,
                             .program = "test_ckpt_cb"};
    CHECK_OK(tess_checkpoint_callback_params(&cp));
}

static void run_phase(int from)
{
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    int64_t last;
    CHECK_OK(tess_result(&last, sizeof(last), NULL));
    uint64_t x = check_cells(iters, "after the phase");
    uint64_t want[NCELLS];
    CHECK_MSG((uint64_t)last == model(iters, want), "the last sum is %lld, the model's %llu",
              (long long)last, (unsigned long long)model(iters, want));
    CHECK_MSG(tess_runs == 1, "the start function ran %d times", tess_runs);
    if (tess_process() == 0)
        printf("RESULT from=%d iters=%d sum=%lld digest=%016llx\n", from, iters,
               (long long)last, (unsigned long long)x);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    CHECK_MSG(argc >= 3, "usage: test_ckpt_cb run|restart DIR [iters=I] [every=E]");
    const char *mode = argv[1], *dir = argv[2];
    for (int i = 3; i < argc; i++) {
        if (!strncmp(argv[i], "iters=", 6))
            iters = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "every=", 6))
            every = atoi(argv[i] + 6);
        else
            CHECK_MSG(0, "unknown argument %s", argv[i]);
    }
    CHECK_OK(tess_entry_register("step", on_step, &E_STEP));
    tess_array_params_t ap = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP |
                      TESS_ARRAY_FIELD_MAP,
        .name = "cells", .ndims = 1, .extents = {NCELLS}, .elem_size = sizeof(cell_t),
        .ctor = cell_ctor, .dtor = cell_dtor, .pup = cell_pup, .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&ap, &cells));
    if (!strcmp(mode, "run")) {
        arm(dir);
        start_sum = 0;
        run_phase(0);
    } else if (!strcmp(mode, "restart")) {
        tess_ckpt_info_t info;
        int64_t          sum;
        CHECK_OK(tess_checkpoint_info(dir, "test_ckpt_cb", &sum, sizeof(sum), &info));
        CHECK_MSG(info.user_size == sizeof(sum), "the checkpoint holds %zu user bytes, not the "
                  "reduction's result", info.user_size);
        tess_ckpt_params_t rp = {.field_mask = TESS_CKPT_FIELD_PROGRAM, .dir = dir,
                                 .program = "test_ckpt_cb"};
        CHECK_OK(tess_restart(&rp));
        int      k = (int)info.step;
        uint64_t want[NCELLS];
        CHECK_MSG((uint64_t)sum == model(k, want), "checkpoint %d holds the sum %lld, the "
                  "model's %llu", k, (long long)sum, (unsigned long long)model(k, want));
        check_cells(k, "right after the restart");
        if (tess_process() == 0)
            printf("test_ckpt_cb: restarted at iteration %d (sum %lld) on %d processes\n", k,
                   (long long)sum, tess_num_processes());
        arm(dir);
        start_sum = sum;
        run_phase(k);
    } else {
        CHECK_MSG(0, "unknown mode %s", mode);
    }
    CHECK_OK(tess_array_destroy(cells));
    test_fini();
    return 0;
}
