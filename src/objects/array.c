/* array.c — chare arrays: creation (placement identical on every rank, the location table
 * pre-filled), elements and their per-PE tables, index linearisation, local iteration,
 * destruction, and the layer's per-PE state. */
#include "objects.h"

#include <stdio.h>
#include <stdlib.h>

tess_array_t *tess_obj_arrays[TESS_OBJ_MAX_ARRAYS];
uint32_t      tess_obj_narrays;

obj_pe_t *tess_obj_pe(void)
{
    tess_pe_t *pe = tess_core_pe_self();
    return pe ? *tess_core_pe_slot(pe, TESS_SLOT_OBJECTS) : NULL;
}

static obj_pe_t *obj_pe_of(int local)
{
    return *tess_core_pe_slot(tess_core_pe_by_local(local), TESS_SLOT_OBJECTS);
}

/* ---- indices ----------------------------------------------------------------------------- */

int64_t tess_obj_linearize(const tess_array_t *a, tess_index_t i)
{
    if (i.x < 0 || i.x >= a->ext[0] || i.y < 0 || i.y >= a->ext[1] || i.z < 0 || i.z >= a->ext[2])
        return -1;
    return ((int64_t)i.x * a->ext[1] + i.y) * a->ext[2] + i.z;
}

tess_index_t tess_obj_delinearize(const tess_array_t *a, int64_t linear)
{
    tess_index_t i;
    i.z = (int32_t)(linear % a->ext[2]);
    linear /= a->ext[2];
    i.y = (int32_t)(linear % a->ext[1]);
    i.x = (int32_t)(linear / a->ext[1]);
    return i;
}

const char *tess_obj_index_text(const tess_array_t *a, tess_index_t i, char *buf, size_t len)
{
    int nd = a ? a->ndims : 3;
    /* Components beyond the array's dimensions are 0 in a valid index: show them when they
     * are not (they are what makes the index out of range). */
    if (i.z != 0)
        nd = 3;
    else if (i.y != 0 && nd < 2)
        nd = 2;
    if (nd <= 1)
        snprintf(buf, len, "(%d)", i.x);
    else if (nd == 2)
        snprintf(buf, len, "(%d,%d)", i.x, i.y);
    else
        snprintf(buf, len, "(%d,%d,%d)", i.x, i.y, i.z);
    return buf;
}

int tess_obj_map(const tess_array_params_t *p, int64_t size, int64_t linear, int npes)
{
    tess_map_t map = (p->field_mask & TESS_ARRAY_FIELD_MAP) ? p->map : TESS_MAP_BLOCK;
    switch (map) {
    case TESS_MAP_ROUND_ROBIN:
        return (int)(linear % npes);
    case TESS_MAP_USER: {
        tess_array_t tmp = {.ndims = p->ndims};
        for (int d = 0; d < 3; d++)
            tmp.ext[d] = d < p->ndims ? p->extents[d] : 1;
        return p->map_fn(tess_obj_delinearize(&tmp, linear), tmp.ext, npes, p->map_arg);
    }
    case TESS_MAP_BLOCK:
    default:
        /* Element i goes to PE floor(i * npes / size): blocks differ by at most one. */
        return (int)((__int128)linear * npes / size);
    }
}

/* ---- elements ---------------------------------------------------------------------------- */

/* Every element of every array has a header: keep it at most 80 bytes (bench/array). */
_Static_assert(sizeof(struct tess_ctx) <= 80, "the element header grew past 80 bytes");

static tess_ctx_h elem_init(tess_ctx_h e, tess_array_t *a, int64_t linear)
{
    e->array      = a;
    e->linear     = linear;
    e->migrate_to = -1;
    return e;
}

tess_ctx_h tess_obj_elem_alloc(tess_array_t *a, int local, int64_t linear)
{
    tess_ctx_h e = tess_obj_slab_slot(a, &a->slabs[local], linear);
    if (e) {
        if (e->array)
            tess_fatal("element %lld of array '%s' arrives at PE %d, where it already is",
                       (long long)linear, a->name, tess_core_pe_id());
    } else {
        e = a->state_align > 16 ? tess_aligned_alloc(a->state_align, a->slot_size, "an element")
                                : tess_malloc(a->slot_size, "an element");
        if (!e)
            return NULL;
    }
    memset(e, 0, a->slot_size);
    return elem_init(e, a, linear);
}

static int elem_in_slab(tess_ctx_h e, int local)
{
    return tess_obj_slab_slot(e->array, &e->array->slabs[local], e->linear) == e;
}

void tess_obj_elem_free(tess_ctx_h e, int local)
{
    if (elem_in_slab(e, local))
        e->array = NULL;
    else
        free(e);
}

tess_status_t tess_obj_elem_attach(obj_pe_t *op, tess_ctx_h e)
{
    tess_array_t *a     = e->array;
    int           local = op->local;
    int           slab  = elem_in_slab(e, local);
    tess_status_t st    = TESS_OK;
    if (!slab)
        st = tess_hmap_put(&op->elems, tess_obj_key(a->id, e->linear), e);
    if (st != TESS_OK)
        return st;
    tess_obj_array_lock(a);
    e->slot = (uint32_t)a->pe_elems[local].count;
    st      = tess_vec_push(&a->pe_elems[local], e);
    if (st == TESS_OK)
        tess_obj_red_arrive(a, e);
    tess_obj_array_unlock(a);
    if (st != TESS_OK) {
        if (!slab)
            tess_hmap_remove(&op->elems, tess_obj_key(a->id, e->linear));
        return st;
    }
    atomic_fetch_add(&a->nlocal, 1);
    return TESS_OK;
}

/* O(1): the element knows its place in the PE's list (the last one moves into it). */
void tess_obj_elem_detach(obj_pe_t *op, tess_ctx_h e)
{
    tess_array_t *a = e->array;
    tess_obj_graph_drop(op, e); /* its device pointers change where it goes */
    if (!elem_in_slab(e, op->local))
        tess_hmap_remove(&op->elems, tess_obj_key(a->id, e->linear));
    tess_obj_array_lock(a);
    tess_vec_t *v = &a->pe_elems[op->local];
    size_t      i = e->slot;
    if (i >= v->count || v->items[i] != e)
        tess_fatal("element %lld of array '%s' is not in the list of PE %d", (long long)e->linear,
                   a->name, tess_core_pe_id());
    tess_vec_swap_remove(v, i);
    if (i < v->count)
        ((tess_ctx_h)v->items[i])->slot = (uint32_t)i;
    tess_obj_red_leave(a, e);
    tess_obj_array_unlock(a);
    atomic_fetch_sub(&a->nlocal, 1);
}

/* ---- creation ---------------------------------------------------------------------------- */

static tess_status_t array_check_params(const tess_array_params_t *p, int64_t *size_p)
{
    if (!p)
        return tess_error(TESS_ERR_INVALID, "tess_array_create: params is NULL");
    if (p->ndims < 1 || p->ndims > 3)
        return tess_error(TESS_ERR_INVALID, "tess_array_create: ndims = %d (must be 1, 2 or 3)",
                          p->ndims);
    int64_t size = 1;
    for (int d = 0; d < p->ndims; d++) {
        if (p->extents[d] < 1)
            return tess_error(TESS_ERR_INVALID, "tess_array_create: extent %d is %d (must be "
                              ">= 1)", d, p->extents[d]);
        size *= p->extents[d];
        if (size >= (int64_t)1 << TESS_OBJ_LINEAR_BITS)
            return tess_error(TESS_ERR_INVALID, "tess_array_create: more than 2^%d elements",
                              TESS_OBJ_LINEAR_BITS);
    }
    tess_map_t map = (p->field_mask & TESS_ARRAY_FIELD_MAP) ? p->map : TESS_MAP_BLOCK;
    if (map != TESS_MAP_BLOCK && map != TESS_MAP_ROUND_ROBIN && map != TESS_MAP_USER)
        return tess_error(TESS_ERR_INVALID, "tess_array_create: unknown map %d", (int)map);
    if (map == TESS_MAP_USER && !p->map_fn)
        return tess_error(TESS_ERR_INVALID, "tess_array_create: TESS_MAP_USER without map_fn");
    if ((p->field_mask & TESS_ARRAY_FIELD_RESUME) &&
        (p->resume < 0 || p->resume >= tess_obj_nentries))
        return tess_error(TESS_ERR_INVALID, "tess_array_create: resume entry %d is not "
                          "registered", p->resume);
    if ((p->field_mask & TESS_ARRAY_FIELD_STREAMS) && p->pe_streams < 0)
        return tess_error(TESS_ERR_INVALID, "tess_array_create: pe_streams = %d (must be >= 0)",
                          p->pe_streams);
    *size_p = size;
    return TESS_OK;
}

/* An optional field set without its field_mask bit would be ignored without a word: refuse it.
 * (A zero field is the same as an unset one; resume 0 is a valid entry, so it is not checked.) */
static tess_status_t array_check_field_mask(const tess_array_params_t *p)
{
    const tess_mask_field_t f[] = {
        {TESS_ARRAY_FIELD_NAME, "TESS_ARRAY_FIELD_NAME", "tess_array_params_t.name",
         p->name != NULL},
        {TESS_ARRAY_FIELD_DTOR, "TESS_ARRAY_FIELD_DTOR", "tess_array_params_t.dtor",
         p->dtor != NULL},
        {TESS_ARRAY_FIELD_MAP, "TESS_ARRAY_FIELD_MAP", "tess_array_params_t.map, map_fn or map_arg",
         p->map != TESS_MAP_BLOCK || p->map_fn != NULL || p->map_arg != NULL},
        {TESS_ARRAY_FIELD_PUP, "TESS_ARRAY_FIELD_PUP", "tess_array_params_t.pup", p->pup != NULL},
        {TESS_ARRAY_FIELD_RESUME, "TESS_ARRAY_FIELD_RESUME", "tess_array_params_t.resume",
         p->resume != 0},
        {TESS_ARRAY_FIELD_REDUCE, "TESS_ARRAY_FIELD_REDUCE", "tess_array_params_t.reduce_tree",
         p->reduce_tree != 0},
        {TESS_ARRAY_FIELD_STREAMS, "TESS_ARRAY_FIELD_STREAMS", "tess_array_params_t.pe_streams",
         p->pe_streams != 0},
    };
    char who[256];
    snprintf(who, sizeof(who), "tess_array_create%s%.200s%s", p->name ? " '" : "",
             p->name ? p->name : "", p->name ? "'" : "");
    return tess_check_field_mask(p->field_mask, f, TESS_ARRAY_LEN(f), who);
}

/* Every process computes the placement itself: a user map that answers differently on different
 * processes gives location tables that disagree (elements made twice or never, messages sent to
 * the wrong process). Compare a hash of the table over all processes. Collective. */
static tess_status_t array_check_placement(const tess_array_t *a)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a over (element, PE) */
    for (int64_t i = 0; i < a->size; i++) {
        uint64_t pe = (uint64_t)atomic_load_explicit(&a->loc[i], memory_order_relaxed);
        h = (h ^ pe) * 1099511628211ull;
    }
    uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, tess_rt.comm);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, tess_rt.comm);
    if (lo == hi)
        return TESS_OK;
    /* Name the first element placed differently (chunks of the table, MIN and MAX over all:
     * the error path only). */
    enum { CHUNK = 4096 };
    int lo_pe[CHUNK], hi_pe[CHUNK];
    for (int64_t base = 0; base < a->size; base += CHUNK) {
        int n = (int)TESS_MIN((int64_t)CHUNK, a->size - base);
        for (int k = 0; k < n; k++)
            lo_pe[k] = hi_pe[k] = atomic_load_explicit(&a->loc[base + k], memory_order_relaxed);
        MPI_Allreduce(MPI_IN_PLACE, lo_pe, n, MPI_INT, MPI_MIN, tess_rt.comm);
        MPI_Allreduce(MPI_IN_PLACE, hi_pe, n, MPI_INT, MPI_MAX, tess_rt.comm);
        for (int k = 0; k < n; k++) {
            if (lo_pe[k] == hi_pe[k])
                continue;
            char idx[64];
            return tess_error(TESS_ERR_MISMATCH, "tess_array_create '%s': the map places the "
                              "elements differently on different processes (element %s: PE %d "
                              "on this process, process %d; PEs %d to %d over all): a "
                              "TESS_MAP_USER map_fn must give the same answer on every process",
                              a->name, tess_obj_index_text(a, tess_obj_delinearize(a, base + k),
                                                           idx, sizeof(idx)),
                              atomic_load_explicit(&a->loc[base + k], memory_order_relaxed),
                              tess_rt.rank, lo_pe[k], hi_pe[k]);
        }
    }
    return tess_error(TESS_ERR_MISMATCH, "tess_array_create '%s': the map places the elements "
                      "differently on different processes: a TESS_MAP_USER map_fn must give the "
                      "same answer on every process", a->name);
}

/* Every rank must create the same array: compare a digest of the parameters. */
static tess_status_t array_check_collective(const tess_array_params_t *p, int64_t size)
{
    int64_t mine[5] = {p->ndims, size, (int64_t)p->elem_size, p->extents[0],
                       ((int64_t)p->extents[1] << 32) | (uint32_t)p->extents[2]};
    int64_t lo[5], hi[5];
    MPI_Allreduce(mine, lo, 5, MPI_INT64_T, MPI_MIN, tess_rt.comm);
    MPI_Allreduce(mine, hi, 5, MPI_INT64_T, MPI_MAX, tess_rt.comm);
    if (memcmp(lo, hi, sizeof(lo)))
        return tess_error(TESS_ERR_MISMATCH, "tess_array_create: the ranks create different "
                          "arrays (dimensions, extents or element size differ; this rank: %dD, "
                          "%lld elements of %zu bytes)", p->ndims, (long long)size, p->elem_size);
    return TESS_OK;
}

/* State alignment: the largest power of two dividing elem_size, from 8 to 64, so any C type
 * of that size is aligned as it needs (its alignment divides its size) and elements of a
 * multiple of 64 bytes start on a cache line, without 56 bytes of padding on small ones. */
static size_t obj_state_align(size_t elem_size)
{
    size_t al = elem_size & -elem_size;
    return elem_size == 0 || al < 8 ? 8 : al > 64 ? 64 : al;
}

/* A PE's first elements, seen in increasing linear order: whether they form a progression. */
typedef struct obj_prog {
    int64_t first, last, stride, count;
    int     broken;
} obj_prog_t;

static void obj_prog_add(obj_prog_t *t, int64_t i)
{
    if (t->count == 0)
        t->first = i;
    else if (t->count == 1)
        t->stride = i - t->first;
    else if (i != t->last + t->stride)
        t->broken = 1;
    t->last = i;
    t->count++;
}

/* Slabs for the PEs whose elements form a progression; every PE's list sized to its count. */
static tess_status_t array_alloc_slabs(tess_array_t *a, const obj_prog_t *prog)
{
    for (int l = 0; l < tess_rt.ppn; l++) {
        const obj_prog_t *t = &prog[l];
        if (!t->count)
            continue;
        tess_vec_t *v = &a->pe_elems[l];
        v->items      = tess_malloc((size_t)t->count * sizeof(*v->items), "an element list");
        if (!v->items)
            return TESS_ERR_NO_MEMORY;
        v->cap = (size_t)t->count;
        if (t->broken)
            continue;
        /* calloc: fresh pages come zeroed, and a vacant slot is one whose array is NULL. */
        obj_slab_t *s = &a->slabs[l];
        s->raw = tess_calloc(1, (size_t)t->count * a->slot_size + 64, "an element slab");
        if (!s->raw)
            return TESS_ERR_NO_MEMORY;
        s->mem    = (char *)TESS_ALIGN_UP((uintptr_t)s->raw, 64);
        s->lo     = t->first;
        s->stride = t->count > 1 ? t->stride : 1;
        s->count  = t->count;
    }
    return TESS_OK;
}

static void array_release(tess_array_t *a);

tess_status_t tess_array_create(const tess_array_params_t *p, tess_array_h *array_p)
{
    int64_t       size = 0;
    tess_status_t st   = tess_obj_check_main("tess_array_create");
    if (st != TESS_OK)
        return st;
    if (!array_p)
        return tess_error(TESS_ERR_INVALID, "tess_array_create: array_p is NULL");
    st = array_check_params(p, &size);
    if (st == TESS_OK)
        st = array_check_field_mask(p);
    if (st != TESS_OK)
        return st;
    tess_core_collective_enter(TESS_COLL_ARRAY_CREATE);
    st = array_check_collective(p, size);
    if (st != TESS_OK)
        return st;
    if (tess_obj_narrays >= TESS_OBJ_MAX_ARRAYS)
        return tess_error(TESS_ERR_NO_MEMORY, "tess_array_create: more than %d arrays",
                          TESS_OBJ_MAX_ARRAYS);

    tess_array_t *a = tess_calloc(1, sizeof(*a), "an array");
    if (!a)
        return TESS_ERR_NO_MEMORY;
    a->id    = tess_obj_narrays;
    a->ndims = p->ndims;
    for (int d = 0; d < 3; d++)
        a->ext[d] = d < p->ndims ? p->extents[d] : 1;
    a->size      = size;
    a->elem_size = p->elem_size;
    pthread_mutex_init(&a->lock, NULL);
    a->ctor      = p->ctor;
    a->arg       = p->ctor_arg;
    a->dtor      = (p->field_mask & TESS_ARRAY_FIELD_DTOR) ? p->dtor : NULL;
    a->pup       = (p->field_mask & TESS_ARRAY_FIELD_PUP) ? p->pup : NULL;
    a->has_resume = (p->field_mask & TESS_ARRAY_FIELD_RESUME) != 0;
    a->reduce_tree = (p->field_mask & TESS_ARRAY_FIELD_REDUCE) && p->reduce_tree;
    a->pe_streams  = (p->field_mask & TESS_ARRAY_FIELD_STREAMS) ? p->pe_streams : 0;
    a->resume    = a->has_resume ? p->resume : -1;
    if ((p->field_mask & TESS_ARRAY_FIELD_NAME) && p->name)
        snprintf(a->name, sizeof(a->name), "%s", p->name);
    else
        snprintf(a->name, sizeof(a->name), "array%u", a->id);

    a->state_align = obj_state_align(p->elem_size);
    a->state_off   = TESS_ALIGN_UP(sizeof(struct tess_ctx), a->state_align);
    a->slot_size   = TESS_ALIGN_UP(a->state_off + a->elem_size, a->state_align);

    int npes = tess_core_num_pes(), first = tess_rt.rank * tess_rt.ppn;
    uint8_t *has = tess_calloc((size_t)tess_rt.size, 1, "an array's processes");
    obj_prog_t *prog = tess_calloc((size_t)tess_rt.ppn, sizeof(*prog), "per-PE placements");
    a->loc      = tess_malloc((size_t)size * sizeof(*a->loc), "a location table");
    a->pe_elems = tess_calloc((size_t)tess_rt.ppn, sizeof(*a->pe_elems), "per-PE element lists");
    a->slabs    = tess_calloc((size_t)tess_rt.ppn, sizeof(*a->slabs), "per-PE element slabs");
    if (!has || !prog || !a->loc || !a->pe_elems || !a->slabs ||
        tess_obj_bcast_array_init(a) != TESS_OK) {
        st = TESS_ERR_NO_MEMORY;
        goto err_free_array;
    }
    for (int64_t i = 0; i < size; i++) {
        int pe = tess_obj_map(p, size, i, npes);
        if (pe < 0 || pe >= npes) {
            st = tess_error(TESS_ERR_INVALID, "tess_array_create '%s': the map puts element "
                            "%lld on PE %d (there are %d PEs)", a->name, (long long)i, pe, npes);
            goto err_free_array;
        }
        atomic_store_explicit(&a->loc[i], pe, memory_order_relaxed);
        has[pe / tess_rt.ppn] = 1; /* the reduction tree waits for these processes only */
        if (pe >= first && pe < first + tess_rt.ppn)
            obj_prog_add(&prog[pe - first], i);
    }
    st = array_check_placement(a);
    if (st != TESS_OK)
        goto err_free_array;
    tess_core_reduce_members(a->id, has);
    st = array_alloc_slabs(a, prog);
    if (st != TESS_OK)
        goto err_free_array;

    /* Streams: each PE's elements take those of its own share of the pool (the pool over the
     * PEs of the process, at least one a PE; the array's pe_streams first ones of it, if set),
     * round robin: elements of two PEs share no stream while the pool has one for each PE, so
     * no PE's work queues behind another's; with one stream a PE (pe_streams 1, or as many
     * streams as PEs), a PE's elements share one, which batched launches want (tess_gpu_batch:
     * one wait a stream each way). The PE's elements made so far are its element list
     * (attached one by one below). */
    size_t share = TESS_MAX(tess_gpu_pool_size() / (size_t)tess_rt.ppn, (size_t)1);
    size_t take  = a->pe_streams ? TESS_MIN(share, (size_t)a->pe_streams) : share;
    for (int64_t i = 0; i < size; i++) {
        int pe = atomic_load_explicit(&a->loc[i], memory_order_relaxed);
        if (pe < first || pe >= first + tess_rt.ppn)
            continue;
        tess_ctx_h e = tess_obj_slab_slot(a, &a->slabs[pe - first], i);
        e = e ? elem_init(e, a, i) : tess_obj_elem_alloc(a, pe - first, i);
        if (!e) {
            st = TESS_ERR_NO_MEMORY;
            goto err_free_array;
        }
        e->stream = tess_gpu_pool_stream((size_t)(pe - first) * share +
                                         a->pe_elems[pe - first].count % take);
        st = tess_obj_elem_attach(obj_pe_of(pe - first), e);
        if (st != TESS_OK) {
            tess_obj_elem_free(e, pe - first);
            goto err_free_array;
        }
    }
    free(prog);
    free(has);
    prog = NULL;
    has  = NULL;
    if (MPI_Comm_dup(tess_rt.comm, &a->comm) != MPI_SUCCESS) {
        st = tess_error(TESS_ERR_MPI, "tess_array_create '%s': MPI_Comm_dup failed", a->name);
        goto err_free_array;
    }
    tess_obj_arrays[tess_obj_narrays++] = a;
    tess_obj_red_start(a);
    /* Constructors run once the array is complete, so they may look it up. */
    for (int l = 0; l < tess_rt.ppn; l++) {
        tess_vec_t *v = &a->pe_elems[l];
        for (size_t k = 0; k < v->count; k++) {
            tess_ctx_h e = v->items[k];
            if (a->ctor)
                a->ctor(e, tess_obj_state(e), a->arg);
        }
    }
    tess_dc_streams_dirty(); /* constructors may have enqueued work on element streams */
    *array_p = a;
    return TESS_OK;

err_free_array:
    free(prog);
    free(has);
    pthread_mutex_destroy(&a->lock);
    array_release(a);
    free(a->pe_elems);
    free(a->slabs);
    tess_obj_bcast_array_fini(a);
    free(a->loc);
    free(a);
    return st;
}

/* Free the elements' memory and the per-PE lists (no destructors, no reductions; main). */
static void array_release(tess_array_t *a)
{
    for (int l = 0; a->pe_elems && l < tess_rt.ppn; l++) {
        tess_vec_t *v = &a->pe_elems[l];
        for (size_t k = 0; k < v->count; k++) {
            tess_ctx_h e = v->items[k];
            tess_obj_graph_drop(obj_pe_of(l), e);
            if (!elem_in_slab(e, l)) {
                tess_hmap_remove(&obj_pe_of(l)->elems, tess_obj_key(a->id, e->linear));
                free(e);
            }
        }
        tess_vec_fini(v);
        if (a->slabs) {
            free(a->slabs[l].raw);
            a->slabs[l] = (obj_slab_t){0};
        }
    }
    atomic_store(&a->nlocal, 0);
}

static void array_free_elements(tess_array_t *a)
{
    tess_obj_array_lock(a);
    tess_obj_red_fini(a);
    tess_obj_array_unlock(a);
    if (a->dtor)
        for (int l = 0; l < tess_rt.ppn; l++) {
            tess_vec_t *v = &a->pe_elems[l];
            for (size_t k = v->count; k-- > 0;) {
                tess_ctx_h e = v->items[k];
                a->dtor(e, tess_obj_state(e), a->arg);
            }
        }
    array_release(a);
}

tess_status_t tess_array_destroy(tess_array_h a)
{
    tess_status_t st = tess_obj_check_main("tess_array_destroy");
    if (st != TESS_OK)
        return st;
    if (!a || a->destroyed)
        return tess_error(TESS_ERR_INVALID, "tess_array_destroy: %s array",
                          a ? "an already destroyed" : "a NULL");
    tess_core_collective_enter(TESS_COLL_ARRAY_DESTROY);
    MPI_Barrier(tess_rt.comm);
    array_free_elements(a);
    /* The array record stays until finalize so that later misuse is reported, not UB. */
    a->destroyed = 1;
    MPI_Comm_free(&a->comm);
    free(a->loc);
    a->loc = NULL;
    return TESS_OK;
}

/* ---- queries ----------------------------------------------------------------------------- */

int64_t     tess_array_size(tess_array_h a) { return a ? a->size : 0; }
int         tess_array_ndims(tess_array_h a) { return a ? a->ndims : 0; }
const char *tess_array_name(tess_array_h a) { return a ? a->name : "?"; }

tess_status_t tess_array_location(tess_array_h a, tess_index_t index, int *pe_p)
{
    tess_error_clear();
    if (!a || a->destroyed)
        return tess_error(TESS_ERR_INVALID, "tess_array_location: %s array",
                          a ? "a destroyed" : "a NULL");
    if (!pe_p)
        return tess_error(TESS_ERR_INVALID, "tess_array_location: pe_p is NULL");
    int64_t lin = tess_obj_linearize(a, index);
    if (lin < 0) {
        char buf[48];
        return tess_error(TESS_ERR_INVALID, "tess_array_location: index %s is out of range of "
                          "array '%s'", tess_obj_index_text(a, index, buf, sizeof(buf)), a->name);
    }
    *pe_p = atomic_load_explicit(&a->loc[lin], memory_order_relaxed);
    return TESS_OK;
}

static tess_ctx_h array_find_local(tess_array_h a, int64_t lin)
{
    int pe    = atomic_load_explicit(&a->loc[lin], memory_order_relaxed);
    int first = tess_rt.rank * tess_rt.ppn;
    if (pe < first || pe >= first + tess_rt.ppn)
        return NULL;
    return tess_obj_elem_find(obj_pe_of(pe - first), a, lin);
}

void *tess_array_local(tess_array_h a, tess_index_t index)
{
    if (!a || a->destroyed)
        return NULL;
    int64_t lin = tess_obj_linearize(a, index);
    if (lin < 0)
        return NULL;
    tess_ctx_h e = array_find_local(a, lin);
    return e ? tess_obj_state(e) : NULL;
}

int64_t tess_array_num_local(tess_array_h a)
{
    return a && !a->destroyed ? atomic_load(&a->nlocal) : 0;
}

tess_status_t tess_array_foreach(tess_array_h a, tess_foreach_fn_t fn, void *arg)
{
    tess_status_t st = tess_obj_check_main("tess_array_foreach");
    if (st != TESS_OK)
        return st;
    if (!a || a->destroyed)
        return tess_error(TESS_ERR_INVALID, "tess_array_foreach: %s array",
                          a ? "a destroyed" : "a NULL");
    if (!fn)
        return tess_error(TESS_ERR_INVALID, "tess_array_foreach: fn is NULL");
    for (int l = 0; l < tess_rt.ppn; l++) {
        tess_vec_t *v = &a->pe_elems[l];
        for (size_t k = 0; k < v->count; k++) {
            tess_ctx_h e = v->items[k];
            fn(e, tess_obj_state(e), arg);
        }
    }
    return TESS_OK;
}

/* A NULL ctx is misuse these cannot report as a status: answer as for no element. */
tess_index_t tess_ctx_index(tess_ctx_h ctx)
{
    return ctx ? tess_obj_ctx_index(ctx) : tess_idx1(-1);
}
tess_array_h tess_ctx_array(tess_ctx_h ctx) { return ctx ? ctx->array : NULL; }
void        *tess_ctx_elem(tess_ctx_h ctx) { return ctx ? tess_obj_state(ctx) : NULL; }
int64_t      tess_ctx_linear(tess_ctx_h ctx) { return ctx ? ctx->linear : -1; }

/* ---- layer state ------------------------------------------------------------------------- */

static void obj_pe_init(tess_pe_t *pe)
{
    obj_pe_t *op = tess_calloc(1, sizeof(*op), "per-PE object tables");
    if (!op || tess_hmap_init(&op->elems, 64) != TESS_OK)
        tess_fatal("out of memory setting up PE %d", tess_core_pe_global(pe));
    op->current_entry = -1;
    op->local         = tess_core_pe_local(pe);
    *tess_core_pe_slot(pe, TESS_SLOT_OBJECTS) = op;
}

static void obj_pe_fini(tess_pe_t *pe)
{
    obj_pe_t *op = *tess_core_pe_slot(pe, TESS_SLOT_OBJECTS);
    if (!op)
        return;
    for (size_t i = 0; i < op->parked.count; i++)
        tess_core_msg_free(op->parked.items[i]);
    tess_vec_fini(&op->parked);
    tess_obj_graph_pe_fini(op);
    tess_obj_batch_pe_fini(op);
    tess_hmap_fini(&op->elems);
    free(op);
    *tess_core_pe_slot(pe, TESS_SLOT_OBJECTS) = NULL;
}

tess_status_t tess_obj_init(void)
{
    static const tess_core_layer_t layer = {
        .name    = "objects",
        .pe_init = obj_pe_init,
        .pe_fini = obj_pe_fini,
        .progress = tess_obj_batch_progress,
        .busy    = tess_obj_batch_busy,
        .report_stuck = tess_obj_report_stuck,
    };
    tess_status_t st = tess_core_layer_add(&layer);
    if (st != TESS_OK)
        return st;
    if ((st = tess_obj_send_init()) != TESS_OK || (st = tess_obj_reduce_init()) != TESS_OK ||
        (st = tess_obj_migrate_init()) != TESS_OK)
        return st;
    tess_obj_devmsg_init();
    return TESS_OK;
}

/* Before the PEs stop: destroy what the program left, so destructors run on every rank. */
void tess_obj_fini(void)
{
    tess_obj_promise_fini();
    for (uint32_t i = 0; i < tess_obj_narrays; i++) {
        tess_array_t *a = tess_obj_arrays[i];
        if (!a->destroyed) {
            array_free_elements(a);
            MPI_Comm_free(&a->comm);
        }
        free(a->pe_elems);
        free(a->slabs);
        tess_obj_bcast_array_fini(a);
        free(a->loc);
        pthread_mutex_destroy(&a->lock);
        free(a);
        tess_obj_arrays[i] = NULL;
    }
    tess_obj_narrays = 0;
    tess_obj_batch_fini();
}
