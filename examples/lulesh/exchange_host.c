/* exchange_host.c — the host versions of the LULESH exchange kernels, and the launchers that
 * choose between them and the CUDA ones (exchange.h). No dependency on Tessera or MPI. */
#include "exchange.h"

#include <stdio.h>
#include <stdlib.h>

int lul_xch_backend = LUL_XCH_HOST;
void (*lul_xch_host_launch)(void *stream, lul_xch_host_fn_t fn, const void *args,
                            size_t args_size);

static void launch(void *stream, lul_xch_host_fn_t fn, const void *args, size_t size)
{
    if (stream && lul_xch_host_launch)
        lul_xch_host_launch(stream, fn, args, size);
    else
        fn((void *)args);
}

/* ---- nodes ----------------------------------------------------------------------------------- */

typedef struct node_args {
    lul_fields_t fl;
    lul_region_t r;
    double      *buf;
    int          add;
    int          pad; /* zero: launch arguments without implicit padding (lul_fields_t) */
} node_args_t;

static void host_pack_nodes(void *p)
{
    node_args_t *a = p;
    for (int64_t t = 0; t < a->r.count; t++)
        lul_pack_node(&a->fl, &a->r, a->buf, t);
}

static void host_unpack_nodes(void *p)
{
    node_args_t *a = p;
    for (int64_t t = 0; t < a->r.count; t++)
        lul_unpack_node(&a->fl, &a->r, a->buf, t, a->add);
}

void lul_xch_pack_nodes(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int d,
                        int ring, double *buf)
{
    lul_region_t r = lul_node_region_of(ex, ey, ez, d, ring);
    node_args_t a = {fl, r, buf, 0, 0};
    launch(stream, host_pack_nodes, &a, sizeof(a));
}

void lul_xch_unpack_nodes(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int d,
                          int ring, const double *buf, int add)
{
    lul_region_t r = lul_node_region_of(ex, ey, ez, d, ring);
    node_args_t a = {fl, r, (double *)buf, add, 0};
    launch(stream, host_unpack_nodes, &a, sizeof(a));
}

/* ---- element layers and ghost slabs ------------------------------------------------------ */

typedef struct elem_args {
    lul_fields_t fl;
    int64_t      ex, ey, ez, base, count;
    int          f;
    int          pad; /* zero (node_args_t) */
    double      *buf;
} elem_args_t;

static void host_pack_elems(void *p)
{
    elem_args_t *a = p;
    for (int q = 0; q < a->fl.nf; q++)
        for (int64_t t = 0; t < a->count; t++)
            a->buf[q * a->count + t] = a->fl.f[q][lul_face_elem(a->ex, a->ey, a->ez, a->f, t)];
}

static void host_unpack_elems(void *p)
{
    elem_args_t *a = p;
    for (int q = 0; q < a->fl.nf; q++)
        for (int64_t t = 0; t < a->count; t++)
            a->fl.f[q][a->base + t] = a->buf[q * a->count + t];
}

void lul_xch_pack_elems(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int f,
                        double *buf)
{
    elem_args_t a = {fl, ex, ey, ez, 0, lul_face_count(ex, ey, ez, f), f, 0, buf};
    launch(stream, host_pack_elems, &a, sizeof(a));
}

void lul_xch_unpack_elems(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int f,
                          const double *buf)
{
    int64_t base = lul_ghost_offset(ex, ey, ez, f), count = lul_face_count(ex, ey, ez, f);
    elem_args_t a = {fl, ex, ey, ez, base, count, f, 0, (double *)buf};
    launch(stream, host_unpack_elems, &a, sizeof(a));
}

/* ---- a whole exchange ------------------------------------------------------------------------ */

void lul_xch_pack_nodes_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                            const lul_xch_plan_t *plan, double *buf)
{
#ifdef LULESH_CUDA
    if (lul_xch_backend == LUL_XCH_CUDA) {
        lul_xch_cuda_pack_nodes_all(stream, fl, ex, ey, ez, *plan, buf);
        return;
    }
#endif
    for (int d = 0; d < 27; d++)
        if (plan->off[d] >= 0)
            lul_xch_pack_nodes(stream, fl, ex, ey, ez, d, plan->ring, buf + plan->off[d]);
}

void lul_xch_unpack_nodes_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                              const lul_xch_plan_t *plan, const double *buf, int add)
{
#ifdef LULESH_CUDA
    if (lul_xch_backend == LUL_XCH_CUDA) {
        lul_xch_cuda_unpack_nodes_all(stream, fl, ex, ey, ez, *plan, buf, add);
        return;
    }
#endif
    for (int d = 0; d < 27; d++)
        if (plan->off[d] >= 0)
            lul_xch_unpack_nodes(stream, fl, ex, ey, ez, d, plan->ring, buf + plan->off[d],
                                 add);
}

void lul_xch_pack_elems_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                            const lul_xch_plan_t *plan, double *buf)
{
#ifdef LULESH_CUDA
    if (lul_xch_backend == LUL_XCH_CUDA) {
        lul_xch_cuda_pack_elems_all(stream, fl, ex, ey, ez, *plan, buf);
        return;
    }
#endif
    for (int d = 0; d < 27; d++)
        if (plan->off[d] >= 0 && lul_dir_face(d) >= 0)
            lul_xch_pack_elems(stream, fl, ex, ey, ez, lul_dir_face(d), buf + plan->off[d]);
}

void lul_xch_unpack_elems_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                              const lul_xch_plan_t *plan, const double *buf)
{
#ifdef LULESH_CUDA
    if (lul_xch_backend == LUL_XCH_CUDA) {
        lul_xch_cuda_unpack_elems_all(stream, fl, ex, ey, ez, *plan, buf);
        return;
    }
#endif
    for (int d = 0; d < 27; d++)
        if (plan->off[d] >= 0 && lul_dir_face(d) >= 0)
            lul_xch_unpack_elems(stream, fl, ex, ey, ez, lul_dir_face(d), buf + plan->off[d]);
}

/* ---- the same exchange of several blocks --------------------------------------------------- */

void lul_xch_item_run(void *stream, const lul_xch_item_t *x)
{
    switch (x->op) {
    case LUL_XCH_PACK_NODES:
        lul_xch_pack_nodes_all(stream, x->fl, x->ex, x->ey, x->ez, &x->plan, x->buf);
        break;
    case LUL_XCH_UNPACK_NODES:
        lul_xch_unpack_nodes_all(stream, x->fl, x->ex, x->ey, x->ez, &x->plan, x->buf, x->add);
        break;
    case LUL_XCH_PACK_ELEMS:
        lul_xch_pack_elems_all(stream, x->fl, x->ex, x->ey, x->ez, &x->plan, x->buf);
        break;
    default:
        break;
    }
}

static const lul_xch_item_t *xch_item_at(const void *items, size_t stride, int k)
{
    return (const lul_xch_item_t *)((const char *)items + (size_t)k * stride);
}

void lul_xch_batch(void *stream, const void *items, const void *items_host, size_t stride, int n)
{
    int op = LUL_XCH_NONE;
    for (int k = 0; k < n; k++) {
        int o = xch_item_at(items_host, stride, k)->op;
        if (o != LUL_XCH_NONE && op != LUL_XCH_NONE && o != op) {
            fprintf(stderr, "lul_xch_batch: exchanges of two kinds (%d and %d) in one batch\n", op,
                    o);
            abort();
        }
        if (o != LUL_XCH_NONE)
            op = o;
    }
    if (op == LUL_XCH_NONE)
        return;
#ifdef LULESH_CUDA
    if (lul_xch_backend == LUL_XCH_CUDA) {
        lul_xch_cuda_batch(stream, items, items_host, stride, n, op);
        return;
    }
#else
    (void)items;
#endif
    for (int k = 0; k < n; k++)
        lul_xch_item_run(stream, xch_item_at(items_host, stride, k));
}
