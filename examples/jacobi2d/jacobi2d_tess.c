/*
 * jacobi2d_tess — Jacobi2D with Tessera: ODF chares per GPU, each a block of the grid with its
 * own stream; halos travel as device messages and an iteration runs once its neighbours'
 * halos are in.
 *
 * Halos of iteration k land in the ghost cells of array t[k % 2] (rows directly, columns through
 * receive buffers of parity k % 2), so a neighbour one iteration ahead never overwrites data
 * still in use, and no source-done callback is needed: the transfers are stream-ordered.
 *
 *   mpirun -np P jacobi2d_tess [+ppn T] -x NX -y NY -i ITERS -odf N [-verify] …
 *          [-checkpoint-every N -checkpoint-dir D] [-restart D]
 *
 * Checkpoints (examples/common/app_ckpt.h) are taken between phases: a phase runs to the next
 * checkpoint's iteration and the blocks hold that iteration's halos back, so nothing is in
 * flight and a block's state is its two arrays and its iteration.
 */
#include "common.h"
#include "jacobi.h"

#include <inttypes.h>
#include <mpi.h>
#include <tessera.h>
#include <tessera/gpu.h>

#include "../common/app_ckpt.h"
#include "../common/app_tess.h"

enum { DIR_N = 0, DIR_S = 1, DIR_W = 2, DIR_E = 3 };

typedef struct halo_hdr {
    int32_t iter, dir; /* dir: the receiver's ghost side */
} halo_hdr_t;

typedef struct block {
    int      ci, cj;       /* position in the chare grid */
    int64_t  x0, y0, bx, by;
    int      nbr[4];       /* neighbour present per side */
    int      nnbrs, work;
    double  *t[2];
    double  *colbuf[2][2][2]; /* [send/recv][parity][west/east] */
    /* Where the halo of each side and parity lies (set by halo_post): this block's ghost row or
     * receive column, or, taken in place, the neighbour's own row or send column. */
    const double *halo[4][2];
    double  *rows;         /* device row sums */
    double  *rows_host;
    int      iter, target;
    int      got[2];       /* halos of iteration k counted in got[k % 2] */
    int      finished;
    int      hold;      /* the phase ends at `target` with this iteration's halos held back */
    int      held;      /* they were: send them when the next phase starts */
    int      balancing; /* in a load-balancing step: halos are counted, not acted on */
    int      updating;  /* -launch batch: its update is in a batch, the step goes on in E_UPDATED */
    double   sum;
} block_t;

static jac_opts_t   opt;
static tess_array_h grid;
static tess_entry_t E_RESUME, E_HALO, E_SUMMED, E_RESULT, E_BALANCED, E_UPDATED;
static tess_gpu_batch_t B_UPDATE; /* -launch batch: the updates of a PE's blocks, one launch */
static int          cx = 1, cy = 1;

/* What a phase runs to (the message of E_RESUME). */
typedef struct phase_msg {
    int32_t target, hold;
} phase_msg_t;

/* The program's state saved with a checkpoint. */
typedef struct jac_saved {
    jac_opts_t opt;
    int32_t    cx, cy, iter, pad;
} jac_saved_t;

/* ---- set-up ---------------------------------------------------------------------------------- */

/* What a block needs besides its two arrays: recreated where it arrives after a migration (at a
 * load-balancing step nothing in these is still to be read). */
static void block_alloc_scratch(block_t *b)
{
    for (int p = 0; p < 2; p++)
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < 2; k++)
                b->colbuf[d][p][k] = app_tess_dev_alloc((size_t)b->bx * sizeof(double));
    b->rows = app_tess_dev_alloc((size_t)b->bx * sizeof(double));
    b->rows_host = app_tess_pinned_alloc((size_t)b->bx * sizeof(double));
}

static void block_free_scratch(block_t *b)
{
    for (int p = 0; p < 2; p++)
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < 2; k++)
                tess_gpu_free(b->colbuf[d][p][k]);
    tess_gpu_free(b->rows);
    tess_gpu_free_host(b->rows_host);
}

/* Migration: the two arrays move with their data, the rest is made anew. */
static void block_pup(tess_pup_h p, tess_ctx_h ctx, void *e)
{
    block_t *b     = e;
    size_t   bytes = (size_t)((b->bx + 2) * (b->by + 2)) * sizeof(double);
    if (tess_pup_is_packing(p)) {
        tess_gpu_stream_sync(tess_ctx_stream(ctx));
        block_free_scratch(b);
    }
    tess_pup_device(p, (void **)&b->t[0], bytes);
    tess_pup_device(p, (void **)&b->t[1], bytes);
    if (tess_pup_is_unpacking(p))
        block_alloc_scratch(b);
}

static void block_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    block_t     *b  = e;
    tess_index_t ix = tess_ctx_index(ctx);
    b->ci           = ix.x;
    b->cj           = ix.y;
    b->x0           = jac_start(opt.nx, cx, b->ci);
    b->bx           = jac_start(opt.nx, cx, b->ci + 1) - b->x0;
    b->y0           = jac_start(opt.ny, cy, b->cj);
    b->by           = jac_start(opt.ny, cy, b->cj + 1) - b->y0;
    b->nbr[DIR_N]   = b->ci > 0;
    b->nbr[DIR_S]   = b->ci < cx - 1;
    b->nbr[DIR_W]   = b->cj > 0;
    b->nbr[DIR_E]   = b->cj < cy - 1;
    b->nnbrs        = b->nbr[0] + b->nbr[1] + b->nbr[2] + b->nbr[3];
    b->work         = jac_work(&opt, b->x0);
    size_t cells    = (size_t)((b->bx + 2) * (b->by + 2));
    tess_stream_t s = tess_ctx_stream(ctx);
    for (int p = 0; p < 2; p++) {
        b->t[p] = app_tess_dev_alloc(cells * sizeof(double));
        jac_init_block(s, b->t[p], b->bx, b->by, !b->nbr[DIR_N], !b->nbr[DIR_S], !b->nbr[DIR_W],
                       !b->nbr[DIR_E], 1.0);
    }
    block_alloc_scratch(b);
}

static void block_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    (void)arg;
    block_t *b = e;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    for (int p = 0; p < 2; p++)
        tess_gpu_free(b->t[p]);
    block_free_scratch(b);
}

/* ---- the iteration ------------------------------------------------------------------------- */

/* Halos of iteration k: the rows straight from the array, the columns from the buffers the
 * update filled (packed here for iteration 0 and after a migration). All four go out in one
 * tess_send_device_many, ordered after the same point of the stream. */
static void send_halos(tess_ctx_h ctx, block_t *b, int k, int pack)
{
    tess_stream_t   s  = tess_ctx_stream(ctx);
    int64_t         ld = b->by + 2;
    double         *a  = b->t[k % 2];
    halo_hdr_t      h[4];
    tess_dev_buf_t  buf[4];
    tess_dev_send_t send[4];
    int             n = 0;
    if (pack && b->nbr[DIR_W])
        jac_pack_col(s, a, b->colbuf[0][k % 2][0], b->bx, b->by, 1);
    if (pack && b->nbr[DIR_E])
        jac_pack_col(s, a, b->colbuf[0][k % 2][1], b->bx, b->by, b->by);
    static const struct { int dir, opposite, di, dj; } side[4] = {
        {DIR_N, DIR_S, -1, 0}, {DIR_S, DIR_N, 1, 0}, {DIR_W, DIR_E, 0, -1}, {DIR_E, DIR_W, 0, 1}
    };
    for (int i = 0; i < 4; i++) {
        if (!b->nbr[side[i].dir])
            continue;
        int     d   = side[i].dir;
        double *src = d == DIR_N   ? a + 1 * ld + 1
                      : d == DIR_S ? a + b->bx * ld + 1
                                   : b->colbuf[0][k % 2][d == DIR_W ? 0 : 1];
        buf[n] = (tess_dev_buf_t){src, (size_t)(d == DIR_N || d == DIR_S ? b->by : b->bx) *
                                           sizeof(double)};
        h[n]    = (halo_hdr_t){k, side[i].opposite};
        send[n] = (tess_dev_send_t){grid, tess_idx2(b->ci + side[i].di, b->cj + side[i].dj),
                                    E_HALO, &h[n], sizeof(h[n]), &buf[n], 1, NULL, NULL};
        n++;
    }
    tess_send_device_many(send, n, s);
}

static void finish(tess_ctx_h ctx, block_t *b)
{
    tess_stream_t s = tess_ctx_stream(ctx);
    jac_row_sums(s, b->t[b->iter % 2], b->rows, b->bx, b->by);
    tess_gpu_memcpy_async(b->rows_host, b->rows, (size_t)b->bx * sizeof(double), s);
    tess_gpu_then(ctx, E_SUMMED, NULL, 0);
}

/* After the update of iteration b->iter: the next iteration, a load-balancing step or the next
 * halos. Returns 0 when a load-balancing step began (the step resumes in on_balanced). */
static int after_update(tess_ctx_h ctx, block_t *b)
{
    b->iter++;
    if (opt.lb_period && b->iter % opt.lb_period == 0 && b->iter < opt.warmup + opt.iters) {
        /* Balance before the next halos go out; the step resumes in on_balanced. */
        tess_set_load(ctx, (double)(b->bx * b->by) * b->work);
        b->balancing = 1;
        tess_at_sync(ctx);
        return 0;
    }
    if (b->iter < opt.warmup + opt.iters) {
        if (b->hold && b->iter == b->target)
            b->held = 1;
        else
            send_halos(ctx, b, b->iter, 0);
    }
    return 1;
}

/* Run every iteration whose halos are all in; then send the next halos. With -launch batch
 * the update goes into the PE's batch and the step goes on in on_updated. */
static void advance(tess_ctx_h ctx, block_t *b)
{
    while (!b->balancing && !b->updating && b->iter < b->target &&
           b->got[b->iter % 2] == b->nnbrs) {
        int k = b->iter, p = k % 2;
        b->got[p] = 0;
        /* The received columns are read, and the next columns to send written, by the update. */
        jac_update_item_t it = {b->t[p], b->t[1 - p], b->bx, b->by, b->work,
                                b->nbr[DIR_N] ? b->halo[DIR_N][p] : NULL,
                                b->nbr[DIR_S] ? b->halo[DIR_S][p] : NULL,
                                b->nbr[DIR_W] ? b->halo[DIR_W][p] : NULL,
                                b->nbr[DIR_E] ? b->halo[DIR_E][p] : NULL,
                                b->nbr[DIR_W] ? b->colbuf[0][1 - p][0] : NULL,
                                b->nbr[DIR_E] ? b->colbuf[0][1 - p][1] : NULL};
        tess_trace_begin(ctx, "update"); /* the kernel on the timeline (TESS_TRACE) */
        if (opt.launch_batch) {
            b->updating = 1;
            if (tess_gpu_batch(ctx, B_UPDATE, &it, E_UPDATED, NULL, 0) != TESS_OK) {
                fprintf(stderr, "tess_gpu_batch failed: %s\n", tess_error_detail());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            tess_trace_end(ctx, "update");
            return;
        }
        jac_update(tess_ctx_stream(ctx), it.in, it.out, it.bx, it.by, (int)it.repeat, it.nin,
                   it.sin, it.win, it.ein, it.wout, it.eout);
        tess_trace_end(ctx, "update");
        if (!after_update(ctx, b))
            return;
    }
    if (b->iter == opt.warmup + opt.iters && !b->finished) {
        b->finished = 1;
        finish(ctx, b);
    }
}

/* -launch batch: the update is enqueued (the block's stream is ordered after it). */
static void on_updated(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    block_t *b  = e;
    b->updating = 0;
    if (after_update(ctx, b))
        advance(ctx, b);
}

/* The batched update's launch: one kernel for the n blocks' updates. */
static void update_launch(tess_stream_t stream, const void *items, const void *items_host, int n,
                          void *arg)
{
    (void)arg;
    jac_update_batch(stream, items, items_host, n);
}

static void halo_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                      const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)header_len;
    (void)nbufs;
    (void)sizes;
    (void)stream_p;
    block_t          *b  = e;
    const halo_hdr_t *h  = header;
    int               p  = h->iter % 2;
    int64_t           ld = b->by + 2;
    /* Within a process the runtime offers the neighbour's buffer (TESS_ENTRY_IN_PLACE, -halos
     * inplace): the update reads it there. The neighbour writes it again two iterations on,
     * after this block's next halo to it, which goes out after the update that reads it. */
    if (!dst[0]) {
        switch (h->dir) {
        case DIR_N: dst[0] = b->t[p] + 1; break;
        case DIR_S: dst[0] = b->t[p] + (b->bx + 1) * ld + 1; break;
        case DIR_W: dst[0] = b->colbuf[1][p][0]; break;
        default:    dst[0] = b->colbuf[1][p][1]; break;
        }
    }
    b->halo[h->dir][p] = dst[0];
}

static void on_halo(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    block_t          *b = e;
    const halo_hdr_t *h = msg;
    b->got[h->iter % 2]++;
    advance(ctx, b);
}

static void on_balanced(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    block_t *b = e;
    /* Neighbours that resumed first may have sent this iteration's halos already: they were
     * counted, and are used now. */
    b->balancing = 0;
    if (b->hold && b->iter == b->target)
        b->held = 1; /* a checkpoint's iteration: the next phase sends them */
    else
        send_halos(ctx, b, b->iter, 1); /* the column buffers were made anew if it moved */
    advance(ctx, b);
}

static void on_resume(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    block_t           *b = e;
    const phase_msg_t *m = msg;
    b->target            = m->target;
    b->hold              = m->hold;
    if ((b->iter == 0 || b->held) && b->iter < b->target) {
        send_halos(ctx, b, b->iter, 1);
        b->held = 0;
    }
    advance(ctx, b);
}

static void on_summed(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    block_t *b = e;
    b->sum     = 0;
    for (int64_t i = 0; i < b->bx; i++)
        b->sum += b->rows_host[i];
    /* The blocks' sums are added in the order of the blocks (on block (0,0)), not in the order
     * a reduction meets them: the checksum is the same bit for bit on every shape of the job,
     * which a restart on another shape relies on. */
    double part[2] = {(double)tess_ctx_linear(ctx), b->sum};
    tess_send(grid, tess_idx2(0, 0), E_RESULT, part, sizeof(part));
}

typedef struct result {
    double t_end, checksum;
} result_t;

static double *block_sums; /* [cx * cy] on block (0,0)'s process */
static int     nblock_sums;

static void on_result(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx;
    (void)e;
    (void)size;
    const double *part = msg;
    block_sums[(int64_t)part[0]] = part[1];
    if (++nblock_sums < cx * cy)
        return;
    result_t r = {tess_wtime(), 0};
    for (int i = 0; i < cx * cy; i++)
        r.checksum += block_sums[i];
    nblock_sums = 0;
    tess_exit_with(&r, sizeof(r));
}

static void sync_block(tess_ctx_h ctx, void *e, void *arg)
{
    (void)e;
    (void)arg;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
}

static phase_msg_t phase;
static void start_phase(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(grid, E_RESUME, &phase, sizeof(phase));
}

/* A restart takes the problem from the checkpoint: an option given with another value is
 * refused. */
static void check_restart_options(int argc, char **argv, const jac_opts_t *saved, int scx,
                                  int scy, int rank)
{
    jac_opts_t g = jac_parse(argc, argv, rank);
    char       a[64], b[64];
#define JAC_SAME(flag, field, fmt)                                                             \
    if (app_arg_given(argc, argv, flag) && g.field != saved->field) {                          \
        snprintf(a, sizeof(a), fmt, g.field);                                                   \
        snprintf(b, sizeof(b), fmt, saved->field);                                              \
        app_ckpt_refuse(rank, flag, a, b);                                                      \
    }
    JAC_SAME("-x", nx, "%" PRId64)
    JAC_SAME("-y", ny, "%" PRId64)
    JAC_SAME("-i", iters, "%d")
    JAC_SAME("-w", warmup, "%d")
    JAC_SAME("-imbalance", imbalance, "%d")
    JAC_SAME("-heavy", heavy, "%g")
    JAC_SAME("-lb", lb_period, "%d")
    JAC_SAME("-halos", halos_in_place, "%d")
    JAC_SAME("-odf", odf, "%d")
#undef JAC_SAME
    if (app_arg_given(argc, argv, "-d") && (g.px != scx || g.py != scy)) {
        snprintf(a, sizeof(a), "%dx%d", g.px, g.py);
        snprintf(b, sizeof(b), "%dx%d", scx, scy);
        app_ckpt_refuse(rank, "-d", a, b);
    }
}

/* ---- main ------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    app_tess_set_prog("jacobi2d_tess");
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, NULL) != TESS_OK) {
        fprintf(stderr, "tess_init failed: %s\n", tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    app_ckpt_t  ck = app_ckpt_args(&argc, argv, rank);
    jac_saved_t saved;
    opt = jac_parse(argc, argv, rank);
    if (ck.restart) {
        app_ckpt_read_fixed(&ck, "jacobi2d", &saved, sizeof(saved), rank);
        check_restart_options(argc, argv, &saved.opt, saved.cx, saved.cy, rank);
        int verify = opt.verify, launch_batch = opt.launch_batch;
        opt              = saved.opt;
        opt.verify       = verify;
        opt.launch_batch = launch_batch; /* how updates launch does not change the result */
    }
#ifdef JACOBI_CUDA
    jac_backend = tess_gpu_backend() == TESS_GPU_CUDA ? JAC_CUDA : JAC_HOST;
#endif
    jac_host_launch = app_tess_launch_host;

    int gpus   = app_count_gpus();
    int chares = opt.odf * gpus;
    if (ck.restart) {
        cx = saved.cx; /* the chares are the unit that moves: their grid stays */
        cy = saved.cy;
    } else if (opt.px) {
        cx = opt.px;
        cy = opt.py;
    } else {
        jac_factor(chares, opt.nx, opt.ny, &cx, &cy);
    }
    if (cx > opt.nx || cy > opt.ny) {
        if (rank == 0)
            fprintf(stderr, "a %d x %d chare grid does not fit a %lld x %lld grid\n", cx, cy,
                    (long long)opt.nx, (long long)opt.ny);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    if (tess_entry_register("resume", on_resume, &E_RESUME) != TESS_OK ||
        tess_entry_register_device("halo", halo_post, on_halo,
                                   TESS_ENTRY_BATCH | TESS_ENTRY_SENDER_ORDERED |
                                       (opt.halos_in_place ? TESS_ENTRY_IN_PLACE : 0),
                                   &E_HALO) != TESS_OK ||
        tess_entry_register("summed", on_summed, &E_SUMMED) != TESS_OK ||
        tess_entry_register("result", on_result, &E_RESULT) != TESS_OK ||
        tess_entry_register("balanced", on_balanced, &E_BALANCED) != TESS_OK ||
        tess_entry_register("updated", on_updated, &E_UPDATED) != TESS_OK ||
        tess_gpu_batch_register("update", sizeof(jac_update_item_t), update_launch, NULL,
                                &B_UPDATE) != TESS_OK) {
        fprintf(stderr, "entry registration failed: %s\n", tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tess_array_params_t ap = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP |
                      TESS_ARRAY_FIELD_RESUME,
        .name       = "jacobi",
        .ndims      = 2,
        .extents    = {cx, cy},
        .elem_size  = sizeof(block_t),
        .ctor       = block_ctor,
        .dtor       = block_dtor,
        .pup        = block_pup,
        .resume     = E_BALANCED,
    };
    if (opt.launch_batch) { /* one stream a PE: a batch waits for one, and one waits for it */
        ap.field_mask |= TESS_ARRAY_FIELD_STREAMS;
        ap.pe_streams = 1;
    }
    if (tess_array_create(&ap, &grid) != TESS_OK) {
        fprintf(stderr, "tess_array_create failed: %s\n", tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    block_sums = calloc((size_t)cx * (size_t)cy, sizeof(double));
    int iter   = 0;
    if (ck.restart) {
        app_ckpt_restore(&ck, "jacobi2d", rank);
        iter = saved.iter;
    }

    /* Warm-up iterations (untimed), then the timed ones. A phase ends at the end of the
     * warm-up and at each checkpoint (when quiet), the last one when the result is in. */
    int    total = opt.warmup + opt.iters, timed = 0, nckpt = 0;
    double t0 = 0, ckpt_s = 0;
    for (;;) {
        if (!timed && iter >= opt.warmup) {
            /* The phase ended when no message was left, but the warm-up kernels may still be
             * running: wait for them, as the MPI program does before its clock starts. */
            tess_array_foreach(grid, sync_block, NULL);
            MPI_Barrier(MPI_COMM_WORLD);
            t0    = tess_wtime();
            timed = total - iter;
        }
        int next = iter < opt.warmup ? opt.warmup : total;
        if (ck.every && (iter / ck.every + 1) * ck.every < next)
            next = (iter / ck.every + 1) * ck.every;
        phase.target = next;
        phase.hold   = ck.every && next % ck.every == 0 && next < total;
        if (tess_run(next == total ? TESS_RUN_UNTIL_EXIT : TESS_RUN_UNTIL_QUIESCENCE,
                     start_phase, NULL) != TESS_OK)
            MPI_Abort(MPI_COMM_WORLD, 1);
        iter = next;
        if (iter == total)
            break;
        if (phase.hold) {
            saved = (jac_saved_t){.opt = opt, .cx = cx, .cy = cy, .iter = iter};
            ckpt_s += app_ckpt_write(&ck, "jacobi2d", &saved, sizeof(saved), iter, rank);
            nckpt++;
        }
    }
    result_t r;
    if (tess_result(&r, sizeof(r), NULL) != TESS_OK) {
        fprintf(stderr, "no result: %s\n", tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Element (0,0) lives on process 0, whose clock gave t0. */
    double per_iter = 0;
    if (rank == 0)
        per_iter = (r.t_end - t0) / timed;

    int status = 0;
    if (rank == 0) {
        printf("jacobi2d_tess: %lld x %lld, %d iterations (+%d warm-up), %d processes x %d PEs, "
               "%d GPU(s), ODF %d: %d x %d chares, backend %s\n", (long long)opt.nx,
               (long long)opt.ny, opt.iters, opt.warmup, nprocs, tess_ppn(), gpus, opt.odf, cx,
               cy, tess_gpu_backend_name());
        printf("time per iteration: %.6f ms\nchecksum: %.15e\n", per_iter * 1e3, r.checksum);
        if (ck.every)
            printf("checkpoints: %d in %s, %.3f s (%.2f%% of the timed part)\n", nckpt, ck.dir,
                   ckpt_s, 100 * ckpt_s / (r.t_end - t0));
        tess_lb_stats_t lbs;
        if (opt.lb_period && tess_lb_get_stats(grid, &lbs) == TESS_OK)
            printf("load balancing: %llu steps; the last moved %lld chares, imbalance %.3f -> "
                   "%.3f\n", (unsigned long long)lbs.steps, (long long)lbs.migrations,
                   lbs.imbalance_before, lbs.imbalance_after);
        if (opt.verify) {
            double ref = jac_serial_checksum(opt.nx, opt.ny, opt.warmup + opt.iters);
            double rel = ref != 0 ? (r.checksum - ref) / ref : r.checksum;
            if (rel < 0)
                rel = -rel;
            printf("verify: serial checksum %.15e, relative difference %.2e: %s\n", ref, rel,
                   rel <= 1e-12 ? "ok" : "WRONG");
            status = rel <= 1e-12 ? 0 : 3;
        }
        printf("RESULT prog=tess nx=%lld ny=%lld iters=%d procs=%d ppn=%d gpus=%d odf=%d "
               "chares=%dx%d backend=%s ms_per_iter=%.6f checksum=%.17g\n", (long long)opt.nx,
               (long long)opt.ny, opt.iters, nprocs, tess_ppn(), gpus, opt.odf, cx, cy,
               tess_gpu_backend_name(), per_iter * 1e3, r.checksum);
        fflush(stdout);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    tess_array_destroy(grid);
    free(block_sums);
    tess_finalize();
    MPI_Finalize();
    return status;
}
