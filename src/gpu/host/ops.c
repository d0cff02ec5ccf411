/*
 * ops.c — the host backend's ops table, init and fini (with the exit and abort cleanups that
 * keep /dev/shm clean), device properties, pinned host memory and pointer queries.
 */
#include "host.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

tess_gpu_host_state_t tess_gpu_host;

static _Atomic int fault_kernels, faulted;

int tess_gpu_host_fault_skip(int is_kernel, int is_record)
{
    int n = tess_gpu_host.params.host_fault_kernel;
    if (tess_likely(n == 0))
        return 0;
    if (!atomic_load_explicit(&faulted, memory_order_acquire) && is_kernel &&
        atomic_fetch_add_explicit(&fault_kernels, 1, memory_order_relaxed) + 1 == n) {
        tess_debug("host backend: kernel %d faults (TESS_HOST_FAULT_KERNEL)", n);
        atomic_store_explicit(&faulted, 1, memory_order_release);
    }
    return atomic_load_explicit(&faulted, memory_order_acquire) && !is_record;
}

tess_status_t tess_gpu_host_fault_check(const char *fn)
{
    if (tess_likely(!atomic_load_explicit(&faulted, memory_order_acquire)))
        return TESS_OK;
    return tess_error(TESS_ERR_GPU, "%s: the device failed: host kernel %d faulted "
                      "(TESS_HOST_FAULT_KERNEL)", fn, tess_gpu_host.params.host_fault_kernel);
}

static void host_exit_cleanup(void)
{
    /* Only names: executors may still be running while the process exits. */
    tess_gpu_host_shm_unlink_all();
}

tess_status_t tess_gpu_host_shm_start(const tess_gpu_init_params_t *params)
{
    static _Atomic int atexit_done;
    tess_gpu_host.uid           = getuid();
    tess_gpu_host.pid           = getpid();
    tess_gpu_host.params.job_id = params->job_id;
    /* Before creating anything: what crashed processes left must not pile up. */
    tess_gpu_host_shm_reclaim();
    if (!atomic_exchange(&atexit_done, 1) && atexit(host_exit_cleanup) != 0)
        tess_warn("host backend: cannot register an exit handler; shared memory may be left "
                  "behind by an exit without fini");
    tess_add_abort_cleanup(tess_gpu_host_shm_unlink_all);
    tess_gpu_host_reaper_start();
    return TESS_OK;
}

void tess_gpu_host_shm_stop(void)
{
    tess_remove_abort_cleanup(tess_gpu_host_shm_unlink_all);
    tess_gpu_host_shm_unlink_all();
    tess_gpu_host_shm_fini();
    tess_gpu_host_reaper_stop();
}

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
    atomic_store(&fault_kernels, 0);
    atomic_store(&faulted, 0);
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
    return TESS_OK;
}

static tess_status_t host_host_alloc(size_t size, void **ptr_p)
{
    if (!ptr_p)
        return tess_error(TESS_ERR_INVALID, "host_alloc: ptr_p is NULL");
    void *p = tess_aligned_alloc(TESS_GPU_HOST_ALIGN, size, "pinned host memory");
    if (!p)
        return TESS_ERR_NO_MEMORY;
    *ptr_p = p;
    return TESS_OK;
}

static tess_status_t host_host_free(void *ptr)
{
    free(ptr);
    return TESS_OK;
}

static tess_status_t host_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    tess_gpu_host_alloc_t a;
    if (!info_p)
        return tess_error(TESS_ERR_INVALID, "ptr_query: info_p is NULL");
    memset(info_p, 0, sizeof(*info_p));
    info_p->device = -1;
    if (tess_gpu_host_arena_find(ptr, 0, &a) == TESS_GPU_HOST_FIND_INSIDE ||
        tess_gpu_host_ipc_find(ptr, 0, &a) == TESS_GPU_HOST_FIND_INSIDE) {
        info_p->is_device = 1;
        info_p->device    = a.device;
        info_p->base      = a.base;
        info_p->size      = a.size;
        info_p->alloc_id  = a.alloc_id;
    }
    return TESS_OK;
}

/* Signal words: plain host memory, which the executors write (exec.c's stream_signal). */
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
    tess_status_t st = tess_gpu_host_memcpy_async(dst, src, size, s);
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
    .memcpy_async      = tess_gpu_host_memcpy_async,
    .memset_async      = tess_gpu_host_memset_async,
    .launch_host       = tess_gpu_host_launch_host,
    .stream_create     = tess_gpu_host_stream_create,
    .stream_destroy    = tess_gpu_host_stream_destroy,
    .stream_sync       = tess_gpu_host_stream_sync,
    .stream_query      = tess_gpu_host_stream_query,
    .stream_wait_event = tess_gpu_host_stream_wait_event,
    .event_create      = tess_gpu_host_event_create,
    .event_destroy     = tess_gpu_host_event_destroy,
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
};
