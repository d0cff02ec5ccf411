/* bench_array: how the cost of a chare array grows with its element count. For each count N
 * (one 1D array of 8-byte elements, default block map, every process's PEs):
 *   create     tess_array_create (constructors run)
 *   bcast+red  one phase: process 0 broadcasts to every element, each contributes 1 (INT64
 *              SUM) to a reduction that returns N to every process (checked)
 *   migrate    one phase: a broadcast, then every tenth element moves to a PE of the next
 *              process (or the next PE of this one on one process); the element counts are
 *              checked afterwards
 *   destroy    tess_array_destroy (destructors counted and checked against N)
 *   bytes      heap bytes in use (mallinfo2) after create minus before, less the user's own
 *              N_local * 8 bytes, per local element: the runtime's state per element
 * Every time is the slowest process's, the best of REPS runs (env BENCH_REPS, default 3: the
 * test machines are shared). Prints one CSV row per N with each time, its cost per element (ns;
 * per migrated element for migrate) and that cost as a multiple of the smallest N's, so a
 * linear cost reads ~1.0 (or less, as fixed costs spread) all the way down. Public API only
 * (plus mallinfo2).
 * Usage: mpirun -n 2 bench_array [N ...]   (default 10000 100000 1000000 10000000) */
#define _GNU_SOURCE
#include <tessera.h>

#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t v;
} elem_t;

static tess_entry_t E_RED, E_MIG;
static tess_array_h arr;
static int64_t      ndtor, nctor;

static void fail(const char *what, tess_status_t st)
{
    fprintf(stderr, "bench_array: %s failed (%d)\n", what, (int)st);
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define OK(call) do { tess_status_t st_ = (call); if (st_ != TESS_OK) fail(#call, st_); } while (0)

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    ((elem_t *)e)->v = tess_ctx_linear(ctx);
    nctor++;
}

static void dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    if (((elem_t *)e)->v != tess_ctx_linear(ctx)) {
        fprintf(stderr, "bench_array: element %lld holds %lld\n", (long long)tess_ctx_linear(ctx),
                (long long)((elem_t *)e)->v);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ndtor++;
}

static void red(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    int64_t one = 1;
    OK(tess_contribute(ctx, 0, &one, 1, TESS_INT64, TESS_SUM, tess_cb_return()));
}

static void mig(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    if (tess_ctx_linear(ctx) % 10 != 0)
        return;
    int np = tess_num_processes(), ppn = tess_ppn();
    int dest = np > 1 ? (tess_pe() + ppn) % tess_num_pes() : (tess_pe() + 1) % tess_num_pes();
    if (dest != tess_pe())
        OK(tess_migrate(ctx, dest));
}

static void start_bcast(void *arg)
{
    if (tess_process() == 0)
        OK(tess_broadcast(arr, *(tess_entry_t *)arg, NULL, 0));
}

static size_t heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* The slowest process's time since t0 (all processes enter together). */
static double max_since(double t0)
{
    double t = MPI_Wtime() - t0, mx;
    MPI_Allreduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return mx;
}

/* The state is a value: its bytes are all a migration needs (a PUP function that adds
 * nothing says so). */
static void pup_nothing(tess_pup_h pup, tess_ctx_h ctx, void *elem)
{
    (void)pup, (void)ctx, (void)elem;
}

/* One create / broadcast+reduction / migration / destroy of n elements: the four times and the
 * runtime bytes per local element (the largest over the processes). */
static void run_once(int64_t n, double t[4], double *bpe_p)
{
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_NAME |
                                           TESS_ARRAY_FIELD_PUP,
                             .name = "bench", .ndims = 1, .extents = {(int32_t)n, 1, 1},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor,
                             .pup = pup_nothing};
    nctor = ndtor = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    size_t h0 = heap_bytes();
    double t0 = MPI_Wtime();
    OK(tess_array_create(&p, &arr));
    double t_create = max_since(t0);
    size_t  h1    = heap_bytes();
    int64_t nloc  = tess_array_num_local(arr);
    double  bpe   = nloc ? ((double)h1 - (double)h0 - (double)nloc * sizeof(elem_t)) / nloc : 0;
    double  bpe_max;
    MPI_Allreduce(&bpe, &bpe_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    OK(tess_run(TESS_RUN_UNTIL_EXIT, start_bcast, &E_RED));
    double  t_red = max_since(t0);
    int64_t sum   = 0;
    OK(tess_result(&sum, sizeof(sum), NULL));
    if (sum != n) {
        fprintf(stderr, "bench_array: the reduction gave %lld of %lld\n", (long long)sum,
                (long long)n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    int64_t moved = 0;
    if (tess_num_pes() > 1) {
        moved = (n + 9) / 10;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_bcast, &E_MIG));
        int64_t mine = tess_array_num_local(arr), all;
        MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (all != n) {
            fprintf(stderr, "bench_array: %lld elements after migrating, not %lld\n",
                    (long long)all, (long long)n);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    double t_mig = moved ? max_since(t0) : 0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    OK(tess_array_destroy(arr));
    double  t_destroy = max_since(t0);
    int64_t counts[2] = {nctor, ndtor}, tot[2];
    MPI_Allreduce(counts, tot, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (tot[0] != n || tot[1] != n) {
        fprintf(stderr, "bench_array: %lld constructors and %lld destructors for %lld "
                "elements\n", (long long)tot[0], (long long)tot[1], (long long)n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    t[0] = t_create, t[1] = t_red, t[2] = t_mig, t[3] = t_destroy;
    *bpe_p = bpe_max;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    OK(tess_init(&argc, &argv, MPI_COMM_WORLD, NULL));
    OK(tess_entry_register("red", red, &E_RED));
    OK(tess_entry_register("mig", mig, &E_MIG));
    int64_t sizes[32] = {10000, 100000, 1000000, 10000000};
    int     nsizes    = 4;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 32; i++)
            sizes[nsizes++] = atoll(argv[i]);
    }
    int rank = tess_process();
    int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 3;
    if (reps < 1)
        reps = 1;
    if (rank == 0)
        printf("procs,pes,elements,create_s,create_ns,create_x,bcastred_s,bcastred_ns,bcastred_x,"
               "migrate_s,migrate_ns,migrate_x,destroy_s,destroy_ns,destroy_x,bytes_per_elem\n");
    double base[4] = {0};
    for (int k = 0; k < nsizes; k++) {
        int64_t n = sizes[k];
        if (n < 1 || n > INT32_MAX) {
            if (rank == 0)
                fprintf(stderr, "bench_array: skipping %lld elements (1 .. 2^31-1)\n",
                        (long long)n);
            continue;
        }
        double best[4] = {0}, bpe_max = 0;
        for (int rep = 0; rep < reps; rep++) {
            double t[4], bpe;
            run_once(n, t, &bpe);
            for (int i = 0; i < 4; i++)
                best[i] = rep == 0 || t[i] < best[i] ? t[i] : best[i];
            bpe_max = rep == 0 || bpe > bpe_max ? bpe : bpe_max;
        }
        double  t_create = best[0], t_red = best[1], t_mig = best[2], t_destroy = best[3];
        int64_t moved    = tess_num_pes() > 1 ? (n + 9) / 10 : 0;
        double ns[4] = {t_create * 1e9 / n, t_red * 1e9 / n, moved ? t_mig * 1e9 / moved : 0,
                        t_destroy * 1e9 / n};
        if (k == 0)
            memcpy(base, ns, sizeof(base));
        if (rank == 0) {
            printf("%d,%d,%lld", tess_num_processes(), tess_num_pes(), (long long)n);
            double ts[4] = {t_create, t_red, t_mig, t_destroy};
            for (int i = 0; i < 4; i++)
                printf(",%.4f,%.1f,%.2f", ts[i], ns[i], base[i] > 0 ? ns[i] / base[i] : 0.0);
            printf(",%.1f\n", bpe_max);
            fflush(stdout);
        }
    }
    OK(tess_finalize());
    MPI_Finalize();
    return 0;
}
