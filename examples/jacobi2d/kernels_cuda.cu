// kernels_cuda.cu — the CUDA versions of the Jacobi2D kernels: thin wrappers around the math of
// jacobi.h, launched on the caller's stream.
#include "jacobi.h"

#include <cuda_runtime.h>

static __global__ void k_init(double *t, int64_t bx, int64_t by, int n, int s, int w, int e,
                              double ghost)
{
    int64_t ld = by + 2;
    TESS_KERNEL_LOOP(k, (bx + 2) * ld)
    {
        int64_t i = k / ld, j = k % ld;
        double  v = 0.0;
        if ((n && i == 0) || (s && i == bx + 1) || (w && j == 0) || (e && j == by + 1))
            v = ghost;
        t[k] = v;
    }
}

/* One row per block row (blockIdx.y, striding when there are more rows than the grid has),
 * 256 consecutive columns per block: coalesced, and no index division. Only a block holding
 * the first or last column takes the path that reads and writes halo buffers; the test is the
 * same for every thread of a block, so the others run the plain stencil. (With the halo tests
 * in every thread the kernel took about 20% longer on the H200, with or without halos.) */
static __device__ void update_rows(const double *__restrict__ in, double *__restrict__ out,
                                   int64_t bx, int64_t by, const double *nin, const double *sin,
                                   const double *__restrict__ win, const double *__restrict__ ein,
                                   double *__restrict__ wout, double *__restrict__ eout)
{
    int64_t ld = by + 2;
    for (int64_t i = (int64_t)blockIdx.y + 1; i <= bx; i += gridDim.y) {
        const double *up   = jac_row_above(in, ld, i, nin);
        const double *down = jac_row_below(in, ld, i, bx, sin);
        for (int64_t j0 = (int64_t)blockIdx.x * blockDim.x + 1; j0 <= by;
             j0 += (int64_t)blockDim.x * gridDim.x) {
            int64_t j = j0 + threadIdx.x;
            if (j > by)
                continue;
            if (j0 == 1 || j0 + blockDim.x > by)
                jac_update_point(in, out, ld, by, i, j, up, down, win, ein, wout, eout);
            else
                jac_update_point(in, out, ld, by, i, j, up, down, NULL, NULL, NULL, NULL);
        }
    }
}

static __global__ void k_update(const double *__restrict__ in, double *__restrict__ out,
                                int64_t bx, int64_t by, const double *nin, const double *sin,
                                const double *__restrict__ win, const double *__restrict__ ein,
                                double *__restrict__ wout, double *__restrict__ eout)
{
    update_rows(in, out, bx, by, nin, sin, win, ein, wout, eout);
}

/* A batch of updates: blockIdx.z selects the item (striding when there are more items than
 * the grid has), whose blocks do what k_update's do for it; the grid's x and y cover the
 * largest item, and the blocks beyond a smaller item's rows and columns find nothing to do.
 * An item's repeats run one after the other in its blocks (they all compute the same values). */
static __global__ void k_update_batch(const jac_update_item_t *__restrict__ items, int n)
{
    for (int k = (int)blockIdx.z; k < n; k += gridDim.z) {
        const jac_update_item_t it = items[k];
        for (int64_t r = 0; r < it.repeat; r++)
            update_rows(it.in, it.out, it.bx, it.by, it.nin, it.sin, it.win, it.ein, it.wout,
                        it.eout);
    }
}

static __global__ void k_pack_col(const double *t, double *buf, int64_t bx, int64_t by, int64_t col)
{
    int64_t ld = by + 2;
    TESS_KERNEL_LOOP(i, bx)
    buf[i] = t[(i + 1) * ld + col];
}

static __global__ void k_row_sums(const double *t, double *rows, int64_t bx, int64_t by)
{
    int64_t ld = by + 2;
    TESS_KERNEL_LOOP(i, bx)
    {
        double s = 0;
        for (int64_t j = 1; j <= by; j++)
            s += t[(i + 1) * ld + j];
        rows[i] = s;
    }
}

static unsigned blocks_for(int64_t n)
{
    return tess_kernel_blocks(n, 256, 65535);
}

extern "C" {

void jac_cuda_init_block(void *s, double *t, int64_t bx, int64_t by, int n, int so, int w, int e,
                         double ghost)
{
    k_init<<<blocks_for((bx + 2) * (by + 2)), 256, 0, (cudaStream_t)s>>>(t, bx, by, n, so, w, e,
                                                                         ghost);
}

void jac_cuda_update(void *s, const double *in, double *out, int64_t bx, int64_t by, int repeat,
                     const double *nin, const double *sin, const double *win, const double *ein,
                     double *wout, double *eout)
{
    dim3 block(256);
    dim3 grid((unsigned)((by + 255) / 256), (unsigned)(bx < 65535 ? bx : 65535));
    for (int r = 0; r < repeat; r++)
        k_update<<<grid, block, 0, (cudaStream_t)s>>>(in, out, bx, by, nin, sin, win, ein, wout,
                                                      eout);
}

void jac_cuda_update_batch(void *s, const jac_update_item_t *items,
                           const jac_update_item_t *items_host, int n)
{
    int64_t bx = 1, by = 1;
    for (int k = 0; k < n; k++) {
        bx = items_host[k].bx > bx ? items_host[k].bx : bx;
        by = items_host[k].by > by ? items_host[k].by : by;
    }
    dim3 block(256);
    dim3 grid((unsigned)((by + 255) / 256), (unsigned)(bx < 65535 ? bx : 65535),
              (unsigned)(n < 65535 ? n : 65535));
    k_update_batch<<<grid, block, 0, (cudaStream_t)s>>>(items, n);
}

void jac_cuda_pack_col(void *s, const double *t, double *buf, int64_t bx, int64_t by, int64_t col)
{
    k_pack_col<<<blocks_for(bx), 256, 0, (cudaStream_t)s>>>(t, buf, bx, by, col);
}

void jac_cuda_row_sums(void *s, const double *t, double *rows, int64_t bx, int64_t by)
{
    k_row_sums<<<blocks_for(bx), 128, 0, (cudaStream_t)s>>>(t, rows, bx, by);
}

} // extern "C"
