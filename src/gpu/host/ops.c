/*
 * ops.c — the host backend's ops table: init and fini of the parts in order, device properties,
 * pinned host memory, and what needs more than one part — a pointer's place in device memory
 * (own arena or opened through IPC) for pointer queries and the enqueue-time checks of copies,
 * closing an opened event through event_destroy, and a copy that signals.
 */
#include "host.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

tess_gpu_host_state_t tess_gpu_host;

static _Atomic size_t host_pinned_used; /* pinned host memory in use (host_host_alloc) */

static tess_status_t host_init(const tess_gpu_init_params_t *params)
{
    tess_status_t st;
    if (tess_gpu_host.initialised)
        return tess_error(TESS_ERR_STATE, "host backend: already initialised");
    if (!params)
        return tess_error(TESS_ERR_INVALID, "host backend: params is NULL");
    if (params->host_threads < 0 || params->host_threads > TESS_GPU_HOST_MAX_THREADS ||
        params->host_jitter_us < 0 || params->host_devices < 0)
        return tess_error(TESS_ERR_INVALID, "host backend: %d executor threads (at most %d), "
                          "jitter %d us, %d devices", params->host_threads,
                          TESS_GPU_HOST_MAX_THREADS, params->host_jitter_us,
                          params->host_devices);

    memset(&tess_gpu_host, 0, sizeof(tess_gpu_host));
    atomic_store(&host_pinned_used, 0);
    tess_gpu_host_fault_reset();
    tess_gpu_host.params = *params;
    tess_gpu_init_params_t *p = &tess_gpu_host.params;
    if (p->host_arena_size == 0)
        p->host_arena_size = TESS_GPU_HOST_ARENA_DEFAULT;
    if (p->host_threads == 0)
        p->host_threads = 1;
    if (p->host_devices == 0)
        p->host_devices = 1;
    tess_gpu_host.page_size = (size_t)sysconf(_SC_PAGESIZE);
    tess_gpu_host.device    = 0;
    if ((st = tess_gpu_host_shm_start(params)) != TESS_OK)
        return st;

    if ((st = tess_gpu_host_arena_init()) != TESS_OK)
        goto err_fini_shm;
    if ((st = tess_gpu_host_exec_init()) != TESS_OK)
        goto err_fini_arena;
    tess_gpu_host.initialised = 1;
    tess_debug("host backend: %d executor threads, %zu-byte segments, jitter %d us",
               p->host_threads, p->host_arena_size, p->host_jitter_us);
    return TESS_OK;

err_fini_arena:
    tess_gpu_host_arena_fini();
err_fini_shm:
    tess_gpu_host_shm_stop();
    return st;
}

static void host_fini(void)
{
    if (!tess_gpu_host.initialised)
        return;
    tess_gpu_host_exec_fini(); /* first: executors may be using the memory */
    tess_gpu_host_events_fini();
    tess_gpu_host_ipc_fini();
    tess_gpu_host_arena_fini();
    tess_gpu_host_shm_stop();
    tess_gpu_host.initialised = 0;
}

static int host_device_count(void)
{
    return tess_gpu_host.params.host_devices;
}

static tess_status_t host_set_device(int device)
{
    if (device < 0 || device >= tess_gpu_host.params.host_devices)
        return tess_error(TESS_ERR_INVALID, "set_device: device %d of %d", device,
                          tess_gpu_host.params.host_devices);
    tess_gpu_host.device = device;
    return TESS_OK;
}

static tess_status_t host_get_props(int device, tess_gpu_props_t *props_p)
{
    if (!props_p || device < 0 || device >= tess_gpu_host.params.host_devices)
        return tess_error(TESS_ERR_INVALID, "get_props: device %d of %d", device,
                          tess_gpu_host.params.host_devices);
    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "Tessera host backend");
    long pages = sysconf(_SC_PHYS_PAGES);
    props_p->total_mem       = pages > 0 ? (size_t)pages * tess_gpu_host.page_size : 0;
    props_p->multiprocessors = tess_gpu_host.params.host_threads;
    props_p->ipc             = 1;
    props_p->wait_value      = 0;
    props_p->mps             = -1; /* processes share its executors' cores, not a device */
    return TESS_OK;
}

/* Pinned host memory: ordinary memory, with a size in front (one page) so that with
 * TESS_HOST_PINNED_MEMORY what is in use can be counted, and an allocation past it fail as
 * cudaHostAlloc does when the system will not pin more. It starts on a page, as cudaHostAlloc's
 * does (O_DIRECT writes from it). The count is atomic (any thread). */
#define HOST_PINNED_ALIGN 4096
static tess_status_t host_host_alloc(size_t size, void **ptr_p)
{
    if (!ptr_p)
        return tess_error(TESS_ERR_INVALID, "host_alloc: ptr_p is NULL");
    size_t limit = tess_gpu_host.params.host_pinned_memory;
    if (size > SIZE_MAX / 2)
        return tess_error(TESS_ERR_NO_MEMORY, "host_alloc: %zu bytes", size);
    size_t used = atomic_load(&host_pinned_used);
    do {
        if (limit && size > limit - TESS_MIN(used, limit))
            return tess_error(TESS_ERR_NO_MEMORY, "host_alloc: out of pinned host memory: %zu "
                              "bytes asked, %zu of %zu in use (TESS_HOST_PINNED_MEMORY)", size,
                              used, limit);
    } while (!atomic_compare_exchange_weak(&host_pinned_used, &used, used + size));
    char *p = tess_aligned_alloc(HOST_PINNED_ALIGN, HOST_PINNED_ALIGN + size,
                                 "pinned host memory");
    if (!p) {
        atomic_fetch_sub(&host_pinned_used, size);
        return TESS_ERR_NO_MEMORY;
    }
    memcpy(p, &size, sizeof(size));
    *ptr_p = p + HOST_PINNED_ALIGN;
    return TESS_OK;
}

static tess_status_t host_host_free(void *ptr)
{
    if (!ptr)
        return TESS_OK;
    char  *p = (char *)ptr - HOST_PINNED_ALIGN;
    size_t size;
    memcpy(&size, p, sizeof(size));
    atomic_fetch_sub(&host_pinned_used, size);
    free(p);
    return TESS_OK;
}

/* Where [ptr, ptr+len) lies in device memory, own or opened (len 0: the byte at ptr). */
static int host_mem_find(const void *ptr, size_t len, tess_gpu_host_alloc_t *a_p)
{
    int r = tess_gpu_host_arena_find(ptr, len, a_p);
    return r != TESS_GPU_HOST_FIND_NONE ? r : tess_gpu_host_ipc_find(ptr, len, a_p);
}

static tess_status_t host_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    tess_gpu_host_alloc_t a;
    if (!info_p)
        return tess_error(TESS_ERR_INVALID, "ptr_query: info_p is NULL");
    memset(info_p, 0, sizeof(*info_p));
    info_p->device = -1;
    if (host_mem_find(ptr, 0, &a) == TESS_GPU_HOST_FIND_INSIDE) {
        info_p->is_device = 1;
        info_p->device    = a.device;
        info_p->base      = a.base;
        info_p->size      = a.size;
        info_p->alloc_id  = a.alloc_id;
    }
    return TESS_OK;
}

/* Enqueue-time checks that CUDA makes too: a device range must lie inside one live allocation. */
static tess_status_t host_check_range(const char *fn, const char *which, const void *p, size_t n)
{
    tess_gpu_host_alloc_t a;
    if (tess_likely(host_mem_find(p, n, &a) != TESS_GPU_HOST_FIND_BAD))
        return TESS_OK;
    if (a.base)
        return tess_error(TESS_ERR_INVALID,
                          "%s: %s [%p, +%zu) runs past the end of its allocation %p (%zu bytes)",
                          fn, which, p, n, a.base, a.size);
    return tess_error(TESS_ERR_INVALID, "%s: %s %p is device memory that is not allocated",
                      fn, which, p);
}

static tess_status_t host_memcpy_async(void *dst, const void *src, size_t size,
                                       tess_gpu_stream_h s)
{
    tess_status_t st;
    if (size == 0)
        return TESS_OK;
    if (!dst || !src)
        return tess_error(TESS_ERR_INVALID, "memcpy_async: NULL %s for %zu bytes",
                          dst ? "source" : "destination", size);
    if ((st = host_check_range("memcpy_async", "destination", dst, size)) != TESS_OK ||
        (st = host_check_range("memcpy_async", "source", src, size)) != TESS_OK)
        return st;
    return tess_gpu_host_stream_copy(dst, src, size, s);
}

static tess_status_t host_memset_async(void *dst, int value, size_t size, tess_gpu_stream_h s)
{
    tess_status_t st;
    if (size == 0)
        return TESS_OK;
    if (!dst)
        return tess_error(TESS_ERR_INVALID, "memset_async: NULL destination for %zu bytes", size);
    if ((st = host_check_range("memset_async", "destination", dst, size)) != TESS_OK)
        return st;
    return tess_gpu_host_stream_set(dst, value, size, s);
}

static tess_status_t host_event_destroy(tess_gpu_event_h e)
{
    tess_status_t st = tess_gpu_host_event_check(e, "event_destroy");
    if (st != TESS_OK)
        return st;
    if (e->flags & TESS_GPU_HOST_EVENT_OPENED)
        return tess_gpu_host_ipc_event_close(e); /* cudaEventDestroy closes opened events */
    return tess_gpu_host_event_destroy(e);
}

/* Signal words: plain host memory, which the executors write (enqueue.c's stream_signal). */
static tess_status_t host_signal_alloc(size_t n, _Atomic uint32_t **words_p)
{
    _Atomic uint32_t *w = tess_calloc(n ? n : 1, sizeof(*w), "stream signal words");
    if (!w)
        return TESS_ERR_NO_MEMORY;
    *words_p = w;
    return TESS_OK;
}

static void host_signal_free(_Atomic uint32_t *words) { free(words); }

/* As the CUDA backend's small copies do: one call, a copy and then a signal on the stream. */
static tess_status_t host_memcpy_signal_async(void *dst, const void *src, size_t size,
                                              tess_gpu_stream_h s, _Atomic uint32_t *word,
                                              uint32_t value)
{
    tess_status_t st = host_memcpy_async(dst, src, size, s);
    return st == TESS_OK ? tess_gpu_host_stream_signal(s, word, value) : st;
}

static void *host_native_stream(tess_gpu_stream_h s)
{
    return s;
}

const tess_gpu_ops_t tess_gpu_host_ops = {
    .name              = "host",
    .kind              = TESS_GPU_HOST,
    .wait_captures_record = 0,
    .init              = host_init,
    .fini              = host_fini,
    .device_count      = host_device_count,
    .set_device        = host_set_device,
    .get_props         = host_get_props,
    .mem_alloc         = tess_gpu_host_mem_alloc,
    .mem_free          = tess_gpu_host_mem_free,
    .host_alloc        = host_host_alloc,
    .host_free         = host_host_free,
    .memcpy_async      = host_memcpy_async,
    .memset_async      = host_memset_async,
    .launch_host       = tess_gpu_host_launch_host,
    .stream_create     = tess_gpu_host_stream_create,
    .stream_destroy    = tess_gpu_host_stream_destroy,
    .stream_sync       = tess_gpu_host_stream_sync,
    .stream_query      = tess_gpu_host_stream_query,
    .stream_wait_event = tess_gpu_host_stream_wait_event,
    .event_create      = tess_gpu_host_event_create,
    .event_destroy     = host_event_destroy,
    .event_record      = tess_gpu_host_event_record,
    .event_query       = tess_gpu_host_event_query,
    .event_sync        = tess_gpu_host_event_sync,
    .event_elapsed_ms  = tess_gpu_host_event_elapsed_ms,
    .signal_alloc      = host_signal_alloc,
    .signal_free       = host_signal_free,
    .stream_signal     = tess_gpu_host_stream_signal,
    .memcpy_signal_async = host_memcpy_signal_async,
    .memcpy_signal_max = 64 << 10, /* as the CUDA backend's */
    .ipc_mem_export    = tess_gpu_host_ipc_mem_export,
    .ipc_mem_open      = tess_gpu_host_ipc_mem_open,
    .ipc_mem_close     = tess_gpu_host_ipc_mem_close,
    .ipc_event_export  = tess_gpu_host_ipc_event_export,
    .ipc_event_open    = tess_gpu_host_ipc_event_open,
    .ipc_event_close   = tess_gpu_host_ipc_event_close,
    .ptr_query         = host_ptr_query,
    .native_stream     = host_native_stream,
    .set_notify        = tess_gpu_host_set_notify,
    .busy              = tess_gpu_host_busy,
    .graph_begin       = tess_gpu_host_graph_begin,
    .graph_end         = tess_gpu_host_graph_end,
    .graph_launch      = tess_gpu_host_graph_launch,
    .graph_destroy     = tess_gpu_host_graph_destroy,
    .graph_compare     = tess_gpu_host_graph_compare,
};
