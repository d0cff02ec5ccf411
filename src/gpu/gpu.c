/* gpu.c — backend selection, device choice per process, the stream pool, event pools, and the
 * public device-memory functions of <tessera/gpu.h> that need nothing above this layer. */
#include "gpu.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>

const tess_gpu_ops_t *tess_gpu;

static tess_gpu_stream_h *gpu_pool;
static size_t             gpu_pool_size;
static int                gpu_device = -1;
static int                gpu_device_procs = 1;
static int                gpu_ndev;

static const tess_gpu_ops_t *gpu_backend_by_name(const char *name)
{
    if (!strcasecmp(name, "host"))
        return &tess_gpu_host_ops;
#ifdef HAVE_CUDA
    if (!strcasecmp(name, "cuda"))
        return &tess_gpu_cuda_ops;
#endif
#ifdef HAVE_HIP
    if (!strcasecmp(name, "hip"))
        return &tess_gpu_hip_ops;
#endif
    return NULL;
}

static tess_status_t gpu_try(const tess_gpu_ops_t *ops, const tess_gpu_init_params_t *params)
{
    tess_status_t st = ops->init(params);
    if (st != TESS_OK)
        return st;
    if (ops->device_count() < 1) {
        ops->fini();
        return TESS_ERR_UNSUPPORTED;
    }
    tess_gpu = ops;
    return TESS_OK;
}

static tess_status_t gpu_select(const char *want, const tess_gpu_init_params_t *params)
{
    if (!want || !strcasecmp(want, "auto")) {
        static const char *const order[] = {"cuda", "hip"};
        for (size_t i = 0; i < TESS_ARRAY_LEN(order); i++) {
            const tess_gpu_ops_t *ops = gpu_backend_by_name(order[i]);
            if (ops && gpu_try(ops, params) == TESS_OK)
                return TESS_OK;
        }
        return gpu_try(&tess_gpu_host_ops, params);
    }
    const tess_gpu_ops_t *ops = gpu_backend_by_name(want);
    if (!ops) {
        if (strcasecmp(want, "cuda") && strcasecmp(want, "hip"))
            return tess_error(TESS_ERR_INVALID,
                              "TESS_GPU=%s: the GPU backend must be auto, host, cuda or hip", want);
        return tess_error(TESS_ERR_UNSUPPORTED,
                          "TESS_GPU=%s: this Tessera was built without the %s backend "
                          "(configure --with-%s)", want, want, want);
    }
    tess_status_t st = gpu_try(ops, params);
    if (st == TESS_ERR_UNSUPPORTED)
        return tess_error(st, "TESS_GPU=%s: no %s device is usable on this node", want, want);
    return st;
}

/* Processes that share an NVIDIA GPU without MPS each have their own context, and the GPU
 * runs one context at a time: their kernels and copies take turns, and a device message from
 * one to another waits for the hand-over, about 0.3 ms instead of 20 us. The first process of
 * the device says so once (the others would repeat it). */
static void gpu_warn_time_slicing(int local_rank, int lsize)
{
    if (gpu_device_procs < 2)
        return;
    int first = 0;
    while (first < lsize && (int)((int64_t)first * gpu_ndev / lsize) != gpu_device)
        first++;
    tess_gpu_props_t props;
    if (local_rank != first || tess_gpu->get_props(gpu_device, &props) != TESS_OK ||
        props.mps != 0)
        return;
    tess_warn("%d processes of this node share GPU %d (%s) without MPS: their kernels and "
              "copies take turns on it, and a device message from one to another waits for the "
              "hand-over (about 0.3 ms). Start the MPS daemon before the job "
              "(nvidia-cuda-mps-control -d; docs/gpu-machines.md)",
              gpu_device_procs, gpu_device, props.name);
}

tess_status_t tess_gpu_init(const char *want, const tess_gpu_init_params_t *params, int nstreams)
{
    tess_status_t st = gpu_select(want, params);
    if (st != TESS_OK)
        return st;

    gpu_ndev   = tess_gpu->device_count();
    int lsize  = params->local_size > 0 ? params->local_size : 1;
    gpu_device = (int)((int64_t)params->local_rank * gpu_ndev / lsize);
    gpu_device_procs = 0;
    for (int r = 0; r < lsize; r++)
        gpu_device_procs += (int)((int64_t)r * gpu_ndev / lsize) == gpu_device;
    st = tess_gpu->set_device(gpu_device);
    if (st != TESS_OK)
        goto err_fini;
    gpu_warn_time_slicing(params->local_rank, lsize);
    tess_gpu_shm_setup(params);

    if (nstreams < 1)
        nstreams = 1;
    gpu_pool = tess_calloc((size_t)nstreams, sizeof(*gpu_pool), "the stream pool");
    if (!gpu_pool) {
        st = TESS_ERR_NO_MEMORY;
        goto err_fini;
    }
    for (gpu_pool_size = 0; gpu_pool_size < (size_t)nstreams; gpu_pool_size++) {
        st = tess_gpu->stream_create(&gpu_pool[gpu_pool_size]);
        if (st != TESS_OK)
            goto err_free_streams;
    }
    return TESS_OK;

err_free_streams:
    while (gpu_pool_size > 0)
        tess_gpu->stream_destroy(gpu_pool[--gpu_pool_size]);
    free(gpu_pool);
    gpu_pool = NULL;
err_fini:
    tess_gpu_shm_fini();
    tess_gpu->fini();
    tess_gpu = NULL;
    return st;
}

void tess_gpu_fini(void)
{
    if (!tess_gpu)
        return;
    for (size_t i = 0; i < gpu_pool_size; i++) {
        tess_gpu->stream_sync(gpu_pool[i]);
        tess_gpu->stream_destroy(gpu_pool[i]);
    }
    free(gpu_pool);
    gpu_pool      = NULL;
    gpu_pool_size = 0;
    tess_gpu_shm_fini();
    tess_gpu->fini();
    tess_gpu   = NULL;
    gpu_device       = -1;
    gpu_device_procs = 1;
}

int tess_gpu_num_devices(void) { return gpu_ndev; }

tess_status_t tess_gpu_memcpy_batch(const tess_gpu_copy_t *copies, int n, tess_gpu_stream_h s)
{
    tess_status_t st = TESS_OK;
    if (!tess_gpu->memcpy_batch_async) {
        for (int i = 0; i < n && st == TESS_OK; i++)
            st = tess_gpu->memcpy_async(copies[i].dst, copies[i].src, copies[i].size, s);
        return st;
    }
    for (int i = 0; i < n && st == TESS_OK; i += TESS_GPU_COPY_BATCH_MAX)
        st = tess_gpu->memcpy_batch_async(copies + i, TESS_MIN(n - i, TESS_GPU_COPY_BATCH_MAX), s);
    return st;
}

tess_gpu_stream_h tess_gpu_pool_stream(size_t i)
{
    return gpu_pool[i % gpu_pool_size];
}

size_t tess_gpu_pool_size(void) { return gpu_pool_size; }

tess_status_t tess_gpu_evpool_init(tess_gpu_evpool_t *p, unsigned flags, size_t initial)
{
    memset(p, 0, sizeof(*p));
    p->flags = flags;
    p->cap   = initial > 0 ? initial : 16;
    p->free  = tess_malloc(p->cap * sizeof(*p->free), "an event pool");
    if (!p->free)
        return TESS_ERR_NO_MEMORY;
    for (size_t i = 0; i < initial; i++) {
        tess_status_t st = tess_gpu->event_create(flags, &p->free[i]);
        if (st != TESS_OK) {
            tess_gpu_evpool_fini(p);
            return st;
        }
        p->nfree++;
        p->created++;
    }
    return TESS_OK;
}

void tess_gpu_evpool_fini(tess_gpu_evpool_t *p)
{
    for (size_t i = 0; i < p->nfree; i++)
        tess_gpu->event_destroy(p->free[i]);
    if (p->nfree != p->created)
        tess_warn("event pool: %zu of %zu events were not returned", p->created - p->nfree,
                  p->created);
    free(p->free);
    memset(p, 0, sizeof(*p));
}

tess_status_t tess_gpu_evpool_get(tess_gpu_evpool_t *p, tess_gpu_event_h *e_p)
{
    if (tess_likely(p->nfree > 0)) {
        *e_p = p->free[--p->nfree];
        return TESS_OK;
    }
    /* Empty: create one more. The free array must hold every event created. */
    if (p->created == p->cap) {
        size_t            cap  = p->cap * 2;
        tess_gpu_event_h *free = realloc(p->free, cap * sizeof(*free));
        if (!free)
            return tess_error(TESS_ERR_NO_MEMORY, "cannot grow an event pool to %zu events", cap);
        p->free = free;
        p->cap  = cap;
    }
    tess_status_t st = tess_gpu->event_create(p->flags, e_p);
    if (st == TESS_OK)
        p->created++;
    return st;
}

void tess_gpu_evpool_put(tess_gpu_evpool_t *p, tess_gpu_event_h e)
{
    tess_assert(p->nfree < p->cap);
    p->free[p->nfree++] = e;
}

/* ---- public device-memory API ------------------------------------------------------------ */

static tess_status_t gpu_check_init(const char *fn)
{
    if (tess_unlikely(!tess_gpu))
        return tess_error(TESS_ERR_STATE, "%s: Tessera is not initialised", fn);
    return TESS_OK;
}

tess_gpu_backend_t tess_gpu_backend(void)
{
    return tess_gpu ? tess_gpu->kind : TESS_GPU_HOST;
}

const char *tess_gpu_backend_name(void)
{
    return tess_gpu ? tess_gpu->name : "none";
}

int tess_gpu_device(void) { return gpu_device; }

int tess_gpu_device_procs(void) { return gpu_device_procs; }

tess_status_t tess_gpu_malloc(void **ptr_p, size_t size)
{
    tess_status_t st = gpu_check_init(__func__);
    if (st == TESS_OK && !ptr_p)
        st = tess_error(TESS_ERR_INVALID, "tess_gpu_malloc: ptr_p is NULL");
    return st != TESS_OK ? st : tess_gpu->mem_alloc(size, ptr_p);
}

static _Atomic(tess_gpu_free_hook_fn) gpu_free_hook;

void tess_gpu_set_free_hook(tess_gpu_free_hook_fn fn) { atomic_store(&gpu_free_hook, fn); }

tess_status_t tess_gpu_mem_release(void *ptr)
{
    tess_gpu_free_hook_fn hook = atomic_load(&gpu_free_hook);
    if (hook && ptr) {
        tess_gpu_ptr_info_t info = {0};
        if (tess_gpu->ptr_query(ptr, &info) == TESS_OK && info.alloc_id)
            hook(info.alloc_id);
    }
    return tess_gpu->mem_free(ptr);
}

tess_status_t tess_gpu_free(void *ptr)
{
    tess_status_t st = gpu_check_init(__func__);
    return st != TESS_OK ? st : tess_gpu_mem_release(ptr);
}

tess_status_t tess_gpu_malloc_host(void **ptr_p, size_t size)
{
    tess_status_t st = gpu_check_init(__func__);
    if (st == TESS_OK && !ptr_p)
        st = tess_error(TESS_ERR_INVALID, "tess_gpu_malloc_host: ptr_p is NULL");
    return st != TESS_OK ? st : tess_gpu->host_alloc(size, ptr_p);
}

tess_status_t tess_gpu_free_host(void *ptr)
{
    tess_status_t st = gpu_check_init(__func__);
    return st != TESS_OK ? st : tess_gpu->host_free(ptr);
}

tess_status_t tess_gpu_memcpy_async(void *dst, const void *src, size_t size, tess_stream_t stream)
{
    tess_status_t st = gpu_check_init(__func__);
    if (st == TESS_OK && size && (!dst || !src))
        st = tess_error(TESS_ERR_INVALID, "tess_gpu_memcpy_async of %zu bytes from %p to %p",
                        size, src, dst);
    return st != TESS_OK ? st : tess_gpu->memcpy_async(dst, src, size, stream);
}

tess_status_t tess_gpu_memset_async(void *dst, int value, size_t size, tess_stream_t stream)
{
    tess_status_t st = gpu_check_init(__func__);
    if (st == TESS_OK && size && !dst)
        st = tess_error(TESS_ERR_INVALID, "tess_gpu_memset_async of %zu bytes at NULL", size);
    return st != TESS_OK ? st : tess_gpu->memset_async(dst, value, size, stream);
}

_Thread_local void (*tess_gpu_record_guard)(const char *call);

tess_status_t tess_gpu_stream_sync(tess_stream_t stream)
{
    if (tess_unlikely(tess_gpu_record_guard))
        tess_gpu_record_guard("tess_gpu_stream_sync");
    tess_status_t st = gpu_check_init(__func__);
    return st != TESS_OK ? st : tess_gpu->stream_sync(stream);
}

tess_status_t tess_gpu_launch_host(tess_stream_t stream, tess_host_kernel_fn_t fn,
                                   const void *args, size_t args_size)
{
    tess_status_t st = gpu_check_init(__func__);
    if (st != TESS_OK)
        return st;
    if (!fn)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_launch_host: fn is NULL");
    if (args_size && !args)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_launch_host: %zu bytes of arguments at "
                          "NULL", args_size);
    if (args_size > TESS_GPU_HOST_ARGS_MAX)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_launch_host: %zu bytes of arguments "
                          "(at most %d)", args_size, TESS_GPU_HOST_ARGS_MAX);
    return tess_gpu->launch_host(stream, fn, args, args_size);
}
