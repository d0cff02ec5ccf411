/*
 * ipc.c — IPC for the host backend: exporting own allocations and events as (segment name,
 * owner's descriptor, offset) handles, and opening other processes' handles. A segment's name
 * is unlinked as soon as it is made (arena.c): it is opened through /proc/<owner>/fd/<fd>.
 * Opened segments are mapped once per name and reference counted, so opening many allocations
 * of one segment maps it once. As with
 * CUDA, an allocation opened while an overlapping one is still open (the exporter freed the
 * first and made the second where it was) gets an address of its own: the segment is mapped
 * once more, a second view, and the two never alias in the open table.
 *
 * A handle comes from another process and is checked as untrusted input: magic, version, a
 * name of our form, the opened descriptor's link naming that segment, and offset + size inside
 * the segment as fstat reports it, before any byte of the mapping is read.
 *
 * Also the plain shared segments that the layers above share between processes of a node
 * (tess_gpu_shm_*, gpu.h): made by the same helper as the arena's, opened the same way, but
 * mapped per call, outside the open table (they are not device memory).
 */
#include "host.h"

#include <errno.h>
#include <fcntl.h>
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

/* ---- handles ------------------------------------------------------------------------------- */

static void ipc_handle_fill(tess_gpu_ipc_handle_t *h_p, uint32_t magic,
                            const tess_gpu_host_shm_t *shm, uint64_t offset, uint64_t size,
                            uint64_t id)
{
    const char *name = shm->name;
    tess_gpu_host_ipc_handle_t h;
    memset(&h, 0, sizeof(h)); /* no stray bytes go over the wire */
    h.magic     = magic;
    h.version   = TESS_GPU_HOST_IPC_VERSION;
    h.name_len  = (uint16_t)strlen(name);
    h.owner_pid = (int32_t)tess_gpu_host.pid;
    h.device    = tess_gpu_host.device;
    h.fd        = shm->fd;
    h.offset    = offset;
    h.size      = size;
    h.id        = id;
    memcpy(h.name, name, h.name_len + 1u);
    memset(h_p, 0, sizeof(*h_p));
    memcpy(h_p->bytes, &h, sizeof(h));
}

static tess_status_t ipc_handle_parse(const tess_gpu_ipc_handle_t *h_in, uint32_t magic,
                                      const char *fn, tess_gpu_host_ipc_handle_t *h)
{
    if (!h_in)
        return tess_error(TESS_ERR_INVALID, "%s: the handle is NULL", fn);
    memcpy(h, h_in->bytes, sizeof(*h));
    if (h->magic != magic)
        return tess_error(TESS_ERR_CORRUPT, "%s: not a host-backend %s handle (magic %#" PRIx32
                          ")", fn, magic == TESS_GPU_HOST_IPC_MEM ? "memory" :
                          magic == TESS_GPU_HOST_IPC_EVENT ? "event" : "segment",
                          h->magic);
    if (h->version != TESS_GPU_HOST_IPC_VERSION)
        return tess_error(TESS_ERR_CORRUPT, "%s: handle version %u, expected %u", fn,
                          (unsigned)h->version, TESS_GPU_HOST_IPC_VERSION);
    static const char prefix[] = "/tessera-u";
    if (h->name_len < sizeof(prefix) || h->name_len >= TESS_GPU_HOST_NAME_MAX ||
        memchr(h->name, '\0', h->name_len) || h->name[h->name_len] != '\0' ||
        memcmp(h->name, prefix, sizeof(prefix) - 1) || strchr(h->name + 1, '/'))
        return tess_error(TESS_ERR_CORRUPT, "%s: the handle does not name a Tessera segment", fn);
    if (h->owner_pid <= 0 || h->fd < 0)
        return tess_error(TESS_ERR_CORRUPT, "%s: the handle names process %" PRId32 ", "
                          "descriptor %" PRId32, fn, h->owner_pid, h->fd);
    if (h->offset > SIZE_MAX || h->size > SIZE_MAX - h->offset)
        return tess_error(TESS_ERR_CORRUPT, "%s: offset %" PRIu64 " + size %" PRIu64
                          " overflows", fn, h->offset, h->size);
    return TESS_OK;
}

/* ---- mappings (ipc.lock held) --------------------------------------------------------------- */

/* Open the segment of handle h through its owner's descriptor (the name is gone: arena.c), and
 * check that what opened is that segment: the descriptor's link names it. */
static int ipc_segment_open(const tess_gpu_host_ipc_handle_t *h, const char *fn,
                            tess_status_t *st_p)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%" PRId32 "/fd/%" PRId32, h->owner_pid, h->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        *st_p = tess_error(e == ENOENT ? TESS_ERR_NOT_FOUND : TESS_ERR_SYSTEM,
                           "%s: cannot open shared memory %s as %s: %s%s", fn, h->name, path,
                           strerror(e), e == ENOENT ? " (its process ended or freed it)" :
                           " (processes of a node must see each other's /proc/<pid>/fd)");
        return -1;
    }
    char self[64], link[160], want[TESS_GPU_HOST_NAME_MAX + 32];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, link, sizeof(link) - 1);
    link[n > 0 ? n : 0] = '\0';
    int len = snprintf(want, sizeof(want), "/dev/shm%s", h->name);
    if (n < len || memcmp(link, want, (size_t)len) ||
        (link[len] != '\0' && strcmp(link + len, " (deleted)"))) {
        close(fd);
        *st_p = tess_error(TESS_ERR_NOT_FOUND, "%s: shared memory %s is gone (%s is %s: its "
                           "process ended or freed it)", fn, h->name, path,
                           n > 0 ? link : "not there");
        return -1;
    }
    return fd;
}

/* Map the segment of handle h once more (a new view), with one reference. */
static tess_status_t ipc_map_new(const tess_gpu_host_ipc_handle_t *h, const char *fn,
                                 ipc_map_t **map_p)
{
    tess_status_t st;
    const char   *name = h->name;
    ipc_map_t *m = tess_calloc(1, sizeof(*m), "an IPC mapping");
    if (!m)
        return TESS_ERR_NO_MEMORY;
    int fd = ipc_segment_open(h, fn, &st);
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
    ipc_handle_fill(h_p, TESS_GPU_HOST_IPC_MEM, a.shm, a.offset, a.size, a.alloc_id);
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
    tess_status_t st = ipc_handle_parse(h_in, TESS_GPU_HOST_IPC_MEM, "ipc_mem_open", &h);
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
    ipc_handle_fill(h_p, TESS_GPU_HOST_IPC_EVENT, e->shm, off, sizeof(*e->slot),
                    atomic_load_explicit(&e->slot->gen, memory_order_relaxed));
    return TESS_OK;
}

tess_status_t tess_gpu_host_ipc_event_open(const tess_gpu_ipc_handle_t *h_in,
                                           tess_gpu_event_h *e_p)
{
    tess_gpu_host_ipc_handle_t h;
    ipc_map_t    *map;
    const size_t  hdr_size = sizeof(tess_gpu_host_evseg_hdr_t);
    tess_status_t st = ipc_handle_parse(h_in, TESS_GPU_HOST_IPC_EVENT, "ipc_event_open", &h);
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

/* ---- plain shared segments (gpu.h) --------------------------------------------------------- */

/* Under another backend (CUDA, HIP) the segments are still plain host memory made here: the
 * host backend's segment service starts with the first of them and stops at tess_gpu_fini. */
static struct {
    pthread_mutex_t        lock;
    int                    setup, started;
    tess_gpu_init_params_t params;
} shm_svc = {.lock = PTHREAD_MUTEX_INITIALIZER};

void tess_gpu_shm_setup(const tess_gpu_init_params_t *params)
{
    pthread_mutex_lock(&shm_svc.lock);
    shm_svc.params = *params;
    shm_svc.setup  = 1;
    pthread_mutex_unlock(&shm_svc.lock);
}

void tess_gpu_shm_fini(void)
{
    pthread_mutex_lock(&shm_svc.lock);
    if (shm_svc.started && !tess_gpu_host.initialised)
        tess_gpu_host_shm_stop();
    shm_svc.started = shm_svc.setup = 0;
    pthread_mutex_unlock(&shm_svc.lock);
}

int tess_gpu_shm_available(void)
{
    pthread_mutex_lock(&shm_svc.lock);
    int up = tess_gpu_host.initialised || shm_svc.setup;
    pthread_mutex_unlock(&shm_svc.lock);
    return up;
}

static tess_status_t shm_usable(const char *fn)
{
    tess_status_t st = TESS_OK;
    pthread_mutex_lock(&shm_svc.lock);
    if (!tess_gpu_host.initialised && !shm_svc.setup)
        st = tess_error(TESS_ERR_UNSUPPORTED, "%s: no GPU backend is initialised", fn);
    else if (!tess_gpu_host.initialised && !shm_svc.started &&
             (st = tess_gpu_host_shm_start(&shm_svc.params)) == TESS_OK)
        shm_svc.started = 1;
    pthread_mutex_unlock(&shm_svc.lock);
    return st;
}

tess_status_t tess_gpu_shm_create(size_t size, tess_gpu_shm_h *shm_p, void **base_p,
                                  tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = shm_usable("tess_gpu_shm_create");
    if (st != TESS_OK)
        return st;
    if (!shm_p || !base_p || !h_p || size == 0)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_shm_create: %zu bytes, shm_p %p, base_p "
                          "%p, h_p %p", size, (void *)shm_p, (void *)base_p, (void *)h_p);
    tess_gpu_host_shm_t *shm;
    if ((st = tess_gpu_host_shm_create('s', size, &shm)) != TESS_OK)
        return st;
    ipc_handle_fill(h_p, TESS_GPU_HOST_IPC_SHM, shm, 0, size, 0);
    *shm_p  = shm;
    *base_p = shm->base;
    return TESS_OK;
}

void tess_gpu_shm_destroy(tess_gpu_shm_h shm)
{
    if (shm)
        tess_gpu_host_shm_destroy(shm);
}

tess_status_t tess_gpu_shm_open(const tess_gpu_ipc_handle_t *h_in, void **base_p,
                                size_t *size_p)
{
    static const char fn[] = "tess_gpu_shm_open";
    tess_gpu_host_ipc_handle_t h;
    tess_status_t st = shm_usable(fn);
    if (st != TESS_OK)
        return st;
    if (!base_p || !size_p)
        return tess_error(TESS_ERR_INVALID, "%s: base_p or size_p is NULL", fn);
    if ((st = ipc_handle_parse(h_in, TESS_GPU_HOST_IPC_SHM, fn, &h)) != TESS_OK)
        return st;
    if (h.offset != 0 || h.size == 0)
        return tess_error(TESS_ERR_CORRUPT, "%s: the handle names %" PRIu64 " bytes at %" PRIu64
                          " of %s, not a whole segment", fn, h.size, h.offset, h.name);
    int fd = ipc_segment_open(&h, fn, &st);
    if (fd < 0)
        return st;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "%s: fstat of %s: %s", fn, h.name, strerror(errno));
        goto err_close;
    }
    if ((uint64_t)sb.st_size != h.size) {
        st = tess_error(TESS_ERR_CORRUPT, "%s: shared memory %s has %lld bytes, the handle says "
                        "%" PRIu64, fn, h.name, (long long)sb.st_size, h.size);
        goto err_close;
    }
    void *base = mmap(NULL, (size_t)h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        st = tess_error(TESS_ERR_NO_MEMORY, "%s: cannot map %" PRIu64 " bytes of %s: %s", fn,
                        h.size, h.name, strerror(errno));
        goto err_close;
    }
    close(fd);
    *base_p = base;
    *size_p = (size_t)h.size;
    return TESS_OK;

err_close:
    close(fd);
    return st;
}

void tess_gpu_shm_close(void *base, size_t size)
{
    if (base)
        munmap(base, size);
}
