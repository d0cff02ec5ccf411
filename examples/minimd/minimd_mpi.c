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
#include "domain.h"
#include "minimd.h"

#include <mpi.h>

#include "../common/app_gpu.h"

/* The device allocator of domain.h: app_gpu.h's, with the one stream. */
static void mem_dev_free(void *p) { app_dev_free(p, 0); }
static void mem_pinned_free(void *p) { app_dev_free(p, 1); }
static void mem_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)stream;
    app_copy(dst, src, bytes);
}
static void mem_sync(void *stream)
{
    (void)stream;
    app_sync_stream();
}

/* ---- the subdomain ------------------------------------------------------------------------- */

static mmd_opts_t    opt;
static mmd_problem_t pr;

/* This rank's subdomain: the state a chare of minimd_tess has (domain.h). */
static mmd_dom_t dom;

/* What the MPI program adds: the neighbor ranks, its message buffers (device, and pinned host
 * for an MPI that is not CUDA-aware) and the communication time. */
static struct {
    int     nbr[3][2]; /* [d][0]: lower neighbor, [1]: upper */
    double  bshift[3][2];
    double *sbuf[2], *rbuf[2], *hsend[2], *hrecv[2];
    int64_t sbuf_cap[2], rbuf_cap[2], hsend_cap[2], hrecv_cap[2];
    double  t_comm;
} msg;


/* One stage of a swap along d: src[s] (device, nsend[s] atoms of `width` doubles) to the lower
 * (s = 0) and upper (s = 1) neighbors; from them nrecv[s] atoms into dst[s]. */
static void swap(int d, double *const src[2], const int64_t nsend[2], double *const dst[2],
                 const int64_t nrecv[2], int width)
{
    int direct = app_cuda_aware || mmd_backend == MMD_HOST;
    if (!direct)
        for (int s = 0; s < 2; s++) {
            mmd_grow_pinned(app_stream, (void **)&msg.hsend[s], &msg.hsend_cap[s],
                            nsend[s] * width, 0, sizeof(double));
            mmd_grow_pinned(app_stream, (void **)&msg.hrecv[s], &msg.hrecv_cap[s],
                            nrecv[s] * width, 0, sizeof(double));
            app_copy(msg.hsend[s], src[s], sizeof(double) * (size_t)(nsend[s] * width));
        }
    app_sync_stream();
    MPI_Request req[4];
    for (int s = 0; s < 2; s++) {
        /* Tag = the direction of travel: 0 down, 1 up; from the lower neighbor comes "up". */
        MPI_Irecv(direct ? dst[s] : msg.hrecv[s], (int)(nrecv[s] * width), MPI_DOUBLE,
                  msg.nbr[d][s], 1 - s, MPI_COMM_WORLD, &req[s]);
        MPI_Isend(direct ? src[s] : msg.hsend[s], (int)(nsend[s] * width), MPI_DOUBLE,
                  msg.nbr[d][s], s, MPI_COMM_WORLD, &req[2 + s]);
    }
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads MPICH's constant */
    MPI_Waitall(4, req, st);
    if (!direct)
        for (int s = 0; s < 2; s++)
            app_copy(dst[s], msg.hrecv[s], sizeof(double) * (size_t)(nrecv[s] * width));
}

static void swap_counts(int d, const int64_t nsend[2], int64_t nrecv[2])
{
    MPI_Request req[4];
    for (int s = 0; s < 2; s++) {
        MPI_Irecv(&nrecv[s], 1, MPI_INT64_T, msg.nbr[d][s], 1 - s, MPI_COMM_WORLD, &req[s]);
        MPI_Isend(&nsend[s], 1, MPI_INT64_T, msg.nbr[d][s], s, MPI_COMM_WORLD, &req[2 + s]);
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
        mmd_select_two(app_stream, &dom, d, n, a, b, list, cap);
        app_sync_stream();
        int fits = 1;
        for (int s = 0; s < 2; s++) {
            counts[s] = dom.hcount[s];
            if (counts[s] > cap[s]) {
                mmd_grow(app_stream, (void **)&list[s], &cap[s], counts[s], 0, sizeof(int));
                fits = 0;
            }
        }
        if (fits)
            return;
    }
}

/* Atoms that left the subdomain go to their new owners, one dimension after the other (an atom
 * that left along x and y reaches its owner in two hops). */
static void exchange(void)
{
    /* Along a dimension of one subdomain the atoms are wrapped into [0, L) in place; along the
     * others an atom that crosses the periodic boundary is wrapped as it is packed. */
    double wrap[3];
    for (int d = 0; d < 3; d++)
        wrap[d] = dom.grid[d] == 1 ? pr.L[d] : 0.0;
    mmd_pbc(app_stream, dom.x, dom.nlocal, wrap);
    for (int d = 0; d < 3; d++) {
        if (dom.grid[d] == 1)
            continue; /* wrapped into [0, L): nothing leaves */
        double  a[2] = {-INFINITY, dom.hi[d]}, b[2] = {dom.lo[d], INFINITY};
        int64_t ns[2], nr[2];
        select_two(d, dom.nlocal, a, b, dom.xlist, dom.xlist_cap, ns);
        for (int s = 0; s < 2; s++) {
            mmd_grow(app_stream, (void **)&msg.sbuf[s], &msg.sbuf_cap[s], MMD_MOVE_W * ns[s], 0,
                     sizeof(double));
            mmd_pack(app_stream, dom.x, dom.v, dom.xlist[s], ns[s], d, mmd_shift_of(&dom, d, s),
                     msg.sbuf[s]);
        }
        mmd_remove(app_stream, dom.x, dom.v, dom.xlist[0], ns[0], dom.xlist[1], ns[1], dom.nlocal);
        dom.nlocal -= ns[0] + ns[1];
        swap_counts(d, ns, nr);
        for (int s = 0; s < 2; s++)
            mmd_grow(app_stream, (void **)&msg.rbuf[s], &msg.rbuf_cap[s], MMD_MOVE_W * nr[s], 0,
                     sizeof(double));
        swap(d, msg.sbuf, ns, msg.rbuf, nr, MMD_MOVE_W);
        mmd_grow_atoms(app_stream, &dom, dom.nlocal + nr[0] + nr[1], dom.nlocal + nr[0] + nr[1],
                       dom.nlocal);
        for (int s = 0; s < 2; s++) {
            mmd_unpack(app_stream, msg.rbuf[s], nr[s], dom.x, dom.v, dom.nlocal);
            dom.nlocal += nr[s];
        }
    }
}

/* Along a dimension of one subdomain the atoms near each face are the ghosts of the other. */
static void pack_in_place(int d)
{
    mmd_pack(app_stream, dom.x, NULL, dom.blist[d][1], dom.bcount[d][1], d, msg.bshift[d][1],
             dom.x + MMD_XW * dom.roff[d][0]);
    mmd_pack(app_stream, dom.x, NULL, dom.blist[d][0], dom.bcount[d][0], d, msg.bshift[d][0],
             dom.x + MMD_XW * dom.roff[d][1]);
}

/* Ghosts: per dimension, the owned atoms and the ghosts of earlier dimensions within the
 * neighbor cutoff of each face go to that neighbor, shifted by a box length across the periodic
 * boundary. The lists are kept for the steps until the next rebuild. */
static void borders(void)
{
    dom.nghost = 0;
    for (int d = 0; d < 3; d++) {
        int64_t n    = dom.nlocal + dom.nghost;
        double  a[2] = {dom.lo[d], dom.hi[d] - pr.cutneigh};
        double  b[2] = {nextafter(dom.lo[d] + pr.cutneigh, INFINITY),
                        nextafter(dom.hi[d], INFINITY)};
        select_two(d, n, a, b, dom.blist[d], dom.blist_cap[d], dom.bcount[d]);
        msg.bshift[d][0] = mmd_shift_of(&dom, d, 0);
        msg.bshift[d][1] = mmd_shift_of(&dom, d, 1);
        if (dom.grid[d] == 1) { /* its own neighbor on both sides: the ghosts are packed in place */
            dom.rcnt[d][0] = dom.bcount[d][1];
            dom.rcnt[d][1] = dom.bcount[d][0];
            dom.roff[d][0] = n;
            dom.roff[d][1] = n + dom.rcnt[d][0];
            mmd_grow_atoms(app_stream, &dom, n + dom.rcnt[d][0] + dom.rcnt[d][1], 0, n);
            pack_in_place(d);
            dom.nghost += dom.rcnt[d][0] + dom.rcnt[d][1];
            continue;
        }
        for (int s = 0; s < 2; s++) {
            mmd_grow(app_stream, (void **)&msg.sbuf[s], &msg.sbuf_cap[s],
                     MMD_XW * dom.bcount[d][s], 0, sizeof(double));
            mmd_pack(app_stream, dom.x, NULL, dom.blist[d][s], dom.bcount[d][s], d,
                     msg.bshift[d][s], msg.sbuf[s]);
        }
        swap_counts(d, dom.bcount[d], dom.rcnt[d]);
        mmd_grow_atoms(app_stream, &dom, n + dom.rcnt[d][0] + dom.rcnt[d][1], 0, n);
        dom.roff[d][0] = n;
        dom.roff[d][1] = n + dom.rcnt[d][0];
        double *dst[2] = {dom.x + MMD_XW * dom.roff[d][0], dom.x + MMD_XW * dom.roff[d][1]};
        swap(d, msg.sbuf, dom.bcount[d], dst, dom.rcnt[d], MMD_XW);
        dom.nghost += dom.rcnt[d][0] + dom.rcnt[d][1];
    }
}

/* Every other step: the ghosts' new positions, through the same lists. */
static void communicate(void)
{
    for (int d = 0; d < 3; d++) {
        if (dom.grid[d] == 1) {
            pack_in_place(d);
            continue;
        }
        for (int s = 0; s < 2; s++)
            mmd_pack(app_stream, dom.x, NULL, dom.blist[d][s], dom.bcount[d][s], d,
                     msg.bshift[d][s], msg.sbuf[s]);
        double *dst[2] = {dom.x + MMD_XW * dom.roff[d][0], dom.x + MMD_XW * dom.roff[d][1]};
        swap(d, msg.sbuf, dom.bcount[d], dst, dom.rcnt[d], MMD_XW);
    }
}

/* Bin owned atoms and ghosts and build the full lists; a bin or a list that did not fit is
 * found on the device, reported here, and the build re-run with more room. */
static void build_neighbors(void)
{
    for (;;) {
        int64_t nbins = (int64_t)dom.bins.n[0] * dom.bins.n[1] * dom.bins.n[2];
        mmd_grow(app_stream, (void **)&dom.bincount, &dom.bincount_cap, nbins, 0, sizeof(int));
        mmd_grow(app_stream, (void **)&dom.binatoms, &dom.binatoms_cap, nbins * dom.bins.cap, 0,
                 sizeof(int));
        mmd_grow(app_stream, (void **)&dom.numneigh, &dom.neigh_cap, dom.cap_own, 0, sizeof(int));
        mmd_grow(app_stream, (void **)&dom.neigh, &dom.neigh_alloc,
                 (int64_t)dom.maxneigh * dom.cap_own, 0, sizeof(int));
        dom.stride = dom.cap_own;
        mmd_bin(app_stream, dom.x, dom.nlocal + dom.nghost, dom.bins, dom.bincount, dom.binatoms,
                dom.status);
        mmd_neighbor(app_stream, dom.x, dom.nlocal, dom.bins, dom.bincount, dom.binatoms,
                     pr.cutneigh * pr.cutneigh,
                     dom.neigh, dom.numneigh, dom.stride, dom.maxneigh, dom.status);
        app_copy(dom.hstatus, dom.status, 2 * sizeof(int));
        app_sync_stream();
        if (dom.hstatus[0] <= dom.bins.cap && dom.hstatus[1] <= dom.maxneigh)
            return;
        if (dom.hstatus[0] > dom.bins.cap)
            dom.bins.cap = dom.hstatus[0] + 2;
        else
            dom.maxneigh = dom.hstatus[1] + 8;
    }
}

static void thermo_row(int step, mmd_thermo_row_t *rows, int *nrows)
{
    double sums[3];
    mmd_thermo_sums(app_stream, dom.v, dom.eatom, dom.watom, dom.nlocal, dom.thermo_out);
    app_copy(dom.hthermo, dom.thermo_out, 3 * sizeof(double));
    app_sync_stream();
    MPI_Allreduce(dom.hthermo, sums, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    rows[(*nrows)++] = mmd_thermo_row(&pr, step, sums);
}

/* The force, timed on its own: the stream drained before and after, which costs nothing extra
 * where the ghost update drains it anyway. With no neighbor to exchange with (one process) the
 * steps run without a wait unless --timing asks for the force's time. */
static void force(int thermo)
{
    int    timed = opt.timing || dom.grid[0] > 1 || dom.grid[1] > 1 || dom.grid[2] > 1;
    double t     = 0;
    if (timed) {
        app_sync_stream();
        t = MPI_Wtime();
    }
    mmd_force(app_stream, dom.x, dom.f, dom.neigh, dom.numneigh, dom.stride, dom.nlocal,
              pr.cutforce * pr.cutforce,
              thermo ? dom.eatom : NULL, thermo ? dom.watom : NULL);
    if (timed) {
        app_sync_stream();
        dom.t_force += MPI_Wtime() - t;
    }
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
    mmd_mem = (mmd_mem_t){app_dev_alloc, app_host_alloc, mem_dev_free, mem_pinned_free, mem_copy,
                          mem_sync};
    mmd_grid(&opt, &pr, nprocs, "processes", rank, dom.grid);
    /* Ranks in the reference's order: z fastest. */
    dom.c[0] = rank / (dom.grid[1] * dom.grid[2]);
    dom.c[1] = rank / dom.grid[2] % dom.grid[1];
    dom.c[2] = rank % dom.grid[2];
    for (int d = 0; d < 3; d++) {
        dom.L[d]  = pr.L[d];
        dom.lo[d] = mmd_bound(pr.L[d], dom.grid[d], dom.c[d]);
        dom.hi[d] = mmd_bound(pr.L[d], dom.grid[d], dom.c[d] + 1);
        for (int s = 0; s < 2; s++) {
            int c[3] = {dom.c[0], dom.c[1], dom.c[2]};
            c[d]     = (c[d] + (s ? 1 : -1) + dom.grid[d]) % dom.grid[d];
            msg.nbr[d][s] = (c[0] * dom.grid[1] + c[1]) * dom.grid[2] + c[2];
        }
    }

    /* Set-up: this rank's lattice sites, the reference's velocities. */
    double *hx, *hv;
    int64_t n;
    app_check(mmd_lattice(&pr, dom.lo, dom.hi, &hx, &hv, &n) == 0, "lattice allocation");
    mmd_setup_velocities(&pr, 1, &hv, &n);
    double density = (double)pr.natoms / (pr.L[0] * pr.L[1] * pr.L[2]);
    int64_t guess  = (int64_t)(density * (dom.hi[0] - dom.lo[0] + 2 * pr.cutneigh) *
                              (dom.hi[1] - dom.lo[1] + 2 * pr.cutneigh) *
                              (dom.hi[2] - dom.lo[2] + 2 * pr.cutneigh));
    dom.maxneigh = opt.small ? 4 : 100;
    mmd_grow_atoms(app_stream, &dom, opt.small ? n : 2 * guess, opt.small ? n : n + n / 4 + 64, 0);
    app_copy(dom.x, hx, sizeof(double) * MMD_XW * (size_t)n);
    app_copy(dom.v, hv, sizeof(double) * 3 * (size_t)n);
    app_sync_stream();
    free(hx);
    free(hv);
    dom.nlocal = n;
    mmd_bins_setup(dom.lo, dom.hi, pr.cutneigh, opt.small ? 1 : 8, &dom.bins);
    dom.status     = app_dev_alloc(2 * sizeof(int));
    dom.hstatus    = app_host_alloc(2 * sizeof(int));
    dom.dcount     = app_dev_alloc(2 * sizeof(int));
    dom.hcount     = app_host_alloc(2 * sizeof(int));
    dom.scratch    = app_dev_alloc(MMD_SCAN_SCRATCH * sizeof(int));
    dom.thermo_out = app_dev_alloc(MMD_THERMO_OUT * sizeof(double));
    dom.hthermo    = app_host_alloc(3 * sizeof(double));
    for (int s = 0; s < 2; s++) {
        int64_t c0 = opt.small ? 1 : 1024;
        mmd_grow(app_stream, (void **)&dom.xlist[s], &dom.xlist_cap[s], c0, 0, sizeof(int));
        for (int d = 0; d < 3; d++)
            mmd_grow(app_stream, (void **)&dom.blist[d][s], &dom.blist_cap[d][s], c0, 0,
                     sizeof(int));
    }

    int               maxrows = mmd_thermo_rows(&opt), nrows = 0;
    mmd_thermo_row_t *rows    = calloc((size_t)maxrows, sizeof(*rows));
    exchange();
    borders();
    build_neighbors();
    force(1);
    thermo_row(0, rows, &nrows);

    msg.t_comm = dom.t_neigh = dom.t_force = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int step = 1; step <= opt.steps; step++) {
        mmd_initial_integrate(app_stream, dom.x, dom.v, dom.f, dom.nlocal, pr.dt, pr.dtforce);
        double t = MPI_Wtime();
        if (step % pr.reneigh == 0) {
            exchange();
            borders();
            double t1 = MPI_Wtime();
            msg.t_comm += t1 - t;
            build_neighbors();
            dom.t_neigh += MPI_Wtime() - t1;
        } else {
            communicate();
            msg.t_comm += MPI_Wtime() - t;
        }
        int thermo = mmd_is_thermo(&opt, step);
        force(thermo);
        mmd_final_integrate(app_stream, dom.v, dom.f, dom.nlocal, pr.dtforce);
        if (thermo)
            thermo_row(step, rows, &nrows);
    }
    app_sync_stream();
    MPI_Barrier(MPI_COMM_WORLD);
    double total = MPI_Wtime() - t0;
    int64_t mine = dom.nlocal, all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    int64_t nn = 0, nn_all = 0;
    int    *hn = malloc(sizeof(int) * (size_t)(dom.nlocal ? dom.nlocal : 1));
    app_check(hn != NULL, "malloc");
    app_copy(hn, dom.numneigh, sizeof(int) * (size_t)dom.nlocal);
    app_sync_stream();
    for (int64_t i = 0; i < dom.nlocal; i++)
        nn += hn[i];
    free(hn);
    MPI_Reduce(&nn, &nn_all, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    double tm[3] = {dom.t_force, dom.t_neigh, msg.t_comm}, tmax[3];
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
                 dom.grid[0], dom.grid[1], dom.grid[2], backend,
                 app_cuda_aware ? " (CUDA-aware MPI)" : "");
        snprintf(fields, sizeof(fields), "procs=%d ppn=1 gpus=0 odf=0 chares=%dx%dx%d backend=%s",
                 nprocs, dom.grid[0], dom.grid[1], dom.grid[2], backend);
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
    app_dev_free(dom.x, 0);
    app_dev_free(dom.v, 0);
    app_dev_free(dom.f, 0);
    app_dev_free(dom.eatom, 0);
    app_dev_free(dom.watom, 0);
    app_dev_free(dom.neigh, 0);
    app_dev_free(dom.numneigh, 0);
    app_dev_free(dom.bincount, 0);
    app_dev_free(dom.binatoms, 0);
    app_dev_free(dom.status, 0);
    app_dev_free(dom.dcount, 0);
    app_dev_free(dom.scratch, 0);
    app_dev_free(dom.thermo_out, 0);
    app_dev_free(dom.hstatus, 1);
    app_dev_free(dom.hcount, 1);
    app_dev_free(dom.hthermo, 1);
    for (int s = 0; s < 2; s++) {
        app_dev_free(dom.xlist[s], 0);
        app_dev_free(msg.sbuf[s], 0);
        app_dev_free(msg.rbuf[s], 0);
        if (msg.hsend[s])
            app_dev_free(msg.hsend[s], 1);
        if (msg.hrecv[s])
            app_dev_free(msg.hrecv[s], 1);
        for (int d = 0; d < 3; d++)
            app_dev_free(dom.blist[d][s], 0);
    }
    MPI_Finalize();
    return st;
}
