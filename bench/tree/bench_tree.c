/* bench_tree: latency of a reduction and of a broadcast across processes against MPI on the
 * same processes in the same run.
 *   reduce:    4 elements per PE each contribute one double (SUM) whose result is broadcast
 *              back to every element, which contributes to the next tag: chained, ROUNDS times;
 *              against MPI_Allreduce of 8 bytes. Twice: on an array with the fast path
 *              (reduce+bcast-fast: one MPI_Iallreduce per round, unless TESS_REDUCE=tree) and
 *              on one that asks for the tree (reduce+bcast).
 *   broadcast: element 0 broadcasts 8 bytes; the last element replies to element 0 point to
 *              point, which broadcasts again; against MPI_Bcast of 8 bytes from rank 0 and an
 *              8-byte MPI_Send from the last rank back to rank 0.
 * Prints one CSV row per measurement: procs,kind,tessera_us,mpi_us,ratio. Public API only. */
#include <tessera.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int          rounds = 2000;
static tess_array_h arr, arr_tree, arr_fast;
static tess_entry_t E_RED, E_BC, E_ACK;
static int64_t      nelem;
static int64_t      red_end; /* the tag that ends this reduction phase */

static void fail(const char *what, tess_status_t st)
{
    fprintf(stderr, "bench_tree: %s failed (%d)\n", what, (int)st);
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define OK(call) do { tess_status_t st_ = (call); if (st_ != TESS_OK) fail(#call, st_); } while (0)

typedef struct {
    int64_t round;
} elem_t;

static void contribute(tess_ctx_h ctx, elem_t *el)
{
    double one = 1.0;
    tess_callback_t cb = el->round + 1 < red_end ? tess_cb_broadcast(arr, E_RED) : tess_cb_return();
    OK(tess_contribute(ctx, (uint64_t)el->round, &one, 1, TESS_DOUBLE, TESS_SUM, cb));
    el->round++;
}

static void red(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    if (size == sizeof(double) && *(const double *)msg != (double)nelem) {
        fprintf(stderr, "bench_tree: reduction gave %g, expected %lld\n", *(const double *)msg,
                (long long)nelem);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (size == 0) /* the start of a phase: this phase's tags (each array runs every other) */
        ((elem_t *)e)->round = red_end - rounds;
    contribute(ctx, e);
}

static void bc(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e;
    if (tess_ctx_linear(ctx) == nelem - 1)
        OK(tess_send(arr, ((tess_index_t){0, 0, 0}), E_ACK, msg, size));
}

static int acks; /* element 0's, on process 0 */

static void ack(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)e;
    if (++acks >= rounds) {
        (void)msg, (void)size;
        OK(tess_exit());
        return;
    }
    OK(tess_broadcast(arr, E_BC, msg, size));
}

static void start_red(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        OK(tess_broadcast(arr, E_RED, NULL, 0));
}

static void start_bc(void *arg)
{
    (void)arg;
    if (tess_process() == 0) {
        double v = 1;
        OK(tess_broadcast(arr, E_BC, &v, sizeof(v)));
    }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    OK(tess_init(&argc, &argv, MPI_COMM_WORLD, NULL));
    if (argc > 1)
        rounds = atoi(argv[1]);
    int rank = tess_process(), np = tess_num_processes();
    OK(tess_entry_register("red", red, &E_RED));
    OK(tess_entry_register("bc", bc, &E_BC));
    OK(tess_entry_register("ack", ack, &E_ACK));
    nelem = 4 * (int64_t)tess_num_pes();
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "b", .ndims = 1,
                             .extents = {(int32_t)nelem, 1, 1}, .elem_size = sizeof(elem_t)};
    OK(tess_array_create(&p, &arr));
    char   out[64];
    size_t len;
    double x = 1, y = 0;

    arr_fast = arr;
    p.field_mask |= TESS_ARRAY_FIELD_REDUCE;
    p.name        = "t";
    p.reduce_tree = 1;
    OK(tess_array_create(&p, &arr_tree));

    double tess_us[3] = {0, 0, 0}, mpi_us[3] = {0, 0, 0};
    for (int rep = 0; rep < 2; rep++) { /* a warm-up, then the measured one */
        for (int v = 0; v < 2; v++) {
            arr = v ? arr_fast : arr_tree;
            red_end += rounds;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            OK(tess_run(TESS_RUN_UNTIL_EXIT, start_red, NULL));
            tess_us[v ? 2 : 0] = (MPI_Wtime() - t0) / rounds * 1e6;
            OK(tess_result(out, sizeof(out), &len));
            if (len != sizeof(double) || memcmp(out, &(double){(double)nelem}, sizeof(double)))
                fail("the reduction's result", TESS_ERR_INVALID);
        }
        arr = arr_fast;

        acks = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        OK(tess_run(TESS_RUN_UNTIL_EXIT, start_bc, NULL));
        tess_us[1] = (MPI_Wtime() - t0) / rounds * 1e6;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int r = 0; r < rounds; r++)
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        mpi_us[0] = mpi_us[2] = (MPI_Wtime() - t0) / rounds * 1e6;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int r = 0; r < rounds; r++) {
            MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            if (np > 1 && rank == np - 1)
                MPI_Send(&x, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD);
            else if (np > 1 && rank == 0)
                MPI_Recv(&y, 1, MPI_DOUBLE, np - 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        mpi_us[1] = (MPI_Wtime() - t0) / rounds * 1e6;
    }
    if (rank == 0) {
        const char *kinds[3] = {"reduce+bcast", "bcast+ack", "reduce+bcast-fast"};
        for (int k = 0; k < 3; k++)
            printf("%d,%s,%.2f,%.2f,%.2f\n", np, kinds[k], tess_us[k], mpi_us[k],
                   tess_us[k] / mpi_us[k]);
    }
    OK(tess_array_destroy(arr_tree));
    OK(tess_array_destroy(arr_fast));
    OK(tess_finalize());
    MPI_Finalize();
    return 0;
}
