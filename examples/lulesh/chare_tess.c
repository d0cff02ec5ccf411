/*
 * chare_tess.c — lulesh_tess's chare (lulesh_tess.h): its memory, its exchange buffers, its
 * set-up and teardown, its PUP for migration and checkpoints, and its place in the chare grid.
 * The cycle it runs is lulesh_tess.c's.
 *
 * Who calls what: main installs the hooks (chare_hooks_install) and picks the grid (chare_grid)
 * before it creates the array; the constructor and destructor run on the main thread
 * (tess_array_create, tess_array_destroy); chare_pup runs where the runtime migrates,
 * checkpoints or restores the chare; the chare's entries (PE threads) launch its kernels through
 * launch_host and use its buffers (chare_plan, chare_xbuf); timed_kernel runs on the host
 * backend's executor threads.
 */
#include "lulesh_tess.h"
#include "stats_tess.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tessera.h>
#include <tessera/gpu.h>

#include "../common/app_tess.h"

static const int phase_fields[NBUFSETS] = {3, 6, 3};

/* ---- memory and load-timing hooks for lulesh.h --------------------------------------------------
 *
 * A chare's domain lives in one device allocation (its arena): the runtime migrates a few device
 * buffers per element, and one move is cheaper than forty. lul_domain_init allocates through
 * lul_dev_alloc, which carves the arena set up by the constructor; pointers into it are rebased
 * when the chare migrates. */

#define ARENA_ALIGN 256

static char  *arena_next, *arena_end; /* the arena being carved (constructor, main thread) */

static size_t arena_round(size_t b)
{
    return (b + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

/* Device bytes of a domain: lul_domain_init's allocations, each rounded up. */
static size_t arena_bytes(const lul_box_t *b, int numReg)
{
    return lul_domain_device_bytes(b->ex, b->ey, b->ez, numReg, ARENA_ALIGN);
}

static void *dom_dev_alloc(size_t bytes)
{
    void *p = NULL;
    if (arena_next) {
        if (arena_round(bytes) > (size_t)(arena_end - arena_next)) {
            fprintf(stderr, "lulesh_tess: the domain arena is too small (lul_domain_init "
                            "allocates more than lul_domain_device_bytes counts)\n");
            exit(1);
        }
        p = arena_next;
        arena_next += arena_round(bytes);
        return p;
    }
    if (tess_gpu_malloc(&p, bytes ? bytes : 8) != TESS_OK)
        return NULL;
    return p;
}
static void dom_dev_release(void *p)
{
    (void)p; /* the domain's arrays go with its arena */
}
static void *dom_pinned_alloc(size_t bytes)
{
    void *p = NULL;
    if (tess_gpu_malloc_host(&p, bytes ? bytes : 8) != TESS_OK)
        return NULL;
    return p;
}
static void dom_pinned_release(void *p)
{
    if (p)
        tess_gpu_free_host(p);
}

/* Load balancing on measured time. On the host backend a chare's "kernels" run on executor
 * threads that interleave every stream of the process, so timing events around a chare's work
 * would also count the other chares' kernels run in between: instead each kernel is timed as it
 * runs (CPU time of the executor thread) and added to its chare's load, which the chare hands to
 * the balancer (tess_set_load). On a GPU the runtime times stream work itself
 * (TESS_LB_GPU_TIME=1). Kernels are enqueued by entry methods, so the chare is the one whose
 * entry runs on the launching thread. */
static _Thread_local _Atomic int64_t *kernel_load;
_Thread_local int                      kernel_part; /* -stats: the part of the cycle launching */

typedef struct timed_args {
    lul_host_fn_t    fn;
    _Atomic int64_t *load;
    int              part;
    _Alignas(16) unsigned char args[200];
} timed_args_t;

static int64_t thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The chare reads its counter while its next kernels may run: hence the atomic. The counter and
 * the part are taken at launch (launch_host) from the thread-locals the chare's step segment
 * sets (chare_count_kernels): a segment replayed from its recording (app_segment) counts to the
 * chare that recorded it, which is this one (recordings are per chare and dropped when it
 * migrates). */
static void timed_kernel(void *p)
{
    timed_args_t *a  = p;
    int64_t       t0 = thread_ns();
    a->fn(a->args);
    int64_t ns = thread_ns() - t0;
    atomic_fetch_add_explicit(a->load, ns, memory_order_relaxed);
    lul_stats_kernel(a->part, ns);
}

static void launch_host(void *stream, lul_host_fn_t fn, const void *args, size_t size)
{
    tess_status_t st;
    if (kernel_load && size <= sizeof(((timed_args_t *)0)->args)) {
        timed_args_t a;
        memset(&a, 0, sizeof(a)); /* no stray padding bytes: recorded arguments compare equal */
        a.fn   = fn;
        a.load = kernel_load;
        a.part = kernel_part;
        memcpy(a.args, args, size);
        st = tess_gpu_launch_host(stream, timed_kernel, &a, offsetof(timed_args_t, args) + size);
    } else {
        st = tess_gpu_launch_host(stream, fn, args, size);
    }
    if (st != TESS_OK)
        app_tess_fail("launch");
}

/* Kernels launched from now on count towards this chare's load (see kernel_load). */
void chare_count_kernels(chare_t *c)
{
    kernel_load = (topt.lb_period || topt.stats) && tess_gpu_backend() == TESS_GPU_HOST
                      ? &c->kernel_ns
                      : NULL;
}

void chare_hooks_install(void)
{
    lul_host_launch     = launch_host;
    lul_xch_host_launch = launch_host;
    lul_dev_alloc       = dom_dev_alloc;
    lul_dev_release     = dom_dev_release;
    lul_pinned_alloc    = dom_pinned_alloc;
    lul_pinned_release  = dom_pinned_release;
}

/* ---- exchange buffers ------------------------------------------------------------------------ */

/* Whether a buffer set's messages carry face rings only (the node-copy: lul_node_copy_ring). */
static int set_ring(int set)
{
    return set == PH_POSVEL && lul_node_copy_ring();
}

int64_t chare_set_count(const chare_t *c, int set, int d)
{
    const lul_box_t *b = &c->box;
    if (set == PH_MONOQ) {
        int f = lul_dir_face(d);
        return f < 0 ? 0 : lul_face_count(b->ex, b->ey, b->ez, f);
    }
    return lul_node_count_of(b->ex, b->ey, b->ez, d, set_ring(set));
}

static void fuse_setup(chare_t *c);

static void xbuf_alloc(chare_t *c)
{
    int64_t total = 0;
    for (int s = 0; s < NBUFSETS; s++)
        for (int p = 0; p < 2; p++)
            for (int r = 0; r < 2; r++)
                for (int d = 0; d < 27; d++) {
                    int64_t n  = chare_set_count(c, s, d);
                    /* element ghosts land in the ghost slabs themselves (xch_post) */
                    int ok = c->nbr[d] && n > 0 && !(s == PH_MONOQ && r) &&
                             (s != PH_POSVEL || (r ? lul_xch_sync_recvs(d) : lul_xch_sync_sends(d)));
                    c->off[s][p][r][d] = ok ? total : -1;
                    if (r)
                        c->rat[s][p][d] = NULL;
                    if (ok)
                        total += n * phase_fields[s];
                }
    c->xbytes = (size_t)(total ? total : 1) * sizeof(double);
    if (tess_gpu_malloc((void **)&c->xbuf, c->xbytes) != TESS_OK)
        app_tess_fail("exchange buffers");
    fuse_setup(c);
    c->gen++;
}

double *chare_plan(chare_t *c, int set, int parity, int recv, lul_xch_plan_t *plan)
{
    int any    = 0;
    plan->ring = set_ring(set);
    plan->pad  = 0;
    for (int d = 0; d < 27; d++)
        any |= (plan->off[d] = c->off[set][parity][recv][d]) >= 0;
    if (!any || !recv)
        return any ? c->xbuf : NULL;
    /* Received messages taken in place lie in their senders' buffers: the plan's base is then
     * the lowest address of all, and each offset counts from there (the kernels add it to the
     * base: one flat address space of the device, whichever allocation it lands in). */
    uintptr_t base = (uintptr_t)c->xbuf;
    for (int d = 0; d < 27; d++)
        if (plan->off[d] >= 0 && c->rat[set][parity][d] &&
            (uintptr_t)c->rat[set][parity][d] < base)
            base = (uintptr_t)c->rat[set][parity][d];
    for (int d = 0; d < 27; d++) {
        if (plan->off[d] < 0)
            continue;
        uintptr_t at = c->rat[set][parity][d]
                           ? (uintptr_t)c->rat[set][parity][d]
                           : (uintptr_t)(c->xbuf + c->off[set][parity][1][d]);
        plan->off[d] = (int64_t)((at - base) / sizeof(double));
    }
    return (double *)base;
}

void chare_recv_at(chare_t *c, int set, int parity, int d, const double *src)
{
    if (c->rat[set][parity][d] == src)
        return;
    c->rat[set][parity][d] = src;
    /* The node stage's fused node-sum reads this parity's receive plan (through a pointer, on
     * the host backend when the kernel runs): only that plan changes, whole, and nothing
     * enqueued reads it (a parity's messages are all posted before the stage that sums them,
     * and its previous one ran before they were sent). The other plans are still read by work
     * in flight. */
    if (set == PH_FORCE && (lul_fuse() & LUL_FUSE_SUMS)) {
        lul_xch_plan_t plan;
        double        *recv            = chare_plan(c, PH_FORCE, parity, 1, &plan);
        c->fz_nodes[parity].rplan = plan;
        c->fz_nodes[parity].recv  = recv;
    }
    c->gen++;
}

double *chare_xbuf(chare_t *c, int set, int parity, int recv, int d)
{
    return c->xbuf + c->off[set][parity][recv][d];
}

/* The stages' exchange work of each parity (LULESH_FUSE), kept in the chare: the host stages
 * read it when they run, and a replayed segment with it. */
static void fuse_setup(chare_t *c)
{
    for (int par = 0; par < 2; par++) {
        lul_fuse_t *ff = &c->fz_force[par], *fn = &c->fz_nodes[par];
        *ff = *fn = (lul_fuse_t){.recv = NULL};
        if (lul_fuse() & LUL_FUSE_FORCE)
            ff->send = chare_plan(c, PH_FORCE, par, 0, &ff->splan);
        if (lul_fuse() & LUL_FUSE_SUMS)
            fn->recv = chare_plan(c, PH_FORCE, par, 1, &fn->rplan);
        if (lul_fuse() & LUL_FUSE_COPY)
            fn->send = chare_plan(c, PH_POSVEL, par, 0, &fn->splan);
    }
}

/* ---- set-up ---------------------------------------------------------------------------------- */

/* The chare's domain in a new arena: fields, constants and initial state (c->box set). */
static void chare_setup(chare_t *c)
{
    c->arena_size = arena_bytes(&c->box, opt.numReg);
    if (tess_gpu_malloc((void **)&c->arena, c->arena_size) != TESS_OK)
        app_tess_fail("domain allocation");
    arena_next = c->arena;
    arena_end  = c->arena + c->arena_size;
    int rc = lul_domain_init(&c->d, topt.n, c->box.ox, c->box.oy, c->box.oz, c->box.ex, c->box.ey,
                             c->box.ez, opt.numReg, opt.balance, opt.cost);
    arena_next = arena_end = NULL;
    if (rc != 0)
        app_tess_fail("domain set-up");
    if (opt.rot[0]) /* -rotate: lulesh.h's regions are the same for every decomposition */
        lul_rotate_costs(&c->d, topt.n, c->box.ox, c->box.oy, c->box.oz, c->box.ex, c->box.ey,
                         c->box.ez, opt.rot);
}

void chare_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    chare_t     *c  = e;
    tess_index_t ix = tess_ctx_index(ctx);
    c->c[0] = ix.z, c->c[1] = ix.y, c->c[2] = ix.x; /* see chare_index */
    c->box   = lul_box_of(topt.n, grid3, c->c);
    chare_setup(c);
    for (int d = 0; d < 27; d++)
        c->nbr[d] = lul_dir_neighbor(grid3, c->c, d, NULL);
    for (int d = 0; d < 27; d++) {
        c->expect[PH_MASS] += c->nbr[d];
        c->expect[PH_FORCE] += c->nbr[d];
        c->expect[PH_POSVEL] += c->nbr[d] && lul_xch_sync_recvs(d);
    }
    for (int f = 0; f < 6; f++)
        c->expect[PH_MONOQ] += c->nbr[lul_face_dir(f)];
    c->d.gather_in_nodes = c->expect[PH_FORCE] == 0; /* no node to sum with a neighbour */
    c->waiting = -1;
    xbuf_alloc(c);
}

void chare_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    chare_t *c = e;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    lul_domain_free(&c->d);
    tess_gpu_free(c->arena);
    tess_gpu_free(c->xbuf);
}

/* ---- checkpoints and migration (PUP) --------------------------------------------------------- */

/* The fields a checkpoint holds, as runs of the arena (lul_domain_init allocates the fields in
 * this order, so each run is one stretch): every node field (coordinates, velocities, the next
 * cycle's forces, which are computed before the checkpoint, and the summed nodal mass); e, p, q;
 * v; ss (read by the next cycle's hourglass forces). Every other field is a set-up constant
 * (volo, elemMass, connectivity, boundary conditions, regions) or written in a cycle before it
 * is read (ql, qq, vnew, delv, vdov, arealg, the gradients, the corner forces). */
enum { CKPT_RUNS = 5 };

static void ckpt_runs(lul_domain_t *d, char *start[CKPT_RUNS], size_t len[CKPT_RUNS])
{
    size_t nn = (size_t)d->numNode * sizeof(double), ne = (size_t)d->numElem * sizeof(double);
    start[0] = (char *)d->x, len[0] = (size_t)((char *)d->zd + nn - start[0]);
    start[1] = (char *)d->nodalMass, len[1] = nn;
    start[2] = (char *)d->e, len[2] = (size_t)((char *)d->q + ne - start[2]);
    start[3] = (char *)d->v, len[3] = ne;
    start[4] = (char *)d->ss, len[4] = ne;
}

/* Checkpoint and restart: the fields a restart needs (ckpt_runs) and the pinned output block.
 * On restart the destructor has freed the constructed domain and the state bytes are the
 * checkpoint's: set the domain up again as the constructor does (the constants), keep the
 * saved host scalars, then copy the saved fields over. */
static void chare_pup_state(tess_pup_h p, tess_ctx_h ctx, chare_t *c)
{
    lul_domain_t *d = &c->d;
    tess_stream_t s = tess_ctx_stream(ctx);
    if (tess_pup_is_unpacking(p)) {
        lul_domain_t saved = *d;
        chare_setup(c);
        d->time = saved.time, d->deltatime = saved.deltatime, d->stoptime = saved.stoptime;
        d->dtmax = saved.dtmax, d->cycle = saved.cycle, d->einit = saved.einit;
        d->gather_in_nodes = saved.gather_in_nodes;
        d->scalars->deltatime = d->deltatime;
    }
    tess_pup_bytes(p, d->out, sizeof(lul_out_t));
    char  *start[CKPT_RUNS];
    size_t len[CKPT_RUNS];
    ckpt_runs(d, start, len);
    for (int r = 0; r < CKPT_RUNS; r++) {
        void *buf = start[r];
        tess_pup_device(p, &buf, len[r]);
        if (tess_pup_is_unpacking(p)) {
            if (tess_gpu_memcpy_async(start[r], buf, len[r], s) != TESS_OK ||
                tess_gpu_stream_sync(s) != TESS_OK)
                app_tess_fail("restoring a checkpoint");
            tess_gpu_free(buf);
        }
    }
    if (tess_pup_is_unpacking(p)) {
        xbuf_alloc(c);
        c->force_ready = 0; /* the next cycle's forces are computed again, from the above */
    }
}

/* Migration: the arena moves with its data and the domain's pointers into it are rebased; the
 * pinned output block and the exchange buffers (nothing in them is still to be read at a
 * load-balancing step but the next cycle's forces, packed again) are made anew; the host arrays
 * of the region sets move as bytes. A checkpoint saves less (chare_pup_state); the first bytes
 * say which of the two follows. */
void chare_pup(tess_pup_h p, tess_ctx_h ctx, void *e)
{
    chare_t      *c  = e;
    lul_domain_t *d  = &c->d;
    size_t        nr = (size_t)d->numReg, I = sizeof(int32_t);
    int32_t       ckpt = tess_pup_is_checkpointing(p) != 0;
    tess_pup_bytes(p, &ckpt, sizeof(ckpt));
    if (ckpt) {
        chare_pup_state(p, ctx, c);
        return;
    }
    if (tess_pup_is_packing(p)) {
        tess_gpu_stream_sync(tess_ctx_stream(ctx));
        tess_gpu_free(c->xbuf);
    }
    char *old = c->arena;
    tess_pup_device(p, (void **)&c->arena, c->arena_size);
    if (tess_pup_is_unpacking(p)) {
#define REBASE(f) (d->f = (void *)(c->arena + ((char *)d->f - old)))
        REBASE(x), REBASE(y), REBASE(z), REBASE(xd), REBASE(yd), REBASE(zd);
        REBASE(fx), REBASE(fy), REBASE(fz), REBASE(nodalMass);
        REBASE(e), REBASE(p), REBASE(q), REBASE(ql), REBASE(qq), REBASE(v), REBASE(volo);
        REBASE(vnew), REBASE(delv), REBASE(vdov), REBASE(arealg), REBASE(ss), REBASE(elemMass);
        REBASE(delv_xi), REBASE(delv_eta), REBASE(delv_zeta);
        REBASE(delx_xi), REBASE(delx_eta), REBASE(delx_zeta);
        REBASE(fx_elem), REBASE(fy_elem), REBASE(fz_elem);
        REBASE(nodelist), REBASE(lxim), REBASE(lxip), REBASE(letam), REBASE(letap);
        REBASE(lzetam), REBASE(lzetap), REBASE(elemBC);
        REBASE(regElemlist), REBASE(regStart), REBASE(regRep);
        REBASE(err), REBASE(red), REBASE(dev_scalars);
#undef REBASE
        /* A device array added to the domain and not rebased above would point into the old
         * arena: say so instead of computing with freed memory. (Within a process the new
         * arena may lie where the old one was, freed: then rebased pointers are there too and
         * the check cannot tell; moves between processes still make it.) */
        void *const *w       = (void *const *)d;
        int          overlap = c->arena < old + c->arena_size && old < c->arena + c->arena_size;
        for (size_t i = 0; !overlap && i < sizeof(*d) / sizeof(void *); i++)
            if ((char *)w[i] >= old && (char *)w[i] < old + c->arena_size) {
                fprintf(stderr, "lulesh_tess: lul_domain_t has a device pointer (word %zu) that "
                                "chare_pup does not rebase\n", i);
                exit(1);
            }
        d->h_regStart = malloc((nr + 1) * I);
        d->h_regRep   = malloc(nr * I);
        d->h_regOf    = malloc(nr * I);
        d->out        = dom_pinned_alloc(sizeof(lul_out_t));
        d->scalars    = dom_pinned_alloc(sizeof(lul_scalars_t));
        if (!d->h_regStart || !d->h_regRep || !d->h_regOf || !d->out || !d->scalars)
            app_tess_fail("migration");
    }
    tess_pup_bytes(p, d->h_regStart, (nr + 1) * I);
    tess_pup_bytes(p, d->h_regRep, nr * I);
    tess_pup_bytes(p, d->h_regOf, nr * I);
    tess_pup_bytes(p, d->out, sizeof(lul_out_t));
    tess_pup_bytes(p, d->scalars, sizeof(lul_scalars_t));
    if (tess_pup_is_packing(p)) {
        free(d->h_regStart);
        free(d->h_regRep);
        free(d->h_regOf);
        dom_pinned_release(d->out);
        dom_pinned_release(d->scalars);
    }
    if (tess_pup_is_unpacking(p)) {
        xbuf_alloc(c);
        c->force_repack = c->force_ready; /* the forces (in the arena) go to the new buffers */
    }
}

/* ---- the chare grid -------------------------------------------------------------------------- */

/* The array index of the chare at c[] = (x, y, z) of the grid is (z, y, x): its row-major
 * linear index is then (z * cy + y) * cx + x, the reference's numbering of its ranks, and the
 * default block placement gives each process a slab of the mesh along z. */
tess_index_t chare_index(const int c[3])
{
    return tess_idx3(c[2], c[1], c[0]);
}

/* The grid of `parts` chares over n³ whose blocks have the least surface. */
void chare_grid(int parts, int64_t n, int g[3])
{
    double best = -1;
    for (int a = 1; a <= parts; a++) {
        if (parts % a)
            continue;
        for (int b = 1; b <= parts / a; b++) {
            if ((parts / a) % b)
                continue;
            int c = parts / a / b;
            if (a > n || b > n || c > n)
                continue;
            double sx = (double)n / a, sy = (double)n / b, sz = (double)n / c;
            double surf = sx * sy + sy * sz + sx * sz;
            if (best < 0 || surf < best - 1e-9) {
                best = surf;
                g[0] = a, g[1] = b, g[2] = c;
            }
        }
    }
    if (best < 0) { /* more chares than elements along a side */
        fprintf(stderr, "lulesh_tess: %d chares do not fit a %lld^3 mesh\n", parts,
                (long long)n);
        exit(2);
    }
}
