/*
 * arena.c — the host backend's device memory: a first-fit allocator over memory segments
 * (shm.c), which other processes map through IPC handles (ipc.c), and the lookup of a pointer
 * in it. A segment made for one allocation larger than a segment goes when it is freed.
 *
 * Block bookkeeping lives in private host memory, never in the segments: other processes map
 * the segments and must not be able to corrupt this process's allocator.
 *
 * With TESS_HOST_DEVICE_MEMORY the device has a size: what the live allocations take (each
 * rounded up to TESS_GPU_HOST_ALIGN, as the allocator takes it) may not exceed it, and an
 * allocation past it fails with TESS_ERR_NO_MEMORY as cudaMalloc does when the device is full
 * (per process, as MPS's per-client device memory limit). The segments themselves do not
 * count: they are the model's reserve, not memory the program asked for. Nothing else of the
 * backend takes device memory: events live in event segments (a GPU's events take none a
 * program sees), plain segments and signal words are host memory on every backend, and memory
 * opened through IPC counts for its owner.
 *
 * Threads: any thread (arena.lock, which also guards the count in use); mem_free waits for
 * the device without it.
 */
#include "host.h"

#include <inttypes.h>
#include <stdlib.h>

/* The blocks of a segment tile it in address order; id 0 marks a free block. */
typedef struct arena_block {
    size_t   off, len; /* len: multiple of TESS_GPU_HOST_ALIGN */
    size_t   size;     /* as requested */
    uint64_t id;
} arena_block_t;

typedef struct arena_seg {
    tess_gpu_host_shm_t *shm;
    int                  dedicated; /* made for one allocation larger than a segment */
    arena_block_t       *blocks;
    size_t               nblocks, cap;
} arena_seg_t;

static struct {
    pthread_mutex_t lock;
    arena_seg_t   **segs; /* sorted by base address */
    size_t          nsegs, cap;
    size_t          seg_size;
    size_t          limit; /* device memory size (0: none) */
    size_t          used;  /* taken by live allocations, rounded up as `need` in mem_alloc */
} arena = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Process-wide and never reset, so an id names one allocation for the life of the process. */
static _Atomic uint64_t arena_next_id = 1;

static inline uintptr_t seg_base(const arena_seg_t *seg)
{
    return (uintptr_t)seg->shm->base;
}

static arena_seg_t *arena_seg_find(uintptr_t p)
{
    size_t lo = 0, hi = arena.nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (seg_base(arena.segs[mid]) <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    arena_seg_t *seg = arena.segs[lo - 1];
    return p - seg_base(seg) < seg->shm->size ? seg : NULL;
}

/* Index of the block containing offset `off` of the segment. */
static size_t arena_block_find(const arena_seg_t *seg, size_t off)
{
    size_t lo = 0, hi = seg->nblocks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (seg->blocks[mid].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1; /* block 0 starts at offset 0 */
}

static tess_status_t arena_block_insert(arena_seg_t *seg, size_t i, arena_block_t blk)
{
    if (seg->nblocks == seg->cap) {
        size_t         cap    = seg->cap ? seg->cap * 2 : 16;
        arena_block_t *blocks = realloc(seg->blocks, cap * sizeof(*blocks));
        if (!blocks)
            return tess_error(TESS_ERR_NO_MEMORY, "cannot grow the block table of %s to %zu",
                              seg->shm->name, cap);
        seg->blocks = blocks;
        seg->cap    = cap;
    }
    memmove(&seg->blocks[i + 1], &seg->blocks[i], (seg->nblocks - i) * sizeof(*seg->blocks));
    seg->blocks[i] = blk;
    seg->nblocks++;
    return TESS_OK;
}

static void arena_block_remove(arena_seg_t *seg, size_t i)
{
    memmove(&seg->blocks[i], &seg->blocks[i + 1], (seg->nblocks - i - 1) * sizeof(*seg->blocks));
    seg->nblocks--;
}

static void arena_seg_release(arena_seg_t *seg)
{
    tess_gpu_host_shm_destroy(seg->shm);
    free(seg->blocks);
    free(seg);
}

static tess_status_t arena_seg_add(size_t size, int dedicated, arena_seg_t **seg_p)
{
    tess_status_t st;
    arena_seg_t  *seg = tess_calloc(1, sizeof(*seg), "an arena segment");
    if (!seg)
        return TESS_ERR_NO_MEMORY;
    seg->dedicated = dedicated;
    if (arena.nsegs == arena.cap) {
        size_t        cap  = arena.cap ? arena.cap * 2 : 8;
        arena_seg_t **segs = realloc(arena.segs, cap * sizeof(*segs));
        if (!segs) {
            st = tess_error(TESS_ERR_NO_MEMORY, "cannot grow the arena to %zu segments", cap);
            goto err_free;
        }
        arena.segs = segs;
        arena.cap  = cap;
    }
    st = tess_gpu_host_shm_create('m', size, &seg->shm);
    if (st != TESS_OK)
        goto err_free;
    st = arena_block_insert(seg, 0, (arena_block_t){.off = 0, .len = size});
    if (st != TESS_OK)
        goto err_destroy;

    size_t i = arena.nsegs;
    while (i > 0 && seg_base(arena.segs[i - 1]) > seg_base(seg)) {
        arena.segs[i] = arena.segs[i - 1];
        i--;
    }
    arena.segs[i] = seg;
    arena.nsegs++;
    *seg_p = seg;
    return TESS_OK;

err_destroy:
    tess_gpu_host_shm_destroy(seg->shm);
err_free:
    free(seg);
    return st;
}

static void arena_seg_remove(arena_seg_t *seg)
{
    size_t i = 0;
    while (arena.segs[i] != seg)
        i++;
    memmove(&arena.segs[i], &arena.segs[i + 1], (arena.nsegs - i - 1) * sizeof(*arena.segs));
    arena.nsegs--;
    arena_seg_release(seg);
}

tess_status_t tess_gpu_host_arena_init(void)
{
    size_t        want = tess_gpu_host.params.host_arena_size;
    arena_seg_t  *seg;
    arena.seg_size = TESS_ALIGN_UP(want, tess_gpu_host.page_size);
    pthread_mutex_lock(&arena.lock);
    arena.limit = tess_gpu_host.params.host_device_memory;
    arena.used  = 0;
    /* Made now so that a system that cannot give shared memory fails at init, not later. */
    tess_status_t st = arena_seg_add(arena.seg_size, 0, &seg);
    pthread_mutex_unlock(&arena.lock);
    return st;
}

void tess_gpu_host_arena_fini(void)
{
    size_t live = 0;
    for (size_t i = 0; i < arena.nsegs; i++) {
        for (size_t b = 0; b < arena.segs[i]->nblocks; b++)
            live += arena.segs[i]->blocks[b].id != 0;
        arena_seg_release(arena.segs[i]);
    }
    if (live)
        tess_debug("host backend fini: %zu device allocations were not freed", live);
    free(arena.segs);
    arena.segs  = NULL;
    arena.nsegs = arena.cap = 0;
}

/* First fit over the shared segments in address order. */
static int arena_first_fit(size_t need, arena_seg_t **seg_p, size_t *block_p)
{
    for (size_t i = 0; i < arena.nsegs; i++) {
        arena_seg_t *seg = arena.segs[i];
        if (seg->dedicated)
            continue;
        for (size_t b = 0; b < seg->nblocks; b++) {
            if (seg->blocks[b].id == 0 && seg->blocks[b].len >= need) {
                *seg_p   = seg;
                *block_p = b;
                return 1;
            }
        }
    }
    return 0;
}

tess_status_t tess_gpu_host_mem_alloc(size_t size, void **ptr_p)
{
    if (!ptr_p)
        return tess_error(TESS_ERR_INVALID, "mem_alloc: ptr_p is NULL");
    if (size > SIZE_MAX / 2)
        return tess_error(TESS_ERR_NO_MEMORY, "mem_alloc: %zu bytes is more than any arena",
                          size);
    /* Size 0 still gets a block of its own, so that every allocation has a distinct address. */
    size_t        need = TESS_ALIGN_UP(size ? size : 1, TESS_GPU_HOST_ALIGN);
    arena_seg_t  *seg  = NULL;
    size_t        b    = 0;
    tess_status_t st   = TESS_OK;

    pthread_mutex_lock(&arena.lock);
    if (arena.limit && need > arena.limit - arena.used) {
        st = tess_error(TESS_ERR_NO_MEMORY, "mem_alloc: out of device memory: %zu bytes asked, "
                        "%zu of %zu in use (TESS_HOST_DEVICE_MEMORY)", size, arena.used,
                        arena.limit);
        goto out_unlock;
    }
    if (need > arena.seg_size)
        st = arena_seg_add(TESS_ALIGN_UP(need, tess_gpu_host.page_size), 1, &seg);
    else if (!arena_first_fit(need, &seg, &b))
        st = arena_seg_add(arena.seg_size, 0, &seg);
    if (st != TESS_OK)
        goto out_unlock;

    arena_block_t *blk = &seg->blocks[b];
    if (blk->len > need) {
        arena_block_t rest = {.off = blk->off + need, .len = blk->len - need};
        st = arena_block_insert(seg, b + 1, rest);
        if (st != TESS_OK)
            goto out_unlock;
        blk      = &seg->blocks[b]; /* the insert may have moved the table */
        blk->len = need;
    }
    blk->size = size;
    blk->id   = atomic_fetch_add(&arena_next_id, 1);
    arena.used += need;
    *ptr_p    = (char *)seg->shm->base + blk->off;
out_unlock:
    pthread_mutex_unlock(&arena.lock);
    return st;
}

/* Why ptr cannot be freed, or TESS_OK. Arena lock held. */
static tess_status_t arena_check_free(void *ptr, arena_seg_t **seg_p, size_t *block_p)
{
    arena_seg_t *seg = arena_seg_find((uintptr_t)ptr);
    if (!seg)
        return tess_error(TESS_ERR_INVALID,
                          "mem_free: %p is not device memory of this process", ptr);
    size_t               off = (uintptr_t)ptr - seg_base(seg);
    size_t               b   = arena_block_find(seg, off);
    const arena_block_t *blk = &seg->blocks[b];
    if (blk->id == 0)
        return tess_error(TESS_ERR_INVALID, "mem_free: %p is not allocated (freed twice?)",
                          ptr);
    if (blk->off != off)
        return tess_error(TESS_ERR_INVALID,
                          "mem_free: %p is inside allocation %p (%zu bytes, id %" PRIu64
                          "), not its start", ptr, (void *)(seg_base(seg) + blk->off),
                          blk->size, blk->id);
    *seg_p   = seg;
    *block_p = b;
    return TESS_OK;
}

tess_status_t tess_gpu_host_mem_free(void *ptr)
{
    arena_seg_t  *seg;
    size_t        b;
    tess_status_t st;
    if (!ptr)
        return TESS_OK;

    pthread_mutex_lock(&arena.lock);
    st = arena_check_free(ptr, &seg, &b);
    pthread_mutex_unlock(&arena.lock);
    if (st != TESS_OK)
        return st;
    /* cudaFree waits for the device; without this a block could be handed out again while an
     * operation enqueued before the free still reads or writes it. */
    st = tess_gpu_host_exec_drain();
    if (st != TESS_OK)
        return st;

    pthread_mutex_lock(&arena.lock);
    st = arena_check_free(ptr, &seg, &b); /* another thread may have freed it meanwhile */
    if (st != TESS_OK)
        goto out_unlock;
    arena.used -= seg->blocks[b].len;
    if (seg->dedicated) {
        arena_seg_remove(seg);
        goto out_unlock;
    }
    arena_block_t *blk = &seg->blocks[b];
    blk->id   = 0;
    blk->size = 0;
    if (b + 1 < seg->nblocks && seg->blocks[b + 1].id == 0) {
        blk->len += seg->blocks[b + 1].len;
        arena_block_remove(seg, b + 1);
    }
    if (b > 0 && seg->blocks[b - 1].id == 0) {
        seg->blocks[b - 1].len += seg->blocks[b].len;
        arena_block_remove(seg, b);
    }
out_unlock:
    pthread_mutex_unlock(&arena.lock);
    return st;
}

int tess_gpu_host_arena_find(const void *ptr, size_t len, tess_gpu_host_alloc_t *a_p)
{
    int r = TESS_GPU_HOST_FIND_NONE;
    memset(a_p, 0, sizeof(*a_p));
    a_p->device = -1;

    pthread_mutex_lock(&arena.lock);
    arena_seg_t *seg = arena_seg_find((uintptr_t)ptr);
    if (!seg)
        goto out_unlock;
    size_t               off = (uintptr_t)ptr - seg_base(seg);
    const arena_block_t *blk = &seg->blocks[arena_block_find(seg, off)];
    r = TESS_GPU_HOST_FIND_BAD;
    if (blk->id == 0)
        goto out_unlock;
    a_p->base     = (char *)seg->shm->base + blk->off;
    a_p->size     = blk->size;
    a_p->alloc_id = blk->id;
    a_p->device   = tess_gpu_host.device;
    a_p->shm      = seg->shm;
    a_p->offset   = blk->off;
    size_t rel    = off - blk->off;
    if (len == 0 ? rel < TESS_MAX(blk->size, 1) : (rel < blk->size && len <= blk->size - rel))
        r = TESS_GPU_HOST_FIND_INSIDE;
out_unlock:
    pthread_mutex_unlock(&arena.lock);
    return r;
}
