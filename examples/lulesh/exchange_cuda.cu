// exchange_cuda.cu — the CUDA versions of the LULESH exchange kernels: thin wrappers around the
// index math of exchange.h, launched on the caller's stream.
#include "exchange.h"

#include <cuda_runtime.h>

static __global__ void k_pack_nodes(lul_fields_t fl, lul_region_t r, double *buf)
{
    TESS_KERNEL_LOOP(t, r.count)
    lul_pack_node(&fl, &r, buf, t);
}

static __global__ void k_unpack_nodes(lul_fields_t fl, lul_region_t r, const double *buf, int add)
{
    TESS_KERNEL_LOOP(t, r.count)
    lul_unpack_node(&fl, &r, buf, t, add);
}

static __global__ void k_pack_elems(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int f,
                                    int64_t count, double *buf)
{
    TESS_KERNEL_LOOP(t, count)
    {
        int64_t e = lul_face_elem(ex, ey, ez, f, t);
        for (int q = 0; q < fl.nf; q++)
            buf[q * count + t] = fl.f[q][e];
    }
}

static __global__ void k_unpack_elems(lul_fields_t fl, int64_t base, int64_t count,
                                      const double *buf)
{
    TESS_KERNEL_LOOP(t, count)
    for (int q = 0; q < fl.nf; q++)
        fl.f[q][base + t] = buf[q * count + t];
}

static unsigned blocks_for(int64_t n)
{
    return tess_kernel_blocks(n, 256, 65535);
}

extern "C" {

void lul_xch_cuda_pack_nodes(void *s, lul_fields_t fl, lul_region_t r, double *buf)
{
    k_pack_nodes<<<blocks_for(r.count), 256, 0, (cudaStream_t)s>>>(fl, r, buf);
}

void lul_xch_cuda_unpack_nodes(void *s, lul_fields_t fl, lul_region_t r, const double *buf,
                               int add)
{
    k_unpack_nodes<<<blocks_for(r.count), 256, 0, (cudaStream_t)s>>>(fl, r, buf, add);
}

void lul_xch_cuda_pack_elems(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int f,
                             double *buf)
{
    int64_t count = lul_face_count(ex, ey, ez, f);
    k_pack_elems<<<blocks_for(count), 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, f, count, buf);
}

void lul_xch_cuda_unpack_elems(void *s, lul_fields_t fl, int64_t base, int64_t count,
                               const double *buf)
{
    k_unpack_elems<<<blocks_for(count), 256, 0, (cudaStream_t)s>>>(fl, base, count, buf);
}

} // extern "C"
