// exchange_cuda.cu — the CUDA versions of the LULESH exchange kernels: thin wrappers around the
// index math of exchange.h, launched on the caller's stream.
#include "exchange.h"

#include <cuda_runtime.h>

/* A whole exchange: blockIdx.y is the direction (pack) or the face (elements). */
static __global__ void k_pack_nodes_all(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                        lul_xch_plan_t plan, double *buf)
{
    int d = blockIdx.y;
    if (plan.off[d] < 0)
        return;
    lul_region_t r = lul_node_region_of(ex, ey, ez, d, plan.ring);
    TESS_KERNEL_LOOP(t, r.count)
    lul_pack_node(&fl, &r, buf + plan.off[d], t);
}

static __global__ void k_unpack_nodes_all(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                          lul_xch_plan_t plan, const double *buf, int add)
{
    if (plan.ring) { /* every node a ring plan's messages hold is on an edge of the block */
        TESS_KERNEL_LOOP(s, lul_edge_count(ex, ey, ez))
        lul_unpack_node_all(&fl, ex, ey, ez, &plan, buf, lul_edge_node(ex, ey, ez, s), add);
        return;
    }
    TESS_KERNEL_LOOP(s, lul_surface_count(ex, ey, ez))
    lul_unpack_node_all(&fl, ex, ey, ez, &plan, buf, lul_surface_node(ex, ey, ez, s), add);
}

static __device__ int face_dir(int f)
{
    int s = f % 2 ? 1 : -1, a = f / 2;
    return (a == 0 ? s + 1 : 1) + 3 * (a == 1 ? s + 1 : 1) + 9 * (a == 2 ? s + 1 : 1);
}

static __global__ void k_pack_elems_all(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                        lul_xch_plan_t plan, double *buf)
{
    int     f = blockIdx.y, d = face_dir(f);
    if (plan.off[d] < 0)
        return;
    int64_t count = lul_face_count(ex, ey, ez, f);
    double *b     = buf + plan.off[d];
    TESS_KERNEL_LOOP(t, count)
    {
        int64_t e = lul_face_elem(ex, ey, ez, f, t);
        for (int q = 0; q < fl.nf; q++)
            b[q * count + t] = fl.f[q][e];
    }
}

static __global__ void k_unpack_elems_all(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                          lul_xch_plan_t plan, const double *buf)
{
    int f = blockIdx.y, d = face_dir(f);
    if (plan.off[d] < 0)
        return;
    int64_t base = ex * ey * ez, count = lul_face_count(ex, ey, ez, f);
    for (int g = 0; g < f; g++)
        base += lul_face_count(ex, ey, ez, g);
    const double *b = buf + plan.off[d];
    TESS_KERNEL_LOOP(t, count)
    for (int q = 0; q < fl.nf; q++)
        fl.f[q][base + t] = b[q * count + t];
}

static unsigned blocks_for(int64_t n)
{
    return tess_kernel_blocks(n, 256, 65535);
}

extern "C" {

void lul_xch_cuda_pack_nodes_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                 lul_xch_plan_t plan, double *buf)
{
    int64_t face = (ex + 1) * (ey + 1) > (ey + 1) * (ez + 1) ? (ex + 1) * (ey + 1) : (ey + 1) * (ez + 1);
    face         = face > (ex + 1) * (ez + 1) ? face : (ex + 1) * (ez + 1);
    dim3 grid(blocks_for(face), 27);
    k_pack_nodes_all<<<grid, 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf);
}

void lul_xch_cuda_unpack_nodes_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                   lul_xch_plan_t plan, const double *buf, int add)
{
    int64_t n = plan.ring ? lul_edge_count(ex, ey, ez) : lul_surface_count(ex, ey, ez);
    k_unpack_nodes_all<<<blocks_for(n), 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf, add);
}

void lul_xch_cuda_pack_elems_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                 lul_xch_plan_t plan, double *buf)
{
    int64_t face = ex * ey > ey * ez ? ex * ey : ey * ez;
    face         = face > ex * ez ? face : ex * ez;
    dim3 grid(blocks_for(face), 6);
    k_pack_elems_all<<<grid, 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf);
}

void lul_xch_cuda_unpack_elems_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                   lul_xch_plan_t plan, const double *buf)
{
    int64_t face = ex * ey > ey * ez ? ex * ey : ey * ez;
    face         = face > ex * ez ? face : ex * ez;
    dim3 grid(blocks_for(face), 6);
    k_unpack_elems_all<<<grid, 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf);
}

} // extern "C"
