/*
 * vendor_hip.h — the HIP side of the vendor layer (included by vendor/vendor.h, which says what
 * it provides): the runtime's names on the AMD platform (built against HIP >= 5.2), and what the
 * HIP backend does its own way — an allocation registry for pointer queries (hip/alloc_hip.c).
 * HIP has no copy kernel and no stream signals here: the runtime polls events.
 */
#ifndef TESS_GPU_VENDOR_HIP_H
#define TESS_GPU_VENDOR_HIP_H

#include <hip/hip_runtime_api.h>

#include <stdio.h>

/* ---- names -------------------------------------------------------------------------------- */

#define VND(name)           hip##name
#define VND_PREFIX          "hip"
#define VND_FN(name)        tess_hip_##name
#define VND_NAME            "hip"
#define VND_TITLE           "HIP"
#define VND_KIND            TESS_GPU_HIP
#define VND_OPS             tess_gpu_hip_ops
#define VND_IPC_MAGIC       0x50485354u /* "TSHP" */
#define VND_ERROR_NO_MEMORY hipErrorOutOfMemory
#define vndDeviceProp_t     hipDeviceProp_t

/* Pinned host memory. */
#define vnd_host_malloc(ptr_p, size) hipHostMalloc((ptr_p), (size), hipHostMallocDefault)
#define VND_HOST_MALLOC_STR          "hipHostMalloc"
#define vnd_host_free(ptr)           hipHostFree(ptr)
#define VND_HOST_FREE_STR            "hipHostFree"

/* launch_host: HIP 5.2 declares hipLaunchHostFunc but its library does not export it, so a
 * stream callback, which likewise blocks later work on the stream until it returns. An error on
 * the stream is not reported to it: it surfaces in the next query or sync of the stream or of
 * an event recorded on it. */
#define VND_HOST_TRAMPOLINE(name, body)                                    \
    static void name(hipStream_t stream, hipError_t status, void *arg)     \
    {                                                                      \
        (void)stream;                                                      \
        (void)status;                                                      \
        body(arg);                                                         \
    }
#define vnd_launch_host_func(s, fn, arg) hipStreamAddCallback((s), (fn), (arg), 0)
#define VND_LAUNCH_HOST_FUNC_STR         "hipStreamAddCallback"

#define VND_HAS_KCOPY 0

/* Graphs: the node parameter structs, instantiation (the signatures differ), and the hook that
 * compares two kernel nodes: kernel, dimensions and shared memory (HIP cannot say where each
 * argument lies, so their bytes are not compared). A host function (hipStreamAddCallback)
 * cannot be recorded: ending such a recording fails. */
typedef hipGraphNodeType  vndGraphNodeType_t;
typedef hipMemcpy3DParms  vndMemcpy3DParms_t;
typedef hipMemsetParams   vndMemsetParams_t;
typedef hipHostNodeParams vndHostNodeParams_t;
#define vnd_graph_instantiate(exec_p, graph) hipGraphInstantiate((exec_p), (graph), NULL, NULL, 0)
#define VND_GRAPH_INSTANTIATE_STR            "hipGraphInstantiate"
/* Make exec launch what graph records, where the two have the same shape. */
static inline hipError_t vnd_graph_exec_update(hipGraphExec_t exec, hipGraph_t graph)
{
    hipGraphNode_t           node;
    hipGraphExecUpdateResult result;
    return hipGraphExecUpdate(exec, graph, &node, &result);
}

static inline int tess_hip_kernel_node_compare(hipGraphNode_t a, hipGraphNode_t b, char *why,
                                               size_t len)
{
    hipKernelNodeParams x, y;
    if (hipGraphKernelNodeGetParams(a, &x) != hipSuccess ||
        hipGraphKernelNodeGetParams(b, &y) != hipSuccess) {
        (void)hipGetLastError();
        snprintf(why, len, "hipGraphKernelNodeGetParams failed");
        return 1;
    }
    if (x.func != y.func) {
        snprintf(why, len, "kernel %p, is %p now", x.func, y.func);
        return 1;
    }
    if (x.gridDim.x != y.gridDim.x || x.gridDim.y != y.gridDim.y || x.gridDim.z != y.gridDim.z ||
        x.blockDim.x != y.blockDim.x || x.blockDim.y != y.blockDim.y ||
        x.blockDim.z != y.blockDim.z || x.sharedMemBytes != y.sharedMemBytes) {
        snprintf(why, len, "kernel %p launched with grid (%u,%u,%u) block (%u,%u,%u) and %u "
                 "bytes of shared memory, now (%u,%u,%u) (%u,%u,%u) and %u", x.func, x.gridDim.x,
                 x.gridDim.y, x.gridDim.z, x.blockDim.x, x.blockDim.y, x.blockDim.z,
                 x.sharedMemBytes, y.gridDim.x, y.gridDim.y, y.gridDim.z, y.blockDim.x,
                 y.blockDim.y, y.blockDim.z, y.sharedMemBytes);
        return 1;
    }
    return 0;
}

/* ---- the hooks (vendor/vendor.h) ---------------------------------------------------------- */

/* HIP needs no functions beyond its runtime API. */
static inline tess_status_t tess_hip_driver_init(void) { return TESS_OK; }
static inline void          tess_hip_driver_fini(void) {}
static inline void          tess_hip_device_selected(int device) { (void)device; }

static inline tess_status_t tess_hip_get_caps(int device, tess_gpu_props_t *props_p)
{
#ifdef __linux__
    props_p->ipc = 1; /* HIP has no attribute for it; ROCm supports IPC on Linux */
#endif
    int        v = 0;
    hipError_t e = hipDeviceGetAttribute(&v, hipDeviceAttributeCanUseStreamWaitValue, device);
    if (e == hipSuccess)
        props_p->wait_value = v != 0;
    else
        (void)hipGetLastError(); /* unknown: leave 0 */
    props_p->mps = -1; /* no MPS on AMD GPUs */
    return TESS_OK;
}

/* Pointer queries (alloc_hip.c), after the vendor layer's registry: HIP promises no stable
 * per-allocation id. */
static inline void tess_hip_mem_forget(void *ptr)
{
    (void)ptr; /* nothing cached beside the registry */
}
tess_status_t tess_hip_alloc_range(void *ptr, uintptr_t *base_p, size_t *size_p);
tess_status_t tess_hip_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p);

#endif /* TESS_GPU_VENDOR_HIP_H */
