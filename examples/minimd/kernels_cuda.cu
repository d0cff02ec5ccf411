// kernels_cuda.cu — the CUDA versions of the MiniMD kernels: thin wrappers around the per-atom
// math of minimd.h, launched on the caller's stream. Every result is the same from run to run:
// selections keep index order (a block scan, not atomics), bins are sorted after filling, and
// the thermo sums are reduced in a fixed tree.
#include "minimd.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

static unsigned blocks_for(int64_t n, unsigned block)
{
    return tess_kernel_blocks(n, block, 65535u * 16u);
}

static __global__ void k_initial(double *x, double *v, const double *f, int64_t n, double dt,
                                 double dtforce)
{
    TESS_KERNEL_LOOP(i, n)
    mmd_initial_integrate_atom(x, v, f, i, dt, dtforce);
}

static __global__ void k_final(double *v, const double *f, int64_t n, double dtforce)
{
    TESS_KERNEL_LOOP(i, n)
    mmd_final_integrate_atom(v, f, i, dtforce);
}

// One thread per atom; the neighbor list is column-major, so the threads of a warp read
// consecutive words of it. The energy and virial are compiled in only for thermo steps.
template <bool ENERGY>
static __global__ void __launch_bounds__(128)
    k_force(const double *__restrict__ x, double *__restrict__ f, const int *__restrict__ neigh,
            const int *__restrict__ numneigh, int64_t stride, int64_t n, double cutforcesq,
            double *eatom, double *watom)
{
    TESS_KERNEL_LOOP(i, n)
    mmd_force_atom(x, f, neigh, numneigh, stride, i, cutforcesq, ENERGY ? eatom : nullptr,
                   ENERGY ? watom : nullptr);
}

enum { THERMO_BLOCK = 256 };
static_assert(MMD_THERMO_PARTS == THERMO_BLOCK, "one thread per part in the second pass");

// Pass 1: block b sums a fixed set of atoms (grid stride) into part b; pass 2 sums the parts.
static __global__ void k_thermo_parts(const double *v, const double *eatom, const double *watom,
                                      int64_t n, double *out)
{
    typedef cub::BlockReduce<double, THERMO_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage tmp;
    double s[3] = {0, 0, 0};
    for (int64_t i = (int64_t)blockIdx.x * THERMO_BLOCK + threadIdx.x; i < n;
         i += (int64_t)THERMO_BLOCK * gridDim.x) {
        s[0] += mmd_v2_atom(v, i);
        s[1] += eatom[i];
        s[2] += watom[i];
    }
    for (int c = 0; c < 3; c++) {
        double t = reduce_t(tmp).Sum(s[c]);
        if (threadIdx.x == 0)
            out[3 * (1 + blockIdx.x) + c] = t;
        __syncthreads();
    }
}

static __global__ void k_thermo_total(double *out)
{
    typedef cub::BlockReduce<double, THERMO_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage tmp;
    for (int c = 0; c < 3; c++) {
        double t = reduce_t(tmp).Sum(out[3 * (1 + threadIdx.x) + c]);
        if (threadIdx.x == 0)
            out[c] = t;
        __syncthreads();
    }
}

static __global__ void k_pbc(double *x, int64_t n, double L0, double L1, double L2)
{
    TESS_KERNEL_LOOP(i, n)
    mmd_pbc_atom(x, i, L0, L1, L2);
}

// Selection in index order: each of MMD_SCAN_BLOCKS blocks owns a contiguous range, counts its
// matches, the counts are scanned, and each block writes its matches at its offset.
enum { SCAN_BLOCK = 256 };

static __global__ void k_select_count(const double *x, int64_t first, int64_t last, int d,
                                      double a, double b, int *scratch)
{
    typedef cub::BlockReduce<int, SCAN_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage tmp;
    int64_t chunk = (last - first + gridDim.x - 1) / gridDim.x;
    int64_t lo = first + chunk * blockIdx.x, hi = lo + chunk < last ? lo + chunk : last;
    int     n  = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += SCAN_BLOCK)
        n += mmd_in_slab(x, i, d, a, b);
    int t = reduce_t(tmp).Sum(n);
    if (threadIdx.x == 0)
        scratch[blockIdx.x] = t;
}

static __global__ void k_select_scan(int *scratch, int *count)
{
    typedef cub::BlockScan<int, MMD_SCAN_BLOCKS> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    int v = scratch[threadIdx.x], total;
    scan_t(tmp).ExclusiveSum(v, v, total);
    scratch[threadIdx.x] = v;
    if (threadIdx.x == 0)
        *count = total;
}

static __global__ void k_select_write(const double *x, int64_t first, int64_t last, int d,
                                      double a, double b, const int *scratch, int *list,
                                      int64_t cap)
{
    typedef cub::BlockScan<int, SCAN_BLOCK> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    int64_t chunk = (last - first + gridDim.x - 1) / gridDim.x;
    int64_t lo = first + chunk * blockIdx.x, hi = lo + chunk < last ? lo + chunk : last;
    int64_t base = scratch[blockIdx.x];
    for (int64_t t0 = lo; t0 < hi; t0 += SCAN_BLOCK) {
        int64_t i    = t0 + threadIdx.x;
        int     flag = i < hi && mmd_in_slab(x, i, d, a, b);
        int     pos, tile;
        scan_t(tmp).ExclusiveSum(flag, pos, tile);
        __syncthreads();
        if (flag && base + pos < cap)
            list[base + pos] = (int)i;
        base += tile;
    }
}

static __global__ void k_pack(const double *x, const double *v, const int *list, int64_t n,
                              int d, double shift, double *buf)
{
    TESS_KERNEL_LOOP(k, n)
    mmd_pack_atom(x, v, list, k, d, shift, buf);
}

static __global__ void k_remove(double *x, double *v, const int *la, int64_t na, const int *lb,
                                int64_t nb, int64_t n)
{
    int64_t first = n - na - nb;
    TESS_KERNEL_LOOP(k, na + nb)
    {
        int64_t j  = first + k;
        int64_t to = mmd_remove_dest(la, na, lb, nb, n, j);
        if (to >= 0)
            mmd_move_atom(x, v, to, j);
    }
}

static __global__ void k_unpack(const double *buf, int64_t n, double *x, double *v, int64_t first)
{
    TESS_KERNEL_LOOP(k, n)
    mmd_unpack_atom(buf, k, x, v, first);
}

static __global__ void k_bin(const double *x, int64_t n, mmd_bins_t b, int *bincount,
                             int *binatoms, int *status)
{
    TESS_KERNEL_LOOP(i, n)
    {
        int bin = mmd_bin_of(&b, x + MMD_XW * i);
        int k   = atomicAdd(&bincount[bin], 1);
        if (k < b.cap)
            binatoms[(int64_t)bin * b.cap + k] = (int)i;
        atomicMax(&status[0], k + 1);
    }
}

// Atoms land in a bin in any order; sorting each bin makes the lists the same every run.
static __global__ void k_bin_sort(int64_t nbins, int cap, const int *bincount, int *binatoms)
{
    TESS_KERNEL_LOOP(bin, nbins)
    {
        int *a = binatoms + bin * cap;
        int  n = bincount[bin] < cap ? bincount[bin] : cap;
        for (int k = 1; k < n; k++) {
            int v = a[k], m = k - 1;
            while (m >= 0 && a[m] > v) {
                a[m + 1] = a[m];
                m--;
            }
            a[m + 1] = v;
        }
    }
}

static __global__ void k_neighbor(const double *__restrict__ x, int64_t nlocal, mmd_bins_t b,
                                  const int *__restrict__ bincount,
                                  const int *__restrict__ binatoms, double cutneighsq,
                                  int *__restrict__ neigh, int *__restrict__ numneigh,
                                  int64_t stride, int maxneigh, int *status)
{
    TESS_KERNEL_LOOP(i, nlocal)
    {
        int n = mmd_neigh_atom(x, i, &b, bincount, binatoms, cutneighsq, neigh, stride, maxneigh);
        numneigh[i] = n < maxneigh ? n : maxneigh;
        atomicMax(&status[1], n);
    }
}

extern "C" {

void mmd_cuda_initial_integrate(void *s, double *x, double *v, const double *f, int64_t n,
                                double dt, double dtforce)
{
    if (n > 0)
        k_initial<<<blocks_for(n, 256), 256, 0, (cudaStream_t)s>>>(x, v, f, n, dt, dtforce);
}

void mmd_cuda_final_integrate(void *s, double *v, const double *f, int64_t n, double dtforce)
{
    if (n > 0)
        k_final<<<blocks_for(n, 256), 256, 0, (cudaStream_t)s>>>(v, f, n, dtforce);
}

void mmd_cuda_force(void *s, const double *x, double *f, const int *neigh, const int *numneigh,
                    int64_t stride, int64_t n, double cutforcesq, double *eatom, double *watom)
{
    if (n <= 0)
        return;
    if (eatom)
        k_force<true><<<blocks_for(n, 128), 128, 0, (cudaStream_t)s>>>(
            x, f, neigh, numneigh, stride, n, cutforcesq, eatom, watom);
    else
        k_force<false><<<blocks_for(n, 128), 128, 0, (cudaStream_t)s>>>(
            x, f, neigh, numneigh, stride, n, cutforcesq, nullptr, nullptr);
}

void mmd_cuda_thermo_sums(void *s, const double *v, const double *eatom, const double *watom,
                          int64_t n, double *out)
{
    k_thermo_parts<<<MMD_THERMO_PARTS, THERMO_BLOCK, 0, (cudaStream_t)s>>>(v, eatom, watom, n,
                                                                          out);
    k_thermo_total<<<1, THERMO_BLOCK, 0, (cudaStream_t)s>>>(out);
}

void mmd_cuda_pbc(void *s, double *x, int64_t n, const double L[3])
{
    if (n > 0)
        k_pbc<<<blocks_for(n, 256), 256, 0, (cudaStream_t)s>>>(x, n, L[0], L[1], L[2]);
}

void mmd_cuda_select(void *s, const double *x, int64_t first, int64_t last, int d, double a,
                     double b, int *list, int *count, int64_t cap, int *scratch)
{
    cudaStream_t st = (cudaStream_t)s;
    if (last <= first) {
        cudaMemsetAsync(count, 0, sizeof(int), st);
        return;
    }
    k_select_count<<<MMD_SCAN_BLOCKS, SCAN_BLOCK, 0, st>>>(x, first, last, d, a, b, scratch);
    k_select_scan<<<1, MMD_SCAN_BLOCKS, 0, st>>>(scratch, count);
    k_select_write<<<MMD_SCAN_BLOCKS, SCAN_BLOCK, 0, st>>>(x, first, last, d, a, b, scratch,
                                                           list, cap);
}

void mmd_cuda_pack(void *s, const double *x, const double *v, const int *list, int64_t n, int d,
                   double shift, double *buf)
{
    if (n > 0)
        k_pack<<<blocks_for(n, 256), 256, 0, (cudaStream_t)s>>>(x, v, list, n, d, shift, buf);
}

void mmd_cuda_remove(void *s, double *x, double *v, const int *la, int64_t na, const int *lb,
                     int64_t nb, int64_t n)
{
    if (na + nb > 0)
        k_remove<<<blocks_for(na + nb, 256), 256, 0, (cudaStream_t)s>>>(x, v, la, na, lb, nb, n);
}

void mmd_cuda_unpack(void *s, const double *buf, int64_t n, double *x, double *v, int64_t first)
{
    if (n > 0)
        k_unpack<<<blocks_for(n, 256), 256, 0, (cudaStream_t)s>>>(buf, n, x, v, first);
}

void mmd_cuda_bin(void *s, const double *x, int64_t n, mmd_bins_t b, int *bincount,
                  int *binatoms, int *status)
{
    cudaStream_t st    = (cudaStream_t)s;
    int64_t      nbins = (int64_t)b.n[0] * b.n[1] * b.n[2];
    cudaMemsetAsync(bincount, 0, sizeof(int) * (size_t)nbins, st);
    cudaMemsetAsync(status, 0, 2 * sizeof(int), st);
    if (n > 0)
        k_bin<<<blocks_for(n, 256), 256, 0, st>>>(x, n, b, bincount, binatoms, status);
    k_bin_sort<<<blocks_for(nbins, 128), 128, 0, st>>>(nbins, b.cap, bincount, binatoms);
}

void mmd_cuda_neighbor(void *s, const double *x, int64_t nlocal, mmd_bins_t b,
                       const int *bincount, const int *binatoms, double cutneighsq, int *neigh,
                       int *numneigh, int64_t stride, int maxneigh, int *status)
{
    if (nlocal > 0)
        k_neighbor<<<blocks_for(nlocal, 128), 128, 0, (cudaStream_t)s>>>(
            x, nlocal, b, bincount, binatoms, cutneighsq, neigh, numneigh, stride, maxneigh,
            status);
}

} // extern "C"
