/* test_quiescence: phases that end at quiescence, with no tess_exit.
 *
 * Chains of messages of random length (0 to 300 hops, a few long ones; some hops stall their
 * PE for a moment, so that at times nothing seems to move while a message is being handled)
 * wander from element to element over every PE. When tess_run returns, every chain's final hop
 * must have been processed and every hop counted: the totals, summed over the ranks with MPI,
 * are compared with the serial answer computed from the same random streams. Quiescence phases
 * that send nothing (no start function; a start function that sends nothing) return too, and
 * repeated phases reuse the elements. */
#include "tess_test.h"

#include <time.h>

typedef struct {
    int32_t  chain;
    int32_t  hops_left;
    int32_t  hops_done;
    int32_t  pad;
    uint64_t rng;
} token_t;

typedef struct {
    int64_t  hops;       /* hops handled here */
    int64_t  finals;     /* chains that ended here */
    uint64_t final_ids;  /* sum of mix(chain id) of the chains that ended here */
    int64_t  final_len;  /* sum of their lengths */
} elem_t;

static tess_array_h arr;
static tess_entry_t E_HOP;
static int32_t      n, nchains;
static int          round_no;

static int32_t chain_len(int32_t c)
{
    uint64_t h = test_mix((uint64_t)c * 977 + (uint64_t)round_no * 1000003);
    if (h % 10 == 0)
        return 0;                          /* dies at once: only the first message */
    if (h % 10 == 1)
        return 200 + (int32_t)(h >> 32) % 100;
    return (int32_t)((h >> 16) % 40);
}

static int32_t chain_first(int32_t c)
{
    return (int32_t)(test_mix((uint64_t)c ^ 0xabcdef ^ ((uint64_t)round_no << 40)) % (uint64_t)n);
}

static void stall(void)
{
    struct timespec ts = {0, 200 * 1000}; /* 0.2 ms */
    nanosleep(&ts, NULL);
}

static void hop(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    token_t t;
    CHECK(size == sizeof(t));
    memcpy(&t, msg, sizeof(t));
    el->hops++;
    if (t.hops_left == 0) {
        el->finals++;
        el->final_ids += test_mix((uint64_t)t.chain);
        el->final_len += t.hops_done;
        return;
    }
    uint64_t r = test_rand(&t.rng);
    if (r % 53 == 0)
        stall();
    t.hops_left--;
    t.hops_done++;
    int32_t next = (int32_t)((r >> 8) % (uint64_t)n);
    (void)ctx;
    CHECK_OK(tess_send(arr, tess_idx1(next), E_HOP, &t, sizeof(t)));
}

static void start(void *arg)
{
    (void)arg;
    /* Chains are started by the process of their number modulo the processes. */
    for (int32_t c = tess_process(); c < nchains; c += tess_num_processes()) {
        token_t t = {c, chain_len(c), 0, 0, test_mix((uint64_t)c + 99)};
        CHECK_OK(tess_send(arr, tess_idx1(chain_first(c)), E_HOP, &t, sizeof(t)));
    }
}

static void start_nothing(void *arg)
{
    *(int *)arg += 1;
}

static void collect(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    elem_t  *el = e;
    int64_t *v  = arg;
    v[0] += el->hops;
    v[1] += el->finals;
    v[2] += (int64_t)el->final_ids;
    v[3] += el->final_len;
    memset(el, 0, sizeof(*el));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    n       = 3 * tess_num_pes() + 1;
    nchains = (int32_t)test_scaled(400, 60);
    CHECK_OK(tess_entry_register("hop", hop, &E_HOP));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_MAP,
                             .name = "chains", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&p, &arr));

    /* Nothing to do: returns at once. */
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, NULL, NULL));
    int calls = 0;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_nothing, &calls));
    CHECK(calls == 1);

    double t0 = MPI_Wtime();
    for (round_no = 0; round_no < 3; round_no++) {
        CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
        int64_t v[4] = {0, 0, 0, 0}, all[4];
        CHECK_OK(tess_array_foreach(arr, collect, v));
        MPI_Allreduce(v, all, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        int64_t  hops = 0, len = 0;
        uint64_t ids  = 0;
        for (int32_t c = 0; c < nchains; c++) {
            hops += chain_len(c) + 1;
            len += chain_len(c);
            ids += test_mix((uint64_t)c);
        }
        CHECK_MSG(all[1] == nchains && (uint64_t)all[2] == ids && all[3] == len && all[0] == hops,
                  "round %d: %lld of %d chains ended (ids %llx/%llx, length %lld/%lld), %lld of "
                  "%lld hops", round_no, (long long)all[1], nchains, (unsigned long long)all[2],
                  (unsigned long long)ids, (long long)all[3], (long long)len, (long long)all[0],
                  (long long)hops);
        /* A quiet phase in between. */
        CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_nothing, &calls));
    }
    CHECK(calls == 4);
    if (tess_process() == 0)
        printf("quiescence: 3 rounds of %d chains over %d elements in %.2f s: ok\n", nchains, n,
               MPI_Wtime() - t0);
    test_fini();
    return 0;
}
