/*
 * jacobi.h — Jacobi2D, shared by the pure MPI program and the Tessera one: the problem, the
 * decomposition, the per-point math (written once, for CUDA and the host), and the launchers.
 *
 * The problem: an NX × NY interior grid with a fixed ghost ring of 1.0 around it; the interior
 * starts at 0.0; every iteration sets T'(i,j) = 0.2 × (T(i,j) + T(i−1,j) + T(i+1,j) + T(i,j−1) +
 * T(i,j+1)) over the whole interior; a fixed number of iterations; the checksum is the sum of
 * the interior.
 *
 * A block of bx × by interior points is stored row-major with its ghost cells: (bx+2) rows of
 * ld = by+2 doubles; row i, column j is t[i*ld + j], the interior is 1..bx × 1..by.
 */
#ifndef JACOBI_H
#define JACOBI_H

#include <stddef.h>
#include <stdint.h>
#include <tessera/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- math (one source for every backend) --------------------------------------------------- */

static inline TESS_HD double jac_stencil(double c, double n, double s, double w, double e)
{
    return 0.2 * (c + n + s + w + e);
}

/* One point of the update. The west and east neighbours of the first and last interior column
 * come from win/ein when given (received halos, instead of the ghost column), and those columns'
 * new values also go to wout/eout when given (the halos to send): packing and unpacking are
 * part of the update instead of kernels of their own. `up` and `down` are the rows above and
 * below row i from column 1 on (jac_row_above / jac_row_below): the ghost rows of `in`, or a
 * neighbour's halo row read where it lies. */
static inline TESS_HD void jac_update_point(const double *TESS_RESTRICT in,
                                            double *TESS_RESTRICT out, int64_t ld, int64_t by,
                                            int64_t i, int64_t j, const double *up,
                                            const double *down, const double *TESS_RESTRICT win,
                                            const double *TESS_RESTRICT ein,
                                            double *TESS_RESTRICT wout, double *TESS_RESTRICT eout)
{
    const double *TESS_RESTRICT r = in + i * ld;
    double w = (j == 1 && win) ? win[i - 1] : r[j - 1];
    double e = (j == by && ein) ? ein[i - 1] : r[j + 1];
    double v = jac_stencil(r[j], up[j - 1], down[j - 1], w, e);
    out[i * ld + j] = v;
    if (j == 1 && wout)
        wout[i - 1] = v;
    if (j == by && eout)
        eout[i - 1] = v;
}

/* The row above interior row i from column 1: the north halo `nin` for the first row when
 * given, else row i - 1 of `in` (for i = 1 its ghost row). */
static inline TESS_HD const double *jac_row_above(const double *in, int64_t ld, int64_t i,
                                                  const double *nin)
{
    return (i == 1 && nin) ? nin : in + (i - 1) * ld + 1;
}

/* The row below interior row i of bx from column 1: the south halo `sin` for the last row. */
static inline TESS_HD const double *jac_row_below(const double *in, int64_t ld, int64_t i,
                                                  int64_t bx, const double *sin)
{
    return (i == bx && sin) ? sin : in + (i + 1) * ld + 1;
}

/* ---- decomposition ------------------------------------------------------------------------ */

/** Split n points into parts: part p gets [jac_start(n, parts, p), jac_start(n, parts, p+1)). */
static inline int64_t jac_start(int64_t n, int64_t parts, int64_t p)
{
    return p * (n / parts) + (p < n % parts ? p : n % parts);
}

/** A px × py grid of `parts` blocks for an nx × ny grid: the factorisation whose blocks are
 *  closest to square (fewest halo points). */
static inline void jac_factor(int64_t parts, int64_t nx, int64_t ny, int *px_p, int *py_p)
{
    double best = -1;
    for (int64_t px = 1; px <= parts; px++) {
        if (parts % px)
            continue;
        int64_t py = parts / px;
        if (px > nx || py > ny)
            continue;
        double halo = (double)nx / px + (double)ny / py; /* per block, up to a factor 2 */
        if (best < 0 || halo < best) {
            best  = halo;
            *px_p = (int)px;
            *py_p = (int)py;
        }
    }
    if (best < 0) { /* more parts than points in a dimension: put them along the longer one */
        *px_p = (int)(nx >= ny ? parts : 1);
        *py_p = (int)(nx >= ny ? 1 : parts);
    }
}

/* ---- launchers ------------------------------------------------------------------------------ */

/*
 * A stream is a tess_stream_t (Tessera) or a cudaStream_t (the MPI program). With the host
 * backend the launchers enqueue host loops with tess_gpu_launch_host; with `stream == NULL` and
 * no GPU (the MPI program on a CPU machine) they run the loop at once.
 */
enum { JAC_HOST = 0, JAC_CUDA = 1 };
extern int jac_backend; /* set by the program before the first launch */
/** How host loops are enqueued on a stream (the Tessera program: tess_gpu_launch_host); NULL
 *  runs them at once. args_size <= 256. */
typedef void (*jac_host_fn_t)(void *args);
extern void (*jac_host_launch)(void *stream, jac_host_fn_t fn, const void *args, size_t args_size);

/** Interior ← 0, ghost ring ← `ghost` where the block touches the global boundary (north,
 *  south, west, east flags), and 0 elsewhere. */
void jac_init_block(void *stream, double *t, int64_t bx, int64_t by, int north, int south,
                    int west, int east, double ghost);
/** out interior ← update of in, `repeat` times (the same result: extra work for imbalance);
 *  nin/sin: the north and south halo rows (by doubles) when they are not in in's ghost rows;
 *  win/ein/wout/eout as in jac_update_point (each may be NULL). */
void jac_update(void *stream, const double *in, double *out, int64_t bx, int64_t by, int repeat,
                const double *nin, const double *sin, const double *win, const double *ein,
                double *wout, double *eout);
/** The arguments of one jac_update, as an item of a batched launch. */
typedef struct jac_update_item {
    const double *in;
    double       *out;
    int64_t       bx, by;
    int64_t       repeat;
    const double *nin, *sin, *win, *ein;
    double       *wout, *eout;
} jac_update_item_t;
/** n updates in one launch: `items` where the kernel reads them (device memory; host memory on
 *  the host backend), `items_host` the same in host memory (to size the grid). */
void jac_update_batch(void *stream, const jac_update_item_t *items,
                      const jac_update_item_t *items_host, int n);
/** buf[i] ← t[(i+1)*ld + col] for i < bx (pack a column: the first iteration's halos; later
 *  ones are written by jac_update). */
void jac_pack_col(void *stream, const double *t, double *buf, int64_t bx, int64_t by, int64_t col);
/** rows[i] ← sum of interior row i+1 (then the caller sums rows on the host: deterministic). */
void jac_row_sums(void *stream, const double *t, double *rows, int64_t bx, int64_t by);

#ifdef JACOBI_CUDA
/* CUDA launchers (kernels_cuda.cu); the C launchers above call them when jac_backend says so. */
void jac_cuda_init_block(void *s, double *t, int64_t bx, int64_t by, int n, int so, int w, int e,
                         double ghost);
void jac_cuda_update(void *s, const double *in, double *out, int64_t bx, int64_t by, int repeat,
                     const double *nin, const double *sin, const double *win, const double *ein,
                     double *wout, double *eout);
void jac_cuda_update_batch(void *s, const jac_update_item_t *items,
                           const jac_update_item_t *items_host, int n);
void jac_cuda_pack_col(void *s, const double *t, double *buf, int64_t bx, int64_t by, int64_t col);
void jac_cuda_row_sums(void *s, const double *t, double *rows, int64_t bx, int64_t by);
#endif

/* ---- a serial reference --------------------------------------------------------------------- */

/** The checksum of the whole problem computed serially on the host (small sizes only). */
double jac_serial_checksum(int64_t nx, int64_t ny, int iters);

#ifdef __cplusplus
}
#endif

#endif /* JACOBI_H */
