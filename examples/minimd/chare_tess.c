/*
 * chare_tess.c — minimd_tess's chare (minimd_tess.h): its memory (the growth of its buffers,
 * counted as new layouts), its set-up and teardown, its PUP for checkpoints, and the initial
 * lattice of the local chares. The step it runs is minimd_tess.c's.
 *
 * Who calls what: the constructor and destructor run on the main thread (tess_array_create,
 * tess_array_destroy), dom_pup where the runtime checkpoints or restores the chare, dom_lattice
 * on the main thread before the first phase (plain MPI); dom_grow and dom_grow_atoms in the
 * chare's entries and post function (PE threads), and in dom_lattice.
 */
#include "minimd_tess.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>
#include <tessera/gpu.h>

#include "../common/app_tess.h"

/* ---- memory ---------------------------------------------------------------------------------- */

/* mmd_grow and mmd_grow_atoms that count a new layout (c->gen) when a buffer moves. */
void dom_grow(dom_t *c, void *stream, void **p, int64_t *cap, int64_t need, int64_t keep,
              size_t elem)
{
    void *old = *p;
    mmd_grow(stream, p, cap, need, keep, elem);
    c->gen += *p != old;
}

void dom_grow_atoms(dom_t *c, void *stream, int64_t need_all, int64_t need_own, int64_t keep)
{
    void *old[5] = {c->m.x, c->m.v, c->m.f, c->m.eatom, c->m.watom};
    mmd_grow_atoms(stream, &c->m, need_all, need_own, keep);
    c->gen += old[0] != c->m.x || old[1] != c->m.v || old[2] != c->m.f || old[3] != c->m.eatom ||
              old[4] != c->m.watom;
}

/* ---- set-up, teardown and checkpoints -------------------------------------------------------- */

static void dom_alloc(tess_ctx_h ctx, dom_t *c);

void dom_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    dom_t        *c  = e;
    tess_index_t  ix = tess_ctx_index(ctx);
    int           i3[3] = {ix.x, ix.y, ix.z};
    for (int d = 0; d < 3; d++) {
        c->m.c[d]    = i3[d];
        c->m.grid[d] = cg[d];
        c->m.L[d]    = pr.L[d];
        c->m.lo[d]   = mmd_bound(pr.L[d], cg[d], i3[d]);
        c->m.hi[d]   = mmd_bound(pr.L[d], cg[d], i3[d] + 1);
        for (int k = 0; k < 2; k++) {
            int n[3] = {i3[0], i3[1], i3[2]};
            n[d]     = (n[d] + (k ? 1 : -1) + cg[d]) % cg[d];
            c->nbr[d][k] = tess_idx3(n[0], n[1], n[2]);
        }
    }
    mmd_bins_setup(c->m.lo, c->m.hi, pr.cutneigh, opt.small ? 1 : 8, &c->m.bins);
    c->m.maxneigh = opt.small ? 4 : 100;
    dom_alloc(ctx, c);
}

/* What a chare allocates whatever its atoms. */
static void dom_alloc(tess_ctx_h ctx, dom_t *c)
{
    tess_stream_t s = tess_ctx_stream(ctx);
    c->m.status     = app_tess_dev_alloc(2 * sizeof(int));
    c->m.dcount     = app_tess_dev_alloc(2 * sizeof(int));
    c->m.scratch    = app_tess_dev_alloc(MMD_SCAN_SCRATCH * sizeof(int));
    c->m.thermo_out = app_tess_dev_alloc(MMD_THERMO_OUT * sizeof(double));
    c->m.hstatus    = app_tess_pinned_alloc(2 * sizeof(int));
    c->m.hcount     = app_tess_pinned_alloc(2 * sizeof(int));
    c->m.hthermo    = app_tess_pinned_alloc(3 * sizeof(double) * (size_t)nslots);
    int64_t c0      = opt.small ? 1 : 1024;
    for (int k = 0; k < 2; k++) {
        dom_grow(c, s, (void **)&c->m.xlist[k], &c->m.xlist_cap[k], c0, 0, sizeof(int));
        for (int d = 0; d < 3; d++)
            dom_grow(c, s, (void **)&c->m.blist[d][k], &c->m.blist_cap[d][k], c0, 0, sizeof(int));
    }
}

void dom_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    dom_t *c = e;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    void *dev[] = {c->m.x, c->m.v, c->m.f, c->m.eatom, c->m.watom, c->m.neigh, c->m.numneigh,
                   c->m.bincount,
                   c->m.binatoms, c->m.status, c->m.dcount, c->m.scratch, c->m.thermo_out};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        if (dev[i])
            tess_gpu_free(dev[i]);
    for (int k = 0; k < 2; k++) {
        tess_gpu_free(c->m.xlist[k]);
        for (int d = 0; d < 3; d++)
            tess_gpu_free(c->m.blist[d][k]);
        for (int p = 0; p < 2; p++)
            for (int st = 0; st < 6; st++) {
                if (c->sbuf[p][st][k])
                    tess_gpu_free(c->sbuf[p][st][k]);
                if (c->rbuf[p][st][k])
                    tess_gpu_free(c->rbuf[p][st][k]);
            }
    }
    tess_gpu_free_host(c->m.hstatus);
    tess_gpu_free_host(c->m.hcount);
    tess_gpu_free_host(c->m.hthermo);
}

/* Checkpoints only (the chares do not migrate), before a rebuild step: the owned atoms'
 * positions, velocities and forces (the next step's first half uses them). Restored, the chare
 * keeps its geometry, bins, counters and step, and makes everything else anew. */
void dom_pup(tess_pup_h p, tess_ctx_h ctx, void *e)
{
    dom_t *c = e;
    if (tess_pup_is_packing(p)) {
        fprintf(stderr, "minimd_tess: chares do not migrate\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (tess_pup_is_unpacking(p)) {
        dom_t keep = *c;
        memset(c, 0, sizeof(*c));
        memcpy(c->m.c, keep.m.c, sizeof(c->m.c));
        memcpy(c->m.grid, keep.m.grid, sizeof(c->m.grid));
        memcpy(c->m.L, keep.m.L, sizeof(c->m.L));
        memcpy(c->m.lo, keep.m.lo, sizeof(c->m.lo));
        memcpy(c->m.hi, keep.m.hi, sizeof(c->m.hi));
        memcpy(c->nbr, keep.nbr, sizeof(c->nbr));
        c->m.nlocal   = keep.m.nlocal;
        c->m.bins     = keep.m.bins;
        c->m.maxneigh = keep.m.maxneigh;
        c->step       = keep.step;
        c->nthermo    = keep.nthermo;
        c->gen        = keep.gen + 1;
        dom_alloc(ctx, c);
    }
    size_t n = (size_t)c->m.nlocal;
    tess_pup_device(p, (void **)&c->m.x, n * MMD_XW * sizeof(double));
    tess_pup_device(p, (void **)&c->m.v, n * 3 * sizeof(double));
    tess_pup_device(p, (void **)&c->m.f, n * 3 * sizeof(double));
    if (tess_pup_is_unpacking(p)) {
        c->m.cap_all = c->m.cap_own = c->m.nlocal;
        c->m.eatom   = app_tess_dev_alloc(n * sizeof(double));
        c->m.watom   = app_tess_dev_alloc(n * sizeof(double));
    }
}

/* ---- the initial lattice (plain MPI around the chares) --------------------------------------- */

/* The lattice: each local chare's sites, then the velocities centred and scaled over all of
 * them (MPI sums), then copied to the chares' device memory. */
typedef struct lattice {
    int      n;
    double **x, **v;
    int64_t *count;
    dom_t  **dom;
    tess_stream_t *stream;
} lattice_t;

static void lattice_make(tess_ctx_h ctx, void *e, void *arg)
{
    lattice_t *l = arg;
    dom_t     *c = e;
    if (mmd_lattice(&pr, c->m.lo, c->m.hi, &l->x[l->n], &l->v[l->n], &l->count[l->n]) != 0)
        app_tess_fail("lattice allocation");
    l->dom[l->n]    = c;
    l->stream[l->n] = tess_ctx_stream(ctx);
    l->n++;
}

/* Plain MPI: the lattice of every local chare and the reference's velocities. */
void dom_lattice(void)
{
    int64_t   nl = tess_array_num_local(grid);
    lattice_t l  = {0, calloc(nl, sizeof(double *)), calloc(nl, sizeof(double *)),
                    calloc(nl, sizeof(int64_t)), calloc(nl, sizeof(dom_t *)),
                    calloc(nl, sizeof(tess_stream_t))};
    tess_array_foreach(grid, lattice_make, &l);
    mmd_setup_velocities(&pr, l.n, l.v, l.count);
    double density = (double)pr.natoms / (pr.L[0] * pr.L[1] * pr.L[2]);
    for (int k = 0; k < l.n; k++) {
        dom_t  *c = l.dom[k];
        int64_t n = l.count[k], g = 1;
        for (int d = 0; d < 3; d++)
            g *= (int64_t)(c->m.hi[d] - c->m.lo[d] + 2 * pr.cutneigh) + 1;
        g = (int64_t)(density * (double)g);
        dom_grow_atoms(c, l.stream[k], opt.small ? n : 2 * g, opt.small ? n : n + n / 4 + 64, 0);
        tess_gpu_memcpy_async(c->m.x, l.x[k], sizeof(double) * MMD_XW * (size_t)n, l.stream[k]);
        tess_gpu_memcpy_async(c->m.v, l.v[k], sizeof(double) * 3 * (size_t)n, l.stream[k]);
        tess_gpu_stream_sync(l.stream[k]);
        c->m.nlocal = n;
        free(l.x[k]);
        free(l.v[k]);
    }
    free(l.x);
    free(l.v);
    free(l.count);
    free(l.dom);
    free(l.stream);
}
