/*
 * minimd_mpi — MiniMD as a plain MPI + GPU program: one subdomain per rank, the reference's
 * phases per step (integrate; ghost update in three stages x, y, z so that edges and corners
 * arrive without diagonal messages; force; integrate) and on rebuild steps atoms moved to their
 * new owners, border lists rebuilt, atoms binned and full neighbor lists built — all in kernels
 * (host loops without a GPU). Messages go through MPI, staged through pinned host memory, or as
 * device pointers when the MPI says it is CUDA-aware. Shares kernels, options and output with
 * minimd_tess.
 *
 *   mpirun -np P minimd_mpi [-s N | -nx NX -ny NY -nz NZ] [-n STEPS] [--thermo N] [-ref FILE]
 */
#include "common.h"
#include "minimd.h"

#include <mpi.h>

#include "../common/app_gpu.h"

/* Make *p hold at least `need` elements of `elem` bytes (with headroom), keeping the first
 * `keep` elements. */
static void grow(void **p, int64_t *cap, int64_t need, int64_t keep, size_t elem, int host)
{
    if (need <= *cap)
        return;
    int64_t n = need + need / 4 + 16;
    void   *q = host ? app_host_alloc(n * elem) : app_dev_alloc(n * elem);
    if (keep > 0)
        app_copy(q, *p, (size_t)keep * elem);
    app_sync_stream();
    app_dev_free(*p, host);
    *p   = q;
    *cap = n;
}

/* ---- the subdomain ------------------------------------------------------------------------- */

static mmd_opts_t    opt;
static mmd_problem_t pr;
static int           pgrid[3], coord[3], nbr[3][2]; /* [d][0]: lower neighbor, [1]: upper */
static double        lo[3], hi[3];

static int64_t nlocal, nghost, cap_all, cap_own;
static double *x, *v, *f, *eatom, *watom;
static int    *neigh, *numneigh, maxneigh;
static int64_t neigh_cap, neigh_alloc, stride;
static mmd_bins_t bins;
static int    *bincount, *binatoms, *status, *hstatus, *dcount, *hcount, *scratch;
static int64_t bincount_cap, binatoms_cap;
static int    *xlist[2], *blist[3][2];
static int64_t xlist_cap[2], blist_cap[3][2], bcount[3][2], roff[3][2], rcnt[3][2];
static double  bshift[3][2];
static double *sbuf[2], *rbuf[2], *hsend[2], *hrecv[2], *thermo_out, *hthermo;
static int64_t sbuf_cap[2], rbuf_cap[2], hsend_cap[2], hrecv_cap[2];
static double  t_comm, t_neigh, t_force;

/* One stage of a swap along d: src[s] (device, nsend[s] atoms of `width` doubles) to the lower
 * (s = 0) and upper (s = 1) neighbors; from them nrecv[s] atoms into dst[s]. */
static void swap(int d, double *const src[2], const int64_t nsend[2], double *const dst[2],
                 const int64_t nrecv[2], int width)
{
    int direct = app_cuda_aware || mmd_backend == MMD_HOST;
    if (!direct)
        for (int s = 0; s < 2; s++) {
            grow((void **)&hsend[s], &hsend_cap[s], nsend[s] * width, 0, sizeof(double), 1);
            grow((void **)&hrecv[s], &hrecv_cap[s], nrecv[s] * width, 0, sizeof(double), 1);
            app_copy(hsend[s], src[s], sizeof(double) * (size_t)(nsend[s] * width));
        }
    app_sync_stream();
    MPI_Request req[4];
    for (int s = 0; s < 2; s++) {
        /* Tag = the direction of travel: 0 down, 1 up; from the lower neighbor comes "up". */
        MPI_Irecv(direct ? dst[s] : hrecv[s], (int)(nrecv[s] * width), MPI_DOUBLE, nbr[d][s],
                  1 - s, MPI_COMM_WORLD, &req[s]);
        MPI_Isend(direct ? src[s] : hsend[s], (int)(nsend[s] * width), MPI_DOUBLE, nbr[d][s], s,
                  MPI_COMM_WORLD, &req[2 + s]);
    }
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads MPICH's constant */
    MPI_Waitall(4, req, st);
    if (!direct)
        for (int s = 0; s < 2; s++)
            app_copy(dst[s], hrecv[s], sizeof(double) * (size_t)(nrecv[s] * width));
}

static void swap_counts(int d, const int64_t nsend[2], int64_t nrecv[2])
{
    MPI_Request req[4];
    for (int s = 0; s < 2; s++) {
        MPI_Irecv(&nrecv[s], 1, MPI_INT64_T, nbr[d][s], 1 - s, MPI_COMM_WORLD, &req[s]);
        MPI_Isend(&nsend[s], 1, MPI_INT64_T, nbr[d][s], s, MPI_COMM_WORLD, &req[2 + s]);
    }
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads MPICH's constant */
    MPI_Waitall(4, req, st);
}

/* Select into list[s] the atoms of [0, n) with a[s] <= x_d < b[s]; counts[s] back on the host,
 * lists grown and the selection re-run when they did not fit. */
static void select_two(int d, int64_t n, const double a[2], const double b[2], int *list[2],
                       int64_t cap[2], int64_t counts[2])
{
    for (int again = 0; again < 2; again++) {
        for (int s = 0; s < 2; s++)
            mmd_select(app_stream, x, 0, n, d, a[s], b[s], list[s], dcount + s, cap[s], scratch);
        app_copy(hcount, dcount, 2 * sizeof(int));
        app_sync_stream();
        int fits = 1;
        for (int s = 0; s < 2; s++) {
            counts[s] = hcount[s];
            if (counts[s] > cap[s]) {
                grow((void **)&list[s], &cap[s], counts[s], 0, sizeof(int), 0);
                fits = 0;
            }
        }
        if (fits)
            return;
    }
}

static void grow_atoms(int64_t need_all, int64_t need_own, int64_t keep)
{
    if (need_own > cap_own) {
        int64_t c = cap_own;
        grow((void **)&v, &c, need_own, keep, 3 * sizeof(double), 0);
        c = cap_own;
        grow((void **)&f, &c, need_own, 0, 3 * sizeof(double), 0);
        c = cap_own;
        grow((void **)&eatom, &c, need_own, 0, sizeof(double), 0);
        c = cap_own;
        grow((void **)&watom, &c, need_own, 0, sizeof(double), 0);
        cap_own = c;
    }
    grow((void **)&x, &cap_all, need_all, keep, MMD_XW * sizeof(double), 0);
}

/* What an atom sent to the lower (s = 0) or upper neighbor along d adds to its coordinate: a box
 * length across the periodic boundary. */
static double bshift_of(int d, int s)
{
    if (s == 0)
        return coord[d] == 0 ? pr.L[d] : 0.0;
    return coord[d] == pgrid[d] - 1 ? -pr.L[d] : 0.0;
}

/* Atoms that left the subdomain go to their new owners, one dimension after the other (an atom
 * that left along x and y reaches its owner in two hops). */
static void exchange(void)
{
    /* Along a dimension of one subdomain the atoms are wrapped into [0, L) in place; along the
     * others an atom that crosses the periodic boundary is wrapped as it is packed. */
    double wrap[3];
    for (int d = 0; d < 3; d++)
        wrap[d] = pgrid[d] == 1 ? pr.L[d] : 0.0;
    mmd_pbc(app_stream, x, nlocal, wrap);
    for (int d = 0; d < 3; d++) {
        if (pgrid[d] == 1)
            continue; /* wrapped into [0, L): nothing leaves */
        double  a[2] = {-INFINITY, hi[d]}, b[2] = {lo[d], INFINITY};
        int64_t ns[2], nr[2];
        select_two(d, nlocal, a, b, xlist, xlist_cap, ns);
        for (int s = 0; s < 2; s++) {
            grow((void **)&sbuf[s], &sbuf_cap[s], MMD_MOVE_W * ns[s], 0, sizeof(double), 0);
            mmd_pack(app_stream, x, v, xlist[s], ns[s], d, bshift_of(d, s), sbuf[s]);
        }
        mmd_remove(app_stream, x, v, xlist[0], ns[0], xlist[1], ns[1], nlocal);
        nlocal -= ns[0] + ns[1];
        swap_counts(d, ns, nr);
        for (int s = 0; s < 2; s++)
            grow((void **)&rbuf[s], &rbuf_cap[s], MMD_MOVE_W * nr[s], 0, sizeof(double), 0);
        swap(d, sbuf, ns, rbuf, nr, MMD_MOVE_W);
        grow_atoms(nlocal + nr[0] + nr[1], nlocal + nr[0] + nr[1], nlocal);
        for (int s = 0; s < 2; s++) {
            mmd_unpack(app_stream, rbuf[s], nr[s], x, v, nlocal);
            nlocal += nr[s];
        }
    }
}

/* Along a dimension of one subdomain the atoms near each face are the ghosts of the other. */
static void pack_in_place(int d)
{
    mmd_pack(app_stream, x, NULL, blist[d][1], bcount[d][1], d, bshift[d][1],
             x + MMD_XW * roff[d][0]);
    mmd_pack(app_stream, x, NULL, blist[d][0], bcount[d][0], d, bshift[d][0],
             x + MMD_XW * roff[d][1]);
}

/* Ghosts: per dimension, the owned atoms and the ghosts of earlier dimensions within the
 * neighbor cutoff of each face go to that neighbor, shifted by a box length across the periodic
 * boundary. The lists are kept for the steps until the next rebuild. */
static void borders(void)
{
    nghost = 0;
    for (int d = 0; d < 3; d++) {
        int64_t n    = nlocal + nghost;
        double  a[2] = {lo[d], hi[d] - pr.cutneigh};
        double  b[2] = {nextafter(lo[d] + pr.cutneigh, INFINITY), nextafter(hi[d], INFINITY)};
        select_two(d, n, a, b, blist[d], blist_cap[d], bcount[d]);
        bshift[d][0] = bshift_of(d, 0);
        bshift[d][1] = bshift_of(d, 1);
        if (pgrid[d] == 1) { /* its own neighbor on both sides: the ghosts are packed in place */
            rcnt[d][0] = bcount[d][1];
            rcnt[d][1] = bcount[d][0];
            roff[d][0] = n;
            roff[d][1] = n + rcnt[d][0];
            grow_atoms(n + rcnt[d][0] + rcnt[d][1], 0, n);
            pack_in_place(d);
            nghost += rcnt[d][0] + rcnt[d][1];
            continue;
        }
        for (int s = 0; s < 2; s++) {
            grow((void **)&sbuf[s], &sbuf_cap[s], MMD_XW * bcount[d][s], 0, sizeof(double), 0);
            mmd_pack(app_stream, x, NULL, blist[d][s], bcount[d][s], d, bshift[d][s], sbuf[s]);
        }
        swap_counts(d, bcount[d], rcnt[d]);
        grow_atoms(n + rcnt[d][0] + rcnt[d][1], 0, n);
        roff[d][0] = n;
        roff[d][1] = n + rcnt[d][0];
        double *dst[2] = {x + MMD_XW * roff[d][0], x + MMD_XW * roff[d][1]};
        swap(d, sbuf, bcount[d], dst, rcnt[d], MMD_XW);
        nghost += rcnt[d][0] + rcnt[d][1];
    }
}

/* Every other step: the ghosts' new positions, through the same lists. */
static void communicate(void)
{
    for (int d = 0; d < 3; d++) {
        if (pgrid[d] == 1) {
            pack_in_place(d);
            continue;
        }
        for (int s = 0; s < 2; s++)
            mmd_pack(app_stream, x, NULL, blist[d][s], bcount[d][s], d, bshift[d][s], sbuf[s]);
        double *dst[2] = {x + MMD_XW * roff[d][0], x + MMD_XW * roff[d][1]};
        swap(d, sbuf, bcount[d], dst, rcnt[d], MMD_XW);
    }
}

/* Bin owned atoms and ghosts and build the full lists; a bin or a list that did not fit is
 * found on the device, reported here, and the build re-run with more room. */
static void build_neighbors(void)
{
    for (;;) {
        int64_t nbins = (int64_t)bins.n[0] * bins.n[1] * bins.n[2];
        grow((void **)&bincount, &bincount_cap, nbins, 0, sizeof(int), 0);
        grow((void **)&binatoms, &binatoms_cap, nbins * bins.cap, 0, sizeof(int), 0);
        grow((void **)&numneigh, &neigh_cap, cap_own, 0, sizeof(int), 0);
        grow((void **)&neigh, &neigh_alloc, (int64_t)maxneigh * cap_own, 0, sizeof(int), 0);
        stride = cap_own;
        mmd_bin(app_stream, x, nlocal + nghost, bins, bincount, binatoms, status);
        mmd_neighbor(app_stream, x, nlocal, bins, bincount, binatoms, pr.cutneigh * pr.cutneigh,
                     neigh, numneigh, stride, maxneigh, status);
        app_copy(hstatus, status, 2 * sizeof(int));
        app_sync_stream();
        if (hstatus[0] <= bins.cap && hstatus[1] <= maxneigh)
            return;
        if (hstatus[0] > bins.cap)
            bins.cap = hstatus[0] + 2;
        else
            maxneigh = hstatus[1] + 8;
    }
}

static void thermo_row(int step, mmd_thermo_row_t *rows, int *nrows)
{
    double sums[3];
    mmd_thermo_sums(app_stream, v, eatom, watom, nlocal, thermo_out);
    app_copy(hthermo, thermo_out, 3 * sizeof(double));
    app_sync_stream();
    MPI_Allreduce(hthermo, sums, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    rows[(*nrows)++] = mmd_thermo_row(&pr, step, sums);
}

/* The force, timed on its own (the stream drained before and after). */
static void force(int thermo)
{
    app_sync_stream();
    double t = MPI_Wtime();
    mmd_force(app_stream, x, f, neigh, numneigh, stride, nlocal, pr.cutforce * pr.cutforce,
              thermo ? eatom : NULL, thermo ? watom : NULL);
    app_sync_stream();
    t_force += MPI_Wtime() - t;
}

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    opt = mmd_parse(argc, argv, rank);
    pr  = mmd_problem(opt.nx, opt.ny, opt.nz);
    pr.void_octant = opt.void_octant;
    if (app_select_device("minimd_mpi", "MINIMD_GPU"))
        mmd_backend = MMD_CUDA;
    mmd_grid(&opt, &pr, nprocs, "processes", rank, pgrid);
    /* Ranks in the reference's order: z fastest. */
    coord[0] = rank / (pgrid[1] * pgrid[2]);
    coord[1] = rank / pgrid[2] % pgrid[1];
    coord[2] = rank % pgrid[2];
    for (int d = 0; d < 3; d++) {
        lo[d] = mmd_bound(pr.L[d], pgrid[d], coord[d]);
        hi[d] = mmd_bound(pr.L[d], pgrid[d], coord[d] + 1);
        for (int s = 0; s < 2; s++) {
            int c[3] = {coord[0], coord[1], coord[2]};
            c[d]     = (c[d] + (s ? 1 : -1) + pgrid[d]) % pgrid[d];
            nbr[d][s] = (c[0] * pgrid[1] + c[1]) * pgrid[2] + c[2];
        }
    }

    /* Set-up: this rank's lattice sites, the reference's velocities. */
    double *hx, *hv;
    int64_t n;
    app_check(mmd_lattice(&pr, lo, hi, &hx, &hv, &n) == 0, "lattice allocation");
    mmd_setup_velocities(&pr, 1, &hv, &n);
    double density = (double)pr.natoms / (pr.L[0] * pr.L[1] * pr.L[2]);
    int64_t guess  = (int64_t)(density * (hi[0] - lo[0] + 2 * pr.cutneigh) *
                              (hi[1] - lo[1] + 2 * pr.cutneigh) * (hi[2] - lo[2] + 2 * pr.cutneigh));
    maxneigh = opt.small ? 4 : 100;
    grow_atoms(opt.small ? n : 2 * guess, opt.small ? n : n + n / 4 + 64, 0);
    app_copy(x, hx, sizeof(double) * MMD_XW * (size_t)n);
    app_copy(v, hv, sizeof(double) * 3 * (size_t)n);
    app_sync_stream();
    free(hx);
    free(hv);
    nlocal = n;
    mmd_bins_setup(lo, hi, pr.cutneigh, opt.small ? 1 : 8, &bins);
    status     = app_dev_alloc(2 * sizeof(int));
    hstatus    = app_host_alloc(2 * sizeof(int));
    dcount     = app_dev_alloc(2 * sizeof(int));
    hcount     = app_host_alloc(2 * sizeof(int));
    scratch    = app_dev_alloc(MMD_SCAN_SCRATCH * sizeof(int));
    thermo_out = app_dev_alloc(MMD_THERMO_OUT * sizeof(double));
    hthermo    = app_host_alloc(3 * sizeof(double));
    for (int s = 0; s < 2; s++) {
        int64_t c0 = opt.small ? 1 : 1024;
        grow((void **)&xlist[s], &xlist_cap[s], c0, 0, sizeof(int), 0);
        for (int d = 0; d < 3; d++)
            grow((void **)&blist[d][s], &blist_cap[d][s], c0, 0, sizeof(int), 0);
    }

    int               maxrows = mmd_thermo_rows(&opt), nrows = 0;
    mmd_thermo_row_t *rows    = calloc((size_t)maxrows, sizeof(*rows));
    exchange();
    borders();
    build_neighbors();
    force(1);
    thermo_row(0, rows, &nrows);

    t_comm = t_neigh = t_force = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int step = 1; step <= opt.steps; step++) {
        mmd_initial_integrate(app_stream, x, v, f, nlocal, pr.dt, pr.dtforce);
        double t = MPI_Wtime();
        if (step % pr.reneigh == 0) {
            exchange();
            borders();
            double t1 = MPI_Wtime();
            t_comm += t1 - t;
            build_neighbors();
            t_neigh += MPI_Wtime() - t1;
        } else {
            communicate();
            t_comm += MPI_Wtime() - t;
        }
        int thermo = mmd_is_thermo(&opt, step);
        force(thermo);
        mmd_final_integrate(app_stream, v, f, nlocal, pr.dtforce);
        if (thermo)
            thermo_row(step, rows, &nrows);
    }
    app_sync_stream();
    MPI_Barrier(MPI_COMM_WORLD);
    double total = MPI_Wtime() - t0;
    int64_t mine = nlocal, all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    int64_t nn = 0, nn_all = 0;
    int    *hn = malloc(sizeof(int) * (size_t)(nlocal ? nlocal : 1));
    app_check(hn != NULL, "malloc");
    app_copy(hn, numneigh, sizeof(int) * (size_t)nlocal);
    app_sync_stream();
    for (int64_t i = 0; i < nlocal; i++)
        nn += hn[i];
    free(hn);
    MPI_Reduce(&nn, &nn_all, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    double tm[3] = {t_force, t_neigh, t_comm}, tmax[3];
    MPI_Reduce(tm, tmax, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    int st = 0;
    if (rank == 0) {
        int    ns    = opt.steps > 0 ? opt.steps : 1;
        double per   = total / ns;
        double split[4] = {tmax[0] / ns * 1e3, tmax[1] / ns * 1e3, tmax[2] / ns * 1e3, 0};
        split[3] = per * 1e3 - split[0] - split[1] - split[2];
        if (split[3] < 0)
            split[3] = 0;
        const char *backend = mmd_backend == MMD_CUDA ? "cuda" : "host";
        char        config[256], fields[256];
        snprintf(config, sizeof(config), "%d processes (%d x %d x %d), backend %s%s", nprocs,
                 pgrid[0], pgrid[1], pgrid[2], backend, app_cuda_aware ? " (CUDA-aware MPI)" : "");
        snprintf(fields, sizeof(fields), "procs=%d ppn=1 gpus=0 odf=0 chares=%dx%dx%d backend=%s",
                 nprocs, pgrid[0], pgrid[1], pgrid[2], backend);
        st = mmd_report("mpi", &opt, &pr, rows, nrows, config, fields, per, split,
                         (double)nn_all / (double)pr.natoms);
        if (all != pr.natoms) {
            printf("atoms: %lld at the end, %lld at the start: WRONG\n", (long long)all,
                   (long long)pr.natoms);
            st = 3;
        }
    }
    MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(rows);
    app_dev_free(x, 0);
    app_dev_free(v, 0);
    app_dev_free(f, 0);
    app_dev_free(eatom, 0);
    app_dev_free(watom, 0);
    app_dev_free(neigh, 0);
    app_dev_free(numneigh, 0);
    app_dev_free(bincount, 0);
    app_dev_free(binatoms, 0);
    app_dev_free(status, 0);
    app_dev_free(dcount, 0);
    app_dev_free(scratch, 0);
    app_dev_free(thermo_out, 0);
    app_dev_free(hstatus, 1);
    app_dev_free(hcount, 1);
    app_dev_free(hthermo, 1);
    for (int s = 0; s < 2; s++) {
        app_dev_free(xlist[s], 0);
        app_dev_free(sbuf[s], 0);
        app_dev_free(rbuf[s], 0);
        if (hsend[s])
            app_dev_free(hsend[s], 1);
        if (hrecv[s])
            app_dev_free(hrecv[s], 1);
        for (int d = 0; d < 3; d++)
            app_dev_free(blist[d][s], 0);
    }
    MPI_Finalize();
    return st;
}
