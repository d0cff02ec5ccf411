/*
 * gpu_cuda.c — the CUDA backend: tess_gpu_ops_t over the CUDA runtime API, called from C.
 *
 * Handles are the vendor's: a tess_gpu_stream_h is a cudaStream_t, a tess_gpu_event_h a
 * cudaEvent_t. Errors are translated once, here (cuda_error), naming the call that failed.
 *
 * Small copies between allocations of the process's device go through the backend's one kernel
 * (copy_kernel.cu) rather than cudaMemcpyAsync, which costs the host more to enqueue.
 *
 * Nothing links libcuda, so a build with CUDA loads and falls back to the host backend on a
 * machine without a driver: init() answers TESS_ERR_UNSUPPORTED quietly when the runtime sees
 * no device, and the few driver-API functions needed (allocation ranges, buffer ids, device
 * attributes) come through cudaGetDriverEntryPointByVersion. <tess_cuda.h> is included for types.
 *
 * Threads: as thread-safe as the CUDA runtime. The state below is written by init, set_device
 * and fini only. The current device is per thread in CUDA, so every op first makes the
 * process's device current on the calling thread (cuda_bind: one compare once done), so PE
 * threads need no set-up of their own. A thread that calls cudaSetDevice itself afterwards must
 * restore it before calling into the runtime.
 */
#include "copy_batch.h"
#include "cuda_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A launch_host call: the function and a copy of its arguments, freed after the call. */
typedef struct cuda_host_call {
    tess_gpu_host_fn_t fn;
    _Alignas(max_align_t) unsigned char args[];
} cuda_host_call_t;

tess_cuda_state_t tess_cuda = {.device = -1};

/* copy_kernel.cu */
extern const void *tess_cuda_copy_kernel_symbol(void);
extern const void *tess_cuda_copy_batch_kernel_symbol(void);

_Thread_local unsigned tess_cuda_bound_gen;

/* ---- errors ------------------------------------------------------------------------------ */

tess_status_t tess_cuda_error_at(cudaError_t e, const char *what, const char *file, int line)
{
    tess_status_t st = e == cudaErrorMemoryAllocation ? TESS_ERR_NO_MEMORY : TESS_ERR_GPU;
    return tess_error_at(st, file, line, "%s failed: %s (%s)", what, cudaGetErrorName(e),
                         cudaGetErrorString(e));
}

tess_status_t tess_cuda_cu_error_at(CUresult r, const char *what, const char *file, int line)
{
    const char *name = NULL;
    if (!tess_cuda.get_error_name || tess_cuda.get_error_name(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    tess_status_t st = r == CUDA_ERROR_OUT_OF_MEMORY ? TESS_ERR_NO_MEMORY : TESS_ERR_GPU;
    return tess_error_at(st, file, line, "%s failed: %s (%d)", what, name, (int)r);
}

/* TESS_OK, TESS_INPROGRESS for cudaErrorNotReady, or the translated error. */
static tess_status_t cuda_poll_status(cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess)
        return TESS_OK;
    if (e == cudaErrorNotReady)
        return TESS_INPROGRESS;
    return tess_cuda_error_at(e, what, file, line);
}

/* ---- init, devices ----------------------------------------------------------------------- */

static tess_status_t cuda_entry(const char *symbol, void **fn_p)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, fn_p, CUDA_ENTRY_VERSION,
                                                     cudaEnableDefault, &found);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaGetDriverEntryPointByVersion");
    if (found != cudaDriverEntryPointSuccess || !*fn_p)
        return tess_error(TESS_ERR_GPU, "the CUDA driver has no %s for CUDA %d.%d (query "
                          "result %d)", symbol, CUDA_ENTRY_VERSION / 1000,
                          CUDA_ENTRY_VERSION % 1000 / 10, (int)found);
    return TESS_OK;
}

static tess_status_t cuda_init(const tess_gpu_init_params_t *params)
{
    (void)params;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        /* No driver or no device: the host backend takes over, nothing to report. */
        (void)cudaGetLastError();
        return TESS_ERR_UNSUPPORTED;
    }

    static const char *const symbols[] = {"cuPointerGetAttribute", "cuMemGetAddressRange",
                                          "cuDeviceGet", "cuDeviceGetAttribute",
                                          "cuGetErrorName", "cuPointerGetAttributes",
                                          "cuLaunchKernel"};
    void *fn[TESS_ARRAY_LEN(symbols)];
    for (size_t i = 0; i < TESS_ARRAY_LEN(symbols); i++) {
        tess_status_t st = cuda_entry(symbols[i], &fn[i]);
        if (st != TESS_OK)
            return st;
    }
    tess_cuda.pointer_get_attribute = (PFN_cuPointerGetAttribute_v4000)fn[0];
    tess_cuda.mem_get_address_range = (PFN_cuMemGetAddressRange_v3020)fn[1];
    tess_cuda.device_get            = (PFN_cuDeviceGet_v2000)fn[2];
    tess_cuda.device_get_attribute  = (PFN_cuDeviceGetAttribute_v2000)fn[3];
    tess_cuda.get_error_name        = (PFN_cuGetErrorName_v6000)fn[4];
    tess_cuda.pointer_get_attributes = (PFN_cuPointerGetAttributes_v7000)fn[5];
    tess_cuda.launch_kernel         = (PFN_cuLaunchKernel_v4000)fn[6];
    /* Stream signals are optional: without them the runtime polls events. */
    void *wv = NULL;
    if (cuda_entry("cuStreamWriteValue32", &wv) != TESS_OK) {
        tess_debug("cuda: no cuStreamWriteValue32: GPU completions are polled with events");
        wv = NULL;
    }
    tess_cuda.write_value32 = (PFN_cuStreamWriteValue32_v11070)wv;
    tess_cuda.ndev                  = ndev;
    tess_cuda.device                = -1;
    return TESS_OK;
}

static void cuda_fini(void)
{
    /* No cudaDeviceReset: the application may still use the primary context. */
    tess_cuda.ndev                  = 0;
    tess_cuda.device                = -1;
    tess_cuda.pointer_get_attribute = NULL;
    tess_cuda.mem_get_address_range = NULL;
    tess_cuda.device_get            = NULL;
    tess_cuda.device_get_attribute  = NULL;
    tess_cuda.get_error_name        = NULL;
    tess_cuda.pointer_get_attributes = NULL;
    tess_cuda.launch_kernel         = NULL;
    tess_cuda.write_value32         = NULL;
    tess_cuda.copy_fn               = NULL;
    tess_cuda.copy_batch_fn         = NULL;
}

static int cuda_device_count(void) { return tess_cuda.ndev; }

static tess_status_t cuda_set_device(int device)
{
    if (device < 0 || device >= tess_cuda.ndev)
        return tess_error(TESS_ERR_INVALID, "CUDA device %d does not exist (%d visible)",
                          device, tess_cuda.ndev);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaSetDevice");
    /* The copy kernel's handle in this device's context, looked up once per device (every PE
     * thread selects the same one); without it every copy is a memcpy. */
    if (device != tess_cuda.device || !tess_cuda.copy_fn) {
        cudaFunction_t fn = NULL, bfn = NULL;
        if (cudaGetFuncBySymbol(&fn, tess_cuda_copy_kernel_symbol()) != cudaSuccess ||
            cudaGetFuncBySymbol(&bfn, tess_cuda_copy_batch_kernel_symbol()) != cudaSuccess) {
            (void)cudaGetLastError();
            fn = bfn = NULL;
            tess_debug("cuda: no copy kernel for device %d: copies use cudaMemcpyAsync", device);
        }
        tess_cuda.copy_fn       = (CUfunction)fn;
        tess_cuda.copy_batch_fn = (CUfunction)bfn;
    }
    tess_cuda.device = device;
    unsigned gen = atomic_fetch_add_explicit(&tess_cuda.gen, 1, memory_order_acq_rel) + 1;
    tess_cuda_bound_gen = gen;
    return TESS_OK;
}

static tess_status_t cuda_get_props(int device, tess_gpu_props_t *props_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaGetDeviceProperties");

    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%.*s", (int)sizeof(props_p->name) - 1,
             p.name);
    props_p->total_mem       = p.totalGlobalMem;
    props_p->multiprocessors = p.multiProcessorCount;

    int v = 0;
#ifdef __linux__
    props_p->ipc = 1;
    e = cudaDeviceGetAttribute(&v, cudaDevAttrIpcEventSupport, device);
    if (e == cudaSuccess)
        props_p->ipc = v != 0;
    else
        (void)cudaGetLastError(); /* an older driver without the attribute: keep 1 */
#endif

    /* Since CUDA 12 the 32-bit stream memory operations need no opt-in and the attribute
     * that gated them is retired; the one capability attribute left is for the NOR
     * comparison, taken as the (conservative) sign that stream memory operations work. */
    CUdevice dev;
    CUresult r = tess_cuda.device_get(&dev, device);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cuDeviceGet");
    v = 0;
    r = tess_cuda.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cuDeviceGetAttribute(CAN_USE_STREAM_WAIT_VALUE_NOR)");
    props_p->wait_value = v != 0;
    return TESS_OK;
}

/* ---- memory ------------------------------------------------------------------------------ */

static tess_status_t cuda_mem_alloc(size_t size, void **ptr_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaMalloc(ptr_p, size);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof(what), "cudaMalloc(%zu bytes)", size);
        return cuda_error(e, what);
    }
    return TESS_OK;
}

static tess_status_t cuda_mem_free(void *ptr)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    tess_cuda_ptr_cache_forget();
    cudaError_t e = cudaFree(ptr);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaFree");
}

static tess_status_t cuda_host_alloc(size_t size, void **ptr_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaMallocHost(ptr_p, size);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof(what), "cudaMallocHost(%zu bytes)", size);
        return cuda_error(e, what);
    }
    return TESS_OK;
}

static tess_status_t cuda_host_free(void *ptr)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    tess_cuda_ptr_cache_forget();
    cudaError_t e = cudaFreeHost(ptr);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaFreeHost");
}

/* Copies up to this size between allocations of the process's device run as a kernel: 4.4 µs
 * to enqueue on the H200 against 5.9 for cudaMemcpyAsync (any size). Larger ones keep to the
 * copy engines: in a stream of 16 and 64 MiB device messages the copy kernel moved 2-10% less
 * than the engines (and it takes SMs from the kernels running beside it). */
#define CUDA_KCOPY_MAX ((size_t)1 << 20)
/* A copy that signals its completion runs as one block (up to 1024 threads: 16 KiB a sweep
 * when aligned); larger ones keep the full grid or the copy engines and a signal of their own
 * (the runtime uses events behind those, gpuq.c). */
#define CUDA_KCOPY_SIGNAL_MAX ((size_t)64 << 10)

/* Memory of the process's device (its own, or another process's opened through IPC), which a
 * kernel on it may read and write. An address CUDA does not know answers type 0.
 *
 * The answer costs a driver call (cuPointerGetAttributes: a lock and a lookup), and a chare
 * step that receives M small messages asks it 2M times. So each thread remembers the last
 * allocations it classified, by their whole range (asked in the same call). Every free the
 * runtime does (device, pinned host, an IPC mapping closed) forgets them all, in every thread
 * (a generation count). An allocation the application frees itself keeps its answer until
 * then: device memory of this device lies in the range CUDA reserves for it, so a later
 * allocation at that address is device memory again (or managed memory, which the copy kernel
 * reaches as well). */
#define CUDA_PTR_CACHE 16

static _Atomic uint64_t ptr_cache_gen = 1;

static _Thread_local struct {
    uintptr_t lo[CUDA_PTR_CACHE], hi[CUDA_PTR_CACHE];
    uint8_t   on_device[CUDA_PTR_CACHE];
    uint64_t  gen;
    unsigned  next;
} ptr_cache;

void tess_cuda_ptr_cache_forget(void)
{
    atomic_fetch_add_explicit(&ptr_cache_gen, 1, memory_order_release);
}

static int cuda_on_device(const void *p)
{
    uintptr_t a   = (uintptr_t)p;
    uint64_t  gen = atomic_load_explicit(&ptr_cache_gen, memory_order_acquire);
    if (ptr_cache.gen != gen) {
        memset(&ptr_cache, 0, sizeof(ptr_cache));
        ptr_cache.gen = gen;
    }
    for (unsigned i = 0; i < CUDA_PTR_CACHE; i++)
        if (a - ptr_cache.lo[i] < ptr_cache.hi[i] - ptr_cache.lo[i])
            return ptr_cache.on_device[i];
    CUpointer_attribute attr[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned            type    = 0;
    int                 ordinal = -1;
    CUdeviceptr         start   = 0;
    size_t              size    = 0;
    void               *data[4] = {&type, &ordinal, &start, &size};
    if (tess_cuda.pointer_get_attributes(4, attr, data, (CUdeviceptr)a) != CUDA_SUCCESS)
        return 0;
    int on = type == CU_MEMORYTYPE_DEVICE && ordinal == tess_cuda.device;
    if (size && a - (uintptr_t)start < size) {
        unsigned i             = ptr_cache.next++ % CUDA_PTR_CACHE;
        ptr_cache.lo[i]        = (uintptr_t)start;
        ptr_cache.hi[i]        = (uintptr_t)start + size;
        ptr_cache.on_device[i] = (uint8_t)on;
    }
    return on;
}

/* The copy kernel on s; with `word`, as one block of up to 1024 threads that then writes
 * `value` to the word (the caller keeps such copies to CUDA_KCOPY_SIGNAL_MAX). */
static tess_status_t cuda_copy_kernel(void *dst, const void *src, size_t size, cudaStream_t s,
                                      _Atomic uint32_t *word, uint32_t value)
{
    uintptr_t bits    = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)size;
    unsigned  width   = bits % 16 == 0 ? 16 : bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : 1;
    size_t    elems   = size / width;
    unsigned  threads = 256;
    unsigned  blocks  = (unsigned)TESS_MIN((elems + threads - 1) / threads, (size_t)1024);
    if (word) {
        threads = (unsigned)TESS_MIN((elems + 31) / 32 * 32, (size_t)1024);
        blocks  = 1;
    }
    void    *wp     = (void *)word;
    unsigned v      = value;
    void    *args[] = {&dst, (void *)&src, &size, &width, &wp, &v};
    CUresult r      = tess_cuda.launch_kernel(tess_cuda.copy_fn, blocks, 1, 1, threads, 1, 1, 0,
                                              (CUstream)s, args, NULL);
    return r == CUDA_SUCCESS ? TESS_OK : cu_error(r, "cuLaunchKernel (the copy kernel)");
}

static tess_status_t cuda_memcpy_async(void *dst, const void *src, size_t size,
                                       tess_gpu_stream_h s)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    if (size && size <= CUDA_KCOPY_MAX && tess_cuda.copy_fn && cuda_on_device(dst) &&
        cuda_on_device(src))
        return cuda_copy_kernel(dst, src, size, (cudaStream_t)s, NULL, 0);
    cudaError_t e = cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, (cudaStream_t)s);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaMemcpyAsync");
}

static tess_status_t cuda_stream_signal(tess_gpu_stream_h s, _Atomic uint32_t *word,
                                        uint32_t value);

/* The small copies between device allocations of the batch as one launch of the batch copy
 * kernel (one row of blocks a copy); the others as memcpy_async each. The host pays one
 * launch instead of one per copy: the receiver of several small device messages at once. */
static tess_status_t cuda_memcpy_batch_async(const tess_gpu_copy_t *copies, int n,
                                             tess_gpu_stream_h s)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    tess_cuda_copy_batch_t b;
    size_t                 most = 0;
    b.n                         = 0;
    for (int i = 0; i < n; i++) {
        const tess_gpu_copy_t *c = &copies[i];
        if (!c->size)
            continue;
        if (n > 1 && c->size <= CUDA_KCOPY_MAX && tess_cuda.copy_batch_fn &&
            b.n < TESS_CUDA_COPY_BATCH_MAX && cuda_on_device(c->dst) && cuda_on_device(c->src)) {
            b.dst[b.n]    = c->dst;
            b.src[b.n]    = c->src;
            b.size[b.n++] = c->size;
            most          = TESS_MAX(most, c->size);
        } else if ((st = cuda_memcpy_async(c->dst, c->src, c->size, s)) != TESS_OK) {
            return st;
        }
    }
    if (b.n == 0)
        return TESS_OK;
    if (b.n == 1)
        return cuda_copy_kernel(b.dst[0], b.src[0], b.size[0], (cudaStream_t)s, NULL, 0);
    unsigned threads = 256;
    unsigned blocks  = (unsigned)TESS_MIN((most / 16 + threads - 1) / threads, (size_t)64);
    void    *args[]  = {&b};
    CUresult r = tess_cuda.launch_kernel(tess_cuda.copy_batch_fn, TESS_MAX(blocks, 1u), b.n, 1,
                                         threads, 1, 1, 0, (CUstream)s, args, NULL);
    return r == CUDA_SUCCESS ? TESS_OK : cu_error(r, "cuLaunchKernel (the batch copy kernel)");
}

/* A small device copy signals from the copy kernel itself (one launch: cuStreamWriteValue32
 * costs the host as much again); anything else is a copy and then a stream signal. */
static tess_status_t cuda_memcpy_signal_async(void *dst, const void *src, size_t size,
                                              tess_gpu_stream_h s, _Atomic uint32_t *word,
                                              uint32_t value)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    if (size && size <= CUDA_KCOPY_SIGNAL_MAX && tess_cuda.copy_fn && cuda_on_device(dst) &&
        cuda_on_device(src))
        return cuda_copy_kernel(dst, src, size, (cudaStream_t)s, word, value);
    if ((st = cuda_memcpy_async(dst, src, size, s)) != TESS_OK)
        return st;
    return cuda_stream_signal(s, word, value);
}

static tess_status_t cuda_memset_async(void *dst, int value, size_t size, tess_gpu_stream_h s)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaMemsetAsync(dst, value, size, (cudaStream_t)s);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaMemsetAsync");
}

/* Runs on a CUDA runtime thread; must not call CUDA. */
static void CUDART_CB cuda_host_trampoline(void *arg)
{
    cuda_host_call_t *call = arg;
    call->fn(call->args);
    free(call);
}

static tess_status_t cuda_launch_host(tess_gpu_stream_h s, tess_gpu_host_fn_t fn,
                                      const void *args, size_t args_size)
{
    if (args_size > TESS_GPU_HOST_ARGS_MAX)
        return tess_error(TESS_ERR_INVALID, "launch_host: %zu bytes of arguments (at most %d)",
                          args_size, TESS_GPU_HOST_ARGS_MAX);
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cuda_host_call_t *call = tess_malloc(sizeof(*call) + args_size, "a host launch");
    if (!call)
        return TESS_ERR_NO_MEMORY;
    call->fn = fn;
    if (args_size > 0)
        memcpy(call->args, args, args_size);

    cudaError_t e = cudaLaunchHostFunc((cudaStream_t)s, cuda_host_trampoline, call);
    if (e != cudaSuccess) {
        st = cuda_error(e, "cudaLaunchHostFunc");
        goto err_free_call;
    }
    return TESS_OK;

err_free_call:
    free(call);
    return st;
}

/* ---- streams ----------------------------------------------------------------------------- */

static tess_status_t cuda_stream_create(tess_gpu_stream_h *s_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaStream_t s;
    cudaError_t  e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaStreamCreateWithFlags");
    *s_p = (tess_gpu_stream_h)s;
    return TESS_OK;
}

static tess_status_t cuda_stream_destroy(tess_gpu_stream_h s)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaStreamDestroy((cudaStream_t)s);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaStreamDestroy");
}

static tess_status_t cuda_stream_sync(tess_gpu_stream_h s)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)s);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaStreamSynchronize");
}

static tess_status_t cuda_stream_query(tess_gpu_stream_h s)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    return cuda_poll_status(cudaStreamQuery((cudaStream_t)s), "cudaStreamQuery", __FILE__,
                            __LINE__);
}

static tess_status_t cuda_stream_wait_event(tess_gpu_stream_h s, tess_gpu_event_h ev)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)ev, 0);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaStreamWaitEvent");
}

/* ---- events ------------------------------------------------------------------------------ */

static tess_status_t cuda_event_create(unsigned flags, tess_gpu_event_h *e_p)
{
    unsigned cflags;
    if (flags & TESS_GPU_EVENT_IPC) {
        if (flags & TESS_GPU_EVENT_TIMING)
            return tess_error(TESS_ERR_INVALID, "an IPC event cannot measure time");
        cflags = cudaEventInterprocess | cudaEventDisableTiming;
    } else {
        cflags = (flags & TESS_GPU_EVENT_TIMING) ? cudaEventDefault : cudaEventDisableTiming;
    }
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cflags);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaEventCreateWithFlags");
    *e_p = (tess_gpu_event_h)ev;
    return TESS_OK;
}

static tess_status_t cuda_event_destroy(tess_gpu_event_h ev)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaEventDestroy((cudaEvent_t)ev);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaEventDestroy");
}

static tess_status_t cuda_event_record(tess_gpu_event_h ev, tess_gpu_stream_h s)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)s);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaEventRecord");
}

static tess_status_t cuda_event_query(tess_gpu_event_h ev)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    return cuda_poll_status(cudaEventQuery((cudaEvent_t)ev), "cudaEventQuery", __FILE__,
                            __LINE__);
}

/* Signal words: mapped pinned host memory, which under unified addressing the device writes at
 * the host's own address (checked: the word's address is passed as the device pointer). */
static tess_status_t cuda_signal_alloc(size_t n, _Atomic uint32_t **words_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    if (!tess_cuda.write_value32)
        return TESS_ERR_UNSUPPORTED;
    size_t      size = (n ? n : 1) * sizeof(uint32_t);
    void       *host = NULL, *dev = NULL;
    cudaError_t e = cudaHostAlloc(&host, size, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaHostAlloc (stream signal words)");
    e = cudaHostGetDevicePointer(&dev, host, 0);
    if (e != cudaSuccess || dev != host) {
        (void)cudaGetLastError();
        (void)cudaFreeHost(host);
        tess_debug("cuda: mapped host memory has another device address: no stream signals");
        return TESS_ERR_UNSUPPORTED;
    }
    memset(host, 0, size);
    *words_p = host;
    return TESS_OK;
}

static void cuda_signal_free(_Atomic uint32_t *words)
{
    if (words && cuda_bind() == TESS_OK)
        (void)cudaFreeHost((void *)words);
}

static tess_status_t cuda_stream_signal(tess_gpu_stream_h s, _Atomic uint32_t *word,
                                        uint32_t value)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    /* CU_STREAM_WRITE_VALUE_DEFAULT: the write follows a fence over the stream's earlier work. */
    CUresult r = tess_cuda.write_value32((CUstream)s, (CUdeviceptr)(uintptr_t)word, value,
                                    CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? TESS_OK : cu_error(r, "cuStreamWriteValue32");
}

static tess_status_t cuda_event_sync(tess_gpu_event_h ev)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaEventSynchronize");
}

/* TESS_INPROGRESS while either event has not completed. */
static tess_status_t cuda_event_elapsed_ms(tess_gpu_event_h start, tess_gpu_event_h end,
                                           float *ms_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    return cuda_poll_status(cudaEventElapsedTime(ms_p, (cudaEvent_t)start, (cudaEvent_t)end),
                            "cudaEventElapsedTime", __FILE__, __LINE__);
}

/* ---- pointers ---------------------------------------------------------------------------- */

/* One driver call for every attribute (each device-message send asks once per buffer: three
 * calls cost it a microsecond or more). cuPointerGetAttributes does not fail on a pointer CUDA
 * does not know: it leaves the attributes zero, which is host memory. */
static tess_status_t cuda_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    memset(info_p, 0, sizeof(*info_p));
    info_p->device = -1;
    if (!ptr)
        return TESS_OK;
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;

    CUpointer_attribute attr[6] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID};
    unsigned            type    = 0;
    unsigned            managed = 0;
    int                 ordinal = -1;
    CUdeviceptr         base    = 0;
    size_t              size    = 0;
    unsigned long long  id      = 0;
    void               *data[6] = {&type, &managed, &ordinal, &base, &size, &id};
    CUresult r = tess_cuda.pointer_get_attributes(6, attr, data, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cuPointerGetAttributes");
    if (type != CU_MEMORYTYPE_DEVICE && !managed)
        return TESS_OK; /* unregistered or pinned host memory */

    info_p->is_device = 1;
    info_p->device    = ordinal;
    info_p->base      = (void *)(uintptr_t)base;
    info_p->size      = size;
    info_p->alloc_id  = id;
    return TESS_OK;
}

static void *cuda_native_stream(tess_gpu_stream_h s) { return (void *)s; }

const tess_gpu_ops_t tess_gpu_cuda_ops = {
    .name              = "cuda",
    .kind              = TESS_GPU_CUDA,
    .wait_captures_record = 1,
    .init              = cuda_init,
    .fini              = cuda_fini,
    .device_count      = cuda_device_count,
    .set_device        = cuda_set_device,
    .get_props         = cuda_get_props,
    .mem_alloc         = cuda_mem_alloc,
    .mem_free          = cuda_mem_free,
    .host_alloc        = cuda_host_alloc,
    .host_free         = cuda_host_free,
    .memcpy_async      = cuda_memcpy_async,
    .memset_async      = cuda_memset_async,
    .launch_host       = cuda_launch_host,
    .stream_create     = cuda_stream_create,
    .stream_destroy    = cuda_stream_destroy,
    .stream_sync       = cuda_stream_sync,
    .stream_query      = cuda_stream_query,
    .stream_wait_event = cuda_stream_wait_event,
    .event_create      = cuda_event_create,
    .event_destroy     = cuda_event_destroy,
    .event_record      = cuda_event_record,
    .event_query       = cuda_event_query,
    .memcpy_signal_async = cuda_memcpy_signal_async,
    .memcpy_signal_max = CUDA_KCOPY_SIGNAL_MAX,
    .memcpy_batch_async = cuda_memcpy_batch_async,
    .signal_alloc      = cuda_signal_alloc,
    .signal_free       = cuda_signal_free,
    .stream_signal     = cuda_stream_signal,
    .event_sync        = cuda_event_sync,
    .event_elapsed_ms  = cuda_event_elapsed_ms,
    .ipc_mem_export    = tess_cuda_ipc_mem_export,
    .ipc_mem_open      = tess_cuda_ipc_mem_open,
    .ipc_mem_close     = tess_cuda_ipc_mem_close,
    .ipc_event_export  = tess_cuda_ipc_event_export,
    .ipc_event_open    = tess_cuda_ipc_event_open,
    .ipc_event_close   = tess_cuda_ipc_event_close,
    .ptr_query         = cuda_ptr_query,
    .native_stream     = cuda_native_stream,
    .set_notify        = NULL, /* the runtime polls events */
    .busy              = NULL, /* the device has cores of its own */
};
