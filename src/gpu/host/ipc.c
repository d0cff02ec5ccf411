/*
 * ipc.c — IPC for the host backend: exporting own allocations (arena.c) and events (events.c)
 * as handles naming (segment, owner's descriptor, offset: shm.c), and opening other processes'
 * handles. Opened segments are mapped once per name and reference counted, so opening many
 * allocations of one segment maps it once. As with CUDA, an allocation opened while an
 * overlapping one is still open (the exporter freed the first and made the second where it
 * was) gets an address of its own: the segment is mapped once more, a second view, and the two
 * never alias in the open table.
 *
 * A handle comes from another process and is checked as untrusted input: magic, version, a
 * name of our form, the opened descriptor's link naming that segment (shm.c), and offset + size
 * inside the segment as fstat reports it, before any byte of the mapping is read.
 *
 * Threads: any thread (ipc.lock); closing waits for the device without it.
 */
#include "host.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A segment of another process (or our own, opened again) mapped here. */
typedef struct tess_gpu_host_map {
    struct tess_gpu_host_map *next;
    void                     *base;
    size_t                    size;
    int                       refs; /* open allocations and opened events */
    char                      name[TESS_GPU_HOST_NAME_MAX];
} ipc_map_t;

/* One opened allocation. */
typedef struct ipc_open {
    char      *ptr;
    size_t     size;
    int        device;
    int        refs;
    ipc_map_t *map;
} ipc_open_t;

static struct {
    pthread_mutex_t  lock;
    ipc_map_t       *maps;
    ipc_open_t     **opens; /* sorted by ptr; their ranges never overlap (views differ) */
    size_t           nopens, cap;
    tess_gpu_event_h events; /* opened events */
} ipc = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- mappings (ipc.lock held) --------------------------------------------------------------- */

/* Map the segment of handle h once more (a new view), with one reference. */
static tess_status_t ipc_map_new(const tess_gpu_host_ipc_handle_t *h, const char *fn,
                                 ipc_map_t **map_p)
{
    tess_status_t st;
    const char   *name = h->name;
    ipc_map_t *m = tess_calloc(1, sizeof(*m), "an IPC mapping");
    if (!m)
        return TESS_ERR_NO_MEMORY;
    int fd = tess_gpu_host_shm_open_fd(h, fn, &st);
    if (fd < 0)
        goto err_free;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "%s: fstat of %s: %s", fn, name, strerror(errno));
        goto err_close;
    }
    if (sb.st_size <= 0) {
        st = tess_error(TESS_ERR_CORRUPT, "%s: shared memory %s is empty", fn, name);
        goto err_close;
    }
    m->size = (size_t)sb.st_size;
    m->base = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m->base == MAP_FAILED) {
        st = tess_error(TESS_ERR_NO_MEMORY, "%s: cannot map %zu bytes of %s: %s", fn, m->size,
                        name, strerror(errno));
        goto err_close;
    }
    close(fd);
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->refs  = 1;
    m->next  = ipc.maps;
    ipc.maps = m;
    *map_p   = m;
    return TESS_OK;

err_close:
    close(fd);
err_free:
    free(m);
    return st;
}

/* A view of the segment of handle h (the first one mapped), with one more reference. */
static tess_status_t ipc_map_get(const tess_gpu_host_ipc_handle_t *h, const char *fn,
                                 ipc_map_t **map_p)
{
    for (ipc_map_t *m = ipc.maps; m; m = m->next) {
        if (!strcmp(m->name, h->name)) {
            m->refs++;
            *map_p = m;
            return TESS_OK;
        }
    }
    return ipc_map_new(h, fn, map_p);
}

static void ipc_map_put(ipc_map_t *map)
{
    if (--map->refs > 0)
        return;
    for (ipc_map_t **pp = &ipc.maps; *pp; pp = &(*pp)->next) {
        if (*pp == map) {
            *pp = map->next;
            break;
        }
    }
    munmap(map->base, map->size);
    free(map);
}

/* Index of the first open with ptr > p. */
static size_t ipc_open_upper(const char *p)
{
    size_t lo = 0, hi = ipc.nopens;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ipc.opens[mid]->ptr <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- memory --------------------------------------------------------------------------------- */

tess_status_t tess_gpu_host_ipc_mem_export(void *ptr, tess_gpu_ipc_handle_t *h_p)
{
    tess_gpu_host_alloc_t a;
    if (!h_p)
        return tess_error(TESS_ERR_INVALID, "ipc_mem_export: h_p is NULL");
    if (tess_gpu_host_arena_find(ptr, 0, &a) != TESS_GPU_HOST_FIND_INSIDE || a.base != ptr)
        return tess_error(TESS_ERR_INVALID, "ipc_mem_export: %p is not the start of a device "
                          "allocation of this process", ptr);
    tess_gpu_host_handle_fill(h_p, TESS_GPU_HOST_IPC_MEM, a.shm, a.offset, a.size, a.alloc_id);
    return TESS_OK;
}

/* The handle's range lies inside the mapped segment (as fstat gave its size). */
static tess_status_t ipc_range_check(const tess_gpu_host_ipc_handle_t *h, const ipc_map_t *m)
{
    if (h->offset + h->size <= m->size)
        return TESS_OK;
    return tess_error(TESS_ERR_CORRUPT, "ipc_mem_open: [%" PRIu64 ", +%" PRIu64 ") is outside "
                      "%s (%zu bytes)", h->offset, h->size, h->name, m->size);
}

tess_status_t tess_gpu_host_ipc_mem_open(const tess_gpu_ipc_handle_t *h_in, void **ptr_p)
{
    tess_gpu_host_ipc_handle_t h;
    ipc_map_t    *map;
    tess_status_t st = tess_gpu_host_handle_parse(h_in, TESS_GPU_HOST_IPC_MEM, "ipc_mem_open", &h);
    if (st != TESS_OK)
        return st;
    if (!ptr_p)
        return tess_error(TESS_ERR_INVALID, "ipc_mem_open: ptr_p is NULL");

    pthread_mutex_lock(&ipc.lock);
    /* The first view of the segment where the range is open already (share it) or overlaps
     * nothing open; else a new view. */
    char  *ptr = NULL;
    size_t i   = 0;
    map        = NULL;
    for (ipc_map_t *m = ipc.maps; m && !map; m = m->next) {
        if (strcmp(m->name, h.name))
            continue;
        if ((st = ipc_range_check(&h, m)) != TESS_OK)
            goto out_unlock;
        ptr = (char *)m->base + h.offset;
        i   = ipc_open_upper(ptr);
        if (i > 0 && ipc.opens[i - 1]->ptr == ptr && ipc.opens[i - 1]->size == h.size) {
            ipc.opens[i - 1]->refs++;
            *ptr_p = ptr;
            goto out_unlock;
        }
        if ((i > 0 && ipc.opens[i - 1]->ptr + ipc.opens[i - 1]->size > ptr) ||
            (i < ipc.nopens && ptr + h.size > ipc.opens[i]->ptr))
            continue;
        map = m;
        map->refs++;
    }
    if (!map) {
        if ((st = ipc_map_new(&h, "ipc_mem_open", &map)) != TESS_OK)
            goto out_unlock;
        if ((st = ipc_range_check(&h, map)) != TESS_OK)
            goto err_put_map;
        ptr = (char *)map->base + h.offset;
        i   = ipc_open_upper(ptr);
    }
    if (ipc.nopens == ipc.cap) {
        size_t       cap   = ipc.cap ? ipc.cap * 2 : 16;
        ipc_open_t **opens = realloc(ipc.opens, cap * sizeof(*opens));
        if (!opens) {
            st = tess_error(TESS_ERR_NO_MEMORY, "ipc_mem_open: cannot track %zu opens", cap);
            goto err_put_map;
        }
        ipc.opens = opens;
        ipc.cap   = cap;
    }
    ipc_open_t *o = tess_calloc(1, sizeof(*o), "an opened allocation");
    if (!o) {
        st = TESS_ERR_NO_MEMORY;
        goto err_put_map;
    }
    o->ptr    = ptr;
    o->size   = (size_t)h.size;
    o->device = h.device;
    o->refs   = 1;
    o->map    = map;
    memmove(&ipc.opens[i + 1], &ipc.opens[i], (ipc.nopens - i) * sizeof(*ipc.opens));
    ipc.opens[i] = o;
    ipc.nopens++;
    *ptr_p = ptr;
    goto out_unlock;

err_put_map:
    ipc_map_put(map);
out_unlock:
    pthread_mutex_unlock(&ipc.lock);
    return st;
}

tess_status_t tess_gpu_host_ipc_mem_close(void *ptr)
{
    pthread_mutex_lock(&ipc.lock);
    size_t i = ipc_open_upper(ptr);
    if (i == 0 || ipc.opens[i - 1]->ptr != (char *)ptr) {
        pthread_mutex_unlock(&ipc.lock);
        return tess_error(TESS_ERR_INVALID, "ipc_mem_close: %p was not returned by ipc_mem_open",
                          ptr);
    }
    ipc_open_t *o = ipc.opens[i - 1];
    if (--o->refs > 0) {
        pthread_mutex_unlock(&ipc.lock);
        return TESS_OK;
    }
    memmove(&ipc.opens[i - 1], &ipc.opens[i], (ipc.nopens - i) * sizeof(*ipc.opens));
    ipc.nopens--;
    pthread_mutex_unlock(&ipc.lock);

    /* Queued copies may still use the mapping: let them finish before it can go. */
    tess_status_t st = tess_gpu_host_exec_drain();
    pthread_mutex_lock(&ipc.lock);
    ipc_map_put(o->map);
    pthread_mutex_unlock(&ipc.lock);
    free(o);
    return st;
}

int tess_gpu_host_ipc_find(const void *ptr, size_t len, tess_gpu_host_alloc_t *a_p)
{
    int r = TESS_GPU_HOST_FIND_NONE;
    memset(a_p, 0, sizeof(*a_p));
    a_p->device = -1;
    pthread_mutex_lock(&ipc.lock);
    size_t i = ipc_open_upper(ptr);
    if (i > 0) {
        const ipc_open_t *o   = ipc.opens[i - 1];
        size_t            rel = (size_t)((const char *)ptr - o->ptr);
        if (rel < TESS_MAX(o->size, 1)) {
            a_p->base   = o->ptr;
            a_p->size   = o->size;
            a_p->device = o->device;
            r = (len == 0 || (rel < o->size && len <= o->size - rel)) ? TESS_GPU_HOST_FIND_INSIDE
                                                                     : TESS_GPU_HOST_FIND_BAD;
        }
    }
    pthread_mutex_unlock(&ipc.lock);
    return r;
}

/* ---- events --------------------------------------------------------------------------------- */

tess_status_t tess_gpu_host_ipc_event_export(tess_gpu_event_h e, tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = tess_gpu_host_event_check(e, "ipc_event_export");
    if (st != TESS_OK)
        return st;
    if (!h_p)
        return tess_error(TESS_ERR_INVALID, "ipc_event_export: h_p is NULL");
    if (!(e->flags & TESS_GPU_EVENT_IPC) || (e->flags & TESS_GPU_HOST_EVENT_OPENED))
        return tess_error(TESS_ERR_INVALID, "ipc_event_export: the event was not created by "
                          "this process with TESS_GPU_EVENT_IPC");
    size_t off = (size_t)((char *)e->slot - (char *)e->shm->base);
    tess_gpu_host_handle_fill(h_p, TESS_GPU_HOST_IPC_EVENT, e->shm, off, sizeof(*e->slot),
                    atomic_load_explicit(&e->slot->gen, memory_order_relaxed));
    return TESS_OK;
}

tess_status_t tess_gpu_host_ipc_event_open(const tess_gpu_ipc_handle_t *h_in,
                                           tess_gpu_event_h *e_p)
{
    tess_gpu_host_ipc_handle_t h;
    ipc_map_t    *map;
    const size_t  hdr_size = sizeof(tess_gpu_host_evseg_hdr_t);
    tess_status_t st = tess_gpu_host_handle_parse(h_in, TESS_GPU_HOST_IPC_EVENT, "ipc_event_open", &h);
    if (st != TESS_OK)
        return st;
    if (!e_p)
        return tess_error(TESS_ERR_INVALID, "ipc_event_open: e_p is NULL");
    if (h.size != sizeof(tess_gpu_host_evslot_t) || h.offset < hdr_size ||
        (h.offset - hdr_size) % sizeof(tess_gpu_host_evslot_t) != 0)
        return tess_error(TESS_ERR_CORRUPT, "ipc_event_open: offset %" PRIu64 " size %" PRIu64
                          " is not an event slot", h.offset, h.size);

    pthread_mutex_lock(&ipc.lock);
    if ((st = ipc_map_get(&h, "ipc_event_open", &map)) != TESS_OK)
        goto out_unlock;
    const tess_gpu_host_evseg_hdr_t *hdr = map->base;
    if (h.offset + h.size > map->size || hdr->magic != TESS_GPU_HOST_EVSEG_MAGIC ||
        hdr->slot_size != sizeof(tess_gpu_host_evslot_t)) {
        st = tess_error(TESS_ERR_CORRUPT, "ipc_event_open: %s+%" PRIu64 " is not an event "
                        "slot (segment of %zu bytes)", h.name, h.offset, map->size);
        goto err_put_map;
    }
    tess_gpu_host_evslot_t *slot = (tess_gpu_host_evslot_t *)((char *)map->base + h.offset);
    if (atomic_load_explicit(&slot->gen, memory_order_relaxed) != h.id) {
        st = tess_error(TESS_ERR_NOT_FOUND, "ipc_event_open: the event of %s+%" PRIu64
                        " was destroyed and its slot reused", h.name, h.offset);
        goto err_put_map;
    }
    tess_gpu_event_h e = tess_calloc(1, sizeof(*e), "an opened event");
    if (!e) {
        st = TESS_ERR_NO_MEMORY;
        goto err_put_map;
    }
    e->magic = TESS_GPU_HOST_EVENT_MAGIC;
    e->flags = TESS_GPU_EVENT_IPC | TESS_GPU_HOST_EVENT_OPENED;
    e->slot  = slot;
    e->map   = map;
    e->next  = ipc.events;
    if (ipc.events)
        ipc.events->prev = e;
    ipc.events = e;
    *e_p       = e;
    goto out_unlock;

err_put_map:
    ipc_map_put(map);
out_unlock:
    pthread_mutex_unlock(&ipc.lock);
    return st;
}

tess_status_t tess_gpu_host_ipc_event_close(tess_gpu_event_h e)
{
    tess_status_t st = tess_gpu_host_event_check(e, "ipc_event_close");
    if (st != TESS_OK)
        return st;
    if (!(e->flags & TESS_GPU_HOST_EVENT_OPENED))
        return tess_error(TESS_ERR_INVALID, "ipc_event_close: the event was not opened with "
                          "ipc_event_open");
    pthread_mutex_lock(&ipc.lock);
    e->magic = 0;
    if (e->prev)
        e->prev->next = e->next;
    else
        ipc.events = e->next;
    if (e->next)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&ipc.lock);

    /* Queued records and waits point into the mapping. */
    st = tess_gpu_host_exec_drain();
    pthread_mutex_lock(&ipc.lock);
    ipc_map_put(e->map);
    pthread_mutex_unlock(&ipc.lock);
    free(e);
    return st;
}

void tess_gpu_host_ipc_fini(void)
{
    size_t nmem = ipc.nopens, nev = 0;
    while (ipc.events) {
        tess_gpu_event_h e = ipc.events;
        ipc.events         = e->next;
        free(e);
        nev++;
    }
    for (size_t i = 0; i < ipc.nopens; i++)
        free(ipc.opens[i]);
    free(ipc.opens);
    ipc.opens  = NULL;
    ipc.nopens = ipc.cap = 0;
    while (ipc.maps) {
        ipc_map_t *m = ipc.maps;
        ipc.maps     = m->next;
        munmap(m->base, m->size);
        free(m);
    }
    if (nmem || nev)
        tess_warn("host backend fini: %zu opened allocations and %zu opened events were not "
                  "closed", nmem, nev);
}
