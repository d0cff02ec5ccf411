/* test_reduce_fast: reductions whose result is broadcast back to the array (the fast path of
 * TESS_REDUCE=auto, the tree with TESS_REDUCE=tree) while elements migrate in the middle of the
 * rounds. Each element contributes {linear + r, r, 1} (SUM, int64) to round r with a broadcast
 * callback; the result must be the round's sum, and each element must get every round exactly
 * once, in order (its own round counter is checked against the round the result names).
 *   args "move":     in a third of the rounds an element moves to a PE of another process
 *                    before it contributes (the others may have contributed already).
 *   args "fallback": besides, each round one element (the mover, r mod N) contributes only
 *                    after every other element has, and first moves to another process: every
 *                    process's partial has then joined the round without it, so the round comes
 *                    back incomplete and process 0 completes it from the partials sent to it
 *                    (asserted at process 0: it completed every round itself).
 * Elements move only after their previous result and before contributing, so that none is in
 * motion when its round's result is delivered; a broadcast reaches the elements of each process
 * when it gets there, so a mover may meet a result from before its move again at its new
 * process (a stale copy, skipped; any other repeat or gap fails). */
#include "tess_test.h"

#define ROUNDS 16

typedef struct {
    int round;   /* results received */
    int gos;     /* go messages for the round being waited on (mover) */
    int go_round;
    int moved;   /* the mover has moved for its round */
    int moved_in; /* round + 1 of the last move (before contributing to that round) */
    int started;
} elem_t;

static tess_entry_t E_RES, E_STEP, E_GO;
static tess_array_h arr;
static int64_t      nelem;
static int          fallback;

static int other_process_pe(tess_ctx_h ctx, int r)
{
    int np = tess_num_processes(), ppn = tess_num_pes() / np;
    return (int)((tess_pe() + ppn * (1 + (tess_ctx_linear(ctx) + r) % (np > 1 ? np - 1 : 1))) %
                 tess_num_pes());
}

static int64_t mover_of(int r)
{
    return fallback && nelem > 1 ? r % nelem : -1;
}

static void contribute(tess_ctx_h ctx, elem_t *el)
{
    int     r    = el->round;
    int64_t v[3] = {tess_ctx_linear(ctx) + r, r, 1};
    CHECK_OK(tess_contribute(ctx, (uint64_t)r, v, 3, TESS_INT64, TESS_SUM,
                             tess_cb_broadcast(arr, E_RES)));
    int64_t m = mover_of(r);
    if (m >= 0 && tess_ctx_linear(ctx) != m)
        CHECK_OK(tess_send(arr, ((tess_index_t){(int32_t)m, 0, 0}), E_GO, &r, sizeof(r)));
}

/* Move (to a PE of another process) and contribute there. */
static void move_then_contribute(tess_ctx_h ctx, elem_t *el)
{
    el->moved_in = el->round + 1;
    CHECK_OK(tess_migrate(ctx, other_process_pe(ctx, el->round)));
    CHECK_OK(tess_send(arr, tess_ctx_index(ctx), E_STEP, NULL, 0));
}

/* The mover goes once it has its round's result before and every other element's go. */
static void mover_check(tess_ctx_h ctx, elem_t *el)
{
    if (el->round < ROUNDS && !el->moved && el->go_round == el->round && el->gos == nelem - 1) {
        el->moved = 1;
        move_then_contribute(ctx, el);
    }
}

static void begin_round(tess_ctx_h ctx, elem_t *el)
{
    int r = el->round;
    if (r == ROUNDS) {
        int64_t one = 1;
        CHECK_OK(tess_contribute(ctx, ROUNDS, &one, 1, TESS_INT64, TESS_SUM, tess_cb_return()));
        return;
    }
    if (tess_ctx_linear(ctx) == mover_of(r)) {
        el->moved = 0;
        mover_check(ctx, el);
        return;
    }
    if (tess_num_processes() > 1 && (tess_ctx_linear(ctx) + r) % 3 == 1)
        move_then_contribute(ctx, el);
    else
        contribute(ctx, el);
}

static void res(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    if (size) {
        int64_t got[3];
        CHECK(size == sizeof(got));
        memcpy(got, msg, sizeof(got));
        /* A broadcast reaches each process when it gets there: an element that moved may meet
         * a result it had before the move again at its new process — the previous round's, or
         * an older one where that process had no element waiting for it (its PE delivers the
         * rounds it missed when the mover arrives). Only results from before its last move. */
        int64_t stale = got[2] ? got[1] / got[2] : -1;
        if (got[2] == nelem && got[1] == nelem * stale && stale >= 0 &&
            stale < el->moved_in - 1)
            return;
        CHECK_MSG(got[2] == nelem && got[1] == nelem * el->round,
                  "element %lld expected round %d's result, got %lld contributions of round "
                  "%lld (delivered twice, or one skipped)", (long long)tess_ctx_linear(ctx),
                  el->round, (long long)got[2], got[2] ? (long long)(got[1] / got[2]) : -1ll);
        int64_t want = nelem * (nelem - 1) / 2 + nelem * el->round;
        CHECK_MSG(got[0] == want, "element %lld round %d: sum %lld, expected %lld",
                  (long long)tess_ctx_linear(ctx), el->round, (long long)got[0],
                  (long long)want);
        el->round++;
    } else if (el->started) {
        return; /* the start broadcast again, after a move */
    }
    el->started = 1;
    begin_round(ctx, el);
}

static void step(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    contribute(ctx, e);
}

static void go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    int     r;
    CHECK(size == sizeof(r));
    memcpy(&r, msg, sizeof(r));
    if (el->go_round != r) {
        CHECK_MSG(r > el->go_round, "element %lld: go for round %d after round %d",
                  (long long)tess_ctx_linear(ctx), r, el->go_round);
        el->go_round = r;
        el->gos      = 0;
    }
    el->gos++;
    mover_check(ctx, el);
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_broadcast(arr, E_RES, NULL, 0));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    fallback = argc > 1 && !strcmp(argv[1], "fallback");
    CHECK_OK(tess_entry_register("res", res, &E_RES));
    CHECK_OK(tess_entry_register("step", step, &E_STEP));
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    nelem                 = 3 * (int64_t)tess_num_pes();
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "rounds", .ndims = 1,
                             .extents = {(int32_t)nelem, 1, 1}, .elem_size = sizeof(elem_t)};
    CHECK_OK(tess_array_create(&p, &arr));
    tess_tree_stats_t before;
    CHECK_OK(tess_tree_get_stats(&before));
    double t0 = MPI_Wtime();
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    int64_t all = 0;
    size_t  len = 0;
    CHECK_OK(tess_result(&all, sizeof(all), &len));
    CHECK_MSG(len == sizeof(all) && all == nelem, "%lld of %lld elements finished %d rounds",
              (long long)all, (long long)nelem, ROUNDS);
    tess_tree_stats_t ts;
    CHECK_OK(tess_tree_get_stats(&ts));
    int64_t at_root = ts.combined - before.combined; /* reductions process 0 completed */
    if (fallback && tess_process() == 0 && tess_num_processes() > 1)
        CHECK_MSG(at_root >= ROUNDS + 1, "process 0 completed %lld reductions, expected every "
                  "round's (%d) and the last", (long long)at_root, ROUNDS);
    if (tess_process() == 0)
        printf("reduce_fast %s: %d rounds of %lld elements in %.2f s (%lld completed at process "
               "0): ok\n", fallback ? "fallback" : "move", ROUNDS, (long long)nelem,
               MPI_Wtime() - t0, (long long)at_root);
    CHECK_OK(tess_array_destroy(arr));
    test_fini();
    return 0;
}
