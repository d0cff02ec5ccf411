/* test_init: initialisation and identity.
 *
 *   test_init            tess_init on a reordered copy of MPI_COMM_WORLD: process/PE numbering,
 *                        tess_pe() outside and inside phases, the caller's communicator still
 *                        works after tess_init and tess_finalize, a second tess_init is
 *                        TESS_ERR_STATE.
 *   test_init single     MPI initialised with MPI_THREAD_SINGLE: TESS_ERR_MPI naming FUNNELED.
 *   test_init mismatch   rank 1 registers a different entry: TESS_ERR_MISMATCH everywhere, the
 *                        detail naming both entries (2 or more ranks).
 */
#include "tess_test.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    int       ran;        /* entries run on this element */
    int       pe;         /* tess_pe() seen in the entry */
    int       on_main;    /* the entry ran on the thread that called tess_init */
    int64_t   linear;
} elem_t;

static tess_array_h arr_block, arr_rr;
static tess_entry_t E_PING, E_DONE;
static pthread_t    main_thread;
static int          rank, nprocs, ppn;
static _Atomic int  start_ran;

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    CHECK(el->ran == 0 && el->pe == 0); /* zeroed before the constructor */
    el->linear = tess_ctx_linear(ctx);
    el->pe     = -2;
    CHECK(tess_pe() == -1); /* constructors run on the main thread, outside phases */
}

static void ping(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    CHECK(size == 0);
    elem_t      *el = e;
    tess_array_h a  = tess_ctx_array(ctx);
    int          loc;
    CHECK_OK(tess_array_location(a, tess_ctx_index(ctx), &loc));
    int me = tess_pe();
    CHECK_MSG(me == loc, "element %lld of %s runs on PE %d, located on %d",
              (long long)tess_ctx_linear(ctx), tess_array_name(a), me, loc);
    CHECK(me >= rank * ppn && me < (rank + 1) * ppn);
    CHECK(tess_pe_process(me) == rank);
    CHECK(tess_ctx_elem(ctx) == e && el->linear == tess_ctx_linear(ctx));
    el->ran++;
    el->pe      = me;
    el->on_main = pthread_equal(pthread_self(), main_thread);
    /* Local PE 0 is the main thread; the others are not. */
    CHECK(el->on_main == (me % ppn == 0));
    int32_t one = 1;
    CHECK_OK(tess_contribute(ctx, 1, &one, 1, TESS_INT32, TESS_SUM,
                             tess_cb_element(arr_block, tess_idx1(0), E_DONE)));
}


static void done(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e;
    CHECK(tess_ctx_linear(ctx) == 0 && tess_ctx_array(ctx) == arr_block);
    CHECK(size == sizeof(int32_t));
    int32_t n;
    memcpy(&n, msg, sizeof(n));
    CHECK_MSG(n == tess_array_size(arr_block), "%d contributions for %lld elements", n,
              (long long)tess_array_size(arr_block));
    static int64_t seen; /* only element 0 of arr_block runs this */
    seen += n;
    if (seen == tess_array_size(arr_block))
        CHECK_OK(tess_exit());
}

static void start(void *arg)
{
    CHECK(arg == &start_ran);
    /* The start function runs on PE 0 of every process, i.e. on the main thread. */
    CHECK(tess_pe() == rank * ppn);
    CHECK(pthread_equal(pthread_self(), main_thread));
    atomic_fetch_add(&start_ran, 1);
    if (rank == 0)
        CHECK_OK(tess_broadcast(arr_block, E_PING, NULL, 0));
}

static void start_rr(void *arg)
{
    (void)arg;
    CHECK(tess_pe() == rank * ppn);
    /* Each process pings the elements it owns; messages to local and remote ones alike. */
    for (int64_t i = rank; i < tess_array_size(arr_rr); i += nprocs)
        CHECK_OK(tess_send(arr_rr, tess_idx1((int32_t)i), E_PING, NULL, 0));
}

static void check_elem(tess_ctx_h ctx, void *e, void *arg)
{
    elem_t *el = e;
    (void)arg;
    int loc;
    CHECK_OK(tess_array_location(tess_ctx_array(ctx), tess_ctx_index(ctx), &loc));
    CHECK_MSG(el->ran == 1, "element %lld ran %d times", (long long)el->linear, el->ran);
    CHECK(el->pe == loc && tess_pe_process(loc) == rank);
    CHECK(tess_array_local(tess_ctx_array(ctx), tess_ctx_index(ctx)) == e);
}

static void run_normal(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    CHECK(provided >= MPI_THREAD_FUNNELED);
    main_thread = pthread_self();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    /* A communicator in reverse order: Tessera's process numbers follow it, not the world. */
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - 1 - wrank, &comm);

    CHECK(!tess_initialized());
    CHECK(tess_pe() == -1 && tess_process() == -1 && tess_num_processes() == 0);
    const char *env_ppn = getenv("TESS_PPN");
    int         want_ppn = env_ppn && *env_ppn ? atoi(env_ppn) : 1;

    CHECK_OK(tess_init(&argc, &argv, comm, NULL));
    CHECK(tess_initialized());
    rank   = tess_process();
    nprocs = tess_num_processes();
    ppn    = tess_ppn();
    CHECK_MSG(rank == wsize - 1 - wrank, "world rank %d is process %d", wrank, rank);
    CHECK(nprocs == wsize && ppn == want_ppn && tess_num_pes() == nprocs * ppn);
    for (int p = 0; p < tess_num_pes(); p++)
        CHECK(tess_pe_process(p) == p / ppn);
    CHECK(tess_pe() == -1);
    double t0 = tess_wtime();

    /* The caller's communicator still works, alongside Tessera's duplicate. */
    int sum = 0;
    MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, comm);
    CHECK(sum == wsize * (wsize - 1) / 2);

    /* A second tess_init is refused and changes nothing. */
    CHECK(tess_init(&argc, &argv, comm, NULL) == TESS_ERR_STATE);
    CHECK(*tess_error_detail());
    CHECK(tess_initialized() && tess_process() == rank && tess_ppn() == ppn);

    CHECK_OK(tess_entry_register("ping", ping, &E_PING));
    CHECK_OK(tess_entry_register("done", done, &E_DONE));
    CHECK(!strcmp(tess_entry_name(E_PING), "ping") && !strcmp(tess_entry_name(E_DONE), "done"));
    CHECK(!strcmp(tess_entry_name(-1), "?") && !strcmp(tess_entry_name(1000), "?"));

    /* 3 elements per PE plus one: every PE has elements. */
    int32_t             n = 3 * tess_num_pes() + 1;
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "block", .ndims = 1,
                             .extents = {n}, .elem_size = sizeof(elem_t), .ctor = ctor};
    CHECK_OK(tess_array_create(&p, &arr_block));
    tess_array_params_t q = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_MAP,
                             .name = "rr", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .ctor = ctor,
                             .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&q, &arr_rr));
    CHECK(tess_array_size(arr_block) == n && tess_array_ndims(arr_block) == 1);
    CHECK(!strcmp(tess_array_name(arr_rr), "rr"));
    for (int32_t i = 0; i < n; i++) {
        int loc;
        CHECK_OK(tess_array_location(arr_rr, tess_idx1(i), &loc));
        CHECK(loc == i % tess_num_pes());
        CHECK((tess_array_local(arr_rr, tess_idx1(i)) != NULL) == (tess_pe_process(loc) == rank));
    }
    int dummy;
    CHECK(tess_array_location(arr_rr, tess_idx1(n), &dummy) == TESS_ERR_INVALID);

    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, &start_ran));
    CHECK(tess_pe() == -1);
    CHECK(atomic_load(&start_ran) == 1);
    CHECK_OK(tess_array_foreach(arr_block, check_elem, NULL));

    /* Second phase, at quiescence, on the round-robin array. */
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_rr, NULL));
    CHECK(tess_pe() == -1);
    CHECK_OK(tess_array_foreach(arr_rr, check_elem, NULL));
    int64_t local = tess_array_num_local(arr_block) + tess_array_num_local(arr_rr), all = 0;
    MPI_Allreduce(&local, &all, 1, MPI_INT64_T, MPI_SUM, comm);
    CHECK(all == 2 * (int64_t)n);
    CHECK(tess_wtime() >= t0);

    CHECK_OK(tess_finalize());
    CHECK(!tess_initialized() && tess_pe() == -1 && tess_process() == -1);
    CHECK(tess_finalize() == TESS_ERR_STATE);
    sum = 0;
    MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, comm);
    CHECK(sum == wsize * (wsize - 1) / 2);
    MPI_Comm_free(&comm);
    if (wrank == 0)
        printf("init: %d processes x %d PEs: ok\n", wsize, want_ppn);
    MPI_Finalize();
}

static void run_single(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    int level;
    MPI_Query_thread(&level);
    if (level != MPI_THREAD_SINGLE) {
        printf("MPI raised MPI_THREAD_SINGLE to %d: nothing to test\n", level);
        MPI_Finalize();
        exit(77);
    }
    tess_status_t st = tess_init(&argc, &argv, MPI_COMM_WORLD, NULL);
    CHECK_MSG(st == TESS_ERR_MPI, "tess_init returned %d", (int)st);
    CHECK_MSG(strstr(tess_error_detail(), "FUNNELED"), "detail: %s", tess_error_detail());
    CHECK(!tess_initialized());
    /* MPI is left usable. */
    int one = 1, n = 0, size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(n == size);
    printf("init single: refused with '%s': ok\n", tess_error_detail());
    MPI_Finalize();
}

static void entry_noop(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)e, (void)msg, (void)size;
}

static void run_mismatch(int argc, char **argv)
{
    test_init(&argc, &argv);
    CHECK(tess_num_processes() >= 2);
    tess_entry_t a, b;
    CHECK_OK(tess_entry_register("first", entry_noop, &a));
    const char   *name = tess_process() == 1 ? "beta_entry" : "alpha_entry";
    tess_status_t st   = tess_entry_register(name, entry_noop, &b);
    CHECK_MSG(st == TESS_ERR_MISMATCH, "rank %d: registering %s returned %d", tess_process(), name,
              (int)st);
    const char *d = tess_error_detail();
    CHECK_MSG(strstr(d, "alpha_entry") && strstr(d, "beta_entry"), "detail: %s", d);
    /* The registry is unchanged: the next id is still the one after "first". */
    tess_entry_t c;
    CHECK_OK(tess_entry_register("second", entry_noop, &c));
    CHECK(c == a + 1 && !strcmp(tess_entry_name(c), "second"));
    if (tess_process() == 0)
        printf("init mismatch: '%s': ok\n", d);
    test_fini();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "single"))
        run_single(argc, argv);
    else if (!strcmp(mode, "mismatch"))
        run_mismatch(argc, argv);
    else
        run_normal(argc, argv);
    return 0;
}
