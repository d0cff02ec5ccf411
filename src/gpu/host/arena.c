/*
 * arena.c — the host backend's device memory: POSIX shared-memory segments (creation, unlinked
 * at once and shared through their descriptors; the registry from which exit and abort cleanups
 * unlink a name still there; reclaim of segments that crashed processes left behind) and the
 * first-fit allocator over the memory segments.
 *
 * Block bookkeeping lives in private host memory, never in the segments: other processes map
 * the segments and must not be able to corrupt this process's allocator.
 */
#include "host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- segments and their registry ------------------------------------------------------------ */

static _Atomic(tess_gpu_host_shm_t *) shm_registry;
/* Never reset, not even by fini: a name is never used twice by one process. */
static _Atomic uint64_t shm_counter[3]; /* kinds 'm', 'e', 's' */

static void shm_registry_push(tess_gpu_host_shm_t *shm)
{
    tess_gpu_host_shm_t *head = atomic_load(&shm_registry);
    do {
        shm->next = head;
    } while (!atomic_compare_exchange_weak(&shm_registry, &head, shm));
}

tess_status_t tess_gpu_host_shm_create(char kind, size_t size, tess_gpu_host_shm_t **shm_p)
{
    tess_status_t st;
    tess_gpu_host_shm_t *shm = tess_calloc(1, sizeof(*shm), "a shared-memory segment record");
    if (!shm)
        return TESS_ERR_NO_MEMORY;
    uint64_t n = atomic_fetch_add(&shm_counter[kind == 'e' ? 1 : kind == 's' ? 2 : 0], 1);
    snprintf(shm->name, sizeof(shm->name), "/tessera-u%u-j%016" PRIx64 "-p%ld-%c%" PRIu64,
             (unsigned)tess_gpu_host.uid, tess_gpu_host.params.job_id,
             (long)tess_gpu_host.pid, kind, n);
    shm->owner = tess_gpu_host.pid;
    shm->size  = size;
    shm->fd    = -1;

    int fd = shm_open(shm->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* The name carries our pid and a number this process never used: it was left by a dead
         * process that had the same pid (reclaim skips names with our own pid). */
        tess_info("removing stale shared memory %s (a previous process with pid %ld)",
                  shm->name, (long)shm->owner);
        shm_unlink(shm->name);
        fd = shm_open(shm->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (fd < 0) {
        st = tess_error(TESS_ERR_SYSTEM, "cannot create shared memory %s: %s", shm->name,
                        strerror(errno));
        goto err_free;
    }
    /* From here on the exit and abort cleanups know the name. */
    atomic_store(&shm->linked, 1);
    shm_registry_push(shm);

    /* The umask may have cleared bits of 0600; peers of this user need read and write. */
    if (fchmod(fd, 0600) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "cannot set mode 0600 on shared memory %s: %s",
                        shm->name, strerror(errno));
        goto err_unlink;
    }
    /* Sparse: tmpfs commits pages only when they are touched. */
    if (ftruncate(fd, (off_t)size) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "cannot size shared memory %s to %zu bytes: %s",
                        shm->name, size, strerror(errno));
        goto err_unlink;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        st = tess_error(TESS_ERR_NO_MEMORY, "cannot map %zu bytes of shared memory %s: %s",
                        size, shm->name, strerror(errno));
        goto err_unlink;
    }
    /* Peers open the segment through this descriptor (/proc/<pid>/fd/<fd>, ipc.c), never by
     * its name: the name goes now, so that even kill -9 leaves nothing in /dev/shm. */
    if (atomic_exchange(&shm->linked, 0))
        shm_unlink(shm->name);
    shm->fd   = fd;
    shm->base = base;
    *shm_p    = shm;
    return TESS_OK;

err_unlink:
    close(fd);
    if (atomic_exchange(&shm->linked, 0))
        shm_unlink(shm->name);
    return st; /* the record stays on the registry; fini frees it */
err_free:
    free(shm);
    return st;
}

void tess_gpu_host_shm_destroy(tess_gpu_host_shm_t *shm)
{
    if (atomic_exchange(&shm->linked, 0))
        shm_unlink(shm->name);
    if (shm->base) {
        munmap(shm->base, shm->size);
        shm->base = NULL;
        close(shm->fd);
        shm->fd = -1;
    }
}

void tess_gpu_host_shm_unlink_all(void)
{
    pid_t self = getpid();
    for (tess_gpu_host_shm_t *shm = atomic_load(&shm_registry); shm; shm = shm->next)
        if (shm->owner == self && atomic_exchange(&shm->linked, 0))
            shm_unlink(shm->name);
}

void tess_gpu_host_shm_fini(void)
{
    tess_gpu_host_shm_t *shm = atomic_exchange(&shm_registry, NULL);
    while (shm) {
        tess_gpu_host_shm_t *next = shm->next;
        if (shm->owner == tess_gpu_host.pid && atomic_load(&shm->linked))
            tess_warn("shared memory %s was not destroyed before fini", shm->name);
        free(shm);
        shm = next;
    }
}

/* The pid in "j<16 hex>-p<pid>-<m|e|s><n>" (what follows "tessera-u<uid>-"), or -1 when the name
 * does not have exactly that form: anything else is not ours to remove. */
static long shm_parse_pid(const char *s)
{
    if (*s++ != 'j')
        return -1;
    for (int i = 0; i < 16; i++, s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return -1;
    if (*s++ != '-' || *s++ != 'p' || *s < '1' || *s > '9')
        return -1;
    long pid = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        pid = pid * 10 + (*s - '0');
        if (pid > INT32_MAX)
            return -1;
    }
    if (*s++ != '-' || (*s != 'm' && *s != 'e' && *s != 's'))
        return -1;
    s++;
    if (*s < '0' || *s > '9')
        return -1;
    while (*s >= '0' && *s <= '9')
        s++;
    return *s == '\0' ? pid : -1;
}

void tess_gpu_host_shm_reclaim(void)
{
    char prefix[32];
    int  plen = snprintf(prefix, sizeof(prefix), "tessera-u%u-", (unsigned)tess_gpu_host.uid);
    DIR *dir  = opendir("/dev/shm");
    if (!dir) {
        tess_debug("cannot scan /dev/shm for stale segments: %s", strerror(errno));
        return;
    }
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (strncmp(de->d_name, prefix, (size_t)plen) != 0)
            continue;
        long pid = shm_parse_pid(de->d_name + plen);
        if (pid <= 0 || pid == (long)tess_gpu_host.pid)
            continue;
        /* EPERM means the process exists (under another user): leave it. */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat sb;
        if (fstatat(dirfd(dir), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            sb.st_uid != tess_gpu_host.uid || !S_ISREG(sb.st_mode))
            continue;
        char path[NAME_MAX + 2];
        snprintf(path, sizeof(path), "/%s", de->d_name);
        if (shm_unlink(path) == 0)
            tess_info("reclaimed stale shared memory %s (%lld bytes): process %ld is gone",
                      path, (long long)sb.st_size, pid);
    }
    closedir(dir);
}

/* ---- the allocator ---------------------------------------------------------------------------- */

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
