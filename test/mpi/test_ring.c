/* test_ring: a token travels around a ring of elements spread over every PE of every process,
 * several laps; each hop adds a checksum term. The result returned by tess_exit_with is checked
 * on every rank against the serial answer, and each element's visit count against the laps. */
#include "tess_test.h"

#define LAPS 20

typedef struct { int64_t visits; } elem_t;
typedef struct { int64_t hops; uint64_t sum; } token_t;

static tess_array_h arr;
static tess_entry_t E_HOP;
static int64_t      n;

static void hop(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t  *el = e;
    token_t  t;
    CHECK(size == sizeof(t));
    memcpy(&t, msg, sizeof(t));
    int64_t me = tess_ctx_index(ctx).x;
    CHECK(t.hops % n == me); /* arrives in ring order */
    el->visits++;
    t.sum += test_mix((uint64_t)t.hops);
    t.hops++;
    if (t.hops == LAPS * n) {
        CHECK_OK(tess_exit_with(&t, sizeof(t)));
        return;
    }
    CHECK_OK(tess_send(arr, tess_idx1((int32_t)((me + 1) % n)), E_HOP, &t, sizeof(t)));
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0) {
        token_t t = {0, 0};
        CHECK_OK(tess_send(arr, tess_idx1(0), E_HOP, &t, sizeof(t)));
    }
}

static void check_visits(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(((elem_t *)e)->visits == LAPS);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    n = 3 * (int64_t)tess_num_pes() + 1;
    CHECK_OK(tess_entry_register("hop", hop, &E_HOP));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "ring", .ndims = 1,
                             .extents = {(int32_t)n}, .elem_size = sizeof(elem_t)};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    token_t t;
    size_t  got = 0;
    CHECK_OK(tess_result(&t, sizeof(t), &got));
    CHECK(got == sizeof(t));
    uint64_t expect = 0;
    for (int64_t h = 0; h < LAPS * n; h++)
        expect += test_mix((uint64_t)h);
    CHECK_MSG(t.hops == LAPS * n && t.sum == expect, "hops %lld sum %llx (expected %llx)",
              (long long)t.hops, (unsigned long long)t.sum, (unsigned long long)expect);
    CHECK_OK(tess_array_foreach(arr, check_visits, NULL));
    /* The whole ring was visited: sum of local visits over ranks. */
    int64_t local = tess_array_num_local(arr), total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == n);
    if (tess_process() == 0)
        printf("ring: %lld elements on %d PEs, %d laps: ok\n", (long long)n, tess_num_pes(), LAPS);
    test_fini();
    return 0;
}
