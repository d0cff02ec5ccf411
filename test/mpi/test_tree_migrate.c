/* test_tree_migrate: reductions over the spanning tree of processes while elements migrate.
 * Each element of an array of 3 x PEs elements contributes (linear + r) to a SUM reduction of
 * round r whose result goes to element 0, which sends it to every element; in every round a third of the elements move to
 * another PE right after contributing (their reduction is still open), and another third move
 * before they contribute to the next round (others already have). Every element checks every
 * result, and in its next entry that it runs on the PE it asked to move to; at the end a
 * TESS_CB_RETURN reduction counts the rounds every element saw, and one more the moves every
 * element made (each element asks for at least one). */
#include "tess_test.h"

#define ROUNDS 12

typedef struct {
    int round, checked;
    int expect_pe;      /* the PE it asked to move to, -1 none (checked at its next entry) */
    int moves, asked;   /* moves seen to have happened, and asked for */
} elem_t;

static tess_entry_t E_STEP, E_CHECK, E_FINAL;
static tess_array_h arr;
static int64_t      nelem;

static int dest_of(tess_ctx_h ctx, int r)
{
    return (int)((tess_pe() + 1 + tess_ctx_linear(ctx) + r) % tess_num_pes());
}

/* Ask to move to another PE (not where it is: that is no move). */
static void move(tess_ctx_h ctx, elem_t *el, int r)
{
    int to = dest_of(ctx, r);
    if (to == tess_pe())
        to = (to + 1) % tess_num_pes();
    CHECK_OK(tess_migrate(ctx, to));
    el->expect_pe = to;
    el->asked++;
}

/* At every entry: a move asked for in the last one happened. */
static void arrived(tess_ctx_h ctx, elem_t *el)
{
    if (el->expect_pe < 0)
        return;
    CHECK_MSG(tess_pe() == el->expect_pe, "element %lld asked to move to PE %d and runs on PE "
              "%d", (long long)tess_ctx_linear(ctx), el->expect_pe, tess_pe());
    el->moves++;
    el->expect_pe = -1;
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    ((elem_t *)e)->expect_pe = -1;
}

static void step(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    arrived(ctx, el);
    int64_t v[2] = {tess_ctx_linear(ctx) + el->round, el->round};
    CHECK_OK(tess_contribute(ctx, (uint64_t)el->round, v, 2, TESS_INT64, TESS_SUM,
                             tess_cb_element(arr, ((tess_index_t){0, 0, 0}), E_FINAL)));
    if ((tess_ctx_linear(ctx) + el->round) % 3 == 0 && tess_num_pes() > 1)
        move(ctx, el, el->round);
}

static void check(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    arrived(ctx, el);
    int64_t got2[2];
    CHECK(size == sizeof(got2));
    memcpy(got2, msg, sizeof(got2));
    int64_t r = got2[1] / nelem, got = got2[0];
    CHECK_MSG(got2[1] == nelem * el->round, "element %lld round %d: result of round %lld",
              (long long)tess_ctx_linear(ctx), el->round, (long long)r);
    int64_t want = nelem * (nelem - 1) / 2 + nelem * el->round;
    CHECK_MSG(got == want, "element %lld round %d: sum %lld, expected %lld",
              (long long)tess_ctx_linear(ctx), el->round, (long long)got, (long long)want);
    el->checked++;
    el->round++;
    if (el->round < ROUNDS) {
        if ((tess_ctx_linear(ctx) + el->round) % 3 == 1 && tess_num_pes() > 1)
            move(ctx, el, el->round);
        CHECK_OK(tess_send(arr, tess_ctx_index(ctx), E_STEP, NULL, 0));
    } else {
        /* every round seen; every move asked for made (and, with several PEs, some asked) */
        int64_t ok[2] = {el->checked == ROUNDS,
                         el->moves == el->asked && (el->asked > 0 || tess_num_pes() == 1)};
        CHECK_OK(tess_contribute(ctx, ROUNDS, ok, 2, TESS_INT64, TESS_SUM, tess_cb_return()));
    }
}

/* On element 0, wherever it is: the result of a round, on to every element point to point (a
 * broadcast reaches the elements on each PE when it gets there, and can miss one in motion). */
static void result(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)e;
    for (int32_t i = 0; i < (int32_t)nelem; i++)
        CHECK_OK(tess_send(arr, ((tess_index_t){i, 0, 0}), E_CHECK, msg, size));
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        for (int32_t i = 0; i < (int32_t)nelem; i++)
            CHECK_OK(tess_send(arr, ((tess_index_t){i, 0, 0}), E_STEP, NULL, 0));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    CHECK_OK(tess_entry_register("step", step, &E_STEP));
    CHECK_OK(tess_entry_register("check", check, &E_CHECK));
    CHECK_OK(tess_entry_register("result", result, &E_FINAL));
    nelem                 = 3 * (int64_t)tess_num_pes();
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "movers", .ndims = 1,
                             .extents = {(int32_t)nelem, 1, 1}, .elem_size = sizeof(elem_t),
                             .ctor = ctor};
    CHECK_OK(tess_array_create(&p, &arr));
    double t0 = MPI_Wtime();
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    int64_t all[2] = {0, 0};
    size_t  len    = 0;
    CHECK_OK(tess_result(all, sizeof(all), &len));
    CHECK_MSG(len == sizeof(all) && all[0] == nelem, "%lld of %lld elements saw all %d rounds",
              (long long)all[0], (long long)nelem, ROUNDS);
    CHECK_MSG(all[1] == nelem, "%lld of %lld elements made every move they asked for",
              (long long)all[1], (long long)nelem);
    tess_tree_stats_t ts;
    CHECK_OK(tess_tree_get_stats(&ts));
    CHECK(ts.combined > 0 && ts.children <= ts.arity);
    if (tess_process() == 0)
        printf("tree_migrate: %d rounds on %lld migrating elements in %.2f s (k = %d, root fan-in "
               "%lld, late partials here %lld): ok\n", ROUNDS, (long long)nelem,
               MPI_Wtime() - t0, ts.arity, (long long)ts.max_fanin, (long long)ts.late);
    CHECK_OK(tess_array_destroy(arr));
    test_fini();
    return 0;
}
