/*
 * test_lb: load-balancing steps with tess_at_sync. Elements with a device buffer set their own
 * load (a quarter of them TEST_HEAVY times the others) and enter STEPS steps; the strategy is
 * TESS_LB (rotate, greedy, refine, greedyrefine, hybrid, evencount). After each step the resume
 * entry checks the element's host and device state bit for bit, and the location table on every
 * rank is checked after the phase. With rotate every element must move at every step; with the
 * others the strategy's predicted imbalance must not exceed the one before, and all but refine
 * must reach 1.10 (the loads allow a perfect balance, with even counts too). TESS_LB=drain (the
 * test's own strategy, with TESS_LB_TARGET=process) empties process 1 at the first step: it then
 * takes part in the later steps without elements, learning of each from the others' notices,
 * which may come before it has seen the step before end.
 */
#include "tess_test.h"

#include <strings.h>
#include <tessera/gpu.h>

#define STEPS     4
#define DEV_BYTES 2053

typedef struct elem {
    int64_t  id;
    int      steps, resumes, errors, moved_pe;
    uint8_t *dev;
    uint8_t  host[DEV_BYTES];
} elem_t;

static tess_array_h arr;
static tess_entry_t E_GO, E_RESUME, E_VERIFY;
static int64_t      n;
static double       heavy = 4;

static uint8_t pattern(int64_t id, int step, size_t i)
{
    return (uint8_t)test_mix(((uint64_t)id << 32) ^ ((uint64_t)step << 16) ^ i);
}

static double load_of(int64_t id)
{
    return id < n / 4 ? heavy : 1.0;
}

static void fill(tess_ctx_h ctx, elem_t *e)
{
    for (size_t i = 0; i < DEV_BYTES; i++)
        e->host[i] = pattern(e->id, e->steps, i);
    CHECK_OK(tess_gpu_memcpy_async(e->dev, e->host, DEV_BYTES, tess_ctx_stream(ctx)));
}

static void ctor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t *e = p;
    e->id     = tess_ctx_linear(ctx);
    CHECK_OK(tess_gpu_malloc((void **)&e->dev, DEV_BYTES));
    fill(ctx, e);
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
}

static void dtor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    tess_gpu_free(((elem_t *)p)->dev);
}

static void pup(tess_pup_h p, tess_ctx_h ctx, void *elem)
{
    (void)ctx;
    tess_pup_device(p, (void **)&((elem_t *)elem)->dev, DEV_BYTES);
}

static void enter_step(tess_ctx_h ctx, elem_t *e)
{
    CHECK_OK(tess_set_load(ctx, load_of(e->id)));
    e->moved_pe = tess_pe();
    CHECK_OK(tess_at_sync(ctx));
}

static void go(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    enter_step(ctx, p);
}

static void resume(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e = p;
    e->resumes++;
    memset(e->host, 0, DEV_BYTES);
    CHECK_OK(tess_gpu_memcpy_async(e->host, e->dev, DEV_BYTES, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_then(ctx, E_VERIFY, NULL, 0));
}

static void verify(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e = p;
    for (size_t i = 0; i < DEV_BYTES; i++)
        if (e->host[i] != pattern(e->id, e->steps, i)) {
            if (e->errors++ < 3)
                fprintf(stderr, "element %lld after step %d: device byte %zu wrong\n",
                        (long long)e->id, e->steps, i);
            break;
        }
    e->steps++;
    fill(ctx, e);
    if (e->steps < STEPS)
        CHECK_OK(tess_gpu_then(ctx, E_GO, NULL, 0));
}

/* Every element of bin 1 to another bin (spread by id), the others stay. */
static void drain(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    for (int i = 0; i < in->nobjs; i++) {
        int b = in->objs[i].bin;
        if (b == 1 && in->nbins > 1) {
            b = (int)(in->objs[i].id % (in->nbins - 1));
            b += b >= 1;
        }
        new_bin[i] = b;
    }
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(arr, E_GO, NULL, 0);
}

static int64_t sums[3];
static void collect(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *e = p;
    sums[0] += e->resumes;
    sums[1] += e->errors;
    sums[2] += e->steps;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (getenv("TEST_HEAVY"))
        heavy = atof(getenv("TEST_HEAVY"));
    const char *strategy = getenv("TESS_LB") ? getenv("TESS_LB") : "greedyrefine";
    n = 4 * (int64_t)tess_num_pes();
    CHECK_OK(tess_lb_register("drain", drain, NULL));
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register("resume", resume, &E_RESUME));
    CHECK_OK(tess_entry_register("verify", verify, &E_VERIFY));
    tess_array_params_t p = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP |
                      TESS_ARRAY_FIELD_RESUME,
        .name = "balanced", .ndims = 1, .extents = {(int32_t)n}, .elem_size = sizeof(elem_t),
        .ctor = ctor, .dtor = dtor, .pup = pup, .resume = E_RESUME};
    CHECK_OK(tess_array_create(&p, &arr));
    tess_lb_stats_t none;
    CHECK(tess_lb_get_stats(arr, &none) == TESS_ERR_NOT_FOUND);

    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));

    CHECK_OK(tess_array_foreach(arr, collect, NULL));
    int64_t all[3];
    MPI_Allreduce(sums, all, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK_MSG(all[1] == 0, "%lld state errors", (long long)all[1]);
    CHECK_MSG(all[0] == n * STEPS && all[2] == n * STEPS, "resumes %lld, steps %lld (expected "
              "%lld)", (long long)all[0], (long long)all[2], (long long)(n * STEPS));
    int64_t local = tess_array_num_local(arr), total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == n);
    for (int64_t i = 0; i < n; i++) {
        int pe = -1;
        CHECK_OK(tess_array_location(arr, tess_idx1((int32_t)i), &pe));
        CHECK((tess_pe_process(pe) == tess_process()) ==
              (tess_array_local(arr, tess_idx1((int32_t)i)) != NULL));
    }
    tess_lb_stats_t st;
    CHECK_OK(tess_lb_get_stats(arr, &st));
    CHECK_MSG(st.steps == STEPS, "%llu steps", (unsigned long long)st.steps);
    /* Every rank has the same statistics. */
    double mine[2] = {st.imbalance_after, (double)st.migrations}, lo[2], hi[2];
    MPI_Allreduce(mine, lo, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, hi, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo[0] == hi[0] && lo[1] == hi[1]);
    if (!strcasecmp(strategy, "rotate") && tess_num_pes() > 1) {
        CHECK_MSG(st.migrations == n, "rotate moved %lld of %lld", (long long)st.migrations,
                  (long long)n);
    } else if (!strcasecmp(strategy, "drain")) {
        CHECK_MSG(tess_process() != 1 || local == 0, "process 1 kept %lld elements",
                  (long long)local);
    } else if (strcasecmp(strategy, "none") != 0) {
        CHECK_MSG(st.imbalance_after <= st.imbalance_before + 1e-9, "imbalance %.3f -> %.3f",
                  st.imbalance_before, st.imbalance_after);
        /* refine only moves (no swaps): it may stop above that. */
        if (strcasecmp(strategy, "refine") != 0)
            CHECK_MSG(st.imbalance_after <= 1.10, "imbalance after the last step %.3f",
                      st.imbalance_after);
    }
    if (tess_process() == 0)
        printf("lb (%s): %d steps over %lld elements on %d PEs; last step moved %lld, "
               "imbalance %.3f -> %.3f: ok\n", strategy, STEPS, (long long)n, tess_num_pes(),
               (long long)st.migrations, st.imbalance_before, st.imbalance_after);
    test_fini();
    return 0;
}
