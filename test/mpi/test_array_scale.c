/* test_array_scale: a big chare array is created, migrated in part and destroyed in time
 * linear in its element count. Three arrays: N elements by the block map (N = 1 M scaled by
 * test_scale(), or argv[1]), N/10 round-robin, and N/10 placed by a user map with no pattern.
 * In each, every tenth element moves to a PE of the next process (the next PE on one process)
 * and every twentieth then moves back to where it started, so elements leave and return to
 * their first PE and stay elsewhere. Checked afterwards: every element is found where the
 * location table says, with its own state; the counts add up; destructors run exactly once per
 * element, by tess_array_destroy for two arrays and by tess_finalize for the third. The
 * destroy of the big array must take under 2 s (~0.05 s on the 2-core test machine at 1 M;
 * a search per element made it minutes); sanitizer builds check everything but the time. */
#include "tess_test.h"

#include <mpi.h>

typedef struct {
    int64_t linear;
    int32_t home;  /* global PE it started on */
    int32_t moves;
} elem_t;

static tess_entry_t E_OUT, E_BACK;
static int64_t      nctor[3], ndtor[3];

static int arr_id(void *arg) { return (int)(intptr_t)arg; }

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    elem_t *el = e;
    CHECK(el->linear == 0 && el->moves == 0); /* the state starts zeroed */
    el->linear = tess_ctx_linear(ctx);
    int pe;
    CHECK_OK(tess_array_location(tess_ctx_array(ctx), tess_ctx_index(ctx), &pe));
    el->home = pe;
    nctor[arr_id(arg)]++;
}

static void dtor(tess_ctx_h ctx, void *e, void *arg)
{
    const elem_t *el = e;
    CHECK_MSG(el->linear == tess_ctx_linear(ctx), "element %lld holds %lld",
              (long long)tess_ctx_linear(ctx), (long long)el->linear);
    ndtor[arr_id(arg)]++;
}

static int away_pe(void)
{
    int ppn = tess_ppn(), np = tess_num_pes();
    return tess_num_processes() > 1 ? (tess_pe() + ppn) % np : (tess_pe() + 1) % np;
}

static void out(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    if (el->linear % 10 == 0 && away_pe() != tess_pe()) {
        el->moves++;
        CHECK_OK(tess_migrate(ctx, away_pe()));
    }
}

static void back(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    if (el->linear % 20 == 0 && el->moves == 1) {
        el->moves++;
        CHECK_OK(tess_migrate(ctx, el->home));
    }
}

/* Scatters elements with no pattern a PE's elements could be read as. */
static int scatter(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext, (void)arg;
    return (int)(test_mix((uint64_t)i.x * 7919u) % (uint64_t)npes);
}

static void start(void *arg)
{
    tess_array_h *arrs = arg;
    for (int k = 0; k < 3; k++)
        if (tess_process() == 0)
            CHECK_OK(tess_broadcast(arrs[k], E_OUT, NULL, 0));
}

static void start_back(void *arg)
{
    tess_array_h *arrs = arg;
    for (int k = 0; k < 3; k++)
        if (tess_process() == 0)
            CHECK_OK(tess_broadcast(arrs[k], E_BACK, NULL, 0));
}

typedef struct {
    tess_array_h a;
    int64_t      seen, away, returned;
} visit_t;

static void visit(tess_ctx_h ctx, void *e, void *arg)
{
    visit_t      *v  = arg;
    const elem_t *el = e;
    int64_t       lin = tess_ctx_linear(ctx);
    CHECK(el->linear == lin);
    CHECK(tess_array_local(v->a, tess_ctx_index(ctx)) == e);
    int pe;
    CHECK_OK(tess_array_location(v->a, tess_ctx_index(ctx), &pe));
    CHECK(tess_pe_process(pe) == tess_process());
    /* Where it should be: home, unless it went out and (not a twentieth) stayed out. */
    int moved_out = lin % 10 == 0 && el->moves > 0;
    CHECK_MSG(el->moves == (moved_out ? (lin % 20 == 0 ? 2 : 1) : 0), "element %lld moved %d "
              "times", (long long)lin, el->moves);
    v->seen++;
    v->away += el->moves == 1;
    v->returned += el->moves == 2;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int64_t n = argc > 1 ? atoll(argv[1]) : test_scaled(1000000, 2000);
    CHECK(n >= 20 && n <= INT32_MAX);
    CHECK_OK(tess_entry_register("out", out, &E_OUT));
    CHECK_OK(tess_entry_register("back", back, &E_BACK));

    int64_t      sizes[3] = {n, n / 10, n / 10};
    tess_map_t   maps[3]  = {TESS_MAP_BLOCK, TESS_MAP_ROUND_ROBIN, TESS_MAP_USER};
    tess_array_h arrs[3];
    double       t0 = MPI_Wtime();
    for (int k = 0; k < 3; k++) {
        tess_array_params_t p = {
            .field_mask = TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_MAP, .ndims = 1,
            .extents = {(int32_t)sizes[k], 1, 1}, .elem_size = sizeof(elem_t), .ctor = ctor,
            .ctor_arg = (void *)(intptr_t)k, .dtor = dtor, .map = maps[k], .map_fn = scatter};
        CHECK_OK(tess_array_create(&p, &arrs[k]));
    }
    double t_create = MPI_Wtime() - t0;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, arrs));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_back, arrs));

    int multi = tess_num_pes() > 1;
    for (int k = 0; k < 3; k++) {
        visit_t v = {.a = arrs[k]};
        CHECK_OK(tess_array_foreach(arrs[k], visit, &v));
        CHECK(v.seen == tess_array_num_local(arrs[k]));
        int64_t mine[3] = {v.seen, v.away, v.returned}, all[3];
        MPI_Allreduce(mine, all, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        int64_t tenths = (sizes[k] + 9) / 10, twentieths = (sizes[k] + 19) / 20;
        CHECK_MSG(all[0] == sizes[k], "array %d: %lld elements found of %lld", k,
                  (long long)all[0], (long long)sizes[k]);
        CHECK(all[1] == (multi ? tenths - twentieths : 0));
        CHECK(all[2] == (multi ? twentieths : 0));
    }

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    CHECK_OK(tess_array_destroy(arrs[0]));
    double t_destroy = MPI_Wtime() - t0, t_max;
    MPI_Allreduce(&t_destroy, &t_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    CHECK_OK(tess_array_destroy(arrs[1]));
    if (tess_process() == 0)
        printf("%lld elements: create %.3f s, destroy %.3f s\n", (long long)n, t_create, t_max);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    CHECK_MSG(t_max < 2.0 * (double)(n > 1000000 ? n : 1000000) / 1e6,
              "destroying %lld elements took %.2f s", (long long)n, t_max);
#endif
    /* The third array is left to tess_finalize. */
    CHECK_OK(tess_finalize());
    int64_t mine[6] = {nctor[0], nctor[1], nctor[2], ndtor[0], ndtor[1], ndtor[2]}, all[6];
    MPI_Allreduce(mine, all, 6, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < 3; k++)
        CHECK_MSG(all[k] == sizes[k] && all[3 + k] == sizes[k], "array %d: %lld constructors "
                  "and %lld destructors for %lld elements", k, (long long)all[k],
                  (long long)all[3 + k], (long long)sizes[k]);
    MPI_Finalize();
    return 0;
}
