// kernels_cuda.cu — the CUDA versions of LULESH's stages: thin wrappers around the math of
// lulesh.h (one thread per element or node), launched on the caller's stream. The domain is
// passed by value (its device pointers and sizes; the host scalars zeroed, so that a stage's
// arguments are the same every cycle: the time step is read from d.dev_scalars). As in LLNL's CUDA port: forces are computed
// per element (stress and hourglass fused) into corner arrays and gathered per node (no
// atomics); monotonic Q, EOS, the volume update and the time constraints are one kernel over
// the elements grouped by region (the groups ordered by EOS repetitions, so a warp mostly
// shares one count), whose last block writes the constraints' minima into pinned host memory,
// the only thing the host waits for.
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

static __device__ inline void record_err(const lul_domain_t &d, int err)
{
    if (err)
        atomicCAS((int *)d.err, 0, err);
}

/* Stage 2, one thread an element: the reference's CalcVolumeForceForElems (stress and
 * hourglass forces, lul_elem_force). */
static __global__ void __launch_bounds__(LUL_BLOCK, LUL_FORCE_MINB)
    k_force_elem(const lul_domain_t d)
{
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < d.numElem)
        record_err(d, lul_elem_force(&d, k));
}

/* Stage 2, one thread a surface node: the reference's CalcForceForNodes (lul_node_force).
 * fused: the surface nodes' forces also go into the node-sum's messages (lul_fuse_t). */
template <int fused>
static __global__ void k_force_node(const lul_domain_t d, int64_t nsurf, lul_fuse_t fz)
{
    int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s < nsurf)
        lul_node_force(&d, lul_surface_node(d.ex, d.ey, d.ez, s), fused ? &fz : NULL);
}

/* Stage 3, one thread a node: the reference's LagrangeNodal after the force
 * (CalcAccelerationForNodes, ApplyAccelerationBoundaryConditionsForNodes, CalcVelocityForNodes,
 * CalcPositionForNodes: lul_node_update).
 * fused: the exchange work of fz (lul_fuse_t) is done here; without it fz is not read. (Giving
 * the surface nodes and the interior to different warps was slower: the surface's columns are
 * strided, so its warps each fetch a line per node; 208 against 185 us a call at 129³ nodes.) */
template <int fused> static __global__ void k_nodes(const lul_domain_t d, lul_fuse_t fz)
{
    int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n < d.numNode)
        lul_node_update(&d, n, d.dev_scalars->deltatime, fused ? &fz : NULL);
}

/* Stage 4a, one thread an element: the reference's CalcLagrangeElements (CalcKinematicsForElems)
 * and CalcMonotonicQGradientsForElems (lul_elem_gradients). */
static __global__ void __launch_bounds__(LUL_BLOCK, LUL_GRAD_MINB)
    k_gradients(const lul_domain_t d)
{
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < d.numElem)
        record_err(d, lul_elem_gradients(&d, k, d.dev_scalars->deltatime));
}

/* A non-negative double's bits order as the double does (as unsigned integers): the minima are
 * taken with integer atomics on those bits. (A constraint is a quotient of positive figures or
 * 1e20; a negative or NaN one, which fmin would treat differently, means the mesh has already
 * failed, and the error code says so.) */
static __device__ inline void atomic_min_pos(double *a, double v)
{
    atomicMin((unsigned long long *)a, (unsigned long long)__double_as_longlong(v));
}

static __device__ inline double warp_min(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmin(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

/* Stage 5's reduction: the block's minima go to its slot of d.red with integer atomics
 * (lul_red_t); the block that finishes last writes the minima and the error code straight into
 * the pinned host block d.out (device-visible: no copy to launch, no second kernel) and sets
 * d.red back for the next cycle. Every thread of block blk of the nblk that take the minima
 * calls it. */
static __device__ void publish_minima(const lul_domain_t &d, double c, double h, unsigned blk,
                                      unsigned nblk)
{
    __shared__ double sc[LUL_BLOCK / 32], sh[LUL_BLOCK / 32];
    c = warp_min(c);
    h = warp_min(h);
    if (threadIdx.x % 32 == 0) {
        sc[threadIdx.x / 32] = c;
        sh[threadIdx.x / 32] = h;
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    for (unsigned w = 1; w < blockDim.x / 32; w++) {
        c = fmin(c, sc[w]);
        h = fmin(h, sh[w]);
    }
    unsigned        nslots = nblk < LUL_RED_SLOTS ? nblk : LUL_RED_SLOTS;
    unsigned        s      = blk % LUL_RED_SLOTS;
    unsigned        blocks = nblk / LUL_RED_SLOTS + (s < nblk % LUL_RED_SLOTS);
    lul_red_slot_t *slot   = &d.red->slot[s];
    atomic_min_pos(&slot->dtcourant, c);
    atomic_min_pos(&slot->dthydro, h);
    __threadfence();
    if (atomicAdd(&slot->blocks, 1u) != blocks - 1)
        return;
    __threadfence();
    if (atomicAdd(&d.red->slots_done, 1u) != nslots - 1)
        return;
    __threadfence();
    volatile lul_red_t *r = d.red;
    c = h = 1.0e20;
    for (unsigned i = 0; i < nslots; i++) {
        c                    = fmin(c, r->slot[i].dtcourant);
        h                    = fmin(h, r->slot[i].dthydro);
        r->slot[i].dtcourant = 1.0e20;
        r->slot[i].dthydro   = 1.0e20;
        r->slot[i].blocks    = 0;
    }
    r->slots_done    = 0;
    d.out->dtcourant = c;
    d.out->dthydro   = h;
    d.out->err       = *(volatile int32_t *)d.err;
    __threadfence_system();
}

/* Stage 4b (each element's monotonic Q, EOS and volume, over the elements grouped by region:
 * the reference's CalcMonotonicQRegionForElems, CalcQForElems' qstop check and
 * ApplyMaterialPropertiesForElems with EvalEOSForElems and UpdateVolumesForElems)
 * and, when `constraints`, stage 5 in the same kernel: each element's time constraints, then
 * publish_minima. Fused, it saves a launch per domain (or chare) and cycle, which small blocks
 * need; but the constraint's loads (arealg), gathered in region order, cost more than a pass in
 * element order, which large domains feel: ncu at 256³ elements on one domain, 1.80 ms fused
 * against 1.72 for the EOS and a reduction apart (lul_eos_split decides). */
static __device__ inline void eos_block(const lul_domain_t &d, bool constraints, unsigned blk,
                                        unsigned nblk)
{
    int64_t t = (int64_t)blk * blockDim.x + threadIdx.x;
    double  c = 1.0e20, h = 1.0e20;
    if (t < d.numElem) {
        int g = 0;
        while (g < d.numReg - 1 && t >= d.regStart[g + 1])
            g++;
        int32_t k = d.regElemlist[t];
        record_err(d, lul_elem_eos(&d, k, d.regRep[g]));
        if (constraints)
            lul_elem_constraints(&d, k, &c, &h);
    }
    if (constraints)
        publish_minima(d, c, h, blk, nblk);
}

template <bool constraints>
static __global__ void __launch_bounds__(LUL_BLOCK, LUL_EOS_MINB) k_eos(const lul_domain_t d)
{
    eos_block(d, constraints, blockIdx.x, gridDim.x);
}

/* Stage 5 apart: the time constraints in element order (the reference's
 * CalcTimeConstraintsForElems), then publish_minima. */
static __device__ inline void constraints_block(const lul_domain_t &d, unsigned blk, unsigned nblk)
{
    double c = 1.0e20, h = 1.0e20;
    for (int64_t k = (int64_t)blk * blockDim.x + threadIdx.x; k < d.numElem;
         k += (int64_t)blockDim.x * nblk) {
        double ck, hk;
        lul_elem_constraints(&d, k, &ck, &hk);
        c = fmin(c, ck);
        h = fmin(h, hk);
    }
    publish_minima(d, c, h, blk, nblk);
}

static __global__ void __launch_bounds__(LUL_BLOCK) k_constraints(const lul_domain_t d)
{
    constraints_block(d, blockIdx.x, gridDim.x);
}

static __host__ __device__ unsigned blocks_for(int64_t n, unsigned block)
{
    return (unsigned)((n + block - 1) / block);
}

/* The same stage of n blocks (lul_stage_batch): item k at items + k * stride, blockIdx.z picking
 * it (striding when there are more items than the grid's z); the grid's x covers the largest
 * item, and the blocks beyond an item's own count have nothing to do (a block's threads all
 * take the same path: the minima's block count is the item's). */
static __device__ inline const lul_stage_item_t &item_at(const char *items, size_t stride, int k)
{
    return *(const lul_stage_item_t *)(items + (size_t)k * stride);
}

/* Stage 2's element forces (LUL_STAGE_FORCE) or stage 4a (LUL_STAGE_GRADIENTS), one thread an
 * element of the item. */
template <int stage>
static __global__ void
    __launch_bounds__(LUL_BLOCK, stage == LUL_STAGE_FORCE ? LUL_FORCE_MINB : LUL_GRAD_MINB)
        k_elems_batch(const char *__restrict__ items, size_t stride, int n)
{
    for (int i = (int)blockIdx.z; i < n; i += (int)gridDim.z) {
        const lul_stage_item_t &it = item_at(items, stride, i);
        int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
        if (k < it.d.numElem)
            record_err(it.d, stage == LUL_STAGE_FORCE
                                 ? lul_elem_force(&it.d, k)
                                 : lul_elem_gradients(&it.d, k, it.deltatime));
    }
}

static __global__ void k_force_node_batch(const char *__restrict__ items, size_t stride, int n)
{
    for (int i = (int)blockIdx.z; i < n; i += (int)gridDim.z) {
        const lul_stage_item_t &it = item_at(items, stride, i);
        int64_t s  = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
        int64_t ns = lul_surface_count(it.d.ex, it.d.ey, it.d.ez);
        if (!it.d.gather_in_nodes && s < ns)
            lul_node_force(&it.d, lul_surface_node(it.d.ex, it.d.ey, it.d.ez, s),
                           it.fz.send ? &it.fz : NULL);
    }
}

static __global__ void k_nodes_batch(const char *__restrict__ items, size_t stride, int n)
{
    for (int i = (int)blockIdx.z; i < n; i += (int)gridDim.z) {
        const lul_stage_item_t &it = item_at(items, stride, i);
        int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
        if (v < it.d.numNode)
            lul_node_update(&it.d, v, it.deltatime, it.fz.recv || it.fz.send ? &it.fz : NULL);
        if (v == 0) /* for the stages after this one (this kernel reads the item's) */
            it.d.dev_scalars->deltatime = it.deltatime;
    }
}

static __global__ void __launch_bounds__(LUL_BLOCK, LUL_EOS_MINB)
    k_eos_batch(const char *__restrict__ items, size_t stride, int n)
{
    for (int i = (int)blockIdx.z; i < n; i += (int)gridDim.z) {
        const lul_stage_item_t &it = item_at(items, stride, i);
        unsigned nb = blocks_for(it.d.numElem, LUL_BLOCK);
        if (blockIdx.x < nb)
            eos_block(it.d, !it.split, blockIdx.x, nb);
        __syncthreads(); /* the minima's shared arrays, before the next item's */
    }
}

static __global__ void __launch_bounds__(LUL_BLOCK)
    k_constraints_batch(const char *__restrict__ items, size_t stride, int n)
{
    for (int i = (int)blockIdx.z; i < n; i += (int)gridDim.z) {
        const lul_stage_item_t &it = item_at(items, stride, i);
        unsigned nb = blocks_for(it.d.numElem, 4 * LUL_BLOCK);
        if (it.split && blockIdx.x < nb)
            constraints_block(it.d, blockIdx.x, nb);
        __syncthreads();
    }
}

/* The domain as the kernels get it: the host scalars (time, deltatime, cycle) zeroed, so that a
 * launch's arguments are the same every cycle (the kernels read the time step from
 * d.dev_scalars). */
static lul_domain_t kview(const lul_domain_t *d)
{
    lul_domain_t k = *d;
    k.time = k.deltatime = 0.0;
    k.cycle              = 0;
    return k;
}

extern "C" {

void lul_cuda_force(void *s, const lul_domain_t *dp, const lul_fuse_t *fz)
{
    cudaStream_t       st = (cudaStream_t)s;
    const lul_domain_t d  = kview(dp);
    k_force_elem<<<blocks_for(d.numElem, LUL_BLOCK), LUL_BLOCK, 0, st>>>(d);
    if (!d.gather_in_nodes) {
        int64_t  ns = lul_surface_count(d.ex, d.ey, d.ez);
        unsigned nb = blocks_for(ns, 256);
        if (fz && fz->send)
            k_force_node<1><<<nb, 256, 0, st>>>(d, ns, *fz);
        else
            k_force_node<0><<<nb, 256, 0, st>>>(d, ns, lul_fuse_t{});
    }
}

void lul_cuda_nodes(void *s, const lul_domain_t *dp, const lul_fuse_t *fz)
{
    const lul_domain_t d  = kview(dp);
    unsigned           nb = blocks_for(d.numNode, 256);
    if (fz && (fz->recv || fz->send))
        k_nodes<1><<<nb, 256, 0, (cudaStream_t)s>>>(d, *fz);
    else
        k_nodes<0><<<nb, 256, 0, (cudaStream_t)s>>>(d, lul_fuse_t{});
}

void lul_cuda_gradients(void *s, const lul_domain_t *dp)
{
    const lul_domain_t d = kview(dp);
    k_gradients<<<blocks_for(d.numElem, LUL_BLOCK), LUL_BLOCK, 0, (cudaStream_t)s>>>(d);
}

void lul_cuda_eos(void *s, const lul_domain_t *dp, int split)
{
    cudaStream_t       st = (cudaStream_t)s;
    const lul_domain_t d  = kview(dp);
    unsigned           nb = blocks_for(d.numElem, LUL_BLOCK);
    if (!split) {
        k_eos<true><<<nb, LUL_BLOCK, 0, st>>>(d);
        return;
    }
    k_eos<false><<<nb, LUL_BLOCK, 0, st>>>(d);
    /* Four elements a thread: a quarter of the blocks' minima to take. */
    k_constraints<<<blocks_for(d.numElem, 4 * LUL_BLOCK), LUL_BLOCK, 0, st>>>(d);
}

void lul_cuda_stage_batch(void *s, int stage, const void *items, const void *items_host,
                          size_t stride, int n)
{
    cudaStream_t st = (cudaStream_t)s;
    const char  *dv = (const char *)items;
    int64_t      elems = 1, nodes = 1, surface = 1, split_elems = 0;
    for (int k = 0; k < n; k++) {
        const lul_stage_item_t *it =
            (const lul_stage_item_t *)((const char *)items_host + (size_t)k * stride);
        const lul_domain_t *d = &it->d;
        int64_t             sc = lul_surface_count(d->ex, d->ey, d->ez);
        elems   = d->numElem > elems ? d->numElem : elems;
        nodes   = d->numNode > nodes ? d->numNode : nodes;
        surface = sc > surface ? sc : surface;
        if (it->split && d->numElem > split_elems)
            split_elems = d->numElem;
    }
    unsigned z = (unsigned)(n < 65535 ? n : 65535);
    switch (stage) {
    case LUL_STAGE_FORCE:
        k_elems_batch<LUL_STAGE_FORCE>
            <<<dim3(blocks_for(elems, LUL_BLOCK), 1, z), LUL_BLOCK, 0, st>>>(dv, stride, n);
        k_force_node_batch<<<dim3(blocks_for(surface, 256), 1, z), 256, 0, st>>>(dv, stride, n);
        break;
    case LUL_STAGE_NODES:
        k_nodes_batch<<<dim3(blocks_for(nodes, 256), 1, z), 256, 0, st>>>(dv, stride, n);
        break;
    case LUL_STAGE_GRADIENTS:
        k_elems_batch<LUL_STAGE_GRADIENTS>
            <<<dim3(blocks_for(elems, LUL_BLOCK), 1, z), LUL_BLOCK, 0, st>>>(dv, stride, n);
        break;
    default:
        k_eos_batch<<<dim3(blocks_for(elems, LUL_BLOCK), 1, z), LUL_BLOCK, 0, st>>>(dv, stride, n);
        if (split_elems)
            k_constraints_batch<<<dim3(blocks_for(split_elems, 4 * LUL_BLOCK), 1, z), LUL_BLOCK, 0,
                                  st>>>(dv, stride, n);
        break;
    }
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

void lul_cuda_copy_async(void *s, void *dst, const void *src, size_t bytes)
{
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)s);
}

} // extern "C"
