/*
 * graph.c — the host backend's graphs: the copies, sets and host functions recorded from a
 * stream in recording mode (exec.c), kept in order; references (the owner's and one per queued
 * launch, so that destroying a graph whose launches are still queued or running is safe, as
 * cudaGraphExecDestroy is); and the comparison of two recordings (function, argument bytes,
 * copy and set parameters).
 */
#include "host.h"

#include <stdio.h>
#include <stdlib.h>

tess_gpu_graph_h tess_gpu_host_graph_new(void)
{
    tess_gpu_graph_h g = tess_calloc(1, sizeof(*g), "a graph");
    if (g) {
        g->magic = TESS_GPU_HOST_GRAPH_MAGIC;
        atomic_init(&g->refs, 1);
    }
    return g;
}

tess_status_t tess_gpu_host_graph_append(tess_gpu_graph_h g, const tess_gpu_host_op_t *op)
{
    if (g->n == g->cap) {
        size_t              cap = g->cap ? 2 * g->cap : 8;
        tess_gpu_host_op_t *ops = realloc(g->ops, cap * sizeof(*ops));
        if (!ops)
            return tess_error(TESS_ERR_NO_MEMORY, "graph: no memory for %zu operations", cap);
        g->ops = ops;
        g->cap = cap;
    }
    tess_gpu_host_op_t *o = &g->ops[g->n++];
    o->next      = NULL;
    o->kind      = op->kind;
    o->args_size = op->args_size;
    o->u         = op->u;
    if (op->kind == OP_FN)
        memcpy(o->args, op->args, op->args_size);
    return TESS_OK;
}

void tess_gpu_host_graph_ref(tess_gpu_graph_h g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void tess_gpu_host_graph_unref(tess_gpu_graph_h g)
{
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    g->magic = 0;
    free(g->ops);
    free(g);
}

void tess_gpu_host_graph_destroy(tess_gpu_graph_h g)
{
    if (!g)
        return;
    if (g->magic != TESS_GPU_HOST_GRAPH_MAGIC)
        tess_fatal("host backend: graph_destroy of %p, which is not a live graph", (void *)g);
    tess_gpu_host_graph_unref(g);
}

static const char *op_name(int kind)
{
    switch (kind) {
    case OP_COPY: return "copy";
    case OP_SET:  return "set";
    case OP_FN:   return "kernel";
    default:      return "operation";
    }
}

int tess_gpu_host_graph_compare(tess_gpu_graph_h a, tess_gpu_graph_h b, char *why, size_t len)
{
    if (a->n != b->n) {
        snprintf(why, len, "%zu operations recorded, %zu now", a->n, b->n);
        return 1;
    }
    for (size_t i = 0; i < a->n; i++) {
        const tess_gpu_host_op_t *x = &a->ops[i], *y = &b->ops[i];
        if (x->kind != y->kind) {
            snprintf(why, len, "operation %zu was a %s, is a %s now", i + 1, op_name(x->kind),
                     op_name(y->kind));
            return 1;
        }
        switch (x->kind) {
        case OP_COPY:
            if (x->u.copy.dst != y->u.copy.dst || x->u.copy.src != y->u.copy.src ||
                x->u.copy.size != y->u.copy.size) {
                snprintf(why, len, "operation %zu (copy) was %zu bytes from %p to %p, is %zu "
                         "bytes from %p to %p now", i + 1, x->u.copy.size, x->u.copy.src,
                         x->u.copy.dst, y->u.copy.size, y->u.copy.src, y->u.copy.dst);
                return 1;
            }
            break;
        case OP_SET:
            if (x->u.set.dst != y->u.set.dst || x->u.set.value != y->u.set.value ||
                x->u.set.size != y->u.set.size) {
                snprintf(why, len, "operation %zu (set) was %zu bytes of %d at %p, is %zu bytes "
                         "of %d at %p now", i + 1, x->u.set.size, x->u.set.value, x->u.set.dst,
                         y->u.set.size, y->u.set.value, y->u.set.dst);
                return 1;
            }
            break;
        case OP_FN:
            if (x->u.fn != y->u.fn) {
                snprintf(why, len, "operation %zu (kernel) was function %p, is %p now", i + 1,
                         (void *)(uintptr_t)x->u.fn, (void *)(uintptr_t)y->u.fn);
                return 1;
            }
            if (x->args_size != y->args_size) {
                snprintf(why, len, "operation %zu (kernel %p) had %u bytes of arguments, has "
                         "%u now", i + 1, (void *)(uintptr_t)x->u.fn, x->args_size,
                         y->args_size);
                return 1;
            }
            for (uint32_t k = 0; k < x->args_size; k++)
                if (x->args[k] != y->args[k]) {
                    snprintf(why, len, "operation %zu (kernel %p): argument byte %u was 0x%02x, "
                             "is 0x%02x now (a value that changes between steps, passed as a "
                             "kernel argument?)", i + 1, (void *)(uintptr_t)x->u.fn, k,
                             x->args[k], y->args[k]);
                    return 1;
                }
            break;
        default:
            break;
        }
    }
    return 0;
}
