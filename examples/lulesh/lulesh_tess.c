/*
 * lulesh_tess — LULESH 2.0 with Tessera: a cx × cy × cz grid of chares over the global N³ mesh
 * (any grid: blocks differ by at most one element per side, so every ODF is a whole number of
 * chares at any GPU count), each chare a block with its own stream. Set-up and the final report
 * are plain MPI around tess_run; inside it each cycle is
 *
 *     dt (reduction result, broadcast) -> lul_time_increment -> (lul_stage_force: enqueued early)
 *       -> node-sum of fx, fy, fz with every neighbour          (device messages, PH_FORCE)
 *       -> lul_stage_nodes -> node-copy of x, y, z, xd, yd, zd   (PH_POSVEL)
 *       -> lul_stage_gradients -> ghosts of delv_xi/eta/zeta     (PH_MONOQ)
 *       -> lul_stage_eos (and the constraints) -> (stream drained: tess_gpu_then)
 *       -> contribute min(dtcourant), min(dthydro) -> broadcast to every chare: the next cycle
 *
 * The stream work between two of these exchanges is one step segment (app_segment: SEG_FORCE …
 * SEG_EOS below), whose launches' arguments are the same every cycle of its key (the buffer
 * parity): a runtime may record it once and replay it. With LULESH_LAUNCH=batch (and by
 * default, auto, where the chares are small: LUL_BATCH_GRAIN) the segments of a PE's chares go
 * into the PE's batches instead, one launch a kernel for all of them, the chares of a PE on one
 * stream.
 *
 * Every exchange is a device message whose header carries the phase, the cycle and the
 * receiver's direction of the sender; the post function names the receive buffer of that
 * (phase, cycle parity, direction). A neighbour one cycle ahead writes the other parity's
 * buffers and is counted under its own parity. Received data is unpacked only when all of a
 * phase is in, in ascending direction order, so sums do not depend on arrival order.
 * With -lb K every chare enters a load-balancing step (tess_at_sync) after every K-th cycle's
 * time constraints; chares migrate with all their device arrays (tess_pup_device).
 *
 *   mpirun -np P lulesh_tess [+ppn T] -g N [-odf K | -d CXxCYxCZ] [-i ITS] [-r R] [-b B] [-c C]
 *                            [-lb K] [-rotate P] [-verify CASE] (common.h has the rest)
 *                            [-checkpoint-every N -checkpoint-dir D] [-restart D]
 *
 * Checkpoints (examples/common/app_ckpt.h) are taken between phases: with them the run is a
 * phase per N cycles; each ends when the chares have the minima of a checkpoint's cycle and
 * hold them (dt_held) instead of starting the next cycle. A chare's state is then the fields a
 * restart needs (chare_pup_state: less than the arena a migration moves) and the held minima;
 * the next phase (E_RESUME) goes on from there.
 *
 * This file holds the cycle (step segments, exchanges, entry methods, reductions), the options
 * and restart checks, and main; the chare itself (its arena and timed kernels, its exchange
 * buffers, set-up, teardown and PUP, its place in the grid) is chare_tess.c, behind
 * lulesh_tess.h. main, the checkpoints between phases and the final report run on the main
 * thread; the entry methods, the step segments they enqueue and start_phase on PE threads.
 */
#include "lulesh_tess.h"
#include "stats_tess.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>
#include <tessera/gpu.h>

#include "../common/app_ckpt.h"
#include "../common/app_tess.h"

typedef struct xhdr {
    int32_t cycle;
    int16_t phase, dir; /* dir: the receiver's direction of the sender */
} xhdr_t;

lul_opts_t          opt;
lul_tess_opts_t     topt;
int                 grid3[3];
static tess_array_h chares;
static tess_entry_t E_START, E_XCH, E_DTREADY, E_DT, E_BALANCED, E_RESUME;
static int          stop_cycle = 1 << 30; /* a phase ends once the chares are at this cycle */
/* LULESH_RECV=inplace (the default; copy: every message copied into the receiver's buffers):
 * the node-sum and node-copy messages from chares of this process are taken in place
 * (TESS_ENTRY_IN_PLACE): the unpack reads them in the sender's buffer, and the runtime copies
 * nothing. The sender packs that buffer again two cycles later, after it received this chare's
 * forces of the next cycle, which this chare sends after the unpack (every neighbour sharing a
 * node exchanges forces both ways): the read comes first. Set once in main, before the phase. */
static int recv_in_place;

/* The program's state saved with a checkpoint. */
typedef struct lul_saved {
    lul_opts_t  opt;
    lul_tess_opts_t topt;
    int32_t     grid3[3], cycle;
} lul_saved_t;

/* ---- the cycle ------------------------------------------------------------------------------- */

static void fields_of(chare_t *c, int phase, lul_fields_t *fl)
{
    lul_domain_t *d = &c->d;
    memset(fl, 0, sizeof(*fl));
    switch (phase) {
    case PH_MASS:
        fl->f[0] = d->nodalMass;
        fl->nf   = 1;
        break;
    case PH_FORCE:
        fl->f[0] = d->fx, fl->f[1] = d->fy, fl->f[2] = d->fz;
        fl->nf   = 3;
        break;
    case PH_POSVEL:
        fl->f[0] = d->x, fl->f[1] = d->y, fl->f[2] = d->z;
        fl->f[3] = d->xd, fl->f[4] = d->yd, fl->f[5] = d->zd;
        fl->nf   = 6;
        break;
    default:
        fl->f[0] = d->delv_xi, fl->f[1] = d->delv_eta, fl->f[2] = d->delv_zeta;
        fl->nf   = 3;
        break;
    }
}

static int set_of(int phase)
{
    return phase == PH_MASS ? PH_FORCE : phase;
}

static void advance(tess_ctx_h ctx, chare_t *c);

/* The part of the cycle (-stats) an exchange phase's pack and unpack kernels belong to. */
static int part_of(int phase)
{
    return phase == PH_FORCE ? KP_FORCE : phase == PH_POSVEL ? KP_NODES
                                        : phase == PH_MONOQ  ? KP_GRAD
                                                             : KP_OTHER;
}


/* The pack (recv 0) or unpack (recv 1) of this phase's data of buffer parity `par` as a launch
 * (lul_xch_item_t; op NONE: nothing to do): the pack for every neighbour that gets it; the
 * unpack once everything of the phase is in, in ascending direction order (the same sums and
 * the same last copy whatever order the messages came in). The element ghosts are unpacked
 * where they land (xch_post). */
static void xch_item(chare_t *c, int phase, int par, int recv, lul_xch_item_t *x)
{
    const lul_box_t *b = &c->box;
    memset(x, 0, sizeof(*x));
    if (recv && (!c->expect[phase] || phase == PH_MONOQ))
        return;
    double *base = chare_plan(c, set_of(phase), par, recv, &x->plan);
    if (!recv && !base)
        return;
    fields_of(c, phase, &x->fl);
    x->ex = b->ex, x->ey = b->ey, x->ez = b->ez;
    x->buf = recv ? base : c->xbuf;
    x->op  = recv ? LUL_XCH_UNPACK_NODES : phase == PH_MONOQ ? LUL_XCH_PACK_ELEMS
                                                             : LUL_XCH_PACK_NODES;
    x->add = phase != PH_POSVEL;
}

/* That pack or unpack on stream s, outside a step segment (set-up, after a migration). */
static void xch_run(tess_stream_t s, chare_t *c, int phase, int par, int recv)
{
    lul_xch_item_t x;
    xch_item(c, phase, par, recv, &x);
    kernel_part = part_of(phase);
    lul_xch_item_run(s, &x);
}

/* Send this phase's data (packed by the step segment just enqueued) to every neighbour that
 * gets it in one tess_send_device_many, ordered after that segment; then wait for the phase. */
static void exchange(tess_ctx_h ctx, chare_t *c, int phase)
{
    tess_stream_t   s   = tess_ctx_stream(ctx);
    int             set = set_of(phase), par = c->cycle % 2;
    lul_fields_t    fl;
    lul_xch_plan_t  plan;
    xhdr_t          h[26];
    tess_dev_buf_t  buf[26][3];
    tess_dev_send_t send[26];
    int             n = 0;
    fields_of(c, phase, &fl);
    chare_plan(c, set, par, 0, &plan);
    for (int d = 0; d < 27; d++) {
        if (plan.off[d] < 0)
            continue;
        int nc[3] = {0, 0, 0};
        lul_dir_neighbor(grid3, c->c, d, nc);
        /* The element ghosts go one field a buffer, each straight into its ghost slab there. */
        int     nb  = phase == PH_MONOQ ? fl.nf : 1;
        int64_t cnt = chare_set_count(c, set, d) * (phase == PH_MONOQ ? 1 : fl.nf);
        h[n]        = (xhdr_t){c->cycle, (int16_t)phase, (int16_t)lul_dir_opposite(d)};
        for (int q = 0; q < nb; q++)
            buf[n][q] = (tess_dev_buf_t){c->xbuf + plan.off[d] + q * cnt,
                                         (size_t)cnt * sizeof(double)};
        send[n] = (tess_dev_send_t){chares, chare_index(nc), E_XCH, &h[n], sizeof(h[n]), buf[n],
                                    nb, NULL, NULL};
        n++;
    }
    if (n && tess_send_device_many(send, n, s) != TESS_OK)
        app_tess_fail("send");
    c->waiting = phase;
    advance(ctx, c);
}

/*
 * Step segments: a chare's stream work between two communication points of a cycle, described
 * by seg_describe and enqueued by seg_enqueue through app_segment, which may record its
 * launches once and replay them. A segment only enqueues stream work (no sends, continuations,
 * contributions or waits, no change to the chare's host state), and its launches' arguments
 * depend on nothing but its key: the buffer parity (the exchange buffers and lul_fuse_t it
 * uses), LULESH_FUSE (the kernels it chooses) and the chare's buffer generation (gen: new
 * buffers or arena after a migration or a restart). The time step reaches the kernels through
 * device memory (lul_scalars_t, copied by stage 3). Slots, one a segment and parity:
 *
 *   SEG_FORCE + par   stage 2 for a cycle of parity par, and the forces packed for its node-sum
 *                     (by stage 2 itself with LULESH_FUSE force, else a pack kernel)
 *   SEG_NODES + par   the node-sum unpacked (unless stage 3 adds it), stage 3 (the time step's
 *                     copy to the device first), the node-copy packed (unless stage 3 does)
 *   SEG_GRAD + par    the node-copy unpacked, stage 4a, the element ghosts packed
 *   SEG_EOS           stage 4b and 5 (the constraints into d->out)
 */
enum { SEG_FORCE = 0, SEG_NODES = 2, SEG_GRAD = 4, SEG_EOS = 6 };

static uint64_t seg_key(const chare_t *c, int par)
{
    return (uint64_t)c->gen << 16 | (uint64_t)lul_fuse() << 8 | (uint64_t)par;
}

/* A step segment of a chare as launches: an unpack, a stage and a pack (lul_xch_item_t op NONE:
 * not in this segment), each with the part of the cycle it counts to (-stats). */
typedef struct seg_plan {
    int               stage; /* LUL_STAGE_* */
    const lul_fuse_t *fz;    /* the stage's exchange work, or NULL */
    lul_xch_item_t    unpack, pack;
    int               unpack_part, stage_part, pack_part;
} seg_plan_t;

static void seg_describe(chare_t *c, int slot, int par, seg_plan_t *sp)
{
    static const int stage_of[4]      = {LUL_STAGE_FORCE, LUL_STAGE_NODES, LUL_STAGE_GRADIENTS,
                                         LUL_STAGE_EOS};
    static const int part_of_stage[4] = {KP_FORCE, KP_NODES, KP_GRAD, KP_EOS};
    int              unpack_phase = -1, pack_phase = -1;
    sp->stage      = stage_of[slot / 2];
    sp->stage_part = part_of_stage[slot / 2];
    sp->fz         = NULL;
    switch (slot) {
    case SEG_FORCE:
        sp->fz = &c->fz_force[par];
        if (!sp->fz->send)
            pack_phase = PH_FORCE;
        break;
    case SEG_NODES:
        if (!(lul_fuse() & LUL_FUSE_SUMS))
            unpack_phase = PH_FORCE;
        sp->fz = &c->fz_nodes[par];
        if (!sp->fz->send)
            pack_phase = PH_POSVEL;
        break;
    case SEG_GRAD:
        unpack_phase = PH_POSVEL;
        pack_phase   = PH_MONOQ;
        break;
    default:
        break;
    }
    memset(&sp->unpack, 0, sizeof(sp->unpack));
    memset(&sp->pack, 0, sizeof(sp->pack));
    sp->unpack_part = sp->pack_part = KP_OTHER;
    if (unpack_phase >= 0) {
        xch_item(c, unpack_phase, par, 1, &sp->unpack);
        sp->unpack_part = part_of(unpack_phase);
    }
    if (pack_phase >= 0) {
        xch_item(c, pack_phase, par, 0, &sp->pack);
        sp->pack_part = part_of(pack_phase);
    }
}

/* A step segment on the chare's stream: the record function of its step graph. */
typedef struct seg_arg {
    int slot, par;
} seg_arg_t;

static void seg_enqueue(tess_ctx_h ctx, void *e, void *arg)
{
    chare_t         *c = e;
    const seg_arg_t *a = arg;
    tess_stream_t    s = tess_ctx_stream(ctx);
    seg_plan_t       sp;
    seg_describe(c, a->slot, a->par, &sp);
    chare_count_kernels(c);
    kernel_part = sp.unpack_part;
    lul_xch_item_run(s, &sp.unpack);
    kernel_part = sp.stage_part;
    switch (sp.stage) {
    case LUL_STAGE_FORCE:
        lul_stage_force(s, &c->d, sp.fz);
        break;
    case LUL_STAGE_NODES:
        lul_stage_nodes(s, &c->d, sp.fz);
        break;
    case LUL_STAGE_GRADIENTS:
        lul_stage_gradients(s, &c->d);
        break;
    default:
        lul_stage_eos(s, &c->d);
        break;
    }
    kernel_part = sp.pack_part;
    lul_xch_item_run(s, &sp.pack);
}

static void run_segment(tess_ctx_h ctx, chare_t *c, int slot, int par)
{
    seg_arg_t a = {slot, slot == SEG_EOS ? 0 : par};
    app_segment(ctx, slot + a.par, seg_key(c, a.par), seg_enqueue, &a);
}

/*
 * LULESH_LAUNCH=batch: the four segments of a cycle go into their PE's batches instead
 * (tess_gpu_batch), one batch a segment: the same segment of every chare of the PE that reached
 * it by the batch's flush is one launch of each of its kernels (lul_xch_batch,
 * lul_stage_batch), and the chare goes on in on_segment_done. An item is the segment's launches
 * as data; on the host backend the flush launches the items one by one, each timed into its
 * chare's load.
 */
typedef struct seg_item {
    seg_plan_t       sp; /* its unpack and pack, which stage (sp.fz: the host's, not read) */
    lul_stage_item_t st;
    chare_t         *c;  /* host backend: the chare whose load its kernels count to */
} seg_item_t;
_Static_assert(sizeof(seg_item_t) <= TESS_GPU_BATCH_ITEM_MAX, "a segment's item is too large");

static int              launch_batched; /* batch, or auto at fine grain; set once in main */
static tess_gpu_batch_t B_SEG[4];       /* [slot / 2] */
/*
 * LULESH_LAUNCH=auto (the default) batches when the chares average at most this many elements:
 * on H100s, one process, a batched cycle took 0.77-0.88 × the time of one with a step graph a
 * chare at 32³ elements a chare (128³, ODF 64, 1 and 4 PEs), 1.04-1.07 × at ~43³ (ODF 27) and
 * 1.05 × at 128³ (256³, ODF 8).
 */
#define LUL_BATCH_GRAIN 50000
static tess_entry_t     E_SEGDONE;
/* Segments launched in batches, and the launches (PE threads add; main reports). */
static _Atomic int64_t batch_items, batch_launches;

static void seg_launch_items(tess_stream_t s, const seg_item_t *dev, const seg_item_t *host,
                             int n)
{
    size_t st   = sizeof(seg_item_t);
    kernel_part = host->sp.unpack_part;
    lul_xch_batch(s, &dev->sp.unpack, &host->sp.unpack, st, n);
    kernel_part = host->sp.stage_part;
    lul_stage_batch(s, host->sp.stage, &dev->st, &host->st, st, n);
    kernel_part = host->sp.pack_part;
    lul_xch_batch(s, &dev->sp.pack, &host->sp.pack, st, n);
}

static void seg_batch_launch(tess_stream_t s, const void *items, const void *items_host, int n,
                             void *arg)
{
    (void)arg;
    atomic_fetch_add_explicit(&batch_items, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&batch_launches, 1, memory_order_relaxed);
    if (lul_backend == LUL_CUDA) {
        seg_launch_items(s, items, items_host, n);
        return;
    }
    for (int k = 0; k < n; k++) {
        const seg_item_t *it = (const seg_item_t *)items_host + k;
        chare_count_kernels(it->c);
        seg_launch_items(s, it, it, 1);
    }
}

/* Put the segment into its PE's batch; the chare goes on in on_segment_done. */
static void batch_segment(tess_ctx_h ctx, chare_t *c, int slot, int par)
{
    seg_item_t it;
    memset(&it, 0, sizeof(it));
    seg_describe(c, slot, par, &it.sp);
    lul_stage_item_set(&it.st, &c->d, it.sp.fz);
    it.c = c;
    c->batched = 1;
    if (tess_gpu_batch(ctx, B_SEG[slot / 2], &it, E_SEGDONE, &slot, sizeof(slot)) != TESS_OK)
        app_tess_fail("tess_gpu_batch");
}

/* A step segment of the cycle: into the PE's batch (LULESH_LAUNCH=batch; the chare goes on in
 * on_segment_done) or a step graph on the chare's stream (it goes on at once: returns 1). */
static int segment(tess_ctx_h ctx, chare_t *c, int slot, int par)
{
    if (launch_batched) {
        batch_segment(ctx, c, slot, par);
        return 0;
    }
    run_segment(ctx, c, slot, par);
    return 1;
}

/* The forces need no time step: the next cycle's are enqueued behind the constraints (after
 * the continuation that reads them), so they run while the minimum goes round, when there is a
 * next cycle (the condition on_dt tests: neither time nor cycle changes before it). Their
 * buffers' parity is that of the cycle d.cycle + 1 will be, whose last messages (two cycles
 * back) every neighbour has received. */
static void enqueue_next_force(tess_ctx_h ctx, chare_t *c)
{
    if (c->d.time < c->d.stoptime && c->d.cycle < opt.its) {
        c->force_ready = 1;
        segment(ctx, c, SEG_FORCE, (c->d.cycle + 1) % 2);
    }
}

/* The constraints are enqueued: the host takes them when they are computed (on_dtready), and
 * the next cycle's forces go behind them. */
static void after_eos(tess_ctx_h ctx, chare_t *c)
{
    tess_gpu_then(ctx, E_DTREADY, NULL, 0);
    enqueue_next_force(ctx, c);
}

/* Run the stages whose messages are all in. */
static void advance(tess_ctx_h ctx, chare_t *c)
{
    while (c->waiting >= 0) {
        int ph = c->waiting, par = c->cycle % 2;
        if (c->got[ph][par] < c->expect[ph])
            return;
        c->got[ph][par] = 0;
        c->waiting      = -1;
        switch (ph) {
        case PH_MASS: /* cycle 0: the sum of the nodal mass; the first dt is the initial one */
            xch_run(tess_ctx_stream(ctx), c, PH_MASS, par, 1);
            enqueue_next_force(ctx, c);
            c->dtmin[0] = c->dtmin[1] = 1e20;
            tess_contribute(ctx, 0, c->dtmin, 2, TESS_DOUBLE, TESS_MIN,
                            tess_cb_broadcast(chares, E_DT));
            return;
        case PH_FORCE:
            if (segment(ctx, c, SEG_NODES, par))
                exchange(ctx, c, PH_POSVEL);
            return;
        case PH_POSVEL:
            if (segment(ctx, c, SEG_GRAD, par))
                exchange(ctx, c, PH_MONOQ);
            return;
        case PH_MONOQ:
            if (segment(ctx, c, SEG_EOS, 0))
                after_eos(ctx, c);
            return;
        }
    }
}

static void next_cycle(tess_ctx_h ctx, chare_t *c, const double *m);

/* LULESH_LAUNCH=batch: the segment `slot` is enqueued (the chare's stream is ordered after its
 * batch's launch); the cycle goes on as advance would have gone on after it. Meanwhile messages
 * came and were counted (advance waited: c->waiting was -1), and the next cycle's minima may
 * have come (on_dt kept them). */
static void on_segment_done(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    chare_t *c    = e;
    int      slot = *(const int *)msg;
    chare_count_kernels(c);
    c->batched = 0;
    switch (slot) {
    case SEG_NODES:
        exchange(ctx, c, PH_POSVEL);
        break;
    case SEG_GRAD:
        exchange(ctx, c, PH_MONOQ);
        break;
    case SEG_EOS:
        after_eos(ctx, c);
        break;
    default: /* SEG_FORCE: the next cycle's forces are enqueued */
        break;
    }
    if (!c->batched && c->dt_pending) {
        c->dt_pending = 0;
        next_cycle(ctx, c, c->dt_next);
    }
}

static void xch_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                     const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)header_len;
    (void)stream_p;
    chare_t      *c = e;
    const xhdr_t *h = header;
    if (h->phase != PH_MONOQ) {
        /* LULESH_RECV=inplace: a message from this process stays in the sender's buffer (dst[0]
         * as offered), where the unpack reads it. */
        int           set = set_of(h->phase), par = h->cycle % 2;
        const double *at  = recv_in_place ? dst[0] : NULL;
        chare_recv_at(c, set, par, h->dir, at);
        if (!at)
            dst[0] = chare_xbuf(c, set, par, 1, h->dir);
        return;
    }
    /* The neighbour across face f sent its layer next to the opposite face, one field a
     * buffer: each lands in f's ghost slab of that field (read by this cycle's EOS, which
     * every chare has finished before any sends the next cycle's gradients). */
    const lul_box_t *b = &c->box;
    int              f = lul_dir_face(h->dir);
    lul_fields_t     fl;
    fields_of(c, PH_MONOQ, &fl);
    if (f < 0 || nbufs != fl.nf) {
        fprintf(stderr, "lulesh_tess: element ghosts from direction %d in %d buffers\n", h->dir,
                nbufs);
        exit(1);
    }
    int64_t off = lul_ghost_offset(b->ex, b->ey, b->ez, f);
    size_t  len = (size_t)lul_face_count(b->ex, b->ey, b->ez, f) * sizeof(double);
    for (int q = 0; q < nbufs; q++) {
        if (sizes[q] != len) {
            fprintf(stderr, "lulesh_tess: element ghosts of %zu bytes for a slab of %zu\n",
                    sizes[q], len);
            exit(1);
        }
        dst[q] = fl.f[q] + off;
    }
}

static void on_xch(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    chare_t      *c = e;
    const xhdr_t *h = msg;
    chare_count_kernels(c);
    c->got[h->phase][h->cycle % 2]++;
    advance(ctx, c);
}

static void on_start(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    chare_t *c = e;
    chare_count_kernels(c);
    c->cycle = 0;
    xch_run(tess_ctx_stream(ctx), c, PH_MASS, 0, 0); /* set-up, once: no step segment */
    exchange(ctx, c, PH_MASS);
}

static void contribute(tess_ctx_h ctx, chare_t *c)
{
    tess_contribute(ctx, (uint64_t)c->cycle, c->dtmin, 2, TESS_DOUBLE, TESS_MIN,
                    tess_cb_broadcast(chares, E_DT));
}

/* The time constraints are on the host: contribute them (after a load-balancing step every
 * -lb cycles). */
static void on_dtready(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    chare_t *c = e;
    if (c->d.out->err != LUL_OK) {
        fprintf(stderr, "lulesh_tess: chare (%d,%d,%d): %s at cycle %d\n", c->c[0], c->c[1],
                c->c[2], lul_error_string(c->d.out->err), c->d.cycle);
        exit(1);
    }
    c->dtmin[0] = c->d.out->dtcourant;
    c->dtmin[1] = c->d.out->dthydro;
    int step = topt.lb_period && (topt.lb_first ? c->cycle == topt.lb_first ||
                                                       (c->cycle > topt.lb_first &&
                                                        (c->cycle - topt.lb_first) %
                                                                topt.lb_period == 0)
                                                 : c->cycle % topt.lb_period == 0);
    if (step && c->d.time < c->d.stoptime && c->d.cycle < opt.its) {
        if (tess_gpu_backend() == TESS_GPU_HOST) {
            /* The next cycle's forces may be running, timed into c->kernel_ns: the chare's
             * state moves with a migration, so let them finish first (and count them). */
            tess_gpu_stream_sync(tess_ctx_stream(ctx));
            int64_t ns = atomic_load_explicit(&c->kernel_ns, memory_order_relaxed);
            tess_set_load(ctx, 1e-9 * (double)(ns - c->kernel_ns_step));
            c->kernel_ns_step = ns;
        }
        c->lb_pe = tess_pe();
        tess_at_sync(ctx);
        return;
    }
    contribute(ctx, c);
}

static void on_balanced(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    chare_t *c = e;
    c->lb_moves += tess_pe() != c->lb_pe;
    contribute(ctx, e);
}

/* The global minima of the last cycle's constraints: the next cycle starts (or the run ends,
 * everywhere at once: every chare has the same time and cycle). A chare whose next forces are
 * still in a batch (LULESH_LAUNCH=batch) starts it when they are out (on_segment_done). */

static void on_dt(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    chare_t      *c = e;
    const double *m = msg;
    chare_count_kernels(c);
    if (topt.stats)
        lul_stats_cycle(c->d.time < c->d.stoptime && c->d.cycle < opt.its ? c->d.cycle : -1);
    if (!(c->d.time < c->d.stoptime && c->d.cycle < opt.its))
        return; /* the end: every chare stops here, and the phase ends when all is quiet */
    if (c->d.cycle >= stop_cycle) { /* a checkpoint's cycle: the next phase goes on */
        c->held       = 1;
        c->dt_held[0] = m[0];
        c->dt_held[1] = m[1];
        return;
    }
    if (c->batched) {
        c->dt_pending = 1;
        c->dt_next[0] = m[0];
        c->dt_next[1] = m[1];
        return;
    }
    next_cycle(ctx, c, m);
}

static void on_resume(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    chare_t *c = e;
    if (!c->held)
        return;
    c->held = 0;
    next_cycle(ctx, c, c->dt_held);
}

static void next_cycle(tess_ctx_h ctx, chare_t *c, const double *m)
{
    if (!c->force_ready) { /* for d.cycle + 1: the cycle about to start */
        run_segment(ctx, c, SEG_FORCE, (c->d.cycle + 1) % 2);
    } else if (c->force_repack) { /* once after a migration: no step segment */
        chare_count_kernels(c);
        xch_run(tess_ctx_stream(ctx), c, PH_FORCE, (c->d.cycle + 1) % 2, 0);
    }
    c->force_repack = 0;
    lul_time_increment(&c->d, m[0], m[1]);
    c->cycle = c->d.cycle;
    if (c->c[0] == 0 && c->c[1] == 0 && c->c[2] == 0)
        lul_print_progress(&opt, c->d.cycle, c->d.time, c->d.deltatime);
    c->force_ready = 0;
    exchange(ctx, c, PH_FORCE);
}

static void parse_tess(int *argc, char **argv, int rank);

static void start_phase(void *arg)
{
    int resume = *(const int *)arg;
    if (tess_process() == 0)
        tess_broadcast(chares, resume ? E_RESUME : E_START, NULL, 0);
}

/* A restart takes the problem from the checkpoint: an option given with another value is
 * refused. */
static void check_restart_options(int argc, char **argv, const lul_saved_t *sv, int rank)
{
    /* Parse a copy: parse_tess takes its options out of the array it is given. */
    char **cp = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!cp)
        app_tess_fail("malloc");
    memcpy(cp, argv, sizeof(char *) * (size_t)(argc + 1));
    int         n    = argc;
    lul_tess_opts_t keep = topt;
    topt             = (lul_tess_opts_t){0};
    parse_tess(&n, cp, rank);
    lul_tess_opts_t gt = topt;
    topt           = keep;
    lul_opts_t g   = lul_parse(n, cp, rank);
    free(cp);
    char a[64], b[64];
#define LUL_SAME(flag, given, saved)                                                            \
    if (app_arg_given(argc, argv, flag) && (given) != (saved)) {                               \
        snprintf(a, sizeof(a), "%lld", (long long)(given));                                     \
        snprintf(b, sizeof(b), "%lld", (long long)(saved));                                     \
        app_ckpt_refuse(rank, flag, a, b);                                                      \
    }
    LUL_SAME("-s", g.s, sv->opt.s)
    LUL_SAME("-g", g.g, sv->opt.g)
    LUL_SAME("-i", g.its, sv->opt.its)
    LUL_SAME("-r", g.numReg, sv->opt.numReg)
    LUL_SAME("-b", g.balance, sv->opt.balance)
    LUL_SAME("-c", g.cost, sv->opt.cost)
    LUL_SAME("-odf", g.odf, sv->opt.odf)
    LUL_SAME("-lb", gt.lb_period, sv->topt.lb_period)
    LUL_SAME("-lbfirst", gt.lb_first, sv->topt.lb_first)
#undef LUL_SAME
    if (app_arg_given(argc, argv, "-rotate") && memcmp(g.rot, sv->opt.rot, sizeof(g.rot))) {
        snprintf(a, sizeof(a), "%dx%dx%d", g.rot[0], g.rot[1], g.rot[2]);
        snprintf(b, sizeof(b), "%dx%dx%d", sv->opt.rot[0], sv->opt.rot[1], sv->opt.rot[2]);
        app_ckpt_refuse(rank, "-rotate", a, b);
    }
    if (app_arg_given(argc, argv, "-d") &&
        (gt.cx != sv->grid3[0] || gt.cy != sv->grid3[1] || gt.cz != sv->grid3[2])) {
        snprintf(a, sizeof(a), "%dx%dx%d", gt.cx, gt.cy, gt.cz);
        snprintf(b, sizeof(b), "%dx%dx%d", sv->grid3[0], sv->grid3[1], sv->grid3[2]);
        app_ckpt_refuse(rank, "-d", a, b);
    }
}

/* ---- options --------------------------------------------------------------------------------- */

/* Take -d, -lb, -lbfirst and -stats out of argv (the rest is common.h's). */
static void parse_tess(int *argc, char **argv, int rank)
{
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-d") && v) {
            if (sscanf(v, "%dx%dx%d", &topt.cx, &topt.cy, &topt.cz) != 3 || topt.cx < 1 ||
                topt.cy < 1 || topt.cz < 1) {
                if (rank == 0)
                    fprintf(stderr, "bad chare grid '%s' (want CXxCYxCZ)\n", v);
                exit(2);
            }
            i++;
        } else if (!strcmp(a, "-lb") && v) {
            topt.lb_period = atoi(v);
            if (topt.lb_period < 0) {
                if (rank == 0)
                    fprintf(stderr, "bad load-balancing period '%s'\n", v);
                exit(2);
            }
            i++;
        } else if (!strcmp(a, "-lbfirst") && v) {
            topt.lb_first = atoi(v);
            if (topt.lb_first < 1) {
                if (rank == 0)
                    fprintf(stderr, "bad first load-balancing cycle '%s'\n", v);
                exit(2);
            }
            i++;
        } else if (!strcmp(a, "-stats")) {
            topt.stats = 1;
        } else if (!strcmp(a, "-h") && rank == 0) {
            fprintf(stderr, "lulesh_tess also takes -d CXxCYxCZ (the chare grid, instead of "
                            "-odf), -lb K (a load-balancing step every K cycles), -lbfirst F "
                            "(with -lb: the first step after cycle F, then every K) and -stats "
                            "(where the chares ended, messages within and between processes, "
                            "CPU time per process over the second half of a -i run)\n");
            argv[k++] = argv[i];
        } else {
            argv[k++] = argv[i];
        }
    }
    *argc = k;
}


/* ---- the final report (plain MPI) ------------------------------------------------------------ */

/* After a phase: whether a chare holds a checkpoint's minima, and its cycle. */
static void chare_held(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    *(int *)arg |= ((chare_t *)e)->held;
}

static void chare_cycle(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    int *m = arg, k = ((chare_t *)e)->d.cycle;
    *m     = k > *m ? k : *m;
}

typedef struct gather {
    double *plane; /* n × n energies of the global plane z = 0 */
    int     cycles;
    int64_t moves; /* chares' moves by load balancing, as they saw them */
    int    *owner; /* -stats: [chare] this process's rank where it is local, else -1 */
    int     rank;
} gather_t;

static void collect(tess_ctx_h ctx, void *e, void *arg)
{
    chare_t  *c = e;
    gather_t *g = arg;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    g->cycles = c->d.cycle;
    g->moves += c->lb_moves;
    if (g->owner)
        g->owner[(c->c[2] * grid3[1] + c->c[1]) * grid3[0] + c->c[0]] = g->rank;
    if (c->box.oz != 0)
        return;
    size_t  nplane = (size_t)(c->box.ex * c->box.ey);
    double *tmp    = malloc(nplane * sizeof(double));
    lul_copy_from_dev(tmp, c->d.e, nplane * sizeof(double));
    for (int64_t j = 0; j < c->box.ey; j++)
        for (int64_t i = 0; i < c->box.ex; i++)
            g->plane[(c->box.oy + j) * topt.n + c->box.ox + i] = tmp[j * c->box.ex + i];
    free(tmp);
}

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    app_tess_set_prog("lulesh_tess");
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, NULL) != TESS_OK) {
        fprintf(stderr, "tess_init failed: %s\n", tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    app_ckpt_t  ck = app_ckpt_args(&argc, argv, rank);
    lul_saved_t saved;
    if (ck.restart) {
        app_ckpt_read_fixed(&ck, "lulesh", &saved, sizeof(saved), rank);
        check_restart_options(argc, argv, &saved, rank);
    }
    parse_tess(&argc, argv, rank);
    opt = lul_parse(argc, argv, rank);
    if (ck.restart) { /* the problem from the checkpoint; how to report from the command line */
        lul_opts_t cl = opt;
        int        stats = topt.stats;
        opt           = saved.opt;
        topt          = saved.topt;
        opt.progress  = cl.progress;
        opt.quiet     = cl.quiet;
        opt.verify    = cl.verify;
        opt.refcsv    = cl.refcsv;
        opt.tol       = cl.tol;
        topt.stats    = stats;
    }
    const char *recv = getenv("LULESH_RECV");
    if (recv && *recv && strcmp(recv, "copy") && strcmp(recv, "inplace")) {
        if (rank == 0)
            fprintf(stderr, "lulesh_tess: LULESH_RECV=%s: expected copy or inplace\n", recv);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    recv_in_place = !recv || !*recv || !strcmp(recv, "inplace");
    const char *lm = getenv("LULESH_LAUNCH");
    if (lm && *lm && strcmp(lm, "each") && strcmp(lm, "batch") && strcmp(lm, "auto")) {
        if (rank == 0)
            fprintf(stderr, "lulesh_tess: LULESH_LAUNCH=%s: expected each, batch or auto\n", lm);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int launch_auto = !lm || !*lm || !strcmp(lm, "auto");
    launch_batched  = lm && !strcmp(lm, "batch");
    lul_fuse(); /* LULESH_FUSE, LULESH_NODECOPY and LULESH_EOS_SPLIT checked before the run */
    lul_node_copy_ring();
    (void)lul_eos_split(0);
#ifdef LULESH_CUDA
    if (tess_gpu_backend() == TESS_GPU_CUDA) {
        lul_backend     = LUL_CUDA;
        lul_xch_backend = LUL_XCH_CUDA;
    }
#endif
    chare_hooks_install(); /* domain arrays in the chare's arena, host kernels timed */

    /* The global mesh: -g N, or -s per rank of a cube of ranks as the MPI program (else -s). */
    int p = (int)(cbrt((double)nprocs) + 0.5);
    if (!ck.restart)
        topt.n = opt.g ? opt.g : (int64_t)opt.s * (p * p * p == nprocs ? p : 1);
    int gpus = app_count_gpus();
    if (ck.restart) { /* the chares are the unit that moves: their grid stays */
        grid3[0] = saved.grid3[0], grid3[1] = saved.grid3[1], grid3[2] = saved.grid3[2];
    } else if (topt.cx) {
        grid3[0] = topt.cx, grid3[1] = topt.cy, grid3[2] = topt.cz;
    } else {
        chare_grid(opt.odf * gpus, topt.n, grid3);
    }
    if (grid3[0] > topt.n || grid3[1] > topt.n || grid3[2] > topt.n) {
        if (rank == 0)
            fprintf(stderr, "a %dx%dx%d chare grid does not fit a %lld^3 mesh\n", grid3[0],
                    grid3[1], grid3[2], (long long)topt.n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int    nchares = grid3[0] * grid3[1] * grid3[2];
    double grain   = (double)topt.n * (double)topt.n * (double)topt.n / nchares;
    if (launch_auto) /* batches where a chare's segments are small (LUL_BATCH_GRAIN) */
        launch_batched = grain <= LUL_BATCH_GRAIN;
    lul_stats_window(opt.its / 2);
    if (rank == 0)
        lul_print_banner(&opt, topt.n, nchares, topt.n);

    if (tess_entry_register("start", on_start, &E_START) != TESS_OK ||
        tess_entry_register_device("exchange", xch_post, on_xch,
                                   TESS_ENTRY_BATCH | TESS_ENTRY_SENDER_ORDERED |
                                       (recv_in_place ? TESS_ENTRY_IN_PLACE : 0),
                                   &E_XCH) != TESS_OK ||
        tess_entry_register("dtready", on_dtready, &E_DTREADY) != TESS_OK ||
        tess_entry_register("dt", on_dt, &E_DT) != TESS_OK ||
        tess_entry_register("balanced", on_balanced, &E_BALANCED) != TESS_OK ||
        tess_entry_register("resume", on_resume, &E_RESUME) != TESS_OK ||
        tess_entry_register("segment done", on_segment_done, &E_SEGDONE) != TESS_OK)
        app_tess_fail("entry registration");
    static const char *const seg_names[4] = {"lulesh-force", "lulesh-nodes", "lulesh-gradients",
                                             "lulesh-eos"};
    for (int b = 0; b < 4; b++)
        if (tess_gpu_batch_register(seg_names[b], sizeof(seg_item_t), seg_batch_launch, NULL,
                                    &B_SEG[b]) != TESS_OK)
            app_tess_fail("tess_gpu_batch_register");
    tess_array_params_t ap = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP |
                      TESS_ARRAY_FIELD_RESUME,
        .name       = "lulesh",
        .ndims      = 3,
        .extents    = {grid3[2], grid3[1], grid3[0]}, /* see chare_index */
        .elem_size  = sizeof(chare_t),
        .ctor       = chare_ctor,
        .dtor       = chare_dtor,
        .pup        = chare_pup,
        .resume     = E_BALANCED,
    };
    if (launch_batched) { /* one stream a PE: a batch waits for one, and one waits for it */
        ap.field_mask |= TESS_ARRAY_FIELD_STREAMS;
        ap.pe_streams = 1;
    }
    if (tess_array_create(&ap, &chares) != TESS_OK)
        app_tess_fail("tess_array_create");

    int cycle0 = 0, resume = 0;
    if (ck.restart) {
        app_ckpt_restore(&ck, "lulesh", rank);
        cycle0 = saved.cycle;
        resume = 1;
    }

    /* The run, nodal-mass sum included, is one phase (with checkpoints, one per N cycles): it
     * ends when no message is left. */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), ckpt_s = 0;
    int    nckpt = 0;
    for (int cycle = cycle0;;) {
        stop_cycle = ck.every ? (cycle / ck.every + 1) * ck.every : 1 << 30;
        if (tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_phase, &resume) != TESS_OK)
            app_tess_fail("tess_run");
        resume = 1;
        int held = 0, reached = 0;
        tess_array_foreach(chares, chare_held, &held);
        MPI_Allreduce(MPI_IN_PLACE, &held, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!held)
            break; /* the end */
        tess_array_foreach(chares, chare_cycle, &reached);
        MPI_Allreduce(MPI_IN_PLACE, &reached, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        cycle = reached;
        saved = (lul_saved_t){.opt = opt, .topt = topt,
                              .grid3 = {grid3[0], grid3[1], grid3[2]}, .cycle = cycle};
        saved.opt.verify = saved.opt.refcsv = NULL;
        ckpt_s += app_ckpt_write(&ck, "lulesh", &saved, sizeof(saved), cycle, rank);
        nckpt++;
    }
    if (nckpt) /* the last one's background write is part of the run */
        ckpt_s += app_ckpt_wait(rank);
    double elapsed = MPI_Wtime() - t0, elapsed_max = 0;
    MPI_Reduce(&elapsed, &elapsed_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    /* The report: the global plane z = 0 (every chare touching it adds its part) and the
     * origin, gathered in plain MPI. */
    int64_t  n = topt.n;
    int      nch = grid3[0] * grid3[1] * grid3[2];
    gather_t g   = {.plane = calloc((size_t)(n * n), sizeof(double)), .rank = rank,
                    .owner = topt.stats ? malloc((size_t)nch * sizeof(int)) : NULL};
    for (int i = 0; g.owner && i < nch; i++)
        g.owner[i] = -1;
    tess_array_foreach(chares, collect, &g);
    double *plane = rank == 0 ? calloc((size_t)(n * n), sizeof(double)) : NULL;
    MPI_Reduce(g.plane, plane, (int)(n * n), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    int cycles = 0;
    MPI_Reduce(&g.cycles, &cycles, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    int64_t moves = 0;
    MPI_Reduce(&g.moves, &moves, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    int64_t batched[2] = {atomic_load(&batch_items), atomic_load(&batch_launches)}, bsum[2];
    MPI_Reduce(batched, bsum, 2, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);

    int status = 0;
    if (rank == 0) {
        lul_report_t r = {.prog = "tess", .backend = tess_gpu_backend_name(), .size = n, .n = n,
                          .domains = nchares, .procs = nprocs, .ppn = tess_ppn(),
                          .odf = topt.cx ? 0 : opt.odf, .cycles = cycles, .origin_e = plane[0],
                          .plane = plane, .elapsed = elapsed_max};
        status = lul_report_print(&r, &opt);
        tess_lb_stats_t lbs;
        if (topt.lb_period && tess_lb_get_stats(chares, &lbs) == TESS_OK)
            printf("load balancing: %llu steps, %lld moves of %d chares in all; the last moved "
                   "%lld chares, imbalance %.3f -> %.3f\n", (unsigned long long)lbs.steps,
                   (long long)moves, nch, (long long)lbs.migrations, lbs.imbalance_before,
                   lbs.imbalance_after);
        if (launch_batched)
            printf("batched segments: %lld in %lld launches (%.1f a launch)\n",
                   (long long)bsum[0], (long long)bsum[1],
                   bsum[1] ? (double)bsum[0] / (double)bsum[1] : 0.0);
        else if (launch_auto)
            printf("batched segments: none (LULESH_LAUNCH=auto: %.0f elements a chare > %d)\n",
                   grain, LUL_BATCH_GRAIN);
        if (ck.every)
            printf("checkpoints: %d in %s, %.3f s (%.2f%% of the run)\n", nckpt, ck.dir, ckpt_s,
                   100 * ckpt_s / elapsed_max);
        printf("RESULT-TESS chares=%dx%dx%d gpus=%d lb=%d rotate=%dx%dx%d ms_per_cycle=%.6f\n",
               grid3[0], grid3[1], grid3[2], gpus, topt.lb_period, opt.rot[0], opt.rot[1],
               opt.rot[2],
               cycles > cycle0 ? elapsed_max * 1e3 / (cycles - cycle0) : 0.0);
        fflush(stdout);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (g.owner) {
        lul_stats_print(topt.n, grid3, g.owner, rank, nprocs, cycles);
        free(g.owner);
    }
    free(plane);
    free(g.plane);
    tess_array_destroy(chares);
    tess_finalize();
    MPI_Finalize();
    return status;
}
