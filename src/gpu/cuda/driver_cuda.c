/*
 * driver_cuda.c — what the CUDA backend asks of the driver API: its functions come through
 * cudaGetDriverEntryPointByVersion (nothing links libcuda, so a build with CUDA loads and falls
 * back to the host backend on a machine without a driver), and with them device capabilities,
 * allocation ranges, pointer queries (one driver call for every attribute) and the copy
 * kernel's handles. The hooks of the vendor layer for CUDA (vendor/vendor.h).
 *
 * Threads: tess_cuda_driver is written by init, set_device and fini only; the pointer
 * classifications are per thread.
 */
#include "gpu/vendor/vendor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tess_cuda_driver_t tess_cuda_driver;

/* copy_kernel.cu */
extern const void *tess_cuda_copy_kernel_symbol(void);
extern const void *tess_cuda_copy_batch_kernel_symbol(void);

tess_status_t tess_cuda_cu_error_at(CUresult r, const char *what, const char *file, int line)
{
    const char *name = NULL;
    if (!tess_cuda_driver.get_error_name ||
        tess_cuda_driver.get_error_name(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    tess_status_t st = r == CUDA_ERROR_OUT_OF_MEMORY ? TESS_ERR_NO_MEMORY : TESS_ERR_GPU;
    return tess_error_at(st, file, line, "%s failed: %s (%d)", what, name, (int)r);
}

/* ---- entry points ------------------------------------------------------------------------- */

static tess_status_t cuda_entry_version(const char *symbol, int version, void **fn_p)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, fn_p, (unsigned)version,
                                                     cudaEnableDefault, &found);
    if (e != cudaSuccess)
        return vnd_error(e, "cudaGetDriverEntryPointByVersion");
    if (found != cudaDriverEntryPointSuccess || !*fn_p)
        return tess_error(TESS_ERR_GPU, "the CUDA driver has no %s for CUDA %d.%d (query "
                          "result %d)", symbol, version / 1000, version % 1000 / 10, (int)found);
    return TESS_OK;
}

static tess_status_t cuda_entry(const char *symbol, void **fn_p)
{
    return cuda_entry_version(symbol, CUDA_ENTRY_VERSION, fn_p);
}

/* An optional entry point: NULL (logged at debug level) when the driver lacks it. */
static void *cuda_entry_optional(const char *symbol, int version)
{
    void *fn = NULL;
    if (cuda_entry_version(symbol, version, &fn) != TESS_OK) {
        tess_error_clear();
        tess_debug("cuda: no %s: step graphs are compared without it (TESS_CHECK)", symbol);
        fn = NULL;
    }
    return fn;
}

tess_status_t tess_cuda_driver_init(void)
{
    static const char *const symbols[] = {"cuPointerGetAttributes", "cuMemGetAddressRange",
                                          "cuDeviceGet", "cuDeviceGetAttribute",
                                          "cuGetErrorName", "cuLaunchKernel"};
    void *fn[TESS_ARRAY_LEN(symbols)];
    for (size_t i = 0; i < TESS_ARRAY_LEN(symbols); i++) {
        tess_status_t st = cuda_entry(symbols[i], &fn[i]);
        if (st != TESS_OK)
            return st;
    }
    tess_cuda_driver.pointer_get_attributes = (PFN_cuPointerGetAttributes_v7000)fn[0];
    tess_cuda_driver.mem_get_address_range  = (PFN_cuMemGetAddressRange_v3020)fn[1];
    tess_cuda_driver.device_get             = (PFN_cuDeviceGet_v2000)fn[2];
    tess_cuda_driver.device_get_attribute   = (PFN_cuDeviceGetAttribute_v2000)fn[3];
    tess_cuda_driver.get_error_name         = (PFN_cuGetErrorName_v6000)fn[4];
    tess_cuda_driver.launch_kernel          = (PFN_cuLaunchKernel_v4000)fn[5];
    /* Stream signals are optional: without them the runtime polls events. */
    void *wv = NULL;
    if (cuda_entry("cuStreamWriteValue32", &wv) != TESS_OK) {
        tess_debug("cuda: no cuStreamWriteValue32: GPU completions are polled with events");
        wv = NULL;
    }
    tess_cuda_driver.write_value32 = (PFN_cuStreamWriteValue32_v11070)wv;
    /* What the checks of step graphs use to compare kernel nodes (optional). */
    tess_cuda_driver.kernel_node_get_params = (PFN_cuGraphKernelNodeGetParams_v12000)
        cuda_entry_optional("cuGraphKernelNodeGetParams", 12000);
    tess_cuda_driver.func_get_param_info = (PFN_cuFuncGetParamInfo_v12040)
        cuda_entry_optional("cuFuncGetParamInfo", 12040);
    tess_cuda_driver.kernel_get_param_info = (PFN_cuKernelGetParamInfo_v12040)
        cuda_entry_optional("cuKernelGetParamInfo", 12040);
    return TESS_OK;
}

void tess_cuda_driver_fini(void)
{
    memset(&tess_cuda_driver, 0, sizeof(tess_cuda_driver));
}

/* The copy kernel's handle in this device's context, looked up once per device (every PE thread
 * selects the same one); without it every copy is a memcpy. */
void tess_cuda_device_selected(int device)
{
    if (device == tess_vnd.device && tess_cuda_driver.copy_fn)
        return;
    cudaFunction_t fn = NULL, bfn = NULL;
    if (cudaGetFuncBySymbol(&fn, tess_cuda_copy_kernel_symbol()) != cudaSuccess ||
        cudaGetFuncBySymbol(&bfn, tess_cuda_copy_batch_kernel_symbol()) != cudaSuccess) {
        (void)cudaGetLastError();
        fn = bfn = NULL;
        tess_debug("cuda: no copy kernel for device %d: copies use cudaMemcpyAsync", device);
    }
    tess_cuda_driver.copy_fn       = (CUfunction)fn;
    tess_cuda_driver.copy_batch_fn = (CUfunction)bfn;
}

/* ---- step graphs: kernel nodes compared ---------------------------------------------------- */

/* Where argument i lies (CUDA_SUCCESS), or an error once i is past the last one. */
static CUresult cuda_param_info(const CUDA_KERNEL_NODE_PARAMS *p, size_t i, size_t *off_p,
                                size_t *size_p)
{
    if (p->func && tess_cuda_driver.func_get_param_info)
        return tess_cuda_driver.func_get_param_info(p->func, i, off_p, size_p);
    if (!p->func && p->kern && tess_cuda_driver.kernel_get_param_info)
        return tess_cuda_driver.kernel_get_param_info(p->kern, i, off_p, size_p);
    return CUDA_ERROR_NOT_SUPPORTED;
}

int tess_cuda_kernel_node_compare(cudaGraphNode_t a, cudaGraphNode_t b, char *why, size_t len)
{
    CUDA_KERNEL_NODE_PARAMS x, y;
    if (!tess_cuda_driver.kernel_node_get_params) {
        struct cudaKernelNodeParams rx, ry; /* no driver entry: the runtime's view, no args */
        if (cudaGraphKernelNodeGetParams(a, &rx) != cudaSuccess ||
            cudaGraphKernelNodeGetParams(b, &ry) != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(why, len, "cudaGraphKernelNodeGetParams failed");
            return 1;
        }
        memset(&x, 0, sizeof(x));
        memset(&y, 0, sizeof(y));
        x.func = (CUfunction)rx.func;
        y.func = (CUfunction)ry.func;
        x.gridDimX = rx.gridDim.x, x.gridDimY = rx.gridDim.y, x.gridDimZ = rx.gridDim.z;
        y.gridDimX = ry.gridDim.x, y.gridDimY = ry.gridDim.y, y.gridDimZ = ry.gridDim.z;
        x.blockDimX = rx.blockDim.x, x.blockDimY = rx.blockDim.y, x.blockDimZ = rx.blockDim.z;
        y.blockDimX = ry.blockDim.x, y.blockDimY = ry.blockDim.y, y.blockDimZ = ry.blockDim.z;
        x.sharedMemBytes = rx.sharedMemBytes;
        y.sharedMemBytes = ry.sharedMemBytes;
    } else {
        CUresult r;
        if ((r = tess_cuda_driver.kernel_node_get_params(a, &x)) != CUDA_SUCCESS ||
            (r = tess_cuda_driver.kernel_node_get_params(b, &y)) != CUDA_SUCCESS) {
            snprintf(why, len, "cuGraphKernelNodeGetParams failed (%d)", (int)r);
            return 1;
        }
    }
    const void *kx = x.func ? (const void *)x.func : (const void *)x.kern;
    const void *ky = y.func ? (const void *)y.func : (const void *)y.kern;
    if (kx != ky) {
        snprintf(why, len, "kernel %p, is %p now", kx, ky);
        return 1;
    }
    if (x.gridDimX != y.gridDimX || x.gridDimY != y.gridDimY || x.gridDimZ != y.gridDimZ ||
        x.blockDimX != y.blockDimX || x.blockDimY != y.blockDimY || x.blockDimZ != y.blockDimZ ||
        x.sharedMemBytes != y.sharedMemBytes) {
        snprintf(why, len, "kernel %p launched with grid (%u,%u,%u) block (%u,%u,%u) and %u "
                 "bytes of shared memory, now (%u,%u,%u) (%u,%u,%u) and %u", kx, x.gridDimX,
                 x.gridDimY, x.gridDimZ, x.blockDimX, x.blockDimY, x.blockDimZ,
                 x.sharedMemBytes, y.gridDimX, y.gridDimY, y.gridDimZ, y.blockDimX,
                 y.blockDimY, y.blockDimZ, y.sharedMemBytes);
        return 1;
    }
    if (!x.kernelParams || !y.kernelParams)
        return 0; /* arguments passed through `extra`: not compared */
    size_t off, size;
    for (size_t i = 0; cuda_param_info(&x, i, &off, &size) == CUDA_SUCCESS; i++)
        if (memcmp(x.kernelParams[i], y.kernelParams[i], size)) {
            const unsigned char *p = x.kernelParams[i], *q = y.kernelParams[i];
            size_t k = 0;
            while (p[k] == q[k])
                k++;
            snprintf(why, len, "kernel %p: argument %zu (%zu bytes), byte %zu was 0x%02x, is "
                     "0x%02x now (a value that changes between steps, passed as a kernel "
                     "argument?)", kx, i, size, k, p[k], q[k]);
            return 1;
        }
    return 0;
}

/* ---- device capabilities ------------------------------------------------------------------ */

tess_status_t tess_cuda_get_caps(int device, tess_gpu_props_t *props_p)
{
    int v = 0;
#ifdef __linux__
    props_p->ipc  = 1;
    cudaError_t e = cudaDeviceGetAttribute(&v, cudaDevAttrIpcEventSupport, device);
    if (e == cudaSuccess)
        props_p->ipc = v != 0;
    else
        (void)cudaGetLastError(); /* an older driver without the attribute: keep 1 */
#endif

    /* Since CUDA 12 the 32-bit stream memory operations need no opt-in and the attribute
     * that gated them is retired; the one capability attribute left is for the NOR
     * comparison, taken as the (conservative) sign that stream memory operations work. */
    CUdevice dev;
    CUresult r = tess_cuda_driver.device_get(&dev, device);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cuDeviceGet");
    v = 0;
    r = tess_cuda_driver.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR,
                                              dev);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cuDeviceGetAttribute(CAN_USE_STREAM_WAIT_VALUE_NOR)");
    props_p->wait_value = v != 0;
    v = 0;
    props_p->mps = -1;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMpsEnabled, device) == cudaSuccess)
        props_p->mps = v != 0;
    else
        (void)cudaGetLastError(); /* a driver without the attribute: not known */
    return TESS_OK;
}

/* ---- pointers ----------------------------------------------------------------------------- */

/* Whether a pointer is memory of the process's device costs a driver call
 * (cuPointerGetAttributes: a lock and a lookup), and a chare step that receives M small messages
 * asks it 2M times, for as many distinct buffers as a PE's chares have neighbours (LULESH at 64
 * chares a PE: thousands, in a hundred or more allocations). So each thread remembers the
 * allocations it classified, by their whole range (asked in the same call), in an array sorted
 * by start: allocations do not overlap, so a lookup is a binary search however many there are.
 * Every free the runtime does (device, pinned host, an IPC mapping closed) forgets them all, in
 * every thread (a generation count). An allocation the application frees itself keeps its answer
 * until then: device memory of this device lies in the range CUDA reserves for it, so a later
 * allocation at that address is device memory again (or managed memory, which the copy kernel
 * reaches as well). An address CUDA does not know answers 0. The arrays grow on the heap as a
 * thread needs them (at most 68 KiB a thread) and are not freed when it ends. */
#define CUDA_PTR_CACHE_MAX 4096 /* allocations a thread remembers at most (then starts over) */

static _Atomic uint64_t ptr_cache_gen = 1;

static _Thread_local struct {
    uint64_t   gen;
    int        n, cap;
    int        mru[2];  /* the positions of the two latest hits (a copy's destination and
                           source alternate), tried before the search; shifted by an insert,
                           a position still holds some remembered allocation, so a hit there
                           is right whatever it was */
    uintptr_t *lo;     /* starts, ascending */
    uintptr_t *hi;     /* ends (exclusive) */
    uint8_t   *on_dev; /* the answers */
} ptr_cache TESS_TLS_FAST;

void tess_cuda_mem_forget(void *ptr)
{
    (void)ptr;
    atomic_fetch_add_explicit(&ptr_cache_gen, 1, memory_order_release);
}

/* The first remembered allocation that starts above a. */
static int ptr_cache_after(uintptr_t a)
{
    int lo = 0, hi = ptr_cache.n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ptr_cache.lo[mid] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Remember [lo, hi) with its answer, before position at (its place in the order). */
static void ptr_cache_add(int at, uintptr_t lo, uintptr_t hi, uint8_t on)
{
    if (ptr_cache.n == ptr_cache.cap) {
        if (ptr_cache.cap == CUDA_PTR_CACHE_MAX) {
            ptr_cache.n = 0; /* start over */
            at          = 0;
        } else {
            int        cap = ptr_cache.cap ? 2 * ptr_cache.cap : 64;
            uintptr_t *l   = realloc(ptr_cache.lo, sizeof(*l) * (size_t)cap);
            if (l)
                ptr_cache.lo = l;
            uintptr_t *h = realloc(ptr_cache.hi, sizeof(*h) * (size_t)cap);
            if (h)
                ptr_cache.hi = h;
            uint8_t *o = realloc(ptr_cache.on_dev, (size_t)cap);
            if (o)
                ptr_cache.on_dev = o;
            if (!l || !h || !o)
                return; /* not remembered: asked again next time */
            ptr_cache.cap = cap;
        }
    }
    int tail = ptr_cache.n - at;
    memmove(&ptr_cache.lo[at + 1], &ptr_cache.lo[at], sizeof(uintptr_t) * (size_t)tail);
    memmove(&ptr_cache.hi[at + 1], &ptr_cache.hi[at], sizeof(uintptr_t) * (size_t)tail);
    memmove(&ptr_cache.on_dev[at + 1], &ptr_cache.on_dev[at], (size_t)tail);
    ptr_cache.lo[at]     = lo;
    ptr_cache.hi[at]     = hi;
    ptr_cache.on_dev[at] = on;
    ptr_cache.n++;
}

int tess_cuda_on_device(const void *p)
{
    uintptr_t a   = (uintptr_t)p;
    uint64_t  gen = atomic_load_explicit(&ptr_cache_gen, memory_order_acquire);
    if (ptr_cache.gen != gen) {
        ptr_cache.n   = 0;
        ptr_cache.gen = gen;
    }
    for (int k = 0; k < 2; k++) {
        int i = ptr_cache.mru[k];
        if (i >= 0 && i < ptr_cache.n && a - ptr_cache.lo[i] < ptr_cache.hi[i] - ptr_cache.lo[i])
            return ptr_cache.on_dev[i];
    }
    int at = ptr_cache_after(a);
    if (at > 0 && a < ptr_cache.hi[at - 1]) {
        ptr_cache.mru[1] = ptr_cache.mru[0];
        ptr_cache.mru[0] = at - 1;
        return ptr_cache.on_dev[at - 1];
    }
    CUpointer_attribute attr[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned            type    = 0;
    int                 ordinal = -1;
    CUdeviceptr         start   = 0;
    size_t              size    = 0;
    void               *data[4] = {&type, &ordinal, &start, &size};
    if (tess_cuda_driver.pointer_get_attributes(4, attr, data, (CUdeviceptr)a) != CUDA_SUCCESS)
        return 0;
    int       on = type == CU_MEMORYTYPE_DEVICE && ordinal == tess_vnd.device;
    uintptr_t lo = (uintptr_t)start, hi = lo + size;
    /* Remembered only where it fits between its neighbours (a range CUDA reports is a whole
     * allocation; one that overlaps a remembered range means that one is stale: start over). */
    if (size && a - lo < size) {
        if ((at > 0 && ptr_cache.hi[at - 1] > lo) || (at < ptr_cache.n && ptr_cache.lo[at] < hi)) {
            ptr_cache.n = 0;
            at          = 0;
        }
        ptr_cache_add(at, lo, hi, (uint8_t)on);
    }
    return on;
}

tess_status_t tess_cuda_alloc_range(void *ptr, uintptr_t *base_p, size_t *size_p)
{
    CUdeviceptr base = 0;
    CUresult    r    = tess_cuda_driver.mem_get_address_range(&base, size_p,
                                                              (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cuMemGetAddressRange");
    *base_p = (uintptr_t)base;
    return TESS_OK;
}

/* Pointers the registry does not hold (vendor/alloc_vendor.c): one driver call for every
 * attribute (three calls cost a microsecond or more). cuPointerGetAttributes does not fail on a
 * pointer CUDA does not know: it leaves the attributes zero, which is host memory. */
tess_status_t tess_cuda_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    memset(info_p, 0, sizeof(*info_p));
    info_p->device = -1;
    if (!ptr)
        return TESS_OK;
    tess_status_t st = vnd_bind();
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
    CUresult r = tess_cuda_driver.pointer_get_attributes(6, attr, data,
                                                         (CUdeviceptr)(uintptr_t)ptr);
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
