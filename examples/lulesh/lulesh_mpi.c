/*
 * lulesh_mpi — LULESH 2.0 as a plain MPI + GPU program: one domain per rank, a cube of ranks as
 * in the reference (LLNL/LULESH), the reference's exchanges (nodal mass once; forces summed over
 * the 26 neighbours, positions and velocities copied, monotonic-Q gradients on faces every
 * cycle) packed and unpacked in kernels (exchange.h), staged through pinned host memory: pack
 * kernel, one copy, MPI, one copy, unpack kernel (or device buffers straight to MPI when it is
 * CUDA-aware: then the element ghosts land in their ghost slabs, no unpack kernel). The time
 * step is the global minimum of every cycle's constraints. Without a GPU it runs the same
 * kernels on the host. It shares its kernels, options and report with
 * lulesh_tess.
 *
 *   mpirun -np P³ lulesh_mpi -s SIZE [-i ITERS] [-r R] [-b B] [-c C] [-rotate P] [-p] [-q]
 *                            [-verify CASE]
 */
#include "common.h"
#include "exchange.h"
#include "lulesh.h"

#include <mpi.h>
#ifdef LULESH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "../common/app_gpu.h"

#define TAG_NODES 100
#define TAG_ELEMS 200

static int staged; /* MPI moves pinned host copies (CUDA without CUDA-aware MPI; on the
                    * host backend when LULESH_STAGED is set, to test that path) */

static void die(const char *what)
{
    fprintf(stderr, "lulesh_mpi: %s failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#ifdef LULESH_CUDA
static cudaEvent_t constraints_done;
#endif

static void record_constraints(void)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA &&
        cudaEventRecord(constraints_done, (cudaStream_t)app_stream) != cudaSuccess)
        die("cudaEventRecord");
#endif
}

/* Wait for the constraints (and the error code) of the last cycle; end the run as the
 * reference does on its errors. */
static void wait_constraints(const lul_domain_t *d, int rank)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA && cudaEventSynchronize(constraints_done) != cudaSuccess)
        die("cudaEventSynchronize");
#endif
    if (d->out->err) {
        fprintf(stderr, "lulesh_mpi: rank %d, cycle %d: %s\n", rank, d->cycle,
                lul_error_string(d->out->err));
        MPI_Abort(MPI_COMM_WORLD, d->out->err);
    }
}

static void select_device(void)
{
    if (!app_select_device("lulesh_mpi", "LULESH_GPU"))
        return;
#ifdef LULESH_CUDA
    if (cudaEventCreateWithFlags(&constraints_done, cudaEventDisableTiming) != cudaSuccess)
        die("cudaEventCreate");
    lul_backend     = LUL_CUDA;
    lul_xch_backend = LUL_XCH_CUDA;
#endif
}

/* ---- exchanges ------------------------------------------------------------------------------ */

/* The neighbours, and send and receive buffers (one device allocation each, and pinned host
 * copies) that hold the messages of one exchange back to back, so that an exchange is one copy
 * each way. */
typedef struct xch {
    const lul_domain_t *d;
    int                 nbr[27]; /* rank in direction dir, or -1 */
    int64_t             cap;     /* doubles per buffer */
    double             *dsend, *drecv, *hsend, *hrecv;
} xch_t;

/* One exchange: doubles per direction, the directions sent to and received from, and where each
 * message sits in the send and receive buffers. */
typedef struct xch_plan {
    int64_t  count[27], soff[27], roff[27], stotal, rtotal;
    uint32_t snd, rcv;
} xch_plan_t;

static void plan_offsets(xch_plan_t *p)
{
    p->stotal = p->rtotal = 0;
    for (int dir = 0; dir < 27; dir++) {
        p->soff[dir] = p->stotal;
        p->roff[dir] = p->rtotal;
        if (p->snd >> dir & 1)
            p->stotal += p->count[dir];
        if (p->rcv >> dir & 1)
            p->rtotal += p->count[dir];
    }
}

/* The whole-exchange plans of exchange.h (one pack and one unpack kernel per exchange, as
 * lulesh_tess): where each direction's message lies in the send and receive buffers. */
static void all_plans(const xch_plan_t *p, int ring, lul_xch_plan_t *sp, lul_xch_plan_t *rp)
{
    sp->ring = rp->ring = ring;
    for (int dir = 0; dir < 27; dir++) {
        sp->off[dir] = p->snd >> dir & 1 ? p->soff[dir] : -1;
        rp->off[dir] = p->rcv >> dir & 1 ? p->roff[dir] : -1;
    }
}

/* Move the packed messages of plan p (sends carry the sender's direction in the tag). */
static void xch_move(xch_t *x, const xch_plan_t *p, int tag)
{
    int direct = !staged;
    if (!direct && p->stotal)
        app_copy(x->hsend, x->dsend, sizeof(double) * (size_t)p->stotal);
    app_sync_stream();
    MPI_Request req[54];
    int         nreq = 0;
    double     *rb = direct ? x->drecv : x->hrecv, *sb = direct ? x->dsend : x->hsend;
    for (int dir = 0; dir < 27; dir++) {
        if (p->rcv >> dir & 1)
            MPI_Irecv(rb + p->roff[dir], (int)p->count[dir], MPI_DOUBLE, x->nbr[dir],
                      tag + lul_dir_opposite(dir), MPI_COMM_WORLD, &req[nreq++]);
        if (p->snd >> dir & 1)
            MPI_Isend(sb + p->soff[dir], (int)p->count[dir], MPI_DOUBLE, x->nbr[dir], tag + dir,
                      MPI_COMM_WORLD, &req[nreq++]);
    }
    MPI_Status st[54]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads MPICH's constant */
    MPI_Waitall(nreq, req, st);
    if (!direct && p->rtotal)
        app_copy(x->drecv, x->hrecv, sizeof(double) * (size_t)p->rtotal);
}

/* The element ghosts of plan p (packed in dsend). With CUDA-aware MPI (or none needed), one
 * message a face and field, received straight into the ghost slab of that field: no unpack
 * kernel, as lulesh_tess. Staged, one message a face into hrecv, one copy to drecv and the
 * unpack kernel (cheaper than a copy a slab). */
static void xch_ghosts(xch_t *x, const xch_plan_t *p, lul_fields_t grad, const lul_xch_plan_t *rp)
{
    const lul_domain_t *d = x->d;
    if (staged) {
        xch_move(x, p, TAG_ELEMS);
        lul_xch_unpack_elems_all(app_stream, grad, d->ex, d->ey, d->ez, rp, x->drecv);
        return;
    }
    app_sync_stream();
    MPI_Request req[36];
    int         nreq = 0;
    for (int f = 0; f < 6; f++) {
        int dir = lul_face_dir(f);
        if (!(p->snd >> dir & 1))
            continue;
        int64_t cnt = lul_face_count(d->ex, d->ey, d->ez, f);
        int64_t off = lul_ghost_offset(d->ex, d->ey, d->ez, f);
        for (int q = 0; q < grad.nf; q++) {
            MPI_Irecv(grad.f[q] + off, (int)cnt, MPI_DOUBLE, x->nbr[dir],
                      TAG_ELEMS + 27 * q + lul_dir_opposite(dir), MPI_COMM_WORLD, &req[nreq++]);
            MPI_Isend(x->dsend + p->soff[dir] + q * cnt, (int)cnt, MPI_DOUBLE, x->nbr[dir],
                      TAG_ELEMS + 27 * q + dir, MPI_COMM_WORLD, &req[nreq++]);
        }
    }
    MPI_Status st[36];
    MPI_Waitall(nreq, req, st);
}

/* The plan of a node exchange of nf fields: node-sum (add = 1: nodal mass, forces) with every
 * neighbour, or node-copy (add = 0: positions and velocities; send to dir < 13, receive from
 * dir > 13); sp and rp its whole-exchange plans. Returns 0 when there is nothing to exchange. */
static int plan_nodes(const xch_t *x, int nf, int add, xch_plan_t *p, lul_xch_plan_t *sp,
                      lul_xch_plan_t *rp)
{
    const lul_domain_t *d    = x->d;
    int                 ring = !add && lul_node_copy_ring();
    *p                       = (xch_plan_t){.snd = 0};
    for (int dir = 0; dir < 27; dir++) {
        if (x->nbr[dir] < 0)
            continue;
        p->count[dir] = lul_node_count_of(d->ex, d->ey, d->ez, dir, ring) * nf;
        p->snd |= (uint32_t)(add || lul_xch_sync_sends(dir)) << dir;
        p->rcv |= (uint32_t)(add || lul_xch_sync_recvs(dir)) << dir;
    }
    plan_offsets(p);
    all_plans(p, ring, sp, rp);
    return p->snd || p->rcv;
}

/* The plan of the element ghosts of nf fields: the layer next to each face with a neighbour
 * goes to its ghost slab there. */
static int plan_elems(const xch_t *x, int nf, xch_plan_t *p, lul_xch_plan_t *sp,
                      lul_xch_plan_t *rp)
{
    const lul_domain_t *d = x->d;
    *p                    = (xch_plan_t){.snd = 0};
    for (int f = 0; f < 6; f++) {
        int dir = lul_face_dir(f);
        if (x->nbr[dir] < 0)
            continue;
        p->count[dir] = lul_face_count(d->ex, d->ey, d->ez, f) * nf;
        p->snd |= 1u << dir;
    }
    p->rcv = p->snd;
    plan_offsets(p);
    all_plans(p, 0, sp, rp);
    return p->snd != 0;
}

/* A whole node exchange: pack, move, unpack in ascending dir (the nodal mass). */
static void xch_nodes(xch_t *x, lul_fields_t fl, int add)
{
    const lul_domain_t *d = x->d;
    xch_plan_t          p;
    lul_xch_plan_t      sp, rp;
    if (!plan_nodes(x, fl.nf, add, &p, &sp, &rp))
        return;
    lul_xch_pack_nodes_all(app_stream, fl, d->ex, d->ey, d->ez, &sp, x->dsend);
    xch_move(x, &p, TAG_NODES);
    lul_xch_unpack_nodes_all(app_stream, fl, d->ex, d->ey, d->ez, &rp, x->drecv, add);
}

/* Stage 2's part of the exchange work (lul_fuse_t): with LULESH_FUSE=force or nodes, it packs
 * the forces into the send buffer (free: the last exchange has been moved). */
static lul_fuse_t force_fuse(const xch_t *x)
{
    xch_plan_t     p;
    lul_xch_plan_t rp;
    lul_fuse_t     f = {.recv = NULL};
    if (plan_nodes(x, 3, 1, &p, &f.splan, &rp) && (lul_fuse() & LUL_FUSE_FORCE))
        f.send = x->dsend;
    return f;
}

/* Stages 3 and 4a of a cycle with their exchanges, as lulesh_tess does them: the forces packed
 * (unless stage 2 did: force_fuse) and moved, then the node stage adds them and packs the
 * node-copy (lul_fuse_t, with LULESH_FUSE=nodes); the node-copy moved and unpacked; the gradient
 * stage, its element ghosts packed, moved and unpacked. (xch_move waits for the stream before
 * it receives into drecv, which the node stage reads.) */
static void stages_3_4a(xch_t *x, lul_domain_t *d, lul_fields_t force, lul_fields_t posv,
                        lul_fields_t grad, int force_packed)
{
    xch_plan_t     pf, pp, pg;
    lul_xch_plan_t sf, rp, sg, rg;
    lul_fuse_t     fn = {.recv = NULL};
    int            sums = lul_fuse() & LUL_FUSE_SUMS, copy = lul_fuse() & LUL_FUSE_COPY;
    if (plan_nodes(x, force.nf, 1, &pf, &sf, &fn.rplan)) {
        if (!force_packed)
            lul_xch_pack_nodes_all(app_stream, force, d->ex, d->ey, d->ez, &sf, x->dsend);
        xch_move(x, &pf, TAG_NODES);
        if (sums)
            fn.recv = x->drecv;
        else
            lul_xch_unpack_nodes_all(app_stream, force, d->ex, d->ey, d->ez, &fn.rplan, x->drecv,
                                     1);
    }
    int posvel = plan_nodes(x, posv.nf, 0, &pp, &fn.splan, &rp);
    fn.send    = posvel && copy ? x->dsend : NULL;
    lul_stage_nodes(app_stream, d, &fn);
    if (posvel) {
        if (!copy)
            lul_xch_pack_nodes_all(app_stream, posv, d->ex, d->ey, d->ez, &fn.splan, x->dsend);
        xch_move(x, &pp, TAG_NODES);
        lul_xch_unpack_nodes_all(app_stream, posv, d->ex, d->ey, d->ez, &rp, x->drecv, 0);
    }
    lul_stage_gradients(app_stream, d);
    if (plan_elems(x, grad.nf, &pg, &sg, &rg)) {
        lul_xch_pack_elems_all(app_stream, grad, d->ex, d->ey, d->ez, &sg, x->dsend);
        xch_ghosts(x, &pg, grad, &rg);
    }
}

static void xch_init(xch_t *x, const lul_domain_t *d, const int grid[3], const int c[3])
{
    x->d   = d;
    x->cap = 1;
    for (int dir = 0; dir < 27; dir++) {
        int nc[3];
        x->nbr[dir] = lul_dir_neighbor(grid, c, dir, nc)
                          ? (nc[2] * grid[1] + nc[1]) * grid[0] + nc[0]
                          : -1;
        if (x->nbr[dir] < 0)
            continue;
        int64_t cnt = lul_node_count(d->ex, d->ey, d->ez, dir) * LUL_XCH_MAX_FIELDS;
        int     f   = lul_dir_face(dir);
        if (f >= 0 && lul_face_count(d->ex, d->ey, d->ez, f) * 3 > cnt)
            cnt = lul_face_count(d->ex, d->ey, d->ez, f) * 3;
        x->cap += cnt;
    }
    size_t bytes = sizeof(double) * (size_t)x->cap;
    x->dsend     = lul_dev_alloc(bytes);
    x->drecv     = lul_dev_alloc(bytes);
    const char *env = getenv("LULESH_STAGED");
    staged          = !app_cuda_aware && (lul_backend == LUL_CUDA || (env && *env && *env != '0'));
    x->hsend        = staged ? lul_pinned_alloc(bytes) : x->dsend;
    x->hrecv        = staged ? lul_pinned_alloc(bytes) : x->drecv;
    if (!x->dsend || !x->drecv || !x->hsend || !x->hrecv)
        die("exchange buffer allocation");
}

static void xch_free(xch_t *x)
{
    if (staged) {
        lul_pinned_release(x->hsend);
        lul_pinned_release(x->hrecv);
    }
    lul_dev_release(x->dsend);
    lul_dev_release(x->drecv);
}

/* ---- the run -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    lul_opts_t opt = lul_parse(argc, argv, rank);
    lul_fuse(); /* LULESH_FUSE, LULESH_NODECOPY and LULESH_EOS_SPLIT checked before the run */
    lul_node_copy_ring();
    (void)lul_eos_split(0);
    select_device();

    /* a cube of ranks, rank = (plane * p + row) * p + col, as the reference's InitMeshDecomp */
    int p = (int)(cbrt((double)nprocs) + 0.5);
    if (p * p * p != nprocs) {
        if (rank == 0)
            printf("Num processors must be a cube of an integer (1, 8, 27, ...)\n");
        MPI_Abort(MPI_COMM_WORLD, -1);
    }
    int       grid[3] = {p, p, p}, c[3] = {rank % p, rank / p % p, rank / (p * p)};
    int64_t   n       = (int64_t)opt.s * p;
    lul_box_t b       = lul_box_of(n, grid, c);
    if (rank == 0)
        lul_print_banner(&opt, opt.s, nprocs, n);

    lul_domain_t dom, *d = &dom;
    if (lul_domain_init(d, n, b.ox, b.oy, b.oz, b.ex, b.ey, b.ez, opt.numReg, opt.balance,
                        opt.cost))
        die("domain allocation");
    if (opt.rot[0]) /* -rotate: as on the reference's ranks (here, with -rotate p: rank r's by r) */
        lul_rotate_costs(d, n, b.ox, b.oy, b.oz, b.ex, b.ey, b.ez, opt.rot);
    xch_t x;
    xch_init(&x, d, grid, c);
    d->gather_in_nodes = nprocs == 1; /* no node to sum with a neighbour */
    lul_fields_t mass  = {{d->nodalMass}, 1, 0};
    lul_fields_t force = {{d->fx, d->fy, d->fz}, 3, 0};
    lul_fields_t posv  = {{d->x, d->y, d->z, d->xd, d->yd, d->zd}, 6, 0};
    lul_fields_t grad  = {{d->delv_xi, d->delv_eta, d->delv_zeta}, 3, 0};
    xch_nodes(&x, mass, 1);
    app_sync_stream();
    MPI_Barrier(MPI_COMM_WORLD);

    lul_fuse_t ff = force_fuse(&x);
    double     t0 = MPI_Wtime();
    int        pending = 0; /* the last cycle's constraints are on their way to d->out */
    while (d->time < d->stoptime && d->cycle < opt.its) {
        /* The forces need no time step: they start before the host waits for the last cycle's
         * constraints and takes the global minimum (as LLNL's CUDA port does), which hides the
         * wait and the reduction behind them. */
        lul_stage_force(app_stream, d, &ff);
        if (pending)
            wait_constraints(d, rank);
        double local[2] = {d->out->dtcourant, d->out->dthydro}, global[2] = {1e20, 1e20};
        if (d->cycle > 0)
            MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        lul_time_increment(d, global[0], global[1]);

        stages_3_4a(&x, d, force, posv, grad, ff.send != NULL);
        lul_stage_eos(app_stream, d);
        record_constraints();
        pending = 1;
        if (rank == 0)
            lul_print_progress(&opt, d->cycle, d->time, d->deltatime);
    }
    if (pending)
        wait_constraints(d, rank);
    double elapsed = MPI_Wtime() - t0, elapsed_max = 0;
    MPI_Reduce(&elapsed, &elapsed_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    int status = 0;
    if (rank == 0) {
        /* rank 0 holds the origin and the plane the reference checks (its own plane 0) */
        int64_t m     = opt.s;
        double *plane = malloc(sizeof(double) * (size_t)(m * m));
        if (!plane)
            die("malloc");
        for (int64_t j = 0; j < m; j++)
            lul_copy_from_dev(plane + j * m, d->e + j * d->ex, sizeof(double) * (size_t)m);
        lul_report_t r = {.prog = "mpi", .backend = lul_backend == LUL_CUDA ? "cuda" : "host",
                          .size = m, .n = n, .domains = nprocs, .procs = nprocs, .ppn = 1,
                          .odf = 0, .cycles = d->cycle, .origin_e = plane[0], .plane = plane,
                          .elapsed = elapsed_max};
        status = lul_report_print(&r, &opt);
        free(plane);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    xch_free(&x);
    lul_domain_free(d);
    MPI_Finalize();
    return status;
}
