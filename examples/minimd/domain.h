/*
 * domain.h — the subdomain both MiniMD programs keep (minimd_mpi one per rank, minimd_tess one
 * per chare): its box, atoms, neighbor lists, bins and the lists of atoms it sends, and the
 * functions on it that do not depend on how messages travel. Device memory comes from the
 * driver's allocator (mmd_mem), so these run the same on both.
 */
#ifndef MINIMD_DOMAIN_H
#define MINIMD_DOMAIN_H

#include "minimd.h"

/* Memory and ordering, set by the driver before any call below. `stream` is the subdomain's
 * stream (minimd_mpi: its one stream; the calls may ignore it). */
typedef struct mmd_mem {
    void *(*dev_alloc)(size_t bytes);    /* device memory, or the job ends */
    void *(*pinned_alloc)(size_t bytes); /* pinned host memory, or the job ends */
    void  (*dev_free)(void *p);
    void  (*pinned_free)(void *p);
    void  (*copy)(void *dst, const void *src, size_t bytes, void *stream); /* ordered on stream */
    void  (*sync)(void *stream);                                          /* wait for stream */
} mmd_mem_t;

extern mmd_mem_t mmd_mem;

typedef struct mmd_dom {
    int        c[3], grid[3]; /* its coordinates in the grid of subdomains, and that grid */
    double     L[3];          /* the box */
    double     lo[3], hi[3];
    int64_t    nlocal, nghost, cap_all, cap_own;
    double    *x, *v, *f, *eatom, *watom;
    int       *neigh, *numneigh, maxneigh;
    int64_t    neigh_cap, neigh_alloc, stride;
    mmd_bins_t bins;
    int       *bincount, *binatoms, *status, *dcount, *scratch, *hstatus, *hcount;
    int64_t    bincount_cap, binatoms_cap;
    int       *xlist[2], *blist[3][2];
    int64_t    xlist_cap[2], blist_cap[3][2], bcount[3][2], roff[3][2], rcnt[3][2];
    double    *thermo_out, *hthermo;
    double     t_force, t_neigh;
} mmd_dom_t;

/* Make *p hold at least `need` elements of `elem` bytes (with headroom), keeping the first
 * `keep`; the old buffer is freed once the stream has drained (nothing may still read it).
 * mmd_grow: device memory; mmd_grow_pinned: pinned host memory. */
void mmd_grow(void *stream, void **p, int64_t *cap, int64_t need, int64_t keep, size_t elem);
void mmd_grow_pinned(void *stream, void **p, int64_t *cap, int64_t need, int64_t keep,
                     size_t elem);

/* Room for need_all atoms (owned and ghosts: positions) and need_own owned ones (velocities,
 * forces, per-atom energy and virial), keeping the first `keep` positions and velocities. */
void mmd_grow_atoms(void *stream, mmd_dom_t *c, int64_t need_all, int64_t need_own,
                    int64_t keep);

/* What an atom sent to the lower (s = 0) or upper neighbor along d adds to its coordinate: a
 * box length across the periodic boundary. */
double mmd_shift_of(const mmd_dom_t *c, int d, int s);

/* Enqueue the selection into list[k] (room for cap[k]) of the atoms of [0, n) with
 * a[k] <= x_d < b[k], k = 0, 1, and the copy of the two counts to c->hcount; the driver waits
 * for the stream and grows the lists and selects again when a count is above its room. */
void mmd_select_two(void *stream, mmd_dom_t *c, int d, int64_t n, const double a[2],
                    const double b[2], int *list[2], const int64_t cap[2]);

#endif
