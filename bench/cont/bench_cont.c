/*
 * bench_cont — GPU continuation round trip: launch an empty kernel, wait for its completion,
 * run the code that follows; against raw CUDA measured in the same run.
 *
 *   mpirun -np 1 bench_cont [+ppn T] [--iters 10000] [--reps 7] [--csv FILE] [--goal 1.15]
 *
 * Tessera: one chare (on PE 0) launches the empty kernel (<<<SMs, 32>>>, empty body) on its
 * stream and asks for a continuation (tess_gpu_then); the continuation notes the time since
 * the launch and launches again, ITERS times. Raw CUDA: on one thread, launch the same kernel
 * on a stream, record an event, poll cudaEventQuery until it completes, ITERS times. Every
 * repetition runs raw and Tessera back to back. Reported: the median over REPS of each
 * repetition's mean round trip (the goal: tessera <= goal x raw), and percentiles of all
 * round trips of both.
 *
 * On the host backend (no GPU) the "kernel" is an empty host function and the raw loop drives
 * the chare's own stream directly through the public API.
 *
 * Output (rank 0): a table on stdout; CSV lines to --csv FILE (header if new): kind=pct rows,
 * one per percentile, and one kind=summary row with the goal.
 */
#include "../gpu/gpu_bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROG "bench_cont"

static tess_array_h arr;
static tess_entry_t E_GO, E_DONE;
static struct {
    int     iters, i;
    double  launched_ns;
    double *samples; /* iters round trips of the current repetition */
} rt;

static int cont_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)i; (void)ext; (void)npes; (void)arg;
    return 0;
}

static void fire(tess_ctx_h ctx)
{
    rt.launched_ns = bg_now_ns();
    if (bg_launch(tess_ctx_stream(ctx)))
        bg_die(PROG, "launch", bg_error());
    if (tess_gpu_then(ctx, E_DONE, NULL, 0) != TESS_OK)
        bg_die(PROG, "tess_gpu_then", tess_error_detail());
}

static void on_go(tess_ctx_h ctx, void *elem, const void *msg, size_t size)
{
    (void)elem; (void)msg; (void)size;
    rt.i = 0;
    fire(ctx);
}

static void on_done(tess_ctx_h ctx, void *elem, const void *msg, size_t size)
{
    (void)elem; (void)msg; (void)size;
    rt.samples[rt.i] = bg_now_ns() - rt.launched_ns;
    if (++rt.i < rt.iters) {
        fire(ctx);
        return;
    }
    tess_exit();
}

static void cont_start(void *arg)
{
    (void)arg;
    tess_send(arr, tess_idx1(0), E_GO, NULL, 0);
}

static void tess_roundtrip(int iters, double *samples_ns)
{
    rt.iters   = iters;
    rt.samples = samples_ns;
    if (tess_run(TESS_RUN_UNTIL_EXIT, cont_start, NULL) != TESS_OK)
        bg_die(PROG, "tess_run", tess_error_detail());
}

static double mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s / n;
}

static void get_stream(tess_ctx_h ctx, void *elem, void *arg)
{
    (void)elem;
    *(tess_stream_t *)arg = tess_ctx_stream(ctx);
}

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, NULL) != TESS_OK)
        bg_die(PROG, "tess_init", tess_error_detail());
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs != 1)
        bg_die(PROG, "set-up", "run it as one process (mpirun -np 1)");

    int         iters = 10000, reps = 7;
    double      goal = 1.15;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--iters") && v)
            iters = atoi(v);
        else if (!strcmp(a, "--reps") && v)
            reps = atoi(v);
        else if (!strcmp(a, "--csv") && v)
            csv_path = v;
        else if (!strcmp(a, "--goal") && v)
            goal = atof(v);
        else {
            fprintf(stderr, "usage: %s [+ppn T] [--iters N] [--reps N] [--csv FILE] "
                            "[--goal R]\n", PROG);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        i++;
    }
    if (iters < 1 || iters > 10000000 || reps < 1 || reps > 64)
        bg_die(PROG, "options", "need 1 <= --iters <= 1e7 and 1 <= --reps <= 64");

    bg_setup(PROG);
    if (tess_entry_register("go", on_go, &E_GO) != TESS_OK ||
        tess_entry_register("done", on_done, &E_DONE) != TESS_OK)
        bg_die(PROG, "tess_entry_register", tess_error_detail());
    tess_array_params_t ap = {.field_mask = TESS_ARRAY_FIELD_MAP | TESS_ARRAY_FIELD_NAME,
                              .name = "roundtrip", .ndims = 1, .extents = {1, 1, 1},
                              .map = TESS_MAP_USER, .map_fn = cont_map};
    if (tess_array_create(&ap, &arr) != TESS_OK)
        bg_die(PROG, "tess_array_create", tess_error_detail());
    tess_stream_t stream = NULL;
    tess_array_foreach(arr, get_stream, &stream);
    bg_raw_t raw;
    bg_raw_init(&raw, 1, 1, &stream);

    size_t  n    = (size_t)iters * (size_t)reps;
    double *base = malloc(n * sizeof(double)), *tess = malloc(n * sizeof(double));
    double  base_mean[64], tess_mean[64];
    if (!base || !tess)
        bg_die(PROG, "set-up", "out of memory");

    printf("%s: backend %s, %s; %d PE%s, the chare on PE 0; %d round trips x %d reps\n", PROG,
           tess_gpu_backend_name(), bg_kind_text(), tess_ppn(), tess_ppn() > 1 ? "s" : "",
           iters, reps);
    if (bg_kind != BG_KIND_CUDA)
        printf("%s: no CUDA device: the raw baseline is the %s backend driven through the "
               "public API, not CUDA\n", PROG, tess_gpu_backend_name());
    fflush(stdout);

    /* Warm up both. */
    int warm = iters / 10 > 0 ? iters / 10 : 1;
    bg_raw_roundtrip(&raw, warm, base);
    tess_roundtrip(warm, tess);
    for (int r = 0; r < reps; r++) {
        double *b = base + (size_t)r * iters, *t = tess + (size_t)r * iters;
        bg_raw_roundtrip(&raw, iters, b);
        tess_roundtrip(iters, t);
        base_mean[r] = mean(b, iters) * 1e-3;
        tess_mean[r] = mean(t, iters) * 1e-3;
    }
    double      mb = bg_median(base_mean, reps), mt = bg_median(tess_mean, reps);
    double      ratio  = mt / mb;
    const char *status = ratio <= goal ? "PASS" : "MISS";

    FILE *csv = csv_path ? bg_csv_open(csv_path, "bench,backend,kernel,ppn,kind,percentile,"
                                                 "raw_us,tess_us,ratio,goal,status")
                         : NULL;
    const char *kernel = bg_kind == BG_KIND_CUDA ? "cuda" : "host";
    printf("%-12s %12s %12s %7s\n", "round trip", "raw us", "tessera us", "ratio");
    static const double pcts[] = {1, 10, 25, 50, 75, 90, 99, 99.9};
    for (size_t k = 0; k < sizeof(pcts) / sizeof(pcts[0]); k++) {
        double pb = bg_percentile(base, n, pcts[k]) * 1e-3;
        double pt = bg_percentile(tess, n, pcts[k]) * 1e-3;
        printf("p%-11g %12.2f %12.2f %7.3f\n", pcts[k], pb, pt, pt / pb);
        if (csv)
            fprintf(csv, "cont,%s,%s,%d,pct,%g,%.3f,%.3f,%.4f,-,-\n", tess_gpu_backend_name(),
                    kernel, tess_ppn(), pcts[k], pb, pt, pt / pb);
    }
    printf("%-12s %12.2f %12.2f %7.3f  %s (<= %.2f; median of %d reps' means)\n", "mean", mb, mt,
           ratio, status, goal, reps);
    if (csv) {
        fprintf(csv, "cont,%s,%s,%d,summary,50,%.3f,%.3f,%.4f,%.2f,%s\n",
                tess_gpu_backend_name(), kernel, tess_ppn(), mb, mt, ratio, goal, status);
        fclose(csv);
    }

    free(base);
    free(tess);
    bg_raw_fini(&raw);
    tess_array_destroy(arr);
    tess_finalize();
    MPI_Finalize();
    return 0;
}
