/*
 * vendor_cuda.h — the CUDA side of the vendor layer (included by vendor/vendor.h, which says
 * what it provides): the runtime's names, and what the CUDA backend has of its own beyond the
 * shared source — driver functions reached through cudaGetDriverEntryPointByVersion (nothing
 * links libcuda, so a build with CUDA still loads without a driver: cuda/driver_cuda.c), and the
 * copy kernel with stream signals (cuda/kcopy_cuda.c, copy_kernel.cu).
 */
#ifndef TESS_GPU_VENDOR_CUDA_H
#define TESS_GPU_VENDOR_CUDA_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

/* ---- names -------------------------------------------------------------------------------- */

#define VND(name)           cuda##name
#define VND_PREFIX          "cuda"
#define VND_FN(name)        tess_cuda_##name
#define VND_NAME            "cuda"
#define VND_TITLE           "CUDA"
#define VND_KIND            TESS_GPU_CUDA
#define VND_OPS             tess_gpu_cuda_ops
#define VND_IPC_MAGIC       0x55435354u /* "TSCU" */
#define VND_ERROR_NO_MEMORY cudaErrorMemoryAllocation
#define vndDeviceProp_t     struct cudaDeviceProp

/* Pinned host memory. */
#define vnd_host_malloc(ptr_p, size) cudaMallocHost((ptr_p), (size))
#define VND_HOST_MALLOC_STR          "cudaMallocHost"
#define vnd_host_free(ptr)           cudaFreeHost(ptr)
#define VND_HOST_FREE_STR            "cudaFreeHost"

/* launch_host: a host function on a stream. name(arg) runs body(arg) on a runtime thread. */
#define VND_HOST_TRAMPOLINE(name, body) \
    static void CUDART_CB name(void *arg) { body(arg); }
#define vnd_launch_host_func(s, fn, arg) cudaLaunchHostFunc((s), (fn), (arg))
#define VND_LAUNCH_HOST_FUNC_STR         "cudaLaunchHostFunc"

/* Graphs: the node parameter structs, instantiation (the signatures differ), and the hook that
 * compares two kernel nodes (driver_cuda.c: with their argument bytes where the driver can say
 * where each argument lies). */
typedef enum cudaGraphNodeType  vndGraphNodeType_t;
typedef struct cudaMemcpy3DParms vndMemcpy3DParms_t;
typedef struct cudaMemsetParams  vndMemsetParams_t;
typedef struct cudaHostNodeParams vndHostNodeParams_t;
#define vnd_graph_instantiate(exec_p, graph) cudaGraphInstantiate((exec_p), (graph), 0)
#define VND_GRAPH_INSTANTIATE_STR            "cudaGraphInstantiate"
/* Make exec launch what graph records, where the two have the same shape. */
static inline cudaError_t vnd_graph_exec_update(cudaGraphExec_t exec, cudaGraph_t graph)
{
    cudaGraphExecUpdateResultInfo info;
    return cudaGraphExecUpdate(exec, graph, &info);
}
/** 0 when kernel nodes a and b launch the same kernel with the same dimensions and arguments,
 *  1 with what differs in why. */
int tess_cuda_kernel_node_compare(cudaGraphNode_t a, cudaGraphNode_t b, char *why, size_t len);

/* ---- the driver functions (driver_cuda.c) -------------------------------------------------- */

/* Driver ABI version asked of cudaGetDriverEntryPointByVersion: the PFN_*_vNNNN types below
 * are the newest versions of those symbols at CUDA 12.0. */
#define CUDA_ENTRY_VERSION 12000

typedef struct tess_cuda_driver {
    PFN_cuPointerGetAttributes_v7000 pointer_get_attributes;
    PFN_cuMemGetAddressRange_v3020   mem_get_address_range;
    PFN_cuDeviceGet_v2000            device_get;
    PFN_cuDeviceGetAttribute_v2000   device_get_attribute;
    PFN_cuGetErrorName_v6000         get_error_name;
    PFN_cuLaunchKernel_v4000         launch_kernel;
    PFN_cuStreamWriteValue32_v11070  write_value32; /* NULL: no stream signals, events only */
    PFN_cuGraphKernelNodeGetParams_v12000 kernel_node_get_params; /* NULL: not compared */
    PFN_cuFuncGetParamInfo_v12040    func_get_param_info;   /* NULL: arguments not compared */
    PFN_cuKernelGetParamInfo_v12040  kernel_get_param_info; /* NULL: likewise */
    CUfunction                       copy_fn;       /* the copy kernel on the device, or NULL */
    CUfunction                       copy_batch_fn; /* the batch copy kernel, or NULL */
} tess_cuda_driver_t;

extern tess_cuda_driver_t tess_cuda_driver; /* written by init, set_device and fini only */

tess_status_t tess_cuda_cu_error_at(CUresult r, const char *what, const char *file, int line);
#define cu_error(r, what) tess_cuda_cu_error_at((r), (what), __FILE__, __LINE__)

/* The hooks (vendor/vendor.h). */
tess_status_t tess_cuda_driver_init(void);
void          tess_cuda_driver_fini(void);
void          tess_cuda_device_selected(int device);
tess_status_t tess_cuda_get_caps(int device, tess_gpu_props_t *props_p);
/** Forget every thread's pointer classifications: after any free or unmapping. */
void          tess_cuda_mem_forget(void *ptr);
tess_status_t tess_cuda_alloc_range(void *ptr, uintptr_t *base_p, size_t *size_p);
tess_status_t tess_cuda_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p);

/** Nonzero when p is memory of the process's device (its own, or another process's opened
 *  through IPC), which a kernel on it may read and write. */
int tess_cuda_on_device(const void *p);

/* ---- the copy kernel and stream signals (kcopy_cuda.c) ------------------------------------ */

#define VND_HAS_KCOPY 1

/* A copy that signals its completion runs as one block (up to 1024 threads: 16 KiB a sweep
 * when aligned); larger ones keep the full grid or the copy engines and a signal of their own
 * (the runtime uses events behind those, gpuq.c). */
#define VND_KCOPY_SIGNAL_MAX ((size_t)64 << 10)

tess_status_t tess_cuda_kcopy_memcpy_async(void *dst, const void *src, size_t size,
                                           tess_gpu_stream_h s);
tess_status_t tess_cuda_memcpy_signal_async(void *dst, const void *src, size_t size,
                                            tess_gpu_stream_h s, _Atomic uint32_t *word,
                                            uint32_t value);
tess_status_t tess_cuda_memcpy_batch_async(const tess_gpu_copy_t *copies, int n,
                                           tess_gpu_stream_h s);
tess_status_t tess_cuda_signal_alloc(size_t n, _Atomic uint32_t **words_p);
void          tess_cuda_signal_free(_Atomic uint32_t *words);
tess_status_t tess_cuda_stream_signal(tess_gpu_stream_h s, _Atomic uint32_t *word,
                                      uint32_t value);

#endif /* TESS_GPU_VENDOR_CUDA_H */
