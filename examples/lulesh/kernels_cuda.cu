// kernels_cuda.cu — the CUDA versions of LULESH's stages: thin wrappers around the math of
// lulesh.h (one thread per element or node), launched on the caller's stream. The domain is
// passed by value (its device pointers and sizes). As in LLNL's CUDA port: forces are computed
// per element (stress and hourglass fused) into corner arrays and gathered per node (no
// atomics); monotonic Q, EOS and the volume update are one kernel over the elements grouped
// by region (the groups ordered by EOS repetitions, so a warp mostly shares one count); the
// time constraints are a two-pass minimum whose result is copied to pinned host memory, the
// only thing the host waits for.
#include "lulesh.h"

#include <cuda_runtime.h>

#define LUL_BLOCK       128
/* Minimum resident blocks per SM of the three heavy element kernels (0: let ptxas choose
 * registers; the defaults need no spills). LLNL's port asks for 256 resident threads per SM of
 * its force kernel and 512 of its kinematics kernel (spilling there); -DLUL_GRAD_MINB=4 in
 * NVCC_CPPFLAGS asks the same of k_gradients. */
#ifndef LUL_FORCE_MINB
#define LUL_FORCE_MINB 0
#endif
#ifndef LUL_GRAD_MINB
#define LUL_GRAD_MINB 0
#endif
#ifndef LUL_EOS_MINB
#define LUL_EOS_MINB 0
#endif
#define LUL_RED_BLOCKS  LUL_DT_PART_BLOCKS /* at most this many blocks in the reduction */
#define LUL_RED_THREADS 256

static __device__ inline void record_err(const lul_domain_t &d, int err)
{
    if (err)
        atomicCAS((int *)d.err, 0, err);
}

static __global__ void __launch_bounds__(LUL_BLOCK, LUL_FORCE_MINB)
    k_force_elem(const lul_domain_t d)
{
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < d.numElem)
        record_err(d, lul_elem_force(&d, k));
}

static __global__ void k_force_node(const lul_domain_t d, int64_t nsurf)
{
    int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s < nsurf)
        lul_node_force(&d, lul_surface_node(d.ex, d.ey, d.ez, s));
}

/* fused: the exchange work of fz (lul_fuse_t) is done here; without it fz is not read. (Giving
 * the surface nodes and the interior to different warps was slower: the surface's columns are
 * strided, so its warps each fetch a line per node; 208 against 185 us a call at 129³ nodes.) */
template <int fused> static __global__ void k_nodes(const lul_domain_t d, double dt, lul_fuse_t fz)
{
    int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n < d.numNode)
        lul_node_update(&d, n, dt, fused ? &fz : NULL);
}

static __global__ void __launch_bounds__(LUL_BLOCK, LUL_GRAD_MINB)
    k_gradients(const lul_domain_t d, double dt)
{
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < d.numElem)
        record_err(d, lul_elem_gradients(&d, k, dt));
}

static __global__ void __launch_bounds__(LUL_BLOCK, LUL_EOS_MINB) k_eos(const lul_domain_t d)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= d.numElem)
        return;
    int g = 0;
    while (g < d.numReg - 1 && t >= d.regStart[g + 1])
        g++;
    record_err(d, lul_elem_eos(&d, d.regElemlist[t], d.regRep[g]));
}

static __device__ inline void block_min2(double &a, double &b)
{
    __shared__ double sa[LUL_RED_THREADS], sb[LUL_RED_THREADS];
    sa[threadIdx.x] = a;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            sa[threadIdx.x] = fmin(sa[threadIdx.x], sa[threadIdx.x + s]);
            sb[threadIdx.x] = fmin(sb[threadIdx.x], sb[threadIdx.x + s]);
        }
        __syncthreads();
    }
    a = sa[0];
    b = sb[0];
}

static __global__ void k_constraints(const lul_domain_t d)
{
    double c = 1.0e20, h = 1.0e20;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d.numElem;
         k += (int64_t)blockDim.x * gridDim.x) {
        double ck, hk;
        lul_elem_constraints(&d, k, &ck, &hk);
        c = fmin(c, ck);
        h = fmin(h, hk);
    }
    block_min2(c, h);
    if (threadIdx.x == 0) {
        d.dt_part[blockIdx.x]                  = c;
        d.dt_part[LUL_RED_BLOCKS + blockIdx.x] = h;
    }
}

static __global__ void k_constraints_final(const lul_domain_t d, unsigned nblocks)
{
    double c = 1.0e20, h = 1.0e20;
    for (unsigned b = threadIdx.x; b < nblocks; b += blockDim.x) {
        c = fmin(c, d.dt_part[b]);
        h = fmin(h, d.dt_part[LUL_RED_BLOCKS + b]);
    }
    block_min2(c, h);
    if (threadIdx.x == 0) {
        d.out_dev->dtcourant = c;
        d.out_dev->dthydro   = h;
        d.out_dev->err       = *d.err;
    }
}

static unsigned blocks_for(int64_t n, unsigned block)
{
    return (unsigned)((n + block - 1) / block);
}

extern "C" {

void lul_cuda_force(void *s, const lul_domain_t *d)
{
    cudaStream_t st = (cudaStream_t)s;
    k_force_elem<<<blocks_for(d->numElem, LUL_BLOCK), LUL_BLOCK, 0, st>>>(*d);
    if (!d->gather_in_nodes) {
        int64_t ns = lul_surface_count(d->ex, d->ey, d->ez);
        k_force_node<<<blocks_for(ns, 256), 256, 0, st>>>(*d, ns);
    }
}

void lul_cuda_nodes(void *s, const lul_domain_t *d, double dt, const lul_fuse_t *fz)
{
    unsigned nb = blocks_for(d->numNode, 256);
    if (fz && (fz->recv || fz->send))
        k_nodes<1><<<nb, 256, 0, (cudaStream_t)s>>>(*d, dt, *fz);
    else
        k_nodes<0><<<nb, 256, 0, (cudaStream_t)s>>>(*d, dt, lul_fuse_t{});
}

void lul_cuda_gradients(void *s, const lul_domain_t *d, double dt)
{
    k_gradients<<<blocks_for(d->numElem, LUL_BLOCK), LUL_BLOCK, 0, (cudaStream_t)s>>>(*d, dt);
}

void lul_cuda_eos(void *s, const lul_domain_t *d)
{
    k_eos<<<blocks_for(d->numElem, LUL_BLOCK), LUL_BLOCK, 0, (cudaStream_t)s>>>(*d);
}

void lul_cuda_constraints(void *s, const lul_domain_t *d)
{
    cudaStream_t st = (cudaStream_t)s;
    unsigned     nb = tess_kernel_blocks(d->numElem, LUL_RED_THREADS, LUL_RED_BLOCKS);
    k_constraints<<<nb, LUL_RED_THREADS, 0, st>>>(*d);
    k_constraints_final<<<1, LUL_RED_THREADS, 0, st>>>(*d, nb);
    cudaMemcpyAsync(d->out, d->out_dev, sizeof(lul_out_t), cudaMemcpyDeviceToHost, st);
}

void *lul_cuda_malloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    return p;
}

void lul_cuda_free(void *p)
{
    cudaFree(p);
}

void *lul_cuda_malloc_host(size_t bytes)
{
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

void lul_cuda_free_host(void *p)
{
    cudaFreeHost(p);
}

void lul_cuda_copy(void *dst, const void *src, size_t bytes)
{
    cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
}

} // extern "C"
