/*
 * lulesh_tess.h — what the two files of lulesh_tess share: the chare (chare_t), the exchange
 * phases that size its buffers, the program's options, and the functions of chare_tess.c (the
 * chare's memory, exchange buffers, set-up and PUP, and its place in the chare grid) that the
 * cycle and main in lulesh_tess.c call.
 */
#ifndef LULESH_TESS_H
#define LULESH_TESS_H

#include "common.h"
#include "exchange.h"
#include "lulesh.h"

#include <stdint.h>
#include <tessera.h>

enum { PH_FORCE = 0, PH_POSVEL = 1, PH_MONOQ = 2, PH_MASS = 3, NPHASES = 4 };
/* Buffers: PH_MASS uses PH_FORCE's (1 field of its 3). */
enum { NBUFSETS = 3 };

/* The options besides the shared ones (common.h): the chare grid and load balancing. */
typedef struct lul_tess_opts {
    int64_t n;          /* global edge elements */
    int     cx, cy, cz; /* -d CXxCYxCZ (0: from -odf) */
    int     lb_period;  /* -lb K */
    int     lb_first;   /* -lbfirst F: the first step after cycle F (0: after cycle K) */
    int     stats;      /* -stats: per-process CPU figures and the placement's messages */
} lul_tess_opts_t;

typedef struct chare {
    int          c[3];
    lul_box_t    box;
    lul_domain_t d;
    int          nbr[27];          /* neighbour present in direction d */
    int          expect[NPHASES];  /* messages of a phase per cycle */
    int          got[NPHASES][2];  /* [phase][cycle parity] */
    int          waiting;          /* the phase whose messages the chare waits for, or -1 */
    int          cycle;            /* the cycle being computed (0: the nodal-mass sum) */
    char        *arena;            /* device: every array of the domain */
    size_t       arena_size;
    double      *xbuf;             /* device: every exchange buffer, one allocation */
    size_t       xbytes;
    int64_t      off[NBUFSETS][2][2][27]; /* [set][parity][send/recv][dir] in doubles, -1: none */
    const double *rat[NBUFSETS][2][27];   /* where a received message lies when taken in
                                           * place (the sender's buffer; chare_recv_at), NULL:
                                           * in xbuf at off[..][1][..] */
    double       dtmin[2];         /* this chare's contribution to the next reduction */
    _Atomic int64_t kernel_ns;     /* host backend: nanoseconds its kernels ran (executor threads) */
    int64_t      kernel_ns_step;   /* … at the last load-balancing step */
    int          force_ready;      /* the next cycle's forces are already enqueued */
    int          force_repack;     /* … but not packed into the buffers (new after a migration) */
    int          batched;          /* LULESH_LAUNCH=batch: a step segment is in its PE's batch */
    int          dt_pending;       /* … and the next cycle's minima came meanwhile: */
    double       dt_next[2];       /* … these, taken when it is out (on_segment_done) */
    uint32_t     gen;              /* buffers and arena: a new one, new step segments (seg_key) */
    lul_fuse_t   fz_force[2];      /* [parity]: stage 2's exchange work (lul_fuse_t) */
    lul_fuse_t   fz_nodes[2];      /* … stage 3's */
    int          held;             /* the phase ended with the minima of this cycle held */
    double       dt_held[2];
    int          lb_pe;            /* the PE it entered its last load-balancing step on */
    int          lb_moves;         /* steps after which it resumed on another PE */
} chare_t;

/* The run's options and chare grid (x, y, z): set by main before the array is created, read
 * everywhere after (lulesh_tess.c). */
extern lul_opts_t      opt;
extern lul_tess_opts_t topt;
extern int             grid3[3];

/* ---- chare_tess.c ---------------------------------------------------------------------------- */

/* Install lulesh.h's and exchange.h's hooks: domain arrays carved from the chare's arena, and
 * host-backend kernels timed into the load of the chare launching them (main, before the array
 * is created). */
void chare_hooks_install(void);
/* Kernels launched from now on by this thread count towards this chare's load (entries, at the
 * start of each; a step segment, before its launches). */
void chare_count_kernels(chare_t *c);
/* The part of the cycle (-stats, stats_tess.h's KP_*) the thread's next launches belong to. */
extern _Thread_local int kernel_part;

/* The array's constructor, destructor and PUP (tess_array_params_t). */
void chare_ctor(tess_ctx_h ctx, void *e, void *arg);
void chare_dtor(tess_ctx_h ctx, void *e, void *arg);
void chare_pup(tess_pup_h p, tess_ctx_h ctx, void *e);

/* Nodes (or element-face values) of buffer set `set` exchanged with direction d. */
int64_t chare_set_count(const chare_t *c, int set, int d);
/* The plan of one buffer set, parity and side (recv 0: sends) into *plan; the buffer it lies in,
 * or NULL when it has no message. */
double *chare_plan(chare_t *c, int set, int parity, int recv, lul_xch_plan_t *plan);
/* The buffer of one set, parity, side and direction. */
double *chare_xbuf(chare_t *c, int set, int parity, int recv, int d);
/* The message of one set, parity and direction lies at `src` (the sender's buffer, taken in
 * place), or, src NULL, in this chare's receive buffer: the receive plans read it there. A
 * change is a new layout (gen: the step segments that unpack are recorded again). */
void chare_recv_at(chare_t *c, int set, int parity, int d, const double *src);

/* The array index of the chare at c[] = (x, y, z) of the grid. */
tess_index_t chare_index(const int c[3]);
/* The grid of `parts` chares over n³ whose blocks have the least surface into g (x, y, z). */
void chare_grid(int parts, int64_t n, int g[3]);

#endif
