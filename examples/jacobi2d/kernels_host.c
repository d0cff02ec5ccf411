/* kernels_host.c — the host versions of the Jacobi2D kernels, and the launchers that choose
 * between them and the CUDA ones. No dependency on Tessera or MPI. */
#include "jacobi.h"

#include <stdlib.h>
#include <string.h>

int jac_backend = JAC_HOST;
void (*jac_host_launch)(void *stream, jac_host_fn_t fn, const void *args, size_t args_size);

static void launch(void *stream, jac_host_fn_t fn, const void *args, size_t size)
{
    if (stream && jac_host_launch)
        jac_host_launch(stream, fn, args, size);
    else
        fn((void *)args);
}

/* ---- init ------------------------------------------------------------------------------------ */

typedef struct init_args {
    double *t;
    int64_t bx, by;
    int     n, s, w, e;
    double  ghost;
} init_args_t;

static void host_init(void *p)
{
    init_args_t *a  = p;
    int64_t      ld = a->by + 2;
    memset(a->t, 0, sizeof(double) * (size_t)((a->bx + 2) * ld));
    for (int64_t j = 0; j < ld; j++) {
        if (a->n)
            a->t[j] = a->ghost;
        if (a->s)
            a->t[(a->bx + 1) * ld + j] = a->ghost;
    }
    for (int64_t i = 0; i < a->bx + 2; i++) {
        if (a->w)
            a->t[i * ld] = a->ghost;
        if (a->e)
            a->t[i * ld + a->by + 1] = a->ghost;
    }
}

void jac_init_block(void *stream, double *t, int64_t bx, int64_t by, int north, int south,
                    int west, int east, double ghost)
{
#ifdef JACOBI_CUDA
    if (jac_backend == JAC_CUDA) {
        jac_cuda_init_block(stream, t, bx, by, north, south, west, east, ghost);
        return;
    }
#endif
    init_args_t a = {t, bx, by, north, south, west, east, ghost};
    launch(stream, host_init, &a, sizeof(a));
}

/* ---- update ---------------------------------------------------------------------------------- */

typedef jac_update_item_t update_args_t;

static void host_update(void *p)
{
    update_args_t *a  = p;
    int64_t        ld = a->by + 2;
    /* The first and last columns may read and write halo buffers; the columns between run the
     * plain stencil, which the compiler vectorises. */
    for (int64_t r = 0; r < a->repeat; r++)
        for (int64_t i = 1; i <= a->bx; i++) {
            const double *up   = jac_row_above(a->in, ld, i, a->nin);
            const double *down = jac_row_below(a->in, ld, i, a->bx, a->sin);
            jac_update_point(a->in, a->out, ld, a->by, i, 1, up, down, a->win, a->ein, a->wout,
                             a->eout);
            for (int64_t j = 2; j < a->by; j++)
                jac_update_point(a->in, a->out, ld, a->by, i, j, up, down, NULL, NULL, NULL, NULL);
            if (a->by > 1)
                jac_update_point(a->in, a->out, ld, a->by, i, a->by, up, down, a->win, a->ein,
                                 a->wout, a->eout);
        }
}

void jac_update(void *stream, const double *in, double *out, int64_t bx, int64_t by, int repeat,
                const double *nin, const double *sin, const double *win, const double *ein,
                double *wout, double *eout)
{
#ifdef JACOBI_CUDA
    if (jac_backend == JAC_CUDA) {
        jac_cuda_update(stream, in, out, bx, by, repeat, nin, sin, win, ein, wout, eout);
        return;
    }
#endif
    update_args_t a = {in, out, bx, by, repeat, nin, sin, win, ein, wout, eout};
    launch(stream, host_update, &a, sizeof(a));
}

typedef struct batch_args {
    const jac_update_item_t *items;
    int                      n;
} batch_args_t;

static void host_update_batch(void *p)
{
    batch_args_t *a = p;
    for (int k = 0; k < a->n; k++)
        host_update((void *)&a->items[k]);
}

void jac_update_batch(void *stream, const jac_update_item_t *items,
                      const jac_update_item_t *items_host, int n)
{
#ifdef JACOBI_CUDA
    if (jac_backend == JAC_CUDA) {
        jac_cuda_update_batch(stream, items, items_host, n);
        return;
    }
#endif
    (void)items_host;
    batch_args_t a = {items, n};
    launch(stream, host_update_batch, &a, sizeof(a));
}

/* ---- halo columns ---------------------------------------------------------------------------- */

typedef struct col_args {
    const double *t;
    double       *buf;
    int64_t       bx, by, col;
} col_args_t;

static void host_col(void *p)
{
    col_args_t *a  = p;
    int64_t     ld = a->by + 2;
    for (int64_t i = 0; i < a->bx; i++)
        a->buf[i] = a->t[(i + 1) * ld + a->col];
}

void jac_pack_col(void *stream, const double *t, double *buf, int64_t bx, int64_t by, int64_t col)
{
#ifdef JACOBI_CUDA
    if (jac_backend == JAC_CUDA) {
        jac_cuda_pack_col(stream, t, buf, bx, by, col);
        return;
    }
#endif
    col_args_t a = {t, buf, bx, by, col};
    launch(stream, host_col, &a, sizeof(a));
}

/* ---- checksum -------------------------------------------------------------------------------- */

typedef struct sum_args {
    const double *t;
    double       *rows;
    int64_t       bx, by;
} sum_args_t;

static void host_row_sums(void *p)
{
    sum_args_t *a  = p;
    int64_t     ld = a->by + 2;
    for (int64_t i = 0; i < a->bx; i++) {
        double s = 0;
        for (int64_t j = 1; j <= a->by; j++)
            s += a->t[(i + 1) * ld + j];
        a->rows[i] = s;
    }
}

void jac_row_sums(void *stream, const double *t, double *rows, int64_t bx, int64_t by)
{
#ifdef JACOBI_CUDA
    if (jac_backend == JAC_CUDA) {
        jac_cuda_row_sums(stream, t, rows, bx, by);
        return;
    }
#endif
    sum_args_t a = {t, rows, bx, by};
    launch(stream, host_row_sums, &a, sizeof(a));
}

/* ---- serial reference -------------------------------------------------------------------------- */

double jac_serial_checksum(int64_t nx, int64_t ny, int iters)
{
    int64_t ld = ny + 2;
    double *a  = malloc(sizeof(double) * (size_t)((nx + 2) * ld));
    double *b  = malloc(sizeof(double) * (size_t)((nx + 2) * ld));
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    init_args_t ia = {a, nx, ny, 1, 1, 1, 1, 1.0};
    host_init(&ia);
    ia.t = b;
    host_init(&ia);
    for (int it = 0; it < iters; it++) {
        update_args_t ua = {a, b, nx, ny, 1, NULL, NULL, NULL, NULL, NULL, NULL};
        host_update(&ua);
        double *t = a;
        a         = b;
        b         = t;
    }
    double sum = 0;
    for (int64_t i = 1; i <= nx; i++)
        for (int64_t j = 1; j <= ny; j++)
            sum += a[i * ld + j];
    free(a);
    free(b);
    return sum;
}
