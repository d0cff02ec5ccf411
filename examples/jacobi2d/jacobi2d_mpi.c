/*
 * jacobi2d_mpi — Jacobi2D as a plain MPI + GPU program: one block per rank, halos exchanged with
 * MPI, staged through pinned host memory (or handed to MPI as device pointers when the MPI says
 * it is CUDA-aware). The update kernel reads the received columns and writes the next columns
 * to send itself, so an iteration is one kernel, as a careful MPI + CUDA programmer writes it.
 * Without a GPU it runs the same kernels on the host. It shares its kernels and options with
 * jacobi2d_tess and prints the same result line.
 *
 *   mpirun -np P jacobi2d_mpi -x NX -y NY -i ITERS [-d PXxPY] [-verify] …
 */
#include "common.h"
#include "jacobi.h"

#include <mpi.h>

#include "../common/app_gpu.h"
#include "../common/app_trace.h"

enum { DIR_N = 0, DIR_S = 1, DIR_W = 2, DIR_E = 3 };

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    jac_opts_t opt = jac_parse(argc, argv, rank);
    if (app_select_device("jacobi2d_mpi", "JACOBI_GPU"))
        jac_backend = JAC_CUDA;

    int px = 1, py = 1;
    if (opt.px) {
        px = opt.px;
        py = opt.py;
        if (px * py != nprocs) {
            if (rank == 0)
                fprintf(stderr, "-d %dx%d needs %d processes, not %d\n", px, py, px * py, nprocs);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        jac_factor(nprocs, opt.nx, opt.ny, &px, &py);
    }
    if (px > opt.nx || py > opt.ny) {
        if (rank == 0)
            fprintf(stderr, "%d x %d processes do not fit a %lld x %lld grid\n", px, py,
                    (long long)opt.nx, (long long)opt.ny);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int     ri = rank / py, rj = rank % py;
    int64_t x0 = jac_start(opt.nx, px, ri), bx = jac_start(opt.nx, px, ri + 1) - x0;
    int64_t y0 = jac_start(opt.ny, py, rj), by = jac_start(opt.ny, py, rj + 1) - y0;
    (void)y0;
    int64_t ld   = by + 2;
    int     work = jac_work(&opt, x0);
    int     nbr[4] = {ri > 0 ? rank - py : -1, ri < px - 1 ? rank + py : -1,
                      rj > 0 ? rank - 1 : -1, rj < py - 1 ? rank + 1 : -1};
    int64_t len[4] = {by, by, bx, bx};

    double *t[2];
    for (int p = 0; p < 2; p++) {
        t[p] = app_dev_alloc(sizeof(double) * (size_t)((bx + 2) * ld));
        jac_init_block(app_stream, t[p], bx, by, nbr[DIR_N] < 0, nbr[DIR_S] < 0, nbr[DIR_W] < 0,
                       nbr[DIR_E] < 0, 1.0);
    }
    double *dcol[2][2], *hsend[4], *hrecv[4];
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++)
            dcol[d][k] = app_dev_alloc(sizeof(double) * (size_t)bx);
    for (int d = 0; d < 4; d++) {
        hsend[d] = app_host_alloc(sizeof(double) * (size_t)len[d]);
        hrecv[d] = app_host_alloc(sizeof(double) * (size_t)len[d]);
    }
    double *rows  = app_dev_alloc(sizeof(double) * (size_t)bx);
    double *hrows = app_host_alloc(sizeof(double) * (size_t)bx);

    /* The columns that go out at iteration 0; later ones are written by the update itself,
     * which also reads the received columns in place of the ghost columns: packing and
     * unpacking are part of the update, as in jacobi2d_tess (the same fused kernel). */
    if (nbr[DIR_W] >= 0)
        jac_pack_col(app_stream, t[0], dcol[0][0], bx, by, 1);
    if (nbr[DIR_E] >= 0)
        jac_pack_col(app_stream, t[0], dcol[0][1], bx, by, by);
    double *win  = nbr[DIR_W] >= 0 ? dcol[1][0] : NULL, *ein = nbr[DIR_E] >= 0 ? dcol[1][1] : NULL;
    double *wout = nbr[DIR_W] >= 0 ? dcol[0][0] : NULL, *eout = nbr[DIR_E] >= 0 ? dcol[0][1] : NULL;
    int     direct = app_cuda_aware || jac_backend == JAC_HOST;
    int     nnbrs  = 0; /* none (one process): nothing to exchange, so no wait for the GPU */
    for (int d = 0; d < 4; d++)
        nnbrs += nbr[d] >= 0;

    double t0 = 0;
    app_trace_init(); /* TESS_TRACE=PATH: this driver's timeline, for tools/tess-trace */
    for (int k = 0; k < opt.warmup + opt.iters; k++) {
        if (k == opt.warmup) {
            app_sync_stream();
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        double *a = t[k % 2];
        /* What goes out: rows in place, columns from the buffers the last update filled. */
        const double *src[4] = {a + 1 * ld + 1, a + bx * ld + 1, dcol[0][0], dcol[0][1]};
        double       *dst[4] = {a + 1, a + (bx + 1) * ld + 1, dcol[1][0], dcol[1][1]};
        if (!direct)
            for (int d = 0; d < 4; d++)
                if (nbr[d] >= 0)
                    app_copy(hsend[d], src[d], sizeof(double) * (size_t)len[d]);
        double tr = app_trace_begin();
        if (nnbrs)
            app_sync_stream();
        app_trace_end("wait for the GPU", tr);
        tr = app_trace_begin();
        MPI_Request req[8];
        int         nreq = 0;
        for (int d = 0; d < 4; d++) {
            if (nbr[d] < 0)
                continue;
            /* Tag by the receiver's side: my north halo is my neighbour's south one. */
            MPI_Irecv(direct ? dst[d] : hrecv[d], (int)len[d], MPI_DOUBLE, nbr[d], d,
                      MPI_COMM_WORLD, &req[nreq++]);
            MPI_Isend(direct ? (void *)src[d] : hsend[d], (int)len[d], MPI_DOUBLE, nbr[d], d ^ 1,
                      MPI_COMM_WORLD, &req[nreq++]);
        }
        MPI_Status st[8];
        MPI_Waitall(nreq, req, st);
        app_trace_end("halo exchange", tr);
        if (!direct)
            for (int d = 0; d < 4; d++)
                if (nbr[d] >= 0)
                    app_copy(dst[d], hrecv[d], sizeof(double) * (size_t)len[d]);
        tr = app_trace_begin();
        jac_update(app_stream, a, t[1 - k % 2], bx, by, work, NULL, NULL, win, ein, wout, eout);
        app_trace_end("update", tr);
    }
    jac_row_sums(app_stream, t[(opt.warmup + opt.iters) % 2], rows, bx, by);
    app_copy(hrows, rows, sizeof(double) * (size_t)bx);
    app_sync_stream();
    double local = 0, checksum = 0;
    for (int64_t i = 0; i < bx; i++)
        local += hrows[i];
    MPI_Reduce(&local, &checksum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double per_iter = (MPI_Wtime() - t0) / opt.iters;

    int status = 0;
    if (rank == 0) {
        const char *backend = jac_backend == JAC_CUDA ? "cuda" : "host";
        printf("jacobi2d_mpi: %lld x %lld, %d iterations (+%d warm-up), %d processes (%d x %d), "
               "backend %s%s\n", (long long)opt.nx, (long long)opt.ny, opt.iters, opt.warmup,
               nprocs, px, py, backend, app_cuda_aware ? " (CUDA-aware MPI)" : "");
        printf("time per iteration: %.6f ms\nchecksum: %.15e\n", per_iter * 1e3, checksum);
        if (opt.verify) {
            double ref = jac_serial_checksum(opt.nx, opt.ny, opt.warmup + opt.iters);
            double rel = ref != 0 ? (checksum - ref) / ref : checksum;
            if (rel < 0)
                rel = -rel;
            printf("verify: serial checksum %.15e, relative difference %.2e: %s\n", ref, rel,
                   rel <= 1e-12 ? "ok" : "WRONG");
            status = rel <= 1e-12 ? 0 : 3;
        }
        printf("RESULT prog=mpi nx=%lld ny=%lld iters=%d procs=%d ppn=1 gpus=0 odf=0 "
               "chares=%dx%d backend=%s ms_per_iter=%.6f checksum=%.17g\n", (long long)opt.nx,
               (long long)opt.ny, opt.iters, nprocs, px, py, backend, per_iter * 1e3, checksum);
        fflush(stdout);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    app_trace_write();
    for (int p = 0; p < 2; p++)
        app_dev_free(t[p], 0);
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++)
            app_dev_free(dcol[d][k], 0);
    for (int d = 0; d < 4; d++) {
        app_dev_free(hsend[d], 1);
        app_dev_free(hrecv[d], 1);
    }
    app_dev_free(rows, 0);
    app_dev_free(hrows, 1);
    MPI_Finalize();
    return status;
}
