/*
 * minimd_tess — MiniMD with Tessera: ODF chares per GPU in a 3-D grid over the box, each a
 * subdomain with its own stream. The time-step phase runs as entry methods: the same kernels and
 * the same phases as minimd_mpi, every exchange a device message whose header carries the step,
 * the stage and the direction (so two messages from one chare — 2 chares along a dimension —
 * or from itself are told apart; counts travel with the data), thermo sums gathered on chare
 * (0,0,0) and added in chare order (the same bits on every shape of the job). Lattice set-up and
 * the final report stay in plain MPI around tess_run.
 *
 * Stages of a step: 0-2 the ghost update along x, y, z; on rebuild steps 0-2 move atoms to their
 * new owners along x, y, z and 3-5 rebuild the ghosts. Messages land in receive buffers of
 * parity step % 2 (a neighbor is at most one step ahead), or straight in the ghost positions
 * when they are for the step the chare is in.
 *
 *   mpirun -np P minimd_tess [+ppn T] [-s N | -nx NX -ny NY -nz NZ] [-n STEPS] -odf N …
 *          [-checkpoint-every N -checkpoint-dir D] [-restart D]
 *
 * Checkpoints (examples/common/app_ckpt.h) are taken between phases, before a step that
 * rebuilds the neighbor lists (N is a multiple of the rebuild period): a chare's state is then
 * its owned atoms' positions, velocities and forces; ghosts, lists and buffers are made anew.
 *
 * This file holds the step (messages, rebuild and ordinary steps, thermo, phases), the restart
 * checks, the report and main; the chare itself (the growth of its buffers, its set-up,
 * teardown and checkpoint PUP, and the initial lattice) is chare_tess.c, behind minimd_tess.h.
 * main and the report run on the main thread; the entry methods, the post function and
 * start_phase on PE threads.
 */
#include "minimd_tess.h"

#include <limits.h>
#include <mpi.h>
#include <tessera.h>
#include <tessera/gpu.h>

#include "../common/app_ckpt.h"
#include "../common/app_tess.h"

typedef struct hdr {
    int32_t step, stage, dir; /* dir: 0 sent to the lower neighbor, 1 to the upper */
    int32_t proc;             /* the sender's process */
} hdr_t;

typedef struct thermo_note {
    int     step, slot;
    int64_t nlocal;
} thermo_note_t;

mmd_opts_t          opt;
mmd_problem_t       pr;
int                 cg[3] = {1, 1, 1}; /* chare grid */
tess_array_h        grid;
int                 nslots;
static tess_entry_t E_RESUME, E_ATOMS, E_ATOMS_BATCHED, E_ATOMS_IN_PLACE, E_COUNTED, E_NEIGH,
    E_THERMO_READY, E_THERMO;
/* The entry the ghost and atom messages go to (MINIMD_RECV). "atoms_inplace" (inplace, the
 * default; TESS_ENTRY_IN_PLACE): a ghost update from a chare of this process stays in the
 * sender's send buffer, and the segment that consumes it copies it into x from there, a copy
 * inside its step graph instead of a copy the runtime enqueues for each message. The sender
 * packs that buffer again two steps later, after it received this chare's ghosts of the next
 * step, which this chare sends after that segment: the symmetric exchange, double-buffered by
 * step parity, orders the read before the overwrite. "atoms" (each): the runtime copies each
 * message into the ghost positions. "atoms_batched" (batch; TESS_ENTRY_BATCH: a PE receiving
 * several of them from its own process at once enqueues all their copies as one copy operation
 * a stream). Such a post may run before the entries of messages that came before it: atoms_post
 * reads the chare's step, and one that has not advanced yet sends a ghost update of the next
 * step to the receive buffer instead of straight into x, which the consuming entry reads
 * through c->direct, kept per step parity; so its choice is never wrong, only sometimes the
 * slower one. Set once in main, before the phase. */
static tess_entry_t e_atoms;
static int          recv_in_place;

/* Where a ghost update of an ordinary step lies when its segment runs (c->direct). */
enum { GHOST_RBUF = 0, GHOST_DIRECT = 1, GHOST_IN_PLACE = 2 };

/* Process 0: the thermo table, filled by the reduction callback on chare (0,0,0). */
static mmd_thermo_row_t *rows;
static int               nrows, lost_atoms;
static double            t_end;

/* Chare (0,0,0)'s process: each thermo row's partial sums of every chare, [row][chare][4], and
 * how many are in. */
static double *thermo_parts;
static int    *thermo_nparts, nchares;

/* The program's state saved with a checkpoint: the options, the problem, the chare grid, the
 * step the run continues at, and the thermo rows so far (nrows of them follow). */
typedef struct mmd_saved {
    mmd_opts_t    opt;
    mmd_problem_t pr;
    int32_t       cg[3], step, nrows, pad;
} mmd_saved_t;

static int is_rebuild(int step)
{
    return step % pr.reneigh == 0;
}


static void begin_step(tess_ctx_h ctx, dom_t *c);
static void exch_stage(tess_ctx_h ctx, dom_t *c);
static void border_stage(tess_ctx_h ctx, dom_t *c);
static void step_on(tess_ctx_h ctx, dom_t *c, int from);
static void build_neighbors(tess_ctx_h ctx, dom_t *c);

/* ---- messages ------------------------------------------------------------------------------- */

/* The two sends of a stage (to the lower and the upper neighbor), after the packing. */
static void send_two(tess_ctx_h ctx, dom_t *c, int d, const int64_t n[2], int width)
{
    int             p = c->step % 2;
    hdr_t           h[2];
    tess_dev_buf_t  b[2];
    tess_dev_send_t s[2];
    for (int k = 0; k < 2; k++) {
        h[k] = (hdr_t){c->step, c->stage, k, tess_process()};
        b[k] = (tess_dev_buf_t){c->sbuf[p][c->stage][k], (size_t)(n[k] * width) * sizeof(double)};
        s[k] = (tess_dev_send_t){grid, c->nbr[d][k], e_atoms, &h[k], sizeof(h[k]), &b[k], 1,
                                 NULL, NULL};
    }
    tess_send_device_many(s, 2, tess_ctx_stream(ctx));
    c->waiting = 1;
}

static void atoms_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                       const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)header_len;
    (void)nbufs;
    (void)stream_p;
    dom_t       *c    = e;
    const hdr_t *h    = header;
    int          p    = h->step % 2, from = 1 - h->dir, st = h->stage;
    /* A ghost update for the step this chare is in goes straight to the ghost positions: the
     * force of the step before is already enqueued, and the layout is that of the last rebuild.
     * Only from this process, whose copies are ordered on this chare's stream (an RDMA get from
     * another node is not, and could overwrite positions that force still reads). */
    if (!is_rebuild(h->step) && h->step == c->step && h->proc == tess_process() &&
        sizes[0] == (size_t)c->m.rcnt[st][from] * MMD_XW * sizeof(double)) {
        if (recv_in_place && dst[0]) { /* offered in place: left where it is */
            c->direct[p][st][from] = GHOST_IN_PLACE;
            if (c->src[p][st][from] != dst[0]) { /* the segment copies from elsewhere */
                c->src[p][st][from] = dst[0];
                c->gen++;
            }
        } else {
            dst[0]                 = c->m.x + MMD_XW * c->m.roff[st][from];
            c->direct[p][st][from] = GHOST_DIRECT;
        }
    } else {
        int64_t n = (int64_t)(sizes[0] / sizeof(double));
        dom_grow(c, tess_ctx_stream(ctx), (void **)&c->rbuf[p][st][from],
                 &c->rbuf_cap[p][st][from], n, 0, sizeof(double));
        dst[0]              = sizes[0] ? c->rbuf[p][st][from] : NULL;
        c->direct[p][st][from] = GHOST_RBUF;
    }
    c->rcount[p][st][from] = (int64_t)(sizes[0] / sizeof(double));
}

/* Consume the stage's two messages once both are in and this chare's own sends are out. */
static void try_consume(tess_ctx_h ctx, dom_t *c)
{
    int p = c->step % 2, st = c->stage;
    if (!c->waiting || !c->arrived[p][st][0] || !c->arrived[p][st][1])
        return;
    tess_stream_t s = tess_ctx_stream(ctx);
    c->waiting      = 0;
    c->arrived[p][st][0] = c->arrived[p][st][1] = 0;
    if (is_rebuild(c->step) && st < 3) { /* atoms moving in: MMD_MOVE_W doubles each */
        int64_t r0 = c->rcount[p][st][0] / MMD_MOVE_W, r1 = c->rcount[p][st][1] / MMD_MOVE_W;
        dom_grow_atoms(c, s, c->m.nlocal + r0 + r1, c->m.nlocal + r0 + r1, c->m.nlocal);
        mmd_unpack(s, c->rbuf[p][st][0], r0, c->m.x, c->m.v, c->m.nlocal);
        mmd_unpack(s, c->rbuf[p][st][1], r1, c->m.x, c->m.v, c->m.nlocal + r0);
        c->m.nlocal += r0 + r1;
        c->stage++;
        exch_stage(ctx, c);
    } else if (is_rebuild(c->step)) { /* new ghosts */
        int     d = st - 3;
        int64_t n = c->m.nlocal + c->m.nghost;
        c->m.rcnt[d][0] = c->rcount[p][st][0] / MMD_XW;
        c->m.rcnt[d][1] = c->rcount[p][st][1] / MMD_XW;
        c->m.roff[d][0] = n;
        c->m.roff[d][1] = n + c->m.rcnt[d][0];
        dom_grow_atoms(c, s, n + c->m.rcnt[d][0] + c->m.rcnt[d][1], 0, n);
        for (int k = 0; k < 2; k++)
            if (c->m.rcnt[d][k])
                tess_gpu_memcpy_async(c->m.x + MMD_XW * c->m.roff[d][k], c->rbuf[p][st][k],
                                      (size_t)c->m.rcnt[d][k] * MMD_XW * sizeof(double), s);
        c->m.nghost += c->m.rcnt[d][0] + c->m.rcnt[d][1];
        c->stage++;
        border_stage(ctx, c);
    } else { /* ghost positions: copied in by the next segment */
        step_on(ctx, c, st);
    }
}

static void on_atoms(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    dom_t       *c = e;
    const hdr_t *h = msg;
    c->arrived[h->step % 2][h->stage][1 - h->dir] = 1;
    if (h->step == c->step && h->stage == c->stage)
        try_consume(ctx, c);
}

/* ---- rebuild steps ---------------------------------------------------------------------------- */

/* Select into list[k] the atoms of [0, n) with a[k] <= x_d < b[k]; the counts come back to the
 * host, and on_counted goes on. */
static void select_two(tess_ctx_h ctx, dom_t *c, int d, int64_t n, const double a[2],
                       const double b[2], int *list[2], const int64_t cap[2])
{
    mmd_select_two(tess_ctx_stream(ctx), &c->m, d, n, a, b, list, cap);
    tess_gpu_then(ctx, E_COUNTED, NULL, 0);
}

static void exch_select(tess_ctx_h ctx, dom_t *c)
{
    int    d    = c->stage;
    double a[2] = {-INFINITY, c->m.hi[d]}, b[2] = {c->m.lo[d], INFINITY};
    select_two(ctx, c, d, c->m.nlocal, a, b, c->m.xlist, c->m.xlist_cap);
}

static void border_select(tess_ctx_h ctx, dom_t *c)
{
    int    d    = c->stage - 3;
    double a[2] = {c->m.lo[d], c->m.hi[d] - pr.cutneigh};
    double b[2] = {nextafter(c->m.lo[d] + pr.cutneigh, INFINITY), nextafter(c->m.hi[d], INFINITY)};
    select_two(ctx, c, d, c->m.nlocal + c->m.nghost, a, b, c->m.blist[d], c->m.blist_cap[d]);
}

/* Atoms that left go to the lower or upper neighbor along x, then y, then z (an atom that left
 * along two dimensions reaches its owner in two hops). Along a dimension of one chare the atoms
 * were wrapped into the box in place. */
static void exch_stage(tess_ctx_h ctx, dom_t *c)
{
    while (c->stage < 3 && cg[c->stage] == 1)
        c->stage++;
    if (c->stage == 3) {
        c->m.nghost = 0;
        border_stage(ctx, c);
        return;
    }
    exch_select(ctx, c);
}

static void border_stage(tess_ctx_h ctx, dom_t *c)
{
    if (c->stage == 6) {
        build_neighbors(ctx, c);
        return;
    }
    border_select(ctx, c);
}

static void on_counted(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    dom_t        *c   = e;
    tess_stream_t s   = tess_ctx_stream(ctx);
    int           st  = c->stage, p = c->step % 2, exch = st < 3;
    int           d   = exch ? st : st - 3;
    int         **lst = exch ? c->m.xlist : c->m.blist[d];
    int64_t      *cap = exch ? c->m.xlist_cap : c->m.blist_cap[d];
    int64_t       n[2] = {c->m.hcount[0], c->m.hcount[1]};
    if (n[0] > cap[0] || n[1] > cap[1]) { /* a list did not fit: grow it, select again */
        for (int k = 0; k < 2; k++)
            dom_grow(c, s, (void **)&lst[k], &cap[k], n[k], 0, sizeof(int));
        if (exch)
            exch_select(ctx, c);
        else
            border_select(ctx, c);
        return;
    }
    if (exch) {
        for (int k = 0; k < 2; k++) {
            dom_grow(c, s, (void **)&c->sbuf[p][st][k], &c->sbuf_cap[p][st][k],
                     MMD_MOVE_W * n[k], 0, sizeof(double));
            mmd_pack(s, c->m.x, c->m.v, lst[k], n[k], d, mmd_shift_of(&c->m, d, k),
                     c->sbuf[p][st][k]);
        }
        mmd_remove(s, c->m.x, c->m.v, lst[0], n[0], lst[1], n[1], c->m.nlocal);
        c->m.nlocal -= n[0] + n[1];
        send_two(ctx, c, d, n, MMD_MOVE_W);
        try_consume(ctx, c);
        return;
    }
    c->m.bcount[d][0] = n[0];
    c->m.bcount[d][1] = n[1];
    if (cg[d] == 1) { /* its own neighbor on both sides: the ghosts are packed in place */
        int64_t base = c->m.nlocal + c->m.nghost;
        c->m.rcnt[d][0] = n[1];
        c->m.rcnt[d][1] = n[0];
        c->m.roff[d][0] = base;
        c->m.roff[d][1] = base + n[1];
        dom_grow_atoms(c, s, base + n[0] + n[1], 0, base);
        mmd_pack(s, c->m.x, NULL, lst[1], n[1], d, mmd_shift_of(&c->m, d, 1),
                 c->m.x + MMD_XW * c->m.roff[d][0]);
        mmd_pack(s, c->m.x, NULL, lst[0], n[0], d, mmd_shift_of(&c->m, d, 0),
                 c->m.x + MMD_XW * c->m.roff[d][1]);
        c->m.nghost += n[0] + n[1];
        c->stage++;
        border_stage(ctx, c);
        return;
    }
    for (int k = 0; k < 2; k++) {
        dom_grow(c, s, (void **)&c->sbuf[p][st][k], &c->sbuf_cap[p][st][k], MMD_XW * n[k], 0,
                 sizeof(double));
        mmd_pack(s, c->m.x, NULL, lst[k], n[k], d, mmd_shift_of(&c->m, d, k), c->sbuf[p][st][k]);
    }
    send_two(ctx, c, d, n, MMD_XW);
    try_consume(ctx, c);
}

static void build_neighbors(tess_ctx_h ctx, dom_t *c)
{
    tess_stream_t s     = tess_ctx_stream(ctx);
    int64_t       nbins = (int64_t)c->m.bins.n[0] * c->m.bins.n[1] * c->m.bins.n[2];
    double        t     = 0;
    dom_grow(c, s, (void **)&c->m.bincount, &c->m.bincount_cap, nbins, 0, sizeof(int));
    dom_grow(c, s, (void **)&c->m.binatoms, &c->m.binatoms_cap, nbins * c->m.bins.cap, 0,
             sizeof(int));
    dom_grow(c, s, (void **)&c->m.numneigh, &c->m.neigh_cap, c->m.cap_own, 0, sizeof(int));
    dom_grow(c, s, (void **)&c->m.neigh, &c->m.neigh_alloc,
             (int64_t)c->m.maxneigh * c->m.cap_own, 0, sizeof(int));
    c->m.stride = c->m.cap_own;
    if (opt.timing) {
        tess_gpu_stream_sync(s);
        t = tess_wtime();
    }
    mmd_bin(s, c->m.x, c->m.nlocal + c->m.nghost, c->m.bins, c->m.bincount, c->m.binatoms,
            c->m.status);
    mmd_neighbor(s, c->m.x, c->m.nlocal, c->m.bins, c->m.bincount, c->m.binatoms,
                 pr.cutneigh * pr.cutneigh, c->m.neigh, c->m.numneigh, c->m.stride, c->m.maxneigh,
                 c->m.status);
    if (opt.timing) {
        tess_gpu_stream_sync(s);
        c->m.t_neigh += tess_wtime() - t;
    }
    tess_gpu_memcpy_async(c->m.hstatus, c->m.status, 2 * sizeof(int), s);
    tess_gpu_then(ctx, E_NEIGH, NULL, 0);
}

static void on_neigh(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    dom_t *c = e;
    if (c->m.hstatus[0] > c->m.bins.cap || c->m.hstatus[1] > c->m.maxneigh) {
        if (c->m.hstatus[0] > c->m.bins.cap)
            c->m.bins.cap = c->m.hstatus[0] + 2;
        else
            c->m.maxneigh = c->m.hstatus[1] + 8;
        build_neighbors(ctx, c);
        return;
    }
    step_on(ctx, c, 3); /* the force */
}

/* ---- ordinary steps ------------------------------------------------------------------------- */

/*
 * Step segments: a chare's stream work between two communication points, a function of (ctx,
 * chare, seg_step_t) run through app_segment, which may record its launches once and replay
 * them. A segment only enqueues stream work (no sends, continuations or waits, no change to the
 * chare's host state: step_on grows the buffers and advances the step around it), and its
 * launches' arguments depend on nothing but its key: the chare's layout generation (gen: every
 * rebuild and every buffer that moves starts a new one, so the atom counts, the send lists and
 * the buffers are those of the recording), the step parity (the buffers), which ghosts landed in
 * place, and the parts it runs (all of seg_step_t). dt and dtforce are constants of the run.
 *
 * On an ordinary step a segment runs from a communication point to the next: the ghosts of the
 * stage whose messages came in copied from the receive buffers (or, at the step's start, the
 * first integrate), the stages along dimensions of one chare in place, and the next stage's sends
 * packed; after the last stage the force, the final integrate and the next step's start up to its
 * first sends. A thermo step ends its segment after the thermo sums (their copy to the host and
 * the continuation come between two segments), and so does a step before a rebuild (whose kernels
 * alternate with host decisions, made after waiting for the stream: direct calls) or the end of a
 * phase. With --timing the force is a segment of its own, timed, and the final integrate and the
 * thermo sums another (SEG_FINAL). Slots: 2 (from + 1) + parity for from = -1 (the step's start)
 * … 3 (the force of a rebuild step); SEG_THERMO + parity for a segment with the thermo sums.
 */
enum { SEG_THERMO = 10, SEG_FINAL = 12 };
enum { PART_FORCE = 1, PART_FINAL = 2 };

typedef struct seg_step {
    int par, from, to;         /* step parity; ghosts of stage `from` (-1: the first integrate; 3:
                                * none) copied in, the stages before `to` in place, `to`'s packs */
    int force, thermo, final;  /* when to = 3: the PART_* of the force part */
    int next, next_to;         /* then the next step's start, up to the packs of stage next_to */
} seg_step_t;

/* The first stage from st on along a dimension of more than one chare (3: none). */
static int next_split(int st)
{
    while (st < 3 && cg[st] == 1)
        st++;
    return st;
}

static void seg_ghosts(tess_stream_t s, dom_t *c, int from, int to, int p)
{
    if (from < 0) {
        mmd_initial_integrate(s, c->m.x, c->m.v, c->m.f, c->m.nlocal, pr.dt, pr.dtforce);
    } else {
        for (int k = 0; k < 2; k++)
            if (c->direct[p][from][k] != GHOST_DIRECT && c->m.rcnt[from][k])
                app_tess_copy(c->m.x + MMD_XW * c->m.roff[from][k],
                              c->direct[p][from][k] == GHOST_IN_PLACE ? c->src[p][from][k]
                                                                      : c->rbuf[p][from][k],
                              (size_t)c->m.rcnt[from][k] * MMD_XW * sizeof(double), s);
    }
    for (int d = from + 1; d < to; d++) { /* its own neighbor: in place */
        mmd_pack(s, c->m.x, NULL, c->m.blist[d][1], c->m.bcount[d][1], d, mmd_shift_of(&c->m, d, 1),
                 c->m.x + MMD_XW * c->m.roff[d][0]);
        mmd_pack(s, c->m.x, NULL, c->m.blist[d][0], c->m.bcount[d][0], d, mmd_shift_of(&c->m, d, 0),
                 c->m.x + MMD_XW * c->m.roff[d][1]);
    }
    for (int k = 0; to < 3 && k < 2; k++)
        mmd_pack(s, c->m.x, NULL, c->m.blist[to][k], c->m.bcount[to][k], to,
                 mmd_shift_of(&c->m, to, k), c->sbuf[p][to][k]);
}

static void seg_step(tess_ctx_h ctx, void *e, void *arg)
{
    dom_t            *c = e;
    const seg_step_t *a = arg;
    tess_stream_t     s = tess_ctx_stream(ctx);
    if (a->from < 3)
        seg_ghosts(s, c, a->from, a->to, a->par);
    if (a->force & PART_FORCE)
        mmd_force(s, c->m.x, c->m.f, c->m.neigh, c->m.numneigh, c->m.stride, c->m.nlocal,
                  pr.cutforce * pr.cutforce, a->thermo ? c->m.eatom : NULL,
                  a->thermo ? c->m.watom : NULL);
    if ((a->force & PART_FINAL) && a->final)
        mmd_final_integrate(s, c->m.v, c->m.f, c->m.nlocal, pr.dtforce);
    if ((a->force & PART_FINAL) && a->thermo)
        mmd_thermo_sums(s, c->m.v, c->m.eatom, c->m.watom, c->m.nlocal, c->m.thermo_out);
    if (a->next)
        seg_ghosts(s, c, -1, a->next_to, 1 - a->par);
}

/* Room in the send buffers of stage `to` (none at 3) of parity p. */
static void grow_sends(dom_t *c, tess_stream_t s, int p, int to)
{
    for (int k = 0; to < 3 && k < 2; k++)
        dom_grow(c, s, (void **)&c->sbuf[p][to][k], &c->sbuf_cap[p][to][k],
                 MMD_XW * c->m.bcount[to][k], 0, sizeof(double));
}

static void run_step_segment(tess_ctx_h ctx, dom_t *c, const seg_step_t *a, int slot)
{
    int from = a->from, p = a->par;
    int direct = from >= 0 && from < 3 ? c->direct[p][from][0] | c->direct[p][from][1] << 2 : 0;
    uint64_t key = (uint64_t)c->gen << 24 | (uint64_t)direct << 20 | (uint64_t)a->next << 19 |
                   (uint64_t)a->next_to << 16 | (uint64_t)a->final << 15 |
                   (uint64_t)a->thermo << 14 | (uint64_t)a->force << 11 |
                   (uint64_t)(from + 1) << 6 | (uint64_t)a->to << 2 | (uint64_t)p;
    app_segment(ctx, slot, key, seg_step, (void *)a);
}

/* Step c->step goes on from the stage whose messages just came in (`from`; -1: an ordinary
 * step's start; 3: the force of a rebuild step) to its next communication point. */
static void step_on(tess_ctx_h ctx, dom_t *c, int from)
{
    tess_stream_t s = tess_ctx_stream(ctx);
    int           p = c->step % 2, n = c->step + 1;
    seg_step_t    a = {.par = p, .from = from, .to = from < 3 ? next_split(from + 1) : 3};
    grow_sends(c, s, p, a.to);
    if (a.to == 3 && !(opt.timing && from < 3)) { /* the force (timed: after the ghosts) */
        a.thermo = mmd_is_thermo(&opt, c->step);
        a.final  = c->step > 0;
        a.force  = opt.timing ? PART_FORCE : PART_FORCE | PART_FINAL;
        a.next   = !opt.timing && !a.thermo && n <= c->target && !is_rebuild(n) &&
                 next_split(0) < 3;
        a.next_to = a.next ? next_split(0) : 0;
        if (a.next)
            grow_sends(c, s, 1 - p, a.next_to);
    }
    int    slot = a.thermo ? SEG_THERMO + p : 2 * (from + 1) + p;
    double t    = 0;
    if (opt.timing && a.force) {
        tess_gpu_stream_sync(s);
        t = tess_wtime();
    }
    run_step_segment(ctx, c, &a, slot);
    if (a.to < 3) {
        c->stage = a.to;
        send_two(ctx, c, a.to, c->m.bcount[a.to], MMD_XW);
        try_consume(ctx, c);
        return;
    }
    if (!a.force) { /* --timing: the ghosts apart, then the force */
        step_on(ctx, c, 3);
        return;
    }
    if (opt.timing) {
        tess_gpu_stream_sync(s);
        c->m.t_force += tess_wtime() - t;
        seg_step_t f = {.par = p, .from = 3, .to = 3, .force = PART_FINAL, .thermo = a.thermo,
                        .final = a.final};
        run_step_segment(ctx, c, &f, SEG_FINAL + a.thermo);
    }
    if (a.thermo) { /* outside the segments: the slot changes from row to row */
        int slot = c->nthermo++ % nslots;
        tess_gpu_memcpy_async(c->m.hthermo + 3 * slot, c->m.thermo_out, 3 * sizeof(double), s);
        thermo_note_t note = {c->step, slot, c->m.nlocal};
        tess_gpu_then(ctx, E_THERMO_READY, &note, sizeof(note));
    }
    c->step++;
    if (a.next) { /* the next step's start ran in this segment: its first sends */
        c->stage = a.next_to;
        send_two(ctx, c, a.next_to, c->m.bcount[a.next_to], MMD_XW);
        try_consume(ctx, c);
    } else if (c->step <= c->target) {
        begin_step(ctx, c);
    }
}

static void begin_step(tess_ctx_h ctx, dom_t *c)
{
    tess_stream_t s = tess_ctx_stream(ctx);
    c->stage        = 0;
    if (is_rebuild(c->step)) {
        c->gen++; /* new counts and lists */
        if (c->step > 0)
            mmd_initial_integrate(s, c->m.x, c->m.v, c->m.f, c->m.nlocal, pr.dt, pr.dtforce);
        double wrap[3];
        for (int d = 0; d < 3; d++)
            wrap[d] = cg[d] == 1 ? pr.L[d] : 0.0;
        mmd_pbc(s, c->m.x, c->m.nlocal, wrap);
        exch_stage(ctx, c);
    } else {
        step_on(ctx, c, -1);
    }
}

/* ---- thermo and phases ---------------------------------------------------------------------- */

static void on_thermo_ready(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    dom_t               *c = e;
    const thermo_note_t *n = msg;
    double part[6] = {(double)tess_ctx_linear(ctx), (double)n->step, c->m.hthermo[3 * n->slot],
                      c->m.hthermo[3 * n->slot + 1], c->m.hthermo[3 * n->slot + 2],
                      (double)n->nlocal};
    tess_send(grid, tess_idx3(0, 0, 0), E_THERMO, part, sizeof(part));
}

static void on_thermo(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx;
    (void)e;
    (void)size;
    const double *m    = msg;
    int           step = (int)m[1];
    int           row  = step % opt.thermo ? nslots - 1 : step / opt.thermo;
    memcpy(&thermo_parts[((size_t)row * nchares + (size_t)m[0]) * 4], m + 2, 4 * sizeof(double));
    if (++thermo_nparts[row] < nchares)
        return;
    double s[5] = {0, 0, 0, 0, (double)step * nchares};
    for (int i = 0; i < nchares; i++)
        for (int k = 0; k < 4; k++)
            s[k] += thermo_parts[((size_t)row * nchares + i) * 4 + k];
    rows[nrows++] = mmd_thermo_row(&pr, step, s);
    if ((int64_t)(s[3] + 0.5) != pr.natoms)
        lost_atoms = 1;
    if (step == opt.steps && step > 0) {
        t_end = tess_wtime();
        tess_exit();
    }
}

static void on_resume(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    dom_t *c  = e;
    c->target = *(const int *)msg;
    if (c->step <= c->target)
        begin_step(ctx, c);
}

static int phase_target;
static void start_phase(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(grid, E_RESUME, &phase_target, sizeof(phase_target));
}

/* ---- restart options and the report (plain MPI around the chares) ---------------------------- */

/* A restart takes the problem from the checkpoint: an option given with another value is
 * refused. */
static void check_restart_options(int argc, char **argv, const mmd_opts_t *saved, int rank)
{
    mmd_opts_t g = mmd_parse(argc, argv, rank);
    char       a[64], b[64];
#define MMD_SAME(flag, field)                                                                   \
    if (app_arg_given(argc, argv, flag) && g.field != saved->field) {                          \
        snprintf(a, sizeof(a), "%d", g.field);                                                  \
        snprintf(b, sizeof(b), "%d", saved->field);                                             \
        app_ckpt_refuse(rank, flag, a, b);                                                      \
    }
    MMD_SAME("-s", nx)
    MMD_SAME("-s", ny)
    MMD_SAME("-s", nz)
    MMD_SAME("-nx", nx)
    MMD_SAME("-ny", ny)
    MMD_SAME("-nz", nz)
    MMD_SAME("-n", steps)
    MMD_SAME("-i", steps)
    MMD_SAME("--nsteps", steps)
    MMD_SAME("--thermo", thermo)
    MMD_SAME("-odf", odf)
    MMD_SAME("--small", small)
    MMD_SAME("--void", void_octant)
#undef MMD_SAME
    if (app_arg_given(argc, argv, "-d") && memcmp(g.p, saved->p, sizeof(g.p))) {
        snprintf(a, sizeof(a), "%dx%dx%d", g.p[0], g.p[1], g.p[2]);
        snprintf(b, sizeof(b), "%dx%dx%d", saved->p[0], saved->p[1], saved->p[2]);
        app_ckpt_refuse(rank, "-d", a, b);
    }
}


static void sync_dom(tess_ctx_h ctx, void *e, void *arg)
{
    (void)e;
    (void)arg;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
}

/* Kernel times and the neighbor count of the local chares (after a phase). */
static void sum_times(tess_ctx_h ctx, void *e, void *arg)
{
    dom_t  *c = e;
    double *t = arg;
    t[0] += c->m.t_force;
    t[1] += c->m.t_neigh;
    int *hn = malloc(sizeof(int) * (size_t)(c->m.nlocal ? c->m.nlocal : 1));
    if (!hn)
        app_tess_fail("malloc");
    tess_gpu_memcpy_async(hn, c->m.numneigh, sizeof(int) * (size_t)c->m.nlocal,
                          tess_ctx_stream(ctx));
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    int64_t n = 0;
    for (int64_t i = 0; i < c->m.nlocal; i++)
        n += hn[i];
    free(hn);
    t[2] += (double)n;
}


static int cmp_rows(const void *a, const void *b)
{
    return ((const mmd_thermo_row_t *)a)->step - ((const mmd_thermo_row_t *)b)->step;
}

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    app_tess_set_prog("minimd_tess");
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, NULL) != TESS_OK)
        app_tess_fail("tess_init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    app_ckpt_t   ck    = app_ckpt_args(&argc, argv, rank);
    mmd_saved_t *saved = NULL;
    opt = mmd_parse(argc, argv, rank);
    pr  = mmd_problem(opt.nx, opt.ny, opt.nz);
    pr.void_octant = opt.void_octant;
    if (ck.restart) {
        size_t n;
        saved = app_ckpt_read(&ck, "minimd", &n, rank);
        if (n < sizeof(*saved) || n != sizeof(*saved) + (size_t)saved->nrows * sizeof(*rows)) {
            if (rank == 0)
                fprintf(stderr, "cannot restart from %s: its program state is not this "
                                "program's\n", ck.restart);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        check_restart_options(argc, argv, &saved->opt, rank);
        const char *ref    = opt.ref;
        int         timing = opt.timing;
        opt                = saved->opt;
        opt.ref            = ref;
        opt.timing         = timing;
        pr                 = saved->pr;
    }
    if (ck.every && ck.every % pr.reneigh) {
        if (rank == 0)
            fprintf(stderr, "-checkpoint-every %d: checkpoints come before a step that rebuilds "
                            "the neighbor lists, every %d steps: give a multiple of %d\n",
                    ck.every, pr.reneigh, pr.reneigh);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#ifdef MINIMD_CUDA
    mmd_backend = tess_gpu_backend() == TESS_GPU_CUDA ? MMD_CUDA : MMD_HOST;
#endif
    mmd_host_launch = app_tess_launch_host;
    mmd_mem         = (mmd_mem_t){app_tess_dev_alloc, app_tess_pinned_alloc, app_tess_dev_free,
                                  app_tess_pinned_free, app_tess_copy, app_tess_sync};
    int gpus = app_count_gpus();
    if (saved)
        memcpy(cg, saved->cg, sizeof(cg)); /* the chares are the unit that moves: they stay */
    else
        mmd_grid(&opt, &pr, opt.odf * gpus, "chares", rank, cg);
    nslots  = mmd_thermo_rows(&opt);
    rows    = calloc((size_t)nslots, sizeof(*rows));
    nchares = cg[0] * cg[1] * cg[2];
    thermo_parts  = calloc((size_t)nslots * (size_t)nchares * 4, sizeof(double));
    thermo_nparts = calloc((size_t)nslots, sizeof(int));
    int step = 1; /* the next step to run */
    if (saved) {
        step  = saved->step;
        nrows = saved->nrows;
        memcpy(rows, saved + 1, (size_t)nrows * sizeof(*rows));
        free(saved);
    }

    if (tess_entry_register("resume", on_resume, &E_RESUME) != TESS_OK ||
        tess_entry_register_device("atoms", atoms_post, on_atoms, 0, &E_ATOMS) != TESS_OK ||
        tess_entry_register_device("atoms_batched", atoms_post, on_atoms, TESS_ENTRY_BATCH,
                                   &E_ATOMS_BATCHED) != TESS_OK ||
        tess_entry_register_device("atoms_inplace", atoms_post, on_atoms, TESS_ENTRY_IN_PLACE,
                                   &E_ATOMS_IN_PLACE) != TESS_OK ||
        tess_entry_register("counted", on_counted, &E_COUNTED) != TESS_OK ||
        tess_entry_register("neighbors", on_neigh, &E_NEIGH) != TESS_OK ||
        tess_entry_register("thermo_ready", on_thermo_ready, &E_THERMO_READY) != TESS_OK ||
        tess_entry_register("thermo", on_thermo, &E_THERMO) != TESS_OK)
        app_tess_fail("entry registration");
    const char *recv = getenv("MINIMD_RECV");
    if (recv && *recv && strcmp(recv, "each") && strcmp(recv, "batch") &&
        strcmp(recv, "inplace")) {
        if (rank == 0)
            fprintf(stderr, "minimd_tess: MINIMD_RECV=%s: expected each, batch or inplace\n",
                    recv);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    recv_in_place = !recv || !*recv || !strcmp(recv, "inplace");
    e_atoms       = recv && !strcmp(recv, "batch") ? E_ATOMS_BATCHED
                    : recv_in_place               ? E_ATOMS_IN_PLACE
                                                  : E_ATOMS;
    tess_array_params_t ap = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP,
        .name       = "minimd",
        .ndims      = 3,
        .extents    = {cg[0], cg[1], cg[2]},
        .elem_size  = sizeof(dom_t),
        .ctor       = dom_ctor,
        .dtor       = dom_dtor,
        .pup        = dom_pup,
    };
    if (tess_array_create(&ap, &grid) != TESS_OK)
        app_tess_fail("tess_array_create");

    if (ck.restart)
        app_ckpt_restore(&ck, "minimd", rank);
    else
        dom_lattice();

    /* Step 0 (exchange, ghosts, lists, force, thermo) as a phase of its own, then the timed
     * steps: a phase ends at each checkpoint. */
    double tz[3] = {0, 0, 0};
    if (!ck.restart) {
        phase_target = 0;
        if (tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_phase, NULL) != TESS_OK)
            app_tess_fail("tess_run");
        tess_array_foreach(grid, sync_dom, NULL);
        tess_array_foreach(grid, sum_times, tz); /* the set-up's share, taken off below */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0     = tess_wtime(), ckpt_s = 0;
    int    first  = step, nckpt = 0;
    while (step <= opt.steps) {
        int next = ck.every ? (step / ck.every + 1) * ck.every : INT_MAX;
        phase_target = next - 1 < opt.steps ? next - 1 : opt.steps;
        if (tess_run(phase_target == opt.steps ? TESS_RUN_UNTIL_EXIT : TESS_RUN_UNTIL_QUIESCENCE,
                     start_phase, NULL) != TESS_OK)
            app_tess_fail("tess_run");
        step = phase_target + 1;
        if (step <= opt.steps) { /* before step `step`, which rebuilds */
            size_t       n = sizeof(mmd_saved_t) + (size_t)nrows * sizeof(*rows);
            mmd_saved_t *sv = calloc(1, n);
            if (!sv)
                app_tess_fail("malloc");
            *sv = (mmd_saved_t){.opt = opt, .pr = pr, .cg = {cg[0], cg[1], cg[2]}, .step = step,
                                .nrows = nrows};
            sv->opt.ref = NULL;
            memcpy(sv + 1, rows, (size_t)nrows * sizeof(*rows));
            ckpt_s += app_ckpt_write(&ck, "minimd", sv, n, step, rank);
            nckpt++;
            free(sv);
        }
    }
    double tl[3] = {-tz[0], -tz[1], 0}, tsum[3];
    tess_array_foreach(grid, sum_times, tl);
    MPI_Reduce(tl, tsum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    int st = 0;
    if (rank == 0) {
        int    ns  = opt.steps - first + 1 > 0 ? opt.steps - first + 1 : 1;
        double per = opt.steps >= first ? (t_end - t0) / ns : 0;
        if (ck.every)
            printf("checkpoints: %d in %s, %.3f s (%.2f%% of the timed part)\n", nckpt, ck.dir,
                   ckpt_s, t_end > t0 ? 100 * ckpt_s / (t_end - t0) : 0.0);

        /* Kernel time summed over a GPU's chares (the --timing run only); the rest is not split. */
        double split[4] = {-1, -1, -1, -1};
        if (opt.timing) {
            split[0] = tsum[0] / gpus / ns * 1e3;
            split[1] = tsum[1] / gpus / ns * 1e3;
        }
        qsort(rows, (size_t)nrows, sizeof(*rows), cmp_rows);
        char config[256], fields[256];
        snprintf(config, sizeof(config), "%d processes x %d PEs, %d GPU(s), ODF %d: %d x %d x %d "
                 "chares, backend %s%s", nprocs, tess_ppn(), gpus, opt.odf, cg[0], cg[1], cg[2],
                 tess_gpu_backend_name(), opt.timing ? " (timing run)" : "");
        snprintf(fields, sizeof(fields), "procs=%d ppn=%d gpus=%d odf=%d chares=%dx%dx%d "
                 "backend=%s", nprocs, tess_ppn(), gpus, opt.odf, cg[0], cg[1], cg[2],
                 tess_gpu_backend_name());
        st = mmd_report("tess", &opt, &pr, rows, nrows, config, fields, per, split,
                        tsum[2] / (double)pr.natoms);
        if (lost_atoms) {
            printf("atoms: the count changed during the run: WRONG\n");
            st = 3;
        }
    }
    MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(rows);
    free(thermo_parts);
    free(thermo_nparts);
    tess_array_destroy(grid);
    tess_finalize();
    MPI_Finalize();
    return st;
}
