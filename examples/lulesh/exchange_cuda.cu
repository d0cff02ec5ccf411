// exchange_cuda.cu — the CUDA versions of the LULESH exchange kernels: thin wrappers around the
// index math of exchange.h, launched on the caller's stream.
#include "exchange.h"

#include <cuda_runtime.h>

/* A whole exchange of one block: the kernels below call these with blockIdx.y as the direction
 * (pack) or the face (elements); the batched kernel with the item that blockIdx.z picks. */
static __device__ void pack_nodes_dir(const lul_fields_t &fl, int64_t ex, int64_t ey, int64_t ez,
                                      const lul_xch_plan_t &plan, double *buf, int d)
{
    if (plan.off[d] < 0)
        return;
    lul_region_t r = lul_node_region_of(ex, ey, ez, d, plan.ring);
    TESS_KERNEL_LOOP(t, r.count)
    lul_pack_node(&fl, &r, buf + plan.off[d], t);
}

static __device__ void unpack_nodes(const lul_fields_t &fl, int64_t ex, int64_t ey, int64_t ez,
                                    const lul_xch_plan_t &plan, const double *buf, int add)
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

static __device__ void pack_elems_face(const lul_fields_t &fl, int64_t ex, int64_t ey, int64_t ez,
                                       const lul_xch_plan_t &plan, double *buf, int f)
{
    int d = face_dir(f);
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

static __global__ void k_pack_nodes_all(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                        lul_xch_plan_t plan, double *buf)
{
    pack_nodes_dir(fl, ex, ey, ez, plan, buf, blockIdx.y);
}

static __global__ void k_unpack_nodes_all(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                          lul_xch_plan_t plan, const double *buf, int add)
{
    unpack_nodes(fl, ex, ey, ez, plan, buf, add);
}

static __global__ void k_pack_elems_all(lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                        lul_xch_plan_t plan, double *buf)
{
    pack_elems_face(fl, ex, ey, ez, plan, buf, blockIdx.y);
}

/* The same exchange of n blocks (lul_xch_batch): item k at items + k * stride, blockIdx.z
 * picking it (striding when there are more items than the grid's z); x and y as in the kernels
 * above, sized for the largest item (the loops of a smaller one end sooner). */
static __global__ void k_xch_batch(const char *__restrict__ items, size_t stride, int n, int op)
{
    for (int k = (int)blockIdx.z; k < n; k += (int)gridDim.z) {
        const lul_xch_item_t &x = *(const lul_xch_item_t *)(items + (size_t)k * stride);
        if (x.op != op)
            continue;
        if (op == LUL_XCH_PACK_NODES)
            pack_nodes_dir(x.fl, x.ex, x.ey, x.ez, x.plan, x.buf, blockIdx.y);
        else if (op == LUL_XCH_UNPACK_NODES)
            unpack_nodes(x.fl, x.ex, x.ey, x.ez, x.plan, x.buf, x.add);
        else
            pack_elems_face(x.fl, x.ex, x.ey, x.ez, x.plan, x.buf, blockIdx.y);
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

/* Threads a pack of nodes needs in one direction at most: the largest face's nodes. */
static int64_t node_face_max(int64_t ex, int64_t ey, int64_t ez)
{
    int64_t xy = (ex + 1) * (ey + 1), yz = (ey + 1) * (ez + 1), xz = (ex + 1) * (ez + 1);
    int64_t face = xy > yz ? xy : yz;
    return face > xz ? face : xz;
}

static int64_t elem_face_max(int64_t ex, int64_t ey, int64_t ez)
{
    int64_t face = ex * ey > ey * ez ? ex * ey : ey * ez;
    return face > ex * ez ? face : ex * ez;
}

static int64_t unpack_count(int64_t ex, int64_t ey, int64_t ez, int ring)
{
    return ring ? lul_edge_count(ex, ey, ez) : lul_surface_count(ex, ey, ez);
}

extern "C" {

void lul_xch_cuda_pack_nodes_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                 lul_xch_plan_t plan, double *buf)
{
    dim3 grid(blocks_for(node_face_max(ex, ey, ez)), 27);
    k_pack_nodes_all<<<grid, 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf);
}

void lul_xch_cuda_unpack_nodes_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                   lul_xch_plan_t plan, const double *buf, int add)
{
    int64_t n = unpack_count(ex, ey, ez, plan.ring);
    k_unpack_nodes_all<<<blocks_for(n), 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf, add);
}

void lul_xch_cuda_pack_elems_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                 lul_xch_plan_t plan, double *buf)
{
    dim3 grid(blocks_for(elem_face_max(ex, ey, ez)), 6);
    k_pack_elems_all<<<grid, 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf);
}

void lul_xch_cuda_unpack_elems_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                   lul_xch_plan_t plan, const double *buf)
{
    dim3 grid(blocks_for(elem_face_max(ex, ey, ez)), 6);
    k_unpack_elems_all<<<grid, 256, 0, (cudaStream_t)s>>>(fl, ex, ey, ez, plan, buf);
}

void lul_xch_cuda_batch(void *s, const void *items, const void *items_host, size_t stride, int n,
                        int op)
{
    int64_t most = 1;
    for (int k = 0; k < n; k++) {
        const lul_xch_item_t *x =
            (const lul_xch_item_t *)((const char *)items_host + (size_t)k * stride);
        if (x->op != op)
            continue;
        int64_t c = op == LUL_XCH_PACK_NODES     ? node_face_max(x->ex, x->ey, x->ez)
                    : op == LUL_XCH_UNPACK_NODES ? unpack_count(x->ex, x->ey, x->ez, x->plan.ring)
                                                 : elem_face_max(x->ex, x->ey, x->ez);
        most = c > most ? c : most;
    }
    unsigned y = op == LUL_XCH_PACK_NODES ? 27 : op == LUL_XCH_PACK_ELEMS ? 6 : 1;
    dim3     grid(blocks_for(most), y, (unsigned)(n < 65535 ? n : 65535));
    k_xch_batch<<<grid, 256, 0, (cudaStream_t)s>>>((const char *)items, stride, n, op);
}

} // extern "C"
