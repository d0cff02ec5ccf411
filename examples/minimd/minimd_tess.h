/*
 * minimd_tess.h — what the two files of minimd_tess share: the chare (dom_t), the program's
 * options, problem and chare grid, and the functions of chare_tess.c (the chare's memory, set-up,
 * teardown and checkpoint PUP, and the initial lattice) that the step and main in minimd_tess.c
 * call.
 */
#ifndef MINIMD_TESS_H
#define MINIMD_TESS_H

#include "common.h"
#include "domain.h"
#include "minimd.h"

#include <stdint.h>
#include <tessera.h>

typedef struct dom {
    mmd_dom_t    m; /* what a subdomain of minimd_mpi has too (domain.h) */
    tess_index_t nbr[3][2];
    double      *sbuf[2][6][2], *rbuf[2][6][2]; /* [parity][stage][side] */
    int64_t      sbuf_cap[2][6][2], rbuf_cap[2][6][2], rcount[2][6][2];
    /* direct: where a ghost update of an ordinary step came (GHOST_*); src: the sender's
     * buffer of the last one taken in place (a new one starts a new layout, gen) */
    int          arrived[2][6][2], direct[2][6][2];
    const double *src[2][6][2];
    int          step, stage, target, waiting, nthermo;
    uint32_t     gen; /* atoms, lists and buffers: a new layout, new step segments (seg_key) */
} dom_t;

/* The run's options, problem, chare grid, array and thermo slots: set by main before the array
 * is created (or, for the array, by its creation), read everywhere after (minimd_tess.c). */
extern mmd_opts_t    opt;
extern mmd_problem_t pr;
extern int           cg[3];
extern tess_array_h  grid;
extern int           nslots;

/* ---- chare_tess.c ---------------------------------------------------------------------------- */

/* mmd_grow and mmd_grow_atoms that count a new layout (c->gen) when a buffer moves (the chare's
 * entries, on its stream). */
void dom_grow(dom_t *c, void *stream, void **p, int64_t *cap, int64_t need, int64_t keep,
              size_t elem);
void dom_grow_atoms(dom_t *c, void *stream, int64_t need_all, int64_t need_own, int64_t keep);

/* The array's constructor, destructor and PUP (tess_array_params_t). */
void dom_ctor(tess_ctx_h ctx, void *e, void *arg);
void dom_dtor(tess_ctx_h ctx, void *e, void *arg);
void dom_pup(tess_pup_h p, tess_ctx_h ctx, void *e);

/* The lattice of every local chare and the reference's velocities (main, after the array is
 * created; collective: MPI sums). */
void dom_lattice(void);

#endif
