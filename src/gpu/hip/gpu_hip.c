/*
 * gpu_hip.c — the HIP backend: tess_gpu_ops_t over the HIP runtime API, called from C (AMD
 * platform; built against HIP >= 5.2).
 *
 * Handles are the vendor's: a tess_gpu_stream_h is a hipStream_t, a tess_gpu_event_h a
 * hipEvent_t. Errors are translated once, here (hip_error), naming the call that failed.
 *
 * HIP promises no stable per-allocation id (5.2 declares HIP_POINTER_ATTRIBUTE_BUFFER_ID, but
 * its hipPointerGetAttribute is marked beta), so this file keeps a registry of the allocations made through mem_alloc — sorted by
 * address, ids from a counter that never repeats — and ptr_query answers from it. Other device
 * pointers (IPC mappings, memory the application allocated itself) are answered by
 * hipPointerGetAttributes with alloc_id 0, so nothing caches a mapping for them.
 *
 * HIP 5.2 declares hipLaunchHostFunc but its library does not export it: launch_host uses
 * hipStreamAddCallback, which likewise blocks later work on the stream until it returns.
 *
 * Threads: as thread-safe as the HIP runtime. The registry has its own reader-writer lock.
 * The rest of the state is written by init, set_device and fini only. The current device is
 * per thread in HIP, so every op first makes the process's device current on the calling
 * thread (hip_bind: one compare once done).
 */
#include "gpu/gpu.h"

#include <hip/hip_runtime_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define HIP_IPC_MAGIC   0x50485354u /* "TSHP" */
#define HIP_IPC_VERSION 1

enum { HIP_IPC_MEM = 1, HIP_IPC_EVENT = 2 };

/* What a tess_gpu_ipc_handle_t holds for this backend (copied in and out with memcpy). */
typedef struct hip_ipc_wire {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    int32_t  device; /* exporting device, for messages */
    uint32_t pad;
    uint64_t size;   /* allocation size (memory handles) */
    union {
        hipIpcMemHandle_t   mem;
        hipIpcEventHandle_t event;
    } h;
} hip_ipc_wire_t;

_Static_assert(sizeof(hip_ipc_wire_t) <= TESS_GPU_IPC_HANDLE_SIZE,
               "a HIP IPC handle must fit in tess_gpu_ipc_handle_t");

/* A launch_host call: the function and a copy of its arguments, freed after the call. */
typedef struct hip_host_call {
    tess_gpu_host_fn_t fn;
    _Alignas(max_align_t) unsigned char args[];
} hip_host_call_t;

static struct {
    int              ndev;
    int              device; /* this process's device, -1 before set_device */
    _Atomic unsigned gen;    /* bumped by set_device, see hip_bind */
} hip = {.device = -1};

/* hip.gen when this thread last made hip.device current (0: never needed). */
static _Thread_local unsigned hip_bound_gen;

/* ---- errors ------------------------------------------------------------------------------ */

static tess_status_t hip_error_at(hipError_t e, const char *what, const char *file, int line)
{
    tess_status_t st = e == hipErrorOutOfMemory ? TESS_ERR_NO_MEMORY : TESS_ERR_GPU;
    return tess_error_at(st, file, line, "%s failed: %s (%s)", what, hipGetErrorName(e),
                         hipGetErrorString(e));
}
#define hip_error(e, what) hip_error_at((e), (what), __FILE__, __LINE__)

/* TESS_OK, TESS_INPROGRESS for hipErrorNotReady, or the translated error. */
static tess_status_t hip_poll_status(hipError_t e, const char *what, const char *file, int line)
{
    if (e == hipSuccess)
        return TESS_OK;
    if (e == hipErrorNotReady)
        return TESS_INPROGRESS;
    return hip_error_at(e, what, file, line);
}

/* ---- the device current on this thread ---------------------------------------------------- */

static inline tess_status_t hip_bind(void)
{
    unsigned gen = atomic_load_explicit(&hip.gen, memory_order_acquire);
    if (tess_likely(hip_bound_gen == gen) || hip.device < 0)
        return TESS_OK;
    hipError_t e = hipSetDevice(hip.device);
    if (e != hipSuccess)
        return hip_error(e, "hipSetDevice");
    hip_bound_gen = gen;
    return TESS_OK;
}

/* ---- the allocation registry ------------------------------------------------------------- */

typedef struct hip_alloc {
    uintptr_t base;
    size_t    size;
    uint64_t  id;
    int       device;
} hip_alloc_t;

/* Process-wide and kept across fini/init, so ids are never reused. */
static struct {
    pthread_rwlock_t lock;
    hip_alloc_t     *items; /* sorted by base; allocations do not overlap */
    size_t           count, cap;
    uint64_t         last_id;
} hip_reg = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* Index of the first entry whose base is above addr (lock held). */
static size_t hip_reg_upper(uintptr_t addr)
{
    size_t lo = 0, hi = hip_reg.count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hip_reg.items[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static tess_status_t hip_reg_add(void *ptr, size_t size, int device)
{
    uintptr_t     base = (uintptr_t)ptr;
    tess_status_t st   = TESS_OK;
    pthread_rwlock_wrlock(&hip_reg.lock);
    if (hip_reg.count == hip_reg.cap) {
        size_t       cap   = hip_reg.cap ? hip_reg.cap * 2 : 64;
        hip_alloc_t *items = realloc(hip_reg.items, cap * sizeof(*items));
        if (!items) {
            st = tess_error(TESS_ERR_NO_MEMORY, "cannot grow the HIP allocation registry to "
                            "%zu entries", cap);
            goto out_unlock;
        }
        hip_reg.items = items;
        hip_reg.cap   = cap;
    }
    size_t i = hip_reg_upper(base);
    memmove(&hip_reg.items[i + 1], &hip_reg.items[i],
            (hip_reg.count - i) * sizeof(hip_reg.items[0]));
    hip_reg.items[i] = (hip_alloc_t){
        .base = base, .size = size, .id = ++hip_reg.last_id, .device = device};
    hip_reg.count++;
out_unlock:
    pthread_rwlock_unlock(&hip_reg.lock);
    return st;
}

/* Forget the allocation that starts at ptr, if it is registered. */
static void hip_reg_remove(void *ptr)
{
    uintptr_t base = (uintptr_t)ptr;
    pthread_rwlock_wrlock(&hip_reg.lock);
    size_t i = hip_reg_upper(base);
    if (i > 0 && hip_reg.items[i - 1].base == base) {
        memmove(&hip_reg.items[i - 1], &hip_reg.items[i],
                (hip_reg.count - i) * sizeof(hip_reg.items[0]));
        hip_reg.count--;
    }
    pthread_rwlock_unlock(&hip_reg.lock);
}

/* The registered allocation that contains addr, copied to *a_p. */
static bool hip_reg_find(uintptr_t addr, hip_alloc_t *a_p)
{
    bool found = false;
    pthread_rwlock_rdlock(&hip_reg.lock);
    size_t i = hip_reg_upper(addr);
    if (i > 0 && addr - hip_reg.items[i - 1].base < hip_reg.items[i - 1].size) {
        *a_p  = hip_reg.items[i - 1];
        found = true;
    }
    pthread_rwlock_unlock(&hip_reg.lock);
    return found;
}

/* ---- init, devices ----------------------------------------------------------------------- */

static tess_status_t hip_init(const tess_gpu_init_params_t *params)
{
    (void)params;
    int ndev = 0;
    hipError_t e = hipGetDeviceCount(&ndev);
    if (e != hipSuccess || ndev < 1) {
        /* No ROCm driver or no device: the host backend takes over, nothing to report. */
        (void)hipGetLastError();
        return TESS_ERR_UNSUPPORTED;
    }
    hip.ndev   = ndev;
    hip.device = -1;
    return TESS_OK;
}

static void hip_fini(void)
{
    /* No hipDeviceReset: the application may still use the device. */
    hip.ndev   = 0;
    hip.device = -1;
}

static int hip_device_count(void) { return hip.ndev; }

static tess_status_t hip_set_device(int device)
{
    if (device < 0 || device >= hip.ndev)
        return tess_error(TESS_ERR_INVALID, "HIP device %d does not exist (%d visible)", device,
                          hip.ndev);
    hipError_t e = hipSetDevice(device);
    if (e != hipSuccess)
        return hip_error(e, "hipSetDevice");
    hip.device   = device;
    hip_bound_gen = atomic_fetch_add_explicit(&hip.gen, 1, memory_order_acq_rel) + 1;
    return TESS_OK;
}

static tess_status_t hip_get_props(int device, tess_gpu_props_t *props_p)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipDeviceProp_t p;
    hipError_t      e = hipGetDeviceProperties(&p, device);
    if (e != hipSuccess)
        return hip_error(e, "hipGetDeviceProperties");

    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%.*s", (int)sizeof(props_p->name) - 1,
             p.name);
    props_p->total_mem       = p.totalGlobalMem;
    props_p->multiprocessors = p.multiProcessorCount;
#ifdef __linux__
    props_p->ipc = 1; /* HIP has no attribute for it; ROCm supports IPC on Linux */
#endif
    int v = 0;
    e = hipDeviceGetAttribute(&v, hipDeviceAttributeCanUseStreamWaitValue, device);
    if (e == hipSuccess)
        props_p->wait_value = v != 0;
    else
        (void)hipGetLastError(); /* unknown: leave 0 */
    return TESS_OK;
}

/* ---- memory ------------------------------------------------------------------------------ */

static tess_status_t hip_mem_alloc(size_t size, void **ptr_p)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    void      *ptr = NULL;
    hipError_t e   = hipMalloc(&ptr, size);
    if (e != hipSuccess) {
        char what[64];
        snprintf(what, sizeof(what), "hipMalloc(%zu bytes)", size);
        return hip_error(e, what);
    }
    if (ptr) { /* size 0 gives NULL: nothing to register */
        st = hip_reg_add(ptr, size, hip.device);
        if (st != TESS_OK)
            goto err_free_mem;
    }
    *ptr_p = ptr;
    return TESS_OK;

err_free_mem:
    (void)hipFree(ptr);
    return st;
}

static tess_status_t hip_mem_free(void *ptr)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    /* Unregister first: once freed, another thread's hipMalloc may return the same address. */
    hip_reg_remove(ptr);
    hipError_t e = hipFree(ptr);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipFree");
}

static tess_status_t hip_host_alloc(size_t size, void **ptr_p)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipHostMalloc(ptr_p, size, hipHostMallocDefault);
    if (e != hipSuccess) {
        char what[64];
        snprintf(what, sizeof(what), "hipHostMalloc(%zu bytes)", size);
        return hip_error(e, what);
    }
    return TESS_OK;
}

static tess_status_t hip_host_free(void *ptr)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipHostFree(ptr);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipHostFree");
}

static tess_status_t hip_memcpy_async(void *dst, const void *src, size_t size,
                                      tess_gpu_stream_h s)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipMemcpyAsync(dst, src, size, hipMemcpyDefault, (hipStream_t)s);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipMemcpyAsync");
}

static tess_status_t hip_memset_async(void *dst, int value, size_t size, tess_gpu_stream_h s)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipMemsetAsync(dst, value, size, (hipStream_t)s);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipMemsetAsync");
}

/* Runs on a HIP runtime thread; must not call HIP. An error on the stream is not reported
 * here: it surfaces in the next query or sync of the stream or of an event recorded on it. */
static void hip_host_trampoline(hipStream_t stream, hipError_t status, void *arg)
{
    (void)stream;
    (void)status;
    hip_host_call_t *call = arg;
    call->fn(call->args);
    free(call);
}

static tess_status_t hip_launch_host(tess_gpu_stream_h s, tess_gpu_host_fn_t fn,
                                     const void *args, size_t args_size)
{
    if (args_size > TESS_GPU_HOST_ARGS_MAX)
        return tess_error(TESS_ERR_INVALID, "launch_host: %zu bytes of arguments (at most %d)",
                          args_size, TESS_GPU_HOST_ARGS_MAX);
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hip_host_call_t *call = tess_malloc(sizeof(*call) + args_size, "a host launch");
    if (!call)
        return TESS_ERR_NO_MEMORY;
    call->fn = fn;
    if (args_size > 0)
        memcpy(call->args, args, args_size);

    hipError_t e = hipStreamAddCallback((hipStream_t)s, hip_host_trampoline, call, 0);
    if (e != hipSuccess) {
        st = hip_error(e, "hipStreamAddCallback");
        goto err_free_call;
    }
    return TESS_OK;

err_free_call:
    free(call);
    return st;
}

/* ---- streams ----------------------------------------------------------------------------- */

static tess_status_t hip_stream_create(tess_gpu_stream_h *s_p)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipStream_t s;
    hipError_t  e = hipStreamCreateWithFlags(&s, hipStreamNonBlocking);
    if (e != hipSuccess)
        return hip_error(e, "hipStreamCreateWithFlags");
    *s_p = (tess_gpu_stream_h)s;
    return TESS_OK;
}

static tess_status_t hip_stream_destroy(tess_gpu_stream_h s)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipStreamDestroy((hipStream_t)s);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipStreamDestroy");
}

static tess_status_t hip_stream_sync(tess_gpu_stream_h s)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipStreamSynchronize((hipStream_t)s);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipStreamSynchronize");
}

static tess_status_t hip_stream_query(tess_gpu_stream_h s)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    return hip_poll_status(hipStreamQuery((hipStream_t)s), "hipStreamQuery", __FILE__,
                           __LINE__);
}

static tess_status_t hip_stream_wait_event(tess_gpu_stream_h s, tess_gpu_event_h ev)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipStreamWaitEvent((hipStream_t)s, (hipEvent_t)ev, 0);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipStreamWaitEvent");
}

/* ---- events ------------------------------------------------------------------------------ */

static tess_status_t hip_event_create(unsigned flags, tess_gpu_event_h *e_p)
{
    unsigned hflags;
    if (flags & TESS_GPU_EVENT_IPC) {
        if (flags & TESS_GPU_EVENT_TIMING)
            return tess_error(TESS_ERR_INVALID, "an IPC event cannot measure time");
        hflags = hipEventInterprocess | hipEventDisableTiming;
    } else {
        hflags = (flags & TESS_GPU_EVENT_TIMING) ? hipEventDefault : hipEventDisableTiming;
    }
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipEvent_t ev;
    hipError_t e = hipEventCreateWithFlags(&ev, hflags);
    if (e != hipSuccess)
        return hip_error(e, "hipEventCreateWithFlags");
    *e_p = (tess_gpu_event_h)ev;
    return TESS_OK;
}

static tess_status_t hip_event_destroy(tess_gpu_event_h ev)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipEventDestroy((hipEvent_t)ev);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipEventDestroy");
}

static tess_status_t hip_event_record(tess_gpu_event_h ev, tess_gpu_stream_h s)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipEventRecord((hipEvent_t)ev, (hipStream_t)s);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipEventRecord");
}

static tess_status_t hip_event_query(tess_gpu_event_h ev)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    return hip_poll_status(hipEventQuery((hipEvent_t)ev), "hipEventQuery", __FILE__, __LINE__);
}

static tess_status_t hip_event_sync(tess_gpu_event_h ev)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipEventSynchronize((hipEvent_t)ev);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipEventSynchronize");
}

/* TESS_INPROGRESS while either event has not completed. */
static tess_status_t hip_event_elapsed_ms(tess_gpu_event_h start, tess_gpu_event_h end,
                                          float *ms_p)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    return hip_poll_status(hipEventElapsedTime(ms_p, (hipEvent_t)start, (hipEvent_t)end),
                           "hipEventElapsedTime", __FILE__, __LINE__);
}

/* ---- IPC --------------------------------------------------------------------------------- */

static tess_status_t hip_ipc_unpack(const tess_gpu_ipc_handle_t *h, uint16_t kind,
                                    hip_ipc_wire_t *w_p)
{
    memcpy(w_p, h->bytes, sizeof(*w_p));
    if (w_p->magic != HIP_IPC_MAGIC || w_p->version != HIP_IPC_VERSION || w_p->kind != kind)
        return tess_error(TESS_ERR_INVALID, "not a HIP %s IPC handle of this version "
                          "(magic %#x, version %u, kind %u)",
                          kind == HIP_IPC_MEM ? "memory" : "event", (unsigned)w_p->magic,
                          (unsigned)w_p->version, (unsigned)w_p->kind);
    return TESS_OK;
}

static tess_status_t hip_ipc_mem_export(void *ptr, tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    /* The other side maps the whole allocation and gets its start: ptr must be that start. */
    hip_alloc_t a;
    if (!hip_reg_find((uintptr_t)ptr, &a)) {
        hipDeviceptr_t base = NULL;
        hipError_t     e    = hipMemGetAddressRange(&base, &a.size, ptr);
        if (e != hipSuccess)
            return hip_error(e, "hipMemGetAddressRange");
        a.base = (uintptr_t)base;
    }
    if (a.base != (uintptr_t)ptr)
        return tess_error(TESS_ERR_INVALID, "ipc_mem_export: %p is %zu bytes into an "
                          "allocation; only its start can be exported", ptr,
                          (size_t)((uintptr_t)ptr - a.base));

    hip_ipc_wire_t w;
    memset(&w, 0, sizeof(w));
    w.magic   = HIP_IPC_MAGIC;
    w.version = HIP_IPC_VERSION;
    w.kind    = HIP_IPC_MEM;
    w.device  = hip.device;
    w.size    = a.size;
    hipError_t e = hipIpcGetMemHandle(&w.h.mem, ptr);
    if (e != hipSuccess)
        return hip_error(e, "hipIpcGetMemHandle");
    memset(h_p, 0, sizeof(*h_p));
    memcpy(h_p->bytes, &w, sizeof(w));
    return TESS_OK;
}

static tess_status_t hip_ipc_mem_open(const tess_gpu_ipc_handle_t *h, void **ptr_p)
{
    hip_ipc_wire_t w;
    tess_status_t  st = hip_ipc_unpack(h, HIP_IPC_MEM, &w);
    if (st != TESS_OK)
        return st;
    st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipIpcOpenMemHandle(ptr_p, w.h.mem, hipIpcMemLazyEnablePeerAccess);
    if (e != hipSuccess) {
        char what[96];
        snprintf(what, sizeof(what), "hipIpcOpenMemHandle(%llu bytes of device %d)",
                 (unsigned long long)w.size, (int)w.device);
        return hip_error(e, what);
    }
    return TESS_OK;
}

static tess_status_t hip_ipc_mem_close(void *ptr)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipIpcCloseMemHandle(ptr);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipIpcCloseMemHandle");
}

static tess_status_t hip_ipc_event_export(tess_gpu_event_h ev, tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hip_ipc_wire_t w;
    memset(&w, 0, sizeof(w));
    w.magic   = HIP_IPC_MAGIC;
    w.version = HIP_IPC_VERSION;
    w.kind    = HIP_IPC_EVENT;
    w.device  = hip.device;
    hipError_t e = hipIpcGetEventHandle(&w.h.event, (hipEvent_t)ev);
    if (e != hipSuccess)
        return hip_error(e, "hipIpcGetEventHandle");
    memset(h_p, 0, sizeof(*h_p));
    memcpy(h_p->bytes, &w, sizeof(w));
    return TESS_OK;
}

static tess_status_t hip_ipc_event_open(const tess_gpu_ipc_handle_t *h, tess_gpu_event_h *e_p)
{
    hip_ipc_wire_t w;
    tess_status_t  st = hip_ipc_unpack(h, HIP_IPC_EVENT, &w);
    if (st != TESS_OK)
        return st;
    st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipEvent_t ev;
    hipError_t e = hipIpcOpenEventHandle(&ev, w.h.event);
    if (e != hipSuccess)
        return hip_error(e, "hipIpcOpenEventHandle");
    *e_p = (tess_gpu_event_h)ev;
    return TESS_OK;
}

static tess_status_t hip_ipc_event_close(tess_gpu_event_h ev)
{
    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipError_t e = hipEventDestroy((hipEvent_t)ev);
    return e == hipSuccess ? TESS_OK : hip_error(e, "hipEventDestroy (opened IPC event)");
}

/* ---- pointers ---------------------------------------------------------------------------- */

static tess_status_t hip_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    memset(info_p, 0, sizeof(*info_p));
    info_p->device = -1;
    if (!ptr)
        return TESS_OK;

    hip_alloc_t a;
    if (hip_reg_find((uintptr_t)ptr, &a)) {
        info_p->is_device = 1;
        info_p->device    = a.device;
        info_p->base      = (void *)a.base;
        info_p->size      = a.size;
        info_p->alloc_id  = a.id;
        return TESS_OK;
    }

    tess_status_t st = hip_bind();
    if (st != TESS_OK)
        return st;
    hipPointerAttribute_t pa;
    memset(&pa, 0, sizeof(pa));
    hipError_t e = hipPointerGetAttributes(&pa, ptr);
    if (e == hipErrorInvalidValue) {
        /* A pointer HIP does not know: host memory. Clear the error so it does not surface
         * in a later hipGetLastError of the application. */
        (void)hipGetLastError();
        return TESS_OK;
    }
    if (e != hipSuccess)
        return hip_error(e, "hipPointerGetAttributes");
    if (pa.memoryType == hipMemoryTypeHost && !pa.isManaged)
        return TESS_OK; /* pinned or registered host memory */

    /* Not ours (an IPC mapping, or the application's own allocation): no stable id. */
    info_p->is_device = 1;
    info_p->device    = pa.device;
    hipDeviceptr_t base = NULL;
    size_t         size = 0;
    e = hipMemGetAddressRange(&base, &size, (hipDeviceptr_t)ptr);
    if (e == hipSuccess) {
        info_p->base = base;
        info_p->size = size;
    } else {
        (void)hipGetLastError(); /* range unknown (e.g. some IPC mappings): leave NULL/0 */
    }
    return TESS_OK;
}

static void *hip_native_stream(tess_gpu_stream_h s) { return (void *)s; }

const tess_gpu_ops_t tess_gpu_hip_ops = {
    .name              = "hip",
    .kind              = TESS_GPU_HIP,
    .wait_captures_record = 1,
    .init              = hip_init,
    .fini              = hip_fini,
    .device_count      = hip_device_count,
    .set_device        = hip_set_device,
    .get_props         = hip_get_props,
    .mem_alloc         = hip_mem_alloc,
    .mem_free          = hip_mem_free,
    .host_alloc        = hip_host_alloc,
    .host_free         = hip_host_free,
    .memcpy_async      = hip_memcpy_async,
    .memset_async      = hip_memset_async,
    .launch_host       = hip_launch_host,
    .stream_create     = hip_stream_create,
    .stream_destroy    = hip_stream_destroy,
    .stream_sync       = hip_stream_sync,
    .stream_query      = hip_stream_query,
    .stream_wait_event = hip_stream_wait_event,
    .event_create      = hip_event_create,
    .event_destroy     = hip_event_destroy,
    .event_record      = hip_event_record,
    .event_query       = hip_event_query,
    .event_sync        = hip_event_sync,
    .event_elapsed_ms  = hip_event_elapsed_ms,
    .ipc_mem_export    = hip_ipc_mem_export,
    .ipc_mem_open      = hip_ipc_mem_open,
    .ipc_mem_close     = hip_ipc_mem_close,
    .ipc_event_export  = hip_ipc_event_export,
    .ipc_event_open    = hip_ipc_event_open,
    .ipc_event_close   = hip_ipc_event_close,
    .ptr_query         = hip_ptr_query,
    .native_stream     = hip_native_stream,
    .set_notify        = NULL, /* the runtime polls events */
    .busy              = NULL, /* the device has cores of its own */
};
